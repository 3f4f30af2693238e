"""Plans a person can see: an allocation heatmap, a placement's regions before and after.

* :func:`plot_allocation` — Gavel's allocation matrix X (Gavel §3.1) as a heatmap, job x GPU type,
  rows sorted by the policy's metric (worst served first), beside each job's effective throughput
  ``sum_j T[m, j] X[m, j]`` as a multiple of its isolated 1/n share (the share marked).
* :func:`plot_placement` — per region, GPU supply and the GPU demand of the planned ML jobs today
  and under the plan (MAST §3.3, Expressions 2 and 7-8), and the storage used today and under the
  plan (homes and replicas) against each region's capacity (Expressions 3-4, §3.5).
* :func:`plot_plan` draws the one the plan's kind registers (``ProblemKind.plot``; reservation,
  binpack and gpushare: :mod:`fleetplan.plotting.reservation`, :mod:`fleetplan.plotting.binpack`,
  :mod:`fleetplan.plotting.gpushare`);
  ``fleetplan plot INSTANCE PLAN -o FILE.png`` calls it.

matplotlib loads inside these functions, through its object-oriented API (no pyplot, so no
global figure state and no display needed).

Example
-------
>>> import fleetplan
>>> from fleetplan.plotting import plot_plan
>>> instance = fleetplan.load_instance("examples/allocation-64-jobs.json")  # doctest: +SKIP
>>> result = fleetplan.solve(instance)  # doctest: +SKIP
>>> figure = plot_plan(instance, result.plan, "allocation.png")  # doctest: +SKIP
"""

from __future__ import annotations

import os
from typing import TYPE_CHECKING, Any

import numpy as np

from fleetplan.instances import InstanceError
from fleetplan.instances.allocation import AllocationInstance, AllocationPlan
from fleetplan.instances.allocation.evaluate import effective_throughput
from fleetplan.plotting.style import byte_unit, colour, save

if TYPE_CHECKING:  # pragma: no cover - typing only
    from matplotlib.figure import Figure

    from fleetplan.instances.base import InstanceBase, PlanBase
    from fleetplan.instances.placement import PlacementInstance, PlacementPlan

# Beyond this many jobs the heatmap's rows get no labels (they would overlap).
MAX_JOB_LABELS = 80
# Cells get their value written in when the matrix is this small.
MAX_ANNOTATED_CELLS = 240


def plot_plan(instance: InstanceBase, plan: PlanBase, path: str | os.PathLike[str] | None = None) -> Figure:
    """The plot of ``plan`` for its kind, saved to ``path`` (PNG, SVG or PDF by suffix) if given."""
    if plan.kind != instance.kind:
        raise InstanceError("kind", f"a plan of kind '{plan.kind}' cannot go with an instance of kind '{instance.kind}'")
    from fleetplan.instances import KINDS, get_kind

    spec = get_kind(instance.kind)
    if spec.plot is None:
        known = ", ".join(name for name in sorted(KINDS) if KINDS[name].plot)
        raise InstanceError("kind", f"no plot for the '{instance.kind}' kind (known: {known})")
    plot: Any = spec.load("plot")
    return plot(instance, plan, path)


def _save(figure: Figure, path: str | os.PathLike[str] | None) -> Figure:
    save(figure, path)
    return figure


