"""The hostile sweep's classes of bad input, as parametrised cases: each ends in one
line on stderr naming what is wrong, the documented exit code, no traceback, no "internal
error", and nothing written. ``make test`` runs a sample of every class (the first cases of
each); ``make test-slow`` runs them all.

Classes: CLI values (size, nesting, aliases, YAML 1.2 numbers), output paths, cluster traces,
simulator scenarios, imported tables and plans, instance and plan files, bench suites and
results. Special files, full disks and symlinks are tests/test_output_safety.py; time limits
tests/test_reliability_limits.py; signals tests/test_reliability_signals.py; generators
tests/test_reliability_generators.py.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

import fleetplan
from fleetplan.cli import main

EXAMPLES = Path(fleetplan.__file__).parent / "examples"
TABLES = EXAMPLES / "tables" / "allocation"
SAMPLE_PER_CLASS = 3

BOMB = ("{a: &a [x,x,x,x,x,x,x,x,x,x], b: &b [*a,*a,*a,*a,*a,*a,*a,*a,*a,*a], "
        "c: &c [*b,*b,*b,*b,*b,*b,*b,*b,*b,*b], d: &d [*c,*c,*c,*c,*c,*c,*c,*c,*c,*c], "
        "e: &e [*d,*d,*d,*d,*d,*d,*d,*d,*d,*d], f: [*e,*e,*e,*e,*e,*e,*e,*e,*e,*e]}")


def _files(tmp: Path) -> dict[str, str]:
    """The inputs the cases name, made in the test's own folder."""
    alloc = tmp / "alloc.json"
    fleetplan.save(fleetplan.generate("allocation", {"jobs": 4}, seed=0), alloc)
    data = json.loads(alloc.read_text())
    data["schema_version"] = True
    (tmp / "schema-true.json").write_text(json.dumps(data))
    placement = fleetplan.generate("placement", {"tables": 12, "jobs": 10, "regions": 3}, seed=0)
    fleetplan.save(placement, tmp / "placement.json")
    plan = fleetplan.solve(placement, "hill-climb").plan.model_dump(mode="json")
    plan["replicas"]["table"][0] = None
    (tmp / "null-replica.json").write_text(json.dumps(plan))
    reservation = json.loads((EXAMPLES / "reservation-small.json").read_text())
    for column in reservation["servers"]:
        if reservation["servers"][column] is not None:
            reservation["servers"][column] = []
    (tmp / "no-servers.json").write_text(json.dumps(reservation))
    header = "id,submit_time,gpus,duration\n"
    traces = {
        "extra-field.csv": header.encode() + b"j1,0,1,100,extra\n",
        "gpus-2-70.csv": header.encode() + b"j1,0,1180591620717411303424,100\n",
        "not-utf8.csv": header.encode() + b"j1,0,1,100\nj\xff\xfe,0,1,100\n",
        "duration-1e30.csv": header.encode() + b"j1,0,1,1e30\n",
        "duration-1e308.csv": header.encode() + b"j1,0,1,1e308\n",
        "submit-1e12.csv": header.encode() + b"j1,1e12,1,100\n",
        "submit-1e300.csv": header.encode() + b"j1,1e300,1,100\n",
    }
    for name, body in traces.items():
        (tmp / name).write_bytes(body)
    (tmp / "deep.json").write_text('{"workloads": ' + "[" * 50_000 + "]" * 50_000 + "}")
    (tmp / "gpus-2-63.csv").write_text("name,count,cost_per_hour\nv100,9223372036854775808,2.48\nk80,2,0.45\n")
    (tmp / "gpus.txt").write_text((TABLES / "gpus.csv").read_text())
    (tmp / "gpus").write_text((TABLES / "gpus.csv").read_text())
    import pandas as pd

    frame = pd.read_csv(TABLES / "gpus.csv")
    frame["count"] = frame["count"].astype(str)
    frame.to_parquet(tmp / "gpus-strings.parquet")
    assert main(["solve", str(alloc), "-o", str(tmp / "plan.json")]) == 0
    assert main(["export", str(tmp / "plan.json"), "--instance", str(alloc), "-o", str(tmp / "plan.csv")]) == 0
    lines = (tmp / "plan.csv").read_text().splitlines()
    first = lines[1].split(",")
    first[1] = "1e308"
    (tmp / "plan-1e308.csv").write_text("\n".join([lines[0], ",".join(first), *lines[2:]]) + "\n")
    results = tmp / "results"
    results.mkdir()
    (results / "results.csv").write_text("suite,group\n" + "x" * 140_000 + ",g\n")
    (tmp / "suite.yaml").write_text("name: t\ngroups:\n  - kind: allocation\n    generator: {jobs: 8}\n"
                                    "    solvers: [{name: max-min-fairness, options: {partitions: 0}}]\n")
    return {"tmp": str(tmp), "alloc": str(alloc), "tables": str(TABLES)}


