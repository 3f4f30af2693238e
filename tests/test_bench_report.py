"""Gaps, profiles, wins, scaling fits and the rendered report, on hand-made tables."""

from __future__ import annotations

import json
import math

import numpy as np
import pytest

from fleetplan.benchmarks import profiles
from fleetplan.cli import main
from fleetplan.runs.cells import COLUMNS
from fleetplan.runs.results import finalize, write_results


def row(label, objective, *, bound="", sense="max", status="optimal", wall=1.0, instance="i", seed=0,
        repeat=0, violations=0, params=None, group="g", objective_name="score"):
    values = dict.fromkeys(COLUMNS, "")
    values.update(suite="s", group=group, kind="k", instance=instance, seed=str(seed), solver=label,
                  label=label, options="{}", repeat=str(repeat), status=status,
                  objective="" if objective is None else str(objective), bound=str(bound),
                  wall_s=str(wall), peak_mem_mb="50", violations=str(violations),
                  sense=sense if status != "error" else "",
                  objective_name=objective_name if status != "error" else "",
                  params=json.dumps(params or {"n": 10}))
    return values


def by_label(rows):
    return {r["label"]: r for r in rows}


def test_gap_for_a_maximization_uses_the_lowest_upper_bound():
    rows = by_label(finalize([row("a", 8, bound=10), row("b", 9, bound=12), row("c", 5)]))
    assert {label: r["best_bound"] for label, r in rows.items()} == {"a": 10, "b": 10, "c": 10}
    assert rows["a"]["gap"] == pytest.approx(0.25)  # (10 - 8) / 8
    assert rows["b"]["gap"] == pytest.approx(1 / 9)
    assert rows["c"]["gap"] == pytest.approx(1.0)
    assert {r["gap_reference"] for r in rows.values()} == {"bound"}


def test_gap_for_a_minimization_uses_the_highest_lower_bound():
    rows = by_label(finalize([row("a", 12, bound=10, sense="min"), row("b", 11, bound=7, sense="min")]))
    assert rows["a"]["best_bound"] == rows["b"]["best_bound"] == 10
    assert rows["a"]["gap"] == pytest.approx(2 / 12)  # (objective - bound) / |objective|
    assert rows["b"]["gap"] == pytest.approx(1 / 11)


def test_without_bounds_the_best_feasible_objective_is_the_reference():
    rows = by_label(finalize([row("a", 4, sense="min"), row("b", 5, sense="min"),
                              row("bad", 1, sense="min", violations=3)]))
    assert rows["a"]["best_bound"] == 4 and rows["a"]["gap"] == 0.0
    assert rows["b"]["gap"] == pytest.approx(0.2)
    assert rows["a"]["gap_reference"] == "best_objective"
    # A plan with violations is scored, but never sets the reference.
    assert rows["bad"]["gap"] == 0.0


def test_only_plans_scored_by_the_same_objective_are_compared():
    rows = by_label(finalize([row("fair", 8, bound=10), row("fair-baseline", 4),
                              row("fifo", 3, bound=3, sense="min", objective_name="fifo_score")]))
    assert rows["fair-baseline"]["gap"] == pytest.approx(1.5)  # (10 - 4) / 4
    assert rows["fifo"]["best_bound"] == 3 and rows["fifo"]["gap"] == 0.0


def test_report_splits_a_group_by_objective(tmp_path):
    rows = finalize([row("fair", 8, bound=10), row("fair-baseline", 4, wall=0.5),
                     row("fifo", 3, bound=3, sense="min", objective_name="fifo_score"),
                     row("fifo", None, status="error", repeat=1)])
    write_results(tmp_path, rows)
    text = _render(tmp_path)
    assert "### Objective `score` (maximize)" in text and "### Objective `fifo_score` (minimize)" in text
    # The failed repeat stays with fifo's objective; one failure in two repeats makes the
    # problem's status an error (ties go to the failure), so fifo is not at target there.
    assert "| fifo | 1 | 2 | 1 | 0 |" in text
    assert "| fair | 1 | 1 | 0 | 0 | 0.25 | 0.25 | 1 | 50 | 1 |" in text
    assert "| fair-baseline | 1 | 1 | 0 | 0 | 1.5 | 1.5 | 0.5 | 50 | 0 |" in text


def _render(folder):
    from fleetplan.benchmarks.report import write_report

    return write_report(folder).read_text()


def test_failures_get_no_gap_and_instances_are_separate():
    rows = finalize([row("a", 8, bound=10), row("a", None, status="error", repeat=1),
                     row("a", 3, bound=3, instance="j")])
    assert rows[0]["gap"] == pytest.approx(0.25)
    assert rows[1]["gap"] == "" and rows[1]["best_bound"] == ""
    assert rows[2]["gap"] == 0.0