def job_order(instance: AllocationInstance, plan: AllocationPlan, throughput: np.ndarray) -> tuple[np.ndarray, str]:
    """Rows in the order of the plan's policy metric, worst served first, and what it is:
    fairness policies by (weighted) normalized throughput, finish-time fairness by rho, FIFO by
    arrival, the duration policies by the time to finish; else the speed-up over the isolated
    share."""
    arrays = instance.arrays()
    policy = plan.policy
    with np.errstate(divide="ignore", invalid="ignore"):
        if policy in ("max_min_fairness", "hierarchical", "water_filling"):
            key = throughput / arrays.equal_share_throughput * arrays.scale_factor / arrays.weight
            what = "weighted normalized throughput, lowest first"
        elif policy == "max_min_fairness_unweighted":
            key = throughput / arrays.equal_share_throughput * arrays.scale_factor
            what = "normalized throughput, lowest first"
        elif policy == "finish_time_fairness" and not np.isnan(arrays.steps_left).any():
            isolated_finish = arrays.steps_left / arrays.isolated_throughput
            key = -(np.where(throughput > 0, arrays.steps_left / throughput, np.inf) / isolated_finish)
            what = "finish-time fairness rho, highest (worst) first"
        elif policy == "fifo":
            key = np.asarray(arrays.arrival_rank, dtype=float)
            what = "arrival order"
        elif policy in ("shortest_job_first", "min_makespan") and not np.isnan(arrays.steps_left).any():
            key = -np.where(throughput > 0, arrays.steps_left / throughput, np.inf)
            what = "time to finish, longest first"
        else:
            key = throughput / arrays.isolated_throughput
            what = "speed-up over the isolated share, lowest first"
    return np.argsort(np.nan_to_num(key, nan=-np.inf), kind="stable"), what