# (class, id, argv with {placeholders}, exit code, text the one line holds)
CASES = [
    ("values", "alias-bomb", ["solve", "{alloc}", "--option", f"partitions={BOMB}"], 2, "alias bomb"),
    ("values", "nested-200", ["solve", "{alloc}", "--option", "partitions=" + "[" * 200 + "]" * 200], 2,
     "nested more than 100"),
    ("values", "long-value-echoed-short", ["solve", "{alloc}", "--option", "partitions=" + "x" * 100_000], 2,
     "is not allowed"),
    ("values", "generator-alias-bomb", ["generate", "allocation", f"--jobs={BOMB}", "-o", "{tmp}/g.json"], 2,
     "alias bomb"),
    ("values", "simulate-alias-bomb", ["simulate", "cluster", "--param", f"cluster={BOMB}"], 2, "alias bomb"),
    ("values", "threads-2-70", ["solve", "{alloc}", "--threads", str(2**70)], 2, "not allowed"),
    ("values", "max-exact-levels-1e8", ["solve", "{tmp}/placement.json", "--solver", "cpsat", "--option",
                                        "max_exact_levels=1e8"], 2, "options.max_exact_levels"),
    ("values", "max-moves-2-70", ["solve", "{tmp}/placement.json", "--solver", "hill-climb", "--option",
                                  f"max_moves={2**70}"], 2, "options.max_moves"),
    ("outputs", "under-a-regular-file", ["solve", "{alloc}", "-o", "{alloc}/x.json"], 2, "Not a directory"),
    ("outputs", "in-proc", ["solve", "{alloc}", "-o", "/proc/x.json"], 2, "cannot create a file in '/proc'"),
    ("outputs", "simulate-out-in-proc", ["simulate", "cluster", "--out", "/proc/x"], 2, "/proc/x"),
    ("outputs", "bench-o-a-file", ["bench", "quick", "-o", "{alloc}"], 2, "not a directory"),
    ("outputs", "plot-txt", ["simulate", "cluster", "--plot", "{tmp}/x.txt"], 2, "unknown image type"),
    ("outputs", "generate-in-proc", ["generate", "allocation", "-o", "/proc/a.json"], 2, "/proc"),
    ("traces", "extra-field", ["simulate", "cluster", "--trace", "{tmp}/extra-field.csv"], 2, "5 fields"),
    ("traces", "gpus-2-70", ["simulate", "cluster", "--trace", "{tmp}/gpus-2-70.csv"], 2, "column 'gpus'"),
    ("traces", "not-utf8", ["simulate", "cluster", "--trace", "{tmp}/not-utf8.csv"], 2, "not UTF-8"),
    ("traces", "duration-1e30", ["simulate", "cluster", "--trace", "{tmp}/duration-1e30.csv"], 2, "ten years"),
    ("traces", "duration-1e308", ["simulate", "cluster", "--trace", "{tmp}/duration-1e308.csv"], 2, "ten years"),
    ("traces", "submit-1e12", ["simulate", "cluster", "--trace", "{tmp}/submit-1e12.csv"], 2, "ten years"),
    ("traces", "submit-1e300", ["simulate", "cluster", "--trace", "{tmp}/submit-1e300.csv"], 2, "ten years"),
    ("scenarios", "cluster-1e9-jobs", ["simulate", "cluster", "--jobs", "1000000000"], 2, "jobs"),
    ("scenarios", "mast-1e6-regions", ["simulate", "mast", "--regions", "1000000"], 2, "regions"),
    ("scenarios", "mast-1000-regions-memory", ["simulate", "mast", "--regions", "1000"], 2, "memory"),
    ("scenarios", "mast-nested-50000", ["simulate", "mast", "--file", "{tmp}/deep.json"], 2, "nested too deeply"),
    ("scenarios", "tiresias-negative", ["simulate", "cluster", "--tiresias_thresholds", "[-1]"], 2,
     "tiresias_thresholds"),
    ("scenarios", "quota-negative", ["simulate", "cluster", "--quotas", '{"default": -5}'], 2, "quotas.default"),
    ("scenarios", "round-tiny", ["simulate", "cluster", "--round_s", "1e-300"], 2, "round_s"),
    ("scenarios", "parsync-sync-gap-tiny", ["simulate", "parsync", "--sync_gap_s", "1e-9"], 2, "sync_gap_s"),
    ("scenarios", "mast-hours-1e300", ["simulate", "mast", "--hours", "1e300"], 2, "hours"),
    ("tables", "count-2-63", ["import", "allocation", "--jobs", "{tables}/jobs.csv", "--cluster",
                              "{tmp}/gpus-2-63.csv", "-o", "{tmp}/i.json"], 2, "out of range"),
    ("tables", "txt-suffix", ["import", "allocation", "--jobs", "{tables}/jobs.csv", "--cluster", "{tmp}/gpus.txt",
                              "-o", "{tmp}/i.json"], 2, "unknown table type"),
    ("tables", "plan-policy-bogus", ["import", "plan", "{tmp}/plan.csv", "--instance", "{alloc}", "--policy",
                                     "bogus", "-o", "{tmp}/i.json"], 2, "unknown policy 'bogus'"),
    ("tables", "plan-share-1e308", ["import", "plan", "{tmp}/plan-1e308.csv", "--instance", "{alloc}",
                                    "-o", "{tmp}/i.json"], 2, "out of range"),
    ("tables", "parquet-count-strings", ["import", "allocation", "--jobs", "{tables}/jobs.csv", "--cluster",
                                         "{tmp}/gpus-strings.parquet", "-o", "{tmp}/i.json"], 2,
     "got the text '2'"),
    ("tables", "no-suffix", ["import", "allocation", "--jobs", "{tables}/jobs.csv", "--cluster", "{tmp}/gpus",
                             "-o", "{tmp}/i.json"], 2, "unknown table type"),
    ("files", "schema-version-true", ["validate", "{tmp}/schema-true.json"], 2, "must be the integer 1"),
    ("files", "reservation-no-servers", ["validate", "{tmp}/no-servers.json"], 2, "at least one server"),
    ("files", "null-replica-first-cause", ["evaluate", "{tmp}/placement.json", "{tmp}/null-replica.json"], 2,
     "replicas.table[0]: Input should be a valid string (got null)"),
    ("bench", "suite-option-value", ["bench", "{tmp}/suite.yaml", "-o", "{tmp}/sweep"], 2,
     "options.partitions: 0 is not allowed"),
    ("bench", "report-field-too-large", ["bench", "report", "{tmp}/results"], 2, "field larger than field limit"),
]


