"""binpack plans are ranked by the exact key wherever they are compared: the RMS
score is a float encoding that loses the youth tie-break from about 31 waiting workloads and a
whole priority-6 preemption from about 2,048, and printed to four digits a plan with five
preemptions looks like one with one."""

from __future__ import annotations

import json

import fleetplan
from fleetplan.benchmarks.profiles import median_runs, wins
from fleetplan.instances.binpack import PRIORITY_LEVELS, UNPLACED_COST, level_weight
from fleetplan.instances.binpack.evaluate import key_difference, score_key_from_metrics
from fleetplan.runs.results import finalize


def _metrics(unplaced: int, counts: dict[int, int], youth: float) -> dict[str, float]:
    metrics = {"unplaced_workloads": float(unplaced), "preempted_youth": youth, "machines_used": 4.0,
               "racks_used": 2.0}
    metrics.update({f"preempted_count_p{p}": float(counts.get(p, 0)) for p in range(PRIORITY_LEVELS)})
    return metrics


def _score(metrics: dict[str, float]) -> float:
    return (metrics["unplaced_workloads"] * UNPLACED_COST + metrics["preempted_youth"]
            + sum(metrics[f"preempted_count_p{p}"] * level_weight(p) for p in range(PRIORITY_LEVELS)))


def test_the_float_loses_what_the_key_keeps():
    # From 32 waiting workloads a youth difference below 1 vanishes; from 2,048 a priority-6 job.
    young, old = _metrics(32, {5: 1}, 0.9), _metrics(32, {5: 1}, 0.1)
    assert _score(young) == _score(old)
    assert score_key_from_metrics(old) < score_key_from_metrics(young)
    one_more = _metrics(2048, {6: 1}, 0.0)
    assert _score(one_more) == _score(_metrics(2048, {}, 0.0))
    assert key_difference(score_key_from_metrics(_metrics(2048, {}, 0.0)), score_key_from_metrics(one_more)) == \
        ("+1 priority-6 preemptions", "worse")
    # Below those counts the float still orders them.
    assert _score(_metrics(16, {6: 1}, 0.0)) > _score(_metrics(16, {}, 0.0))


def _row(label: str, metrics: dict[str, float]) -> dict[str, str]:
    return {"group": "g", "kind": "binpack", "instance": "i", "seed": "0", "label": label, "repeat": "0",
            "status": "feasible", "objective": repr(float(_score(metrics))), "bound": "", "gap": "", "wall_s": "1.0",
            "violations": "0", "peak_mem_mb": "1", "params": "{}", "sense": "min", "objective_name": "rms_score",
            "message": "", "metrics": json.dumps(metrics)}


def test_bench_ranks_binpack_plans_by_the_exact_key():
    five = _metrics(1, {3: 5}, 3.99)
    two = _metrics(1, {3: 2}, 1.41)
    # The floats are 2.5e-7 apart (relative): a gap under any usual target, a tie for wins.
    assert abs(_score(five) - _score(two)) / _score(two) < 1e-6
    rows = {row["label"]: row for row in finalize([_row("greedy", five), _row("exact", two)])}
    assert rows["exact"]["gap"] == 0.0 and rows["exact"]["gap_reference"] == "exact_order"
    assert rows["greedy"]["gap"] == ""
    assert "+3 priority-3 preemptions" in rows["greedy"]["message"]
    assert wins(median_runs(rows.values())) == {"exact": 1, "greedy": 0}


def test_solve_shows_what_the_score_encodes(capsys):
    from fleetplan.cli import main

    assert main(["solve", "examples/binpack-small.json", "--solver", "rms-greedy"]) == 0
    out = capsys.readouterr().out
    assert "placed 3 of 4 workloads; preempted 5 running jobs" in out
    assert "p3 5" in out and "loses the youth tie-break" in out
    assert out.index("placed_workloads") < out.index("objective: RMS score")
    plan = fleetplan.solve(fleetplan.load_instance("examples/binpack-small.json"), "rms-greedy")
    assert plan.evaluation.metrics["preempted_count_p3"] == 5