def plot_allocation(instance: AllocationInstance, plan: AllocationPlan,
                    path: str | os.PathLike[str] | None = None) -> Figure:
    """Heatmap of X (rows: jobs sorted by the plan's policy metric, worst served first; columns:
    GPU types; colour: share of the job's time on the type, 0-1) and, on the same rows, each
    job's effective throughput (Gavel §3.1) as a multiple of its isolated 1/n share, the share
    marked, so who is below it shows at once."""
    import matplotlib
    from matplotlib.figure import Figure
    from matplotlib.ticker import FuncFormatter, LogLocator

    arrays = instance.arrays()
    matrix = plan.matrix(instance)
    pair_jobs, pair_matrix = plan.pair_matrix(instance)
    throughput = effective_throughput(instance, matrix, pair_jobs, pair_matrix)
    if len(pair_jobs):  # a job's time in pairs counts toward its row (the rows sum to <= 1)
        shown = matrix.copy()
        np.add.at(shown, pair_jobs[:, 0], pair_matrix)
        np.add.at(shown, pair_jobs[:, 1], pair_matrix)
    else:
        shown = matrix
    order, ordered_by = job_order(instance, plan, throughput)
    shown, throughput = shown[order], throughput[order]
    job_ids = [arrays.job_ids[i] for i in order]
    isolated = arrays.isolated_throughput[order]
    n_jobs, n_types = shown.shape
    labelled = n_jobs <= MAX_JOB_LABELS
    height = float(np.clip(1.6 + 0.16 * n_jobs, 4.0, 16.0))
    width = float(np.clip(6.5 + 0.55 * n_types, 8.0, 16.0))
    figure = Figure(figsize=(width, height), layout="constrained")
    grid = figure.add_gridspec(1, 2, width_ratios=[max(n_types, 2), 4])
    heat = figure.add_subplot(grid[0, 0])
    bars = figure.add_subplot(grid[0, 1], sharey=heat)

    # Zero cells white, so "never runs there" stands apart from a small share.
    colours = matplotlib.colormaps["viridis"].with_extremes(bad="white")
    image = heat.imshow(np.ma.masked_less_equal(shown, 0.0), aspect="auto", cmap=colours, vmin=0.0, vmax=1.0,
                        interpolation="nearest")
    heat.set_xticks(range(n_types), arrays.worker_types)
    heat.set_xlabel("GPU type")
    heat.xaxis.set_label_position("top")
    heat.xaxis.tick_top()
    if labelled:
        heat.set_yticks(range(n_jobs), job_ids, fontsize=7 if n_jobs > 30 else 9)
    else:
        heat.set_yticks([])
    heat.set_ylabel(f"{n_jobs} jobs, by {ordered_by}".replace(", lowest", "\nlowest").replace(", highest", "\nhighest")
                    .replace(", longest", "\nlongest"), fontsize=9)
    if n_jobs * n_types <= MAX_ANNOTATED_CELLS:
        for m, j in zip(*np.nonzero(shown > 0.005), strict=True):
            heat.text(j, m, f"{shown[m, j]:.2f}", ha="center", va="center", fontsize=6 if n_jobs > 30 else 8,
                      color="black" if shown[m, j] > 0.6 else "white")
    colorbar = figure.colorbar(image, ax=heat, location="bottom", shrink=0.9, pad=0.01, aspect=30)
    colorbar.set_label("X: share of the job's time on the GPU type (0-1)")

    # Each job's throughput as a multiple of its isolated 1/n share of the cluster: the line at
    # 1 is that share, red bars are the jobs below it.
    speedup = np.where(isolated > 0, throughput / isolated, 0.0)
    below = speedup < 1 - 1e-6
    positive = speedup > 0
    bars.barh(np.arange(n_jobs), np.where(positive, speedup, np.nan), height=0.75,
              color=[colour(1) if low else colour(0) for low in below])
    bars.axvline(1.0, color="black", lw=1.2, ls="--")
    low, high = (speedup[positive].min(), speedup[positive].max()) if positive.any() else (0.5, 2.0)
    logarithmic = positive.any() and high > 30 * low
    if logarithmic:
        bars.set_xscale("log")
        bars.set_xlim(10 ** np.floor(np.log10(min(low, 1.0))), 10 ** np.ceil(np.log10(max(high, 1.0))))
        bars.xaxis.set_major_locator(LogLocator(base=10))
        bars.xaxis.set_major_formatter(FuncFormatter(lambda value, _: f"{value:g}"))
    else:
        bars.set_xlim(0, max(high, 1.0) * 1.08)
    starved = int((~positive).sum())
    counts = f"{int(below.sum())} of {n_jobs} jobs below it (red)" + (f", {starved} with none" if starved else "")
    bars.set_xlabel("throughput / isolated 1/n share (line: the isolated share"
                    + (", log scale)" if logarithmic else ")") + f"\n{counts}")
    bars.xaxis.set_label_position("top")
    bars.xaxis.tick_top()
    bars.tick_params(axis="y", left=False, labelleft=False)
    bars.grid(axis="x", which="major", alpha=0.3)
    bars.set_ylim(n_jobs - 0.5, -0.5)

    normalized = throughput / arrays.equal_share_throughput[order]  # both in the rows' order
    pairs = f"; shares include time in {len(pair_jobs)} space-sharing pairs" if len(pair_jobs) else ""
    figure.suptitle(
        f"{instance.name or 'allocation'}: {plan.solver or 'plan'} ({plan.policy}){pairs}\n"
        f"min normalized throughput {normalized.min():.3g}, total {throughput.sum():.4g} iterations/s",
        fontsize=10)
    return _save(figure, path)


