"""The bundled `quick` suite over every registered solver, and the invariants of its table."""

from __future__ import annotations

import json
import math

import pytest

import fleetplan
from fleetplan.benchmarks.suite import expand_cells, load_suite
from fleetplan.benchmarks.sweep import run_sweep
from fleetplan.runs.cells import COLUMNS, plan_file
from fleetplan.runs.results import SOLVED, as_float, read_results
from fleetplan.solvers import STATUSES


@pytest.fixture(scope="module")
def quick_run(tmp_path_factory):
    out = tmp_path_factory.mktemp("quick")
    suite = load_suite("quick")
    rows = run_sweep(suite, out, workers=2, save_plans=True, progress=None)
    return suite, out, rows


def test_quick_covers_every_kind_and_solver():
    suite = load_suite("quick")
    covered = {(cell.kind, cell.solver) for cell in expand_cells(suite)}
    registered = {(spec.kind, spec.name) for spec in fleetplan.list_solvers()}
    # A kind with no solver yet has nothing to benchmark; once it has one, quick must cover it.
    with_solvers = {spec.kind for spec in fleetplan.list_solvers()}
    missing_kinds = with_solvers - {kind for kind, _ in covered}
    assert not missing_kinds, f"add a group for {sorted(missing_kinds)} to fleetplan/benchmarks/suites/quick.yaml"
    assert registered <= covered, f"quick misses solvers {sorted(registered - covered)}"


def test_table_has_one_row_per_cell_with_every_column(quick_run):
    suite, out, rows = quick_run
    cells = expand_cells(suite)
    assert [(row["group"], row["instance"], str(row["seed"]), row["label"], str(row["repeat"])) for row in rows] \
        == [cell.key for cell in cells]
    stored = read_results(out)
    assert len(stored) == len(cells)
    assert list(stored[0]) == list(COLUMNS)
    header = (out / "results.csv").read_text().splitlines()[0]
    assert header.split(",") == list(COLUMNS)


def test_every_cell_has_a_status_and_gaps_are_non_negative(quick_run):
    _, out, _ = quick_run
    for row in read_results(out):
        assert row["status"] in STATUSES, row
        if row["status"] in SOLVED:
            assert as_float(row["objective"]) is not None, row
            assert row["violations"] == "0", row
            gap = as_float(row["gap"])
            if row["kind"] == "binpack":
                # Ranked by the exact key: gap 0 for the best plans, none (and a message) behind.
                assert row["gap_reference"] == "exact_order", row
                assert gap == 0 or (gap is None and "behind the best plan" in row["message"]), row
            else:
                assert gap is not None and gap >= 0, row
                assert row["gap_reference"] in ("bound", "best_objective")
            assert row["objective_name"] and row["sense"] in ("min", "max")
        assert as_float(row["wall_s"]) is not None and float(row["wall_s"]) >= 0
        assert as_float(row["peak_mem_mb"]) is not None and float(row["peak_mem_mb"]) > 0


def test_quick_runs_cleanly(quick_run):
    _, _, rows = quick_run
    failures = [(row["label"], row["instance"], row["message"]) for row in rows if row["status"] not in SOLVED]
    assert not failures


def test_objective_equals_an_independent_evaluation(quick_run):
    """Regenerate each instance here, evaluate the stored plan, compare with the table."""
    suite, out, rows = quick_run
    cells = {cell.key: cell for cell in expand_cells(suite)}
    checked = 0
    for row in rows:
        if row["status"] not in SOLVED:
            continue
        cell = cells[(row["group"], row["instance"], str(row["seed"]), row["label"], str(row["repeat"]))]
        instance = fleetplan.generate(row["kind"], json.loads(row["params"]), seed=int(row["seed"]))
        plan = fleetplan.load_plan(plan_file(out / "plans", cell))
        evaluation = fleetplan.evaluate(instance, plan)
        assert math.isclose(evaluation.objective, float(row["objective"]), rel_tol=1e-12, abs_tol=1e-12)
        assert evaluation.sense == row["sense"]
        assert not evaluation.violations
        checked += 1
    assert checked == len(rows)


def test_best_bound_is_the_tightest_proven_bound(quick_run):
    _, _, rows = quick_run
    by_instance: dict = {}
    for row in rows:
        by_instance.setdefault((row["kind"], row["instance"], row["seed"], row["objective_name"]), []).append(row)
    for group in by_instance.values():
        bounds = [float(row["bound"]) for row in group if row["bound"] != ""]
        sense = group[0]["sense"]
        if bounds:
            expected = min(bounds) if sense == "max" else max(bounds)
            assert all(float(row["best_bound"]) == expected for row in group if row["status"] in SOLVED)
            for row in group:
                objective = float(row["objective"])
                gap = (expected - objective) if sense == "max" else (objective - expected)
                assert math.isclose(float(row["gap"]), max(0.0, gap / max(abs(objective), 1e-9)), rel_tol=1e-9, abs_tol=1e-12)