def _params():
    seen: dict[str, int] = {}
    for case in CASES:
        seen[case[0]] = seen.get(case[0], 0) + 1
        marks = () if seen[case[0]] <= SAMPLE_PER_CLASS else (pytest.mark.slow,)
        yield pytest.param(*case, id=f"{case[0]}-{case[1]}", marks=marks)


def _fill(part: str, files: dict[str, str]) -> str:
    for key, value in files.items():
        part = part.replace("{" + key + "}", value)
    return part


@pytest.fixture(scope="module")
def files(tmp_path_factory):
    return _files(tmp_path_factory.mktemp("sweep"))


@pytest.mark.parametrize(("group", "name", "argv", "code", "text"), list(_params()))
def test_bad_input_is_one_line_and_the_exit_code(group, name, argv, code, text, files, capsys, tmp_path):
    capsys.readouterr()  # the fixture's own output
    before = set(os.listdir(files["tmp"]))
    args = [_fill(part, files) for part in argv]
    assert main(args) == code
    captured = capsys.readouterr()
    error = captured.err.strip()
    assert len(error.splitlines()) == 1, error[:2000]
    assert text in error, error
    assert "internal error" not in error and "Traceback" not in error
    assert len(error) < 600  # never the whole bad value
    assert set(os.listdir(files["tmp"])) == before  # nothing written beside the inputs


@pytest.mark.parametrize("text, value", [
    ("1e12", 10**12), ("1e-9", 1e-9), ("1.5e3", 1500.0), ("-2E2", -200), ("1_000e3", 1_000_000), ("1e", "1e"),
    ("0x10", 16), ("[1e3, 2e-3]", [1000, 0.002]),
])
def test_yaml_12_numbers_are_numbers(text, value):
    from fleetplan.cli.common import parse_value

    assert parse_value(text) == value and type(parse_value(text)) is type(value)


def test_yaml_12_numbers_reach_the_options(files, capsys):
    """`tolerance=1e-9` was 'not a valid number' (item 19)."""
    assert main(["solve", files["alloc"], "--solver", "min-makespan-binary-search", "--option",
                 "tolerance=1e-9", "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["plan"]["options"]["tolerance"] == 1e-9


def test_a_trace_with_a_byte_order_mark_is_read(tmp_path, capsys):
    """Spreadsheets write a UTF-8 BOM; it was read as part of the first column's name
    ("missing column 'id'")."""
    trace = tmp_path / "bom.csv"
    trace.write_bytes(b"\xef\xbb\xbfid,submit_time,gpus,duration\nj1,0,1,100\n")
    assert main(["simulate", "cluster", "--trace", str(trace), "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["metrics"]["jobs_finished"] == 1