def plot_placement(instance: PlacementInstance, plan: PlacementPlan,
                   path: str | os.PathLike[str] | None = None) -> Figure:
    """Two panels per region: GPU supply beside the planned ML jobs' demand today and under the
    plan (GPU-hours per day), and storage today and under the plan (homes and replicas stacked)
    against the region's capacity (MAST §3.3, §3.5)."""
    from matplotlib.figure import Figure

    from fleetplan.instances.placement.frames import region_frame

    frame = region_frame(instance, plan)
    regions = frame["region"].tolist()
    n = len(regions)
    x = np.arange(n)
    wide = n > 6  # many regions: one panel above the other, each the figure's width
    if wide:
        figure = Figure(figsize=(float(np.clip(4.0 + 0.8 * n, 10.0, 20.0)), 10.0), layout="constrained")
        gpu, disk = figure.subplots(2, 1)
    else:
        figure = Figure(figsize=(12.0, 5.6), layout="constrained")
        gpu, disk = figure.subplots(1, 2)

    bar = 0.27
    gpu.bar(x - bar, frame["gpu_supply_gpu_hours"], bar, label="supply", color="#9e9e9e")
    gpu.bar(x, frame["gpu_demand_today_gpu_hours"], bar, label="demand today", color="#fdb863")
    gpu.bar(x + bar, frame["gpu_demand_plan_gpu_hours"], bar, label="demand under the plan", color="#e66101")
    title = "GPU supply and demand of recurring ML jobs"
    split_today, split_plan = _split_ml_hours(instance, plan)
    if split_today or split_plan:
        # §3.3: an ML job whose tables are in several regions has no R(job) and adds no demand;
        # say how much demand that hides, or a split looks like a balanced region.
        title += (f"\nnot shown, ML jobs whose tables are split (no region, no demand):"
                  f"\n{split_today:.4g} GPU-hours per day today, {split_plan:.4g} under the plan")
    gpu.set_title(title, fontsize=10 if split_today or split_plan else None)
    gpu.set_ylabel("GPU-hours per day (all GPU types)")

    largest = float(frame[["storage_capacity_bytes", "stored_today_bytes", "stored_plan_bytes"]].to_numpy().max())
    scale, unit = byte_unit(largest)
    half = 0.38
    disk.bar(x - half / 2, frame["stored_today_bytes"] / scale, half, label="stored today (homes)", color="#92c5de")
    disk.bar(x + half / 2, frame["home_plan_bytes"] / scale, half, label="homes under the plan", color="#0571b0")
    disk.bar(x + half / 2, frame["replica_plan_bytes"] / scale, half, bottom=frame["home_plan_bytes"] / scale,
             label="replicas under the plan", color="#7b3294", alpha=0.75)
    capacity = frame["storage_capacity_bytes"] / scale
    disk.hlines(capacity, x - half - 0.04, x + half + 0.04, colors="black", linewidths=2, label="capacity")
    disk.set_title("Storage per region")
    disk.set_ylabel(f"stored ({unit})")

    rotate = n > 10
    for axis in (gpu, disk):
        axis.set_xticks(x, regions, rotation=30 if rotate else 0, ha="right" if rotate else "center")
        axis.set_ylim(bottom=0)
        axis.grid(axis="y", alpha=0.3)
        axis.set_axisbelow(True)
        # Beside the panel when they are stacked, below it when side by side: never on the bars.
        if wide:
            axis.legend(loc="center left", bbox_to_anchor=(1.01, 0.5), frameon=False, fontsize=9)
        else:
            axis.legend(loc="upper center", bbox_to_anchor=(0.5, -0.08), ncol=2, frameon=False, fontsize=9)
    moved = int((plan.home_array(instance) != instance.arrays().table_home).sum())
    figure.suptitle(f"{instance.name or 'placement'}: {plan.solver or 'plan'} — {moved} of "
                    f"{instance.arrays().num_tables} tables move, {len(plan.replicas.table)} replicas",
                    fontsize=11)
    return _save(figure, path)


def _split_ml_hours(instance: PlacementInstance, plan: PlacementPlan) -> tuple[float, float]:
    """GPU-hours of recurring ML jobs whose tables are split across regions, today and planned."""
    from fleetplan.instances.placement import ML
    from fleetplan.instances.placement.evaluate import job_regions

    arrays = instance.arrays()
    ml = arrays.planned & (arrays.job_kind == ML)
    out = []
    for home in (arrays.table_home, plan.home_array(instance)):
        split = ml & (job_regions(arrays, home) < 0)
        out.append(float(arrays.job_gpu_hours[split].sum()))
    return out[0], out[1]


def figure_summary(figure: Any) -> dict[str, Any]:
    """Axes titles and labels of a figure (what a test or a caption can check)."""
    return {"axes": [{"title": a.get_title(), "xlabel": a.get_xlabel(), "ylabel": a.get_ylabel()}
                     for a in figure.axes if a.get_label() != "<colorbar>"]}