def test_an_objective_beyond_the_best_bound_is_flagged_not_negative():
    rows = by_label(finalize([row("a", 10, bound=9), row("b", 9 + 1e-9, bound=9)]))
    assert rows["a"]["gap"] == 0.0 and "beats the best bound" in rows["a"]["message"]
    assert rows["b"]["gap"] == 0.0 and rows["b"]["message"] == ""


def test_medians_over_repeats():
    runs = profiles.median_runs([row("a", 1, wall=w, repeat=r) for r, w in enumerate([5.0, 1.0, 3.0])])
    assert len(runs) == 1 and runs[0].wall_s == 3.0 and runs[0].repeats == 3


def _table():
    # Three problems; a is fastest on p1, b on p2, c never reaches the target (gap 0.5).
    rows = []
    for instance, (ta, tb) in {"p1": (1.0, 2.0), "p2": (4.0, 1.0), "p3": (2.0, 2.0)}.items():
        rows += [row("a", 10, bound=10, wall=ta, instance=instance),
                 row("b", 10, wall=tb, instance=instance),
                 row("c", 5, wall=0.1, instance=instance)]
    return finalize(rows)


def test_performance_profile_by_hand():
    runs = profiles.median_runs(_table())
    profile = profiles.performance_profile(runs, taus=[1.0, 2.0, 4.0])
    # ratios a: 1, 4, 1 -> rho = 2/3, 2/3, 1;  b: 2, 1, 1 -> 2/3, 1, 1;  c: inf.
    assert profile["a"] == pytest.approx([2 / 3, 2 / 3, 1.0])
    assert profile["b"] == pytest.approx([2 / 3, 1.0, 1.0])
    assert profile["c"] == pytest.approx([0.0, 0.0, 0.0])


def test_wins_go_to_the_fastest_at_the_best_objective():
    runs = profiles.median_runs(_table())
    # p3 is a tie in time between a and b: broken by name, deterministically.
    assert profiles.wins(runs) == {"a": 2, "b": 1, "c": 0}
    table = {line["solver"]: line for line in profiles.solver_table(runs)}
    assert table["c"]["at_target"] == 0 and table["c"]["worst_gap"] == pytest.approx(1.0)
    assert table["a"]["median_s"] == 2.0 and table["a"]["at_target"] == 3


def test_time_to_target_counts_every_run():
    curves = profiles.time_to_target(_table())
    times, fractions = curves["a"]
    assert times.tolist() == [1.0, 2.0, 4.0] and fractions == pytest.approx([1 / 3, 2 / 3, 1.0])
    assert len(curves["c"][0]) == 0


def test_scaling_slope_recovers_a_power_law():
    rows = [row("a", 1, bound=1, wall=2e-6 * n ** 1.5, params={"n": n, "flag": True}, instance=f"n{n}")
            for n in (100, 1000, 10000)]
    runs = profiles.median_runs(finalize(rows))
    assert profiles.size_parameter(runs) == "n"
    (curve,) = profiles.scaling_curves(runs, "n")
    assert curve.slope == pytest.approx(1.5)
    assert curve.sizes.tolist() == [100, 1000, 10000]


def test_report_renders_from_the_csv_alone(tmp_path, capsys):
    rows = _table() + finalize([row("a", 1, bound=1, wall=1e-3 * n, params={"n": n}, instance=f"n{n}", group="scale")
                                for n in (10, 100, 1000)])
    write_results(tmp_path, rows)
    assert main(["bench", "report", str(tmp_path)]) == 0
    text = (tmp_path / "report.md").read_text()
    assert "## Group `g` (k)" in text and "## Group `scale` (k)" in text
    assert "| a | 3 | 3 | 0 | 3 |" in text  # problems, runs, failed, at target
    for name in ("g-profile.png", "g-time-to-target.png", "scale-scaling.png"):
        assert f"]({name})" in text
        assert (tmp_path / name).read_bytes()[:4] == b"\x89PNG"
    assert "| a | 10, 100, 1000 | 0.01, 0.1, 1 | 1 |" in text  # the fitted slope of t = 1e-3 n
    assert not list(tmp_path.glob(".*.tmp*"))


def test_profile_on_nothing_solved_is_zero():
    runs = profiles.median_runs(finalize([row("a", None, status="error"), row("b", None, status="error")]))
    assert all(np.all(curve == 0) for curve in profiles.performance_profile(runs, taus=[1.0]).values())
    assert math.isfinite(profiles.profile_taus(np.array([[np.inf]]))[-1])


