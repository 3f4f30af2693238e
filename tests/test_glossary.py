"""Every number the command line prints has a glossary entry — meaning, unit, better direction
— in its kind's or simulator's scope, ``docs/metrics.md`` is the glossary's
output, and a value prints in its unit's one format whatever it is."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

import fleetplan
from fleetplan import sim
from fleetplan.instances import glossary

ROOT = Path(__file__).resolve().parent.parent
EXAMPLES = ROOT / "examples"

# Instances that between them make every judge report every metric it can (SLOs, steps,
# space sharing, entities; replicas and a move quota; today's plans), and the solvers whose
# plans differ in what they report (each policy's own terms).
KIND_CASES = {
    "allocation": (["inventory-30-jobs.json", "allocation-64-jobs.json"], None),
    "placement": (["placement-small.json"], ["greedy", "hill-climb"]),
    "reservation": (["reservation-small.json"], ["greedy"]),
    "binpack": (["binpack-small.json"], ["rms-greedy"]),
    "gpushare": (["gpushare-small.json"], ["fgd"]),
}
SIM_SCENARIOS = {
    "cluster": {"jobs": 12, "generate": "gavel"},
    "parsync": {"slots": 2000, "schedulers": 2, "partitions": 2, "rate": 400, "duration_s": 2, "drain_s": 2},
    "mast": {"hours": 1, "regions": 2, "machines_per_region": 32},
    "gpushare": {"inflation": 1.3},
}


def _kind_names(kind: str) -> set[str]:
    files, chosen = KIND_CASES[kind]
    found: set[str] = set()
    for name in files:
        instance = fleetplan.load_instance(EXAMPLES / name)
        current = fleetplan.instances.evaluate_current(instance)
        if current is not None:
            found |= set(current.metrics) | set(current.terms)
        for spec in fleetplan.list_solvers(kind):
            if chosen is not None and spec.name not in chosen:
                continue
            try:
                result = fleetplan.solve(instance, spec.name, time_limit=20)
            except ValueError:  # a policy that needs fields this instance lacks (steps, SLOs)
                continue
            if result.evaluation is not None:
                found |= set(result.evaluation.metrics) | set(result.evaluation.terms)
    return found


@pytest.mark.parametrize("kind", list(KIND_CASES))
def test_every_metric_and_term_of_a_kind_has_an_entry(kind):
    names = _kind_names(kind) | {"objective", "violations"}
    missing = sorted(name for name in names if glossary.describe(name, kind) is None)
    assert not missing, f"{kind}: no glossary entry for {missing}"
    for name in names:
        entry = glossary.describe(name, kind)
        assert entry.meaning and entry.unit and entry.better in ("higher", "lower", None)


@pytest.mark.parametrize("name", list(SIM_SCENARIOS))
def test_every_metric_of_a_simulator_has_an_entry(name):
    spec = sim.get_simulator(name)
    found: set[str] = set()
    for scheduler in spec.schedulers:
        result = spec.run(SIM_SCENARIOS[name], scheduler, seed=1)
        found |= set(result.metrics)
        for groups in result.groups.values():
            for values in groups.values():
                found |= set(values)
    missing = sorted(metric for metric in found if glossary.describe(metric, name) is None)
    assert not missing, f"simulator {name}: no glossary entry for {missing}"


def test_planning_tables_read_the_glossary():
    from fleetplan.planning.targets import TARGETABLE
    from fleetplan.planning.whatif import default_metrics

    for kind, targets in TARGETABLE.items():
        for metric in [*targets, *default_metrics(kind)]:
            assert glossary.describe(metric, kind) is not None, (kind, metric)


def test_one_format_per_unit_never_from_the_value():
    # buffer_share was "1.0956938" above 1 and "67.94%" below.
    assert glossary.format_value("buffer_share", 1.0956938) == "109.57%"
    assert glossary.format_value("buffer_share", 0.6794) == "67.94%"
    assert glossary.format_value("collocation_rate_first_time", 0.96288455) == "96.29%"
    assert glossary.format_value("collocation_rate", 0.9440) == "94.40%"
    assert glossary.format_value("bytes_moved", 1.8e12) == "1.8 TB"
    # A duration of days reads in hours with the days beside them, never in bare days.
    assert glossary.format_value("makespan_s", 14.2 * 86400, scope="allocation") == "341 h = 14.2 d"
    assert glossary.format_value("latency_p95_minutes", 202.0, scope="mast") == "202 min = 3.37 h"
    assert glossary.format_value("starved_jobs", 54.0) == "54"


def test_alerts_flag_a_job_below_its_isolated_share():
    entry = glossary.describe("min_speedup_over_isolated", "allocation")
    assert entry.alerts(0.418) and entry.alerts(1.2) is None


def test_scopes_keep_their_own_meanings():
    assert glossary.describe("utilization", "cluster").meaning != glossary.describe("utilization", "parsync").meaning
    assert glossary.describe("moves", "reservation").role == "term"
    assert glossary.describe("moves", "placement").role == "stat"
    assert glossary.describe("preempted_count_p3", "binpack").unit == "jobs"


def test_metrics_doc_is_the_glossary_output():
    doc = (ROOT / "docs" / "metrics.md").read_text(encoding="utf-8")
    assert doc == glossary.markdown(), "docs/metrics.md is stale: run `fleetplan metrics --markdown > docs/metrics.md`"


def test_metrics_command_lists_a_scope_and_refuses_an_unknown_one():
    run = subprocess.run([sys.executable, "-m", "fleetplan", "metrics", "parsync", "--json"], capture_output=True,
                         text=True, timeout=60)
    assert run.returncode == 0, run.stderr
    assert '"stet_mean_s"' in run.stdout
    bad = subprocess.run([sys.executable, "-m", "fleetplan", "metrics", "bogus"], capture_output=True, text=True,
                         timeout=60)
    assert bad.returncode == 2 and "neither a problem kind nor a simulator" in bad.stderr
