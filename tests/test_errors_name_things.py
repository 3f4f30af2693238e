"""An error names what it is about: the plan file that does not fit the instance (and the
option that gave it), the file a full disk or ``ulimit -f`` stopped (where it was to be, not
a temporary), and for a generator refused on memory, the largest size that would fit."""

from __future__ import annotations

import os
import re
import resource
import signal
import subprocess
import sys

import pytest
from conftest import EXAMPLES

import fleetplan
from fleetplan.cli import main
from fleetplan.instances import resources

PLACEMENT = str(EXAMPLES / "placement-small.json")


@pytest.fixture(scope="module")
def other_placement_plan(tmp_path_factory):
    """A placement plan of another instance (its tables are not placement-small's)."""
    folder = tmp_path_factory.mktemp("other")
    instance = fleetplan.generate("placement", {"regions": 3, "tables": 30, "jobs": 20}, seed=4)
    plan = folder / "other-plan.json"
    fleetplan.save(fleetplan.solve(instance, "greedy").plan, plan)
    return str(plan)


def _error_line(capsys) -> str:
    lines = capsys.readouterr().err.strip().splitlines()
    assert len(lines) == 1, lines
    return lines[0]


def test_size_names_the_with_plan_file_of_another_instance(other_placement_plan, tmp_path, capsys):
    code = main(["size", PLACEMENT, "--target", "hp_demand_supply_max<=1", "--buy", "*/h100",
                 "--with-plan", other_placement_plan, "-o", str(tmp_path / "s.json")])
    line = _error_line(capsys)
    assert code == 2
    assert line.startswith(f"error: --with-plan {other_placement_plan}: ") and PLACEMENT in line, line
    assert not (tmp_path / "s.json").exists()


def test_size_names_a_with_plan_file_of_another_kind(tmp_path, capsys):
    plan = tmp_path / "allocation-plan.json"
    fleetplan.save(fleetplan.solve(fleetplan.load_instance(EXAMPLES / "allocation-gavel-4.1.json")).plan, plan)
    assert main(["size", PLACEMENT, "--target", "hp_demand_supply_max<=1", "--buy", "*/h100",
                 "--with-plan", str(plan)]) == 2
    line = _error_line(capsys)
    assert line.startswith(f"error: --with-plan {plan}: ") and "allocation" in line, line


def test_evaluate_names_the_plan_file_of_another_instance(other_placement_plan, capsys):
    assert main(["evaluate", PLACEMENT, other_placement_plan]) == 2
    line = _error_line(capsys)
    assert line.startswith(f"error: {other_placement_plan}: home.table: ") and PLACEMENT in line, line


def _limited(max_bytes):
    def apply():
        resource.setrlimit(resource.RLIMIT_FSIZE, (max_bytes, max_bytes))
        signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
    return apply


def test_a_results_table_that_cannot_grow_is_named(tmp_path):
    code = ("from fleetplan.runs.results import ResultsWriter\n"
            f"with ResultsWriter({str(tmp_path / 'sweep')!r}) as writer:\n"
            "    for index in range(10_000):\n"
            "        writer.append({'group': 'g', 'instance': 'x' * 200, 'seed': index})\n")
    run = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120,
                         preexec_fn=_limited(20_000), env={**os.environ, "PYTHONDONTWRITEBYTECODE": "1"})
    assert run.returncode != 0
    last = run.stderr.strip().splitlines()[-1]
    assert f"{tmp_path / 'sweep' / 'results.csv'}: cannot write: file too large" in last, last
    assert re.search(r"the \d+ rows before are kept", last), last


def test_a_folder_output_names_its_file_where_it_was_to_be(tmp_path):
    out = tmp_path / "tables"
    run = subprocess.run([sys.executable, "-m", "fleetplan", "export", str(EXAMPLES / "inventory-30-jobs.json"),
                          "--format", "parquet", "-o", str(out)], capture_output=True, text=True, timeout=120,
                         preexec_fn=_limited(8192), env={**os.environ, "PYTHONDONTWRITEBYTECODE": "1"})
    assert run.returncode == 2
    (line,) = run.stderr.strip().splitlines()
    assert line.startswith(f"error: {out}/") and ".tmp" not in line, line
    assert not out.exists()


def test_a_generator_refused_on_memory_says_what_would_fit(monkeypatch):
    available = 1e9
    monkeypatch.setattr(resources, "available_memory", lambda: available)
    with pytest.raises(fleetplan.InstanceError) as error:
        fleetplan.generate("allocation", {"jobs": 10_000_000})
    message = str(error.value)
    assert "1.0 GB is available" in message, message
    jobs = int(re.search(r"at most about jobs = ([\d,]+) fits", message).group(1).replace(",", ""))
    spec = fleetplan.instances.get_kind("allocation")
    params = spec.generate_params(jobs=jobs)
    assert spec.estimate(params).memory_bytes * resources.SAFETY <= available
    bigger = spec.generate_params(jobs=int(jobs * 1.01) + 1)
    assert spec.estimate(bigger).memory_bytes * resources.SAFETY > available
    resources.check_fits(spec.estimate(params))  # the size named passes the same check


def test_a_generator_refused_on_time_says_what_would_fit(monkeypatch):
    monkeypatch.setattr(resources, "available_memory", lambda: None)
    with pytest.raises(fleetplan.InstanceError, match=r"too slow: .*at most about machines = [\d,]+, "
                                                      r"cpu_machines = [\d,]+, workloads = [\d,]+ fits"):
        fleetplan.generate("binpack", {"machines": 100_000, "cpu_machines": 500_000, "clusters": 1})
