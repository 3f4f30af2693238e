"""Plots of plans: they draw, carry labels with units, keep legends off the data,
and stay a sensible size from a handful of jobs or regions to hundreds."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

import fleetplan
from fleetplan.instances import InstanceError, generate, load_instance
from fleetplan.plotting.plans import (
    MAX_JOB_LABELS,
    figure_summary,
    plot_allocation,
    plot_placement,
    plot_plan,
)

ROOT = Path(__file__).resolve().parent.parent
PNG = b"\x89PNG\r\n\x1a\n"


def _drawn(figure):
    from matplotlib.backends.backend_agg import FigureCanvasAgg

    FigureCanvasAgg(figure).draw()
    return figure.canvas.get_renderer()


def _overlaps(a, b) -> bool:
    return a.x0 < b.x1 and b.x0 < a.x1 and a.y0 < b.y1 and b.y0 < a.y1


def test_allocation_heatmap_draws_the_plan_sorted_with_the_isolated_share(tmp_path):
    instance = load_instance(ROOT / "examples" / "allocation-64-jobs.json")
    plan = fleetplan.solve(instance, "max-throughput").plan
    path = tmp_path / "allocation.png"
    figure = plot_plan(instance, plan, path)
    assert path.read_bytes()[:8] == PNG
    heat, bars = [a for a in figure.axes if a.get_label() != "<colorbar>"]
    arrays = instance.arrays()
    throughput = (arrays.throughput * plan.matrix(instance)).sum(axis=1)
    # Rows in the policy's order (max-throughput: the speed-up over the isolated share, lowest
    # first), so who is below the isolated share is at the top, in red.
    speedup = throughput / arrays.isolated_throughput
    order = np.argsort(speedup, kind="stable")
    shown = heat.get_images()[0].get_array()
    np.testing.assert_allclose(np.ma.filled(shown, 0.0), plan.matrix(instance)[order])
    assert [t.get_text() for t in heat.get_yticklabels()] == [arrays.job_ids[i] for i in order]
    widths = np.array([patch.get_width() for patch in bars.patches])
    np.testing.assert_allclose(np.nan_to_num(widths), np.where(speedup[order] > 0, speedup[order], 0.0))
    assert any(line.get_xdata()[0] == 1.0 for line in bars.get_lines())  # the isolated share marked
    assert (speedup < 1).sum() > 0 and "isolated" in bars.get_xlabel()
    assert f"{int((speedup < 1 - 1e-6).sum())} of 64 jobs below it" in bars.get_xlabel()
    assert "speed-up over the isolated share" in heat.get_ylabel()
    colorbar = [a for a in figure.axes if a.get_label() == "<colorbar>"]
    assert colorbar and "share" in (colorbar[0].get_xlabel() + colorbar[0].get_ylabel())
    width, height = figure.get_size_inches()
    assert 8 <= width <= 16 and 4 <= height <= 16


@pytest.mark.parametrize("policy", ["max-throughput", "max-min-fairness"])
def test_the_title_states_the_judge_s_numbers(policy):
    """The title's minimum normalized throughput is the judge's (the rows are sorted: each job's
    throughput must be divided by its own equal share, not another row's)."""
    instance = load_instance(ROOT / "examples" / "inventory-30-jobs.json")
    result = fleetplan.solve(instance, policy)
    figure = plot_allocation(instance, result.plan)
    expected = result.evaluation.metrics["min_normalized_throughput"]
    assert f"min normalized throughput {expected:.3g}," in figure._suptitle.get_text()


def test_max_min_fairness_rows_follow_its_metric():
    instance = load_instance(ROOT / "examples" / "allocation-64-jobs.json")
    plan = fleetplan.solve(instance, "max-min-fairness").plan
    figure = plot_allocation(instance, plan)
    assert "weighted normalized throughput" in figure.axes[0].get_ylabel()


@pytest.mark.parametrize("kind", ["reservation", "binpack", "gpushare"])
def test_every_kind_has_a_picture(kind, tmp_path):
    from fleetplan.cli import main

    example = ROOT / "examples" / f"{kind}-small.json"
    plan = tmp_path / "plan.json"
    assert main(["solve", str(example), "-o", str(plan)]) == 0
    out = tmp_path / f"{kind}.png"
    assert main(["plot", str(example), str(plan), "-o", str(out)]) == 0
    assert out.read_bytes()[:8] == PNG
    figure = plot_plan(load_instance(example), fleetplan.load_plan(plan))
    titles = " ".join(axis.get_title() for axis in figure.axes)
    if kind == "reservation":
        assert "worst fault domain removed" in titles and "buffer" in titles
        first = figure.axes[0]
        requests = [c for c in first.collections if c.get_label() == "request"]
        assert requests  # the request marked on every row
    elif kind == "gpushare":
        assert "fragmented" in titles and "pending" in titles
    else:
        assert "before and after" in titles and "placed" in titles


def test_large_allocation_drops_row_labels_and_keeps_its_size():
    instance = generate("allocation", {"jobs": MAX_JOB_LABELS + 40}, seed=3)
    plan = fleetplan.solve(instance, "max-min-fairness").plan
    figure = plot_allocation(instance, plan)
    heat = figure.axes[0]
    assert heat.get_yticklabels() == [] or all(not t.get_text() for t in heat.get_yticklabels())
    assert figure.get_size_inches()[1] <= 16


def test_pair_time_counts_in_the_heatmap():
    instance = generate("allocation", {"jobs": 12, "space_sharing": True}, seed=4)
    plan = fleetplan.solve(instance, "max-min-fairness", space_sharing=True).plan
    assert plan.pairs
    figure = plot_allocation(instance, plan)
    shown = np.ma.filled(figure.axes[0].get_images()[0].get_array(), 0.0)
    pair_jobs, pair_matrix = plan.pair_matrix(instance)
    expected = plan.matrix(instance).copy()
    np.add.at(expected, pair_jobs[:, 0], pair_matrix)
    np.add.at(expected, pair_jobs[:, 1], pair_matrix)
    labels = [t.get_text() for t in figure.axes[0].get_yticklabels()]
    order = [instance.arrays().job_ids.index(label) for label in labels]  # rows sorted by the policy
    np.testing.assert_allclose(shown, expected[order])
    assert "space-sharing pairs" in figure.get_suptitle()


@pytest.mark.parametrize("regions", [4, 12])
def test_placement_panels_units_and_legends_outside(tmp_path, regions):
    instance = generate("placement", {"regions": regions, "tables": 120, "jobs": 150}, seed=1)
    plan = fleetplan.solve(instance, "hill-climb").plan
    path = tmp_path / "placement.png"
    figure = plot_placement(instance, plan, path)
    assert path.read_bytes()[:8] == PNG
    summary = figure_summary(figure)["axes"]
    assert "GPU-hours" in summary[0]["ylabel"]
    assert any(unit in summary[1]["ylabel"] for unit in ("PB", "TB", "GB", "MB", "bytes"))
    renderer = _drawn(figure)
    for axis in figure.axes:
        legend = axis.get_legend()
        assert legend is not None
        assert not _overlaps(legend.get_window_extent(renderer), axis.get_window_extent(renderer))
        assert [t.get_text() for t in axis.get_xticklabels()] == instance.arrays().region_ids
    width, height = figure.get_size_inches()
    assert 10 <= width <= 24 and height <= 12


def test_placement_bars_are_the_region_frame():
    from fleetplan.instances.placement.frames import region_frame

    instance = load_instance(ROOT / "examples" / "placement-small.json")
    plan = fleetplan.solve(instance, "hill-climb").plan
    figure = plot_placement(instance, plan)
    frame = region_frame(instance, plan)
    gpu = figure.axes[0]
    heights = [p.get_height() for p in gpu.patches]
    n = len(frame)
    np.testing.assert_allclose(heights[:n], frame["gpu_supply_gpu_hours"])
    np.testing.assert_allclose(heights[n:2 * n], frame["gpu_demand_today_gpu_hours"])
    np.testing.assert_allclose(heights[2 * n:], frame["gpu_demand_plan_gpu_hours"])


def test_plot_refuses_a_plan_of_another_kind():
    allocation = load_instance(ROOT / "examples" / "allocation-64-jobs.json")
    placement = load_instance(ROOT / "examples" / "placement-small.json")
    plan = fleetplan.solve(placement, "keep").plan
    with pytest.raises(InstanceError, match="cannot go with an instance of kind 'allocation'"):
        plot_plan(allocation, plan)


def test_split_ml_demand_is_named_not_hidden():
    """§3.3: an ML job whose tables are split has no region and adds no demand; the plot says
    how many GPU-hours that leaves out instead of showing a quietly emptier region."""
    from fleetplan.instances.placement import PlacementPlan
    from fleetplan.instances.placement.frames import from_frames

    folder = ROOT / "examples" / "tables" / "placement"
    instance = from_frames(tables=folder / "tables.csv", jobs=folder / "jobs.csv", regions=folder / "regions.csv",
                           settings=folder / "settings.yaml")
    home = list(instance.tables.home)
    home[instance.tables.id.index("clicks")] = "west"  # ranker reads clicks and users
    figure = plot_placement(instance, PlacementPlan.model_validate({"kind": "placement", "home": home}))
    title = figure.axes[0].get_title()
    assert "0 GPU-hours per day today, 240 under the plan" in title
    untouched = plot_placement(instance, PlacementPlan.current(instance))
    assert "split" not in untouched.axes[0].get_title()