def test_report_without_plots_keeps_the_tables(tmp_path):
    write_results(tmp_path, finalize([row("a", 1, bound=1, wall=1e-3 * n, params={"n": n}, instance=f"n{n}")
                                      for n in (10, 100)]))
    assert main(["bench", "report", str(tmp_path), "--no-plots"]) == 0
    text = (tmp_path / "report.md").read_text()
    # Two sizes: the times are shown, but no slope is fitted through two points.
    assert "| a | 10, 100 | 0.01, 0.1 | - |" in text and "![" not in text
    assert not list(tmp_path.glob("*.png"))


def test_one_colour_and_marker_per_solver_whatever_a_figure_shows():
    from fleetplan.plotting.bench import solver_styles

    everyone = solver_styles(["b", "a", "c", "a"])
    assert len({style[0] for style in everyone.values()}) == 3
    assert len({style[1] for style in everyone.values()}) == 3
    # The report computes styles once from every label; a figure missing "a" keeps b's style.
    assert everyone["b"] == solver_styles(["a", "b", "c"])["b"]


def test_figures_keep_solver_styles_and_hide_nobody(tmp_path):
    from fleetplan.benchmarks import report
    from fleetplan.plotting import bench

    drawn = {}

    def spy_save(figure, path):
        axes = figure.axes[0]
        drawn[path.name] = {line.get_label(): (line.get_color(), line.get_marker()) for line in axes.get_lines()}
        drawn[path.name + ":legend"] = axes.get_legend()
        drawn[path.name + ":note"] = figure.get_supxlabel()
        drawn[path.name + ":dpi"] = bench.DPI
        drawn[path.name + ":title"] = figure.get_suptitle()
        real_save(figure, path)

    real_save = bench._save
    bench._save = spy_save
    try:
        write_results(tmp_path, _table())
        report.write_report(tmp_path)
    finally:
        bench._save = real_save
    styles = bench.solver_styles(["a", "b", "c"])
    profile = drawn["g-profile.png"]
    assert profile == {"a": styles["a"], "b": styles["b"]}  # c never reaches the target: not a line at 0
    assert "never at target: c" in drawn["g-profile.png:note"]
    assert drawn["g-profile.png:legend"].get_bbox_to_anchor().x0 > 0  # anchored outside the axes
    assert drawn["g-time-to-target.png"] == {"a": styles["a"], "b": styles["b"]}
    assert drawn["g-profile.png:dpi"] >= 150
    # Each figure names its group and objective (ten figures titled alike said nothing).
    assert drawn["g-profile.png:title"].startswith("g, score\nperformance profile")
    assert drawn["g-time-to-target.png:title"].startswith("g, score\ntime to target")


def test_scaling_ticks_are_the_measured_sizes_and_labels_do_not_collide():
    from fleetplan.plotting.bench import _spaced

    assert _spaced([32.0, 256.0, 2048.0, 16384.0]) == [32.0, 256.0, 2048.0, 16384.0]
    # 300, 400 and 600 would overlap on a log axis: keep 300 and the largest.
    assert _spaced([100.0, 300.0, 400.0, 600.0]) == [100.0, 300.0, 600.0]


def test_a_group_with_fewer_than_three_problems_gets_a_table_not_a_profile(tmp_path):
    rows = [r for r in _table() if r["instance"] in ("p1", "p2")]
    write_results(tmp_path, rows)
    text = main(["bench", "report", str(tmp_path)]) == 0 and (tmp_path / "report.md").read_text()
    assert "Too few problems for a performance profile (2)" in text
    assert not (tmp_path / "g-profile.png").exists()
    assert not (tmp_path / "g-time-to-target.png").exists()  # one or two steps: the table says it
    assert "| p1 | 0 | 1 | 2 | missed (optimal) |" in text


def test_every_time_axis_of_a_report_has_one_range(tmp_path):
    from fleetplan.benchmarks import report
    from fleetplan.plotting import bench

    limits = {}

    def spy_save(figure, path):
        limits[path.name] = figure.axes[0].get_xlim()
        real_save(figure, path)

    slow = [dict(r, group="h", wall_s=float(r["wall_s"]) * 100) for r in _table()]
    real_save = bench._save
    bench._save = spy_save
    try:
        write_results(tmp_path, finalize([*_table(), *slow]))
        report.write_report(tmp_path)
    finally:
        bench._save = real_save
    assert limits["g-time-to-target.png"] == pytest.approx(limits["h-time-to-target.png"])
