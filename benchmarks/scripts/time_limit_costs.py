"""CPU cost of the steps the time-limit budgets estimate: building the binpack models per (job, machine) cell, translating the reservation
model for CP-SAT per row, and the water-filling judge's bottleneck LP at 16,384 distinct jobs.

    .venv/bin/python benchmarks/scripts/time_limit_costs.py [--skip-judge] [--mast] [--judge-algorithms]

CPU seconds (time.process_time), since the machine is shared; back-ends are imported before
anything is timed.
"""

from __future__ import annotations

import argparse
import time

import fleetplan


def cpu(function, *args, **kwargs):
    started = time.process_time()
    value = function(*args, **kwargs)
    return value, time.process_time() - started


def binpack_rates() -> None:
    import pyomo.environ  # noqa: F401
    from ortools.sat.python import cp_model  # noqa: F401

    from fleetplan.models.binpack import prepare
    from fleetplan.models.binpack.cpsat import binpack_cpsat
    from fleetplan.models.binpack.mip import binpack_mip

    instance = fleetplan.generate("binpack", {"clusters": 4, "machines": 200, "cpu_machines": 1000,
                                              "workloads": 20}, seed=0)
    data = prepare(instance, list(range(len(instance.workloads))))
    cells = int((data.fit > 0).sum())
    _, cpsat_s = cpu(binpack_cpsat, data, batch=True)
    _, pyomo_s = cpu(binpack_mip, data, batch=True)
    print(f"binpack batch model, {cells} cells: CP-SAT build {cpsat_s:.2f} s ({cpsat_s / cells * 1e6:.0f} us/cell), "
          f"Pyomo build {pyomo_s:.2f} s ({pyomo_s / cells * 1e6:.0f} us/cell)")


def mast_cells() -> None:
    from fleetplan.models.binpack import cell_count, prepare

    instance = fleetplan.generate("binpack", {"clusters": 20, "machines": 2500, "cpu_machines": 64000,
                                              "workloads": 200}, seed=0)
    workloads = list(range(len(instance.workloads)))
    data = prepare(instance, workloads)
    print(f"binpack at MAST size: {len(data.job_index)} jobs x {data.machines.size} machines, "
          f"{int((data.fit > 0).sum())} cells (cell_count bound {cell_count(instance, workloads)})")


def reservation_translation() -> None:
    import scipy.sparse  # noqa: F401
    from ortools.sat.python import cp_model  # noqa: F401

    from fleetplan.models.reservation import build
    from fleetplan.models.reservation.cpsat import to_cpsat

    instance = fleetplan.generate("reservation", {"servers": 100_000, "reservations": 200}, seed=0)
    model = build(instance.arrays())
    _, seconds = cpu(to_cpsat, model.lp, model.col_unit)
    rows = model.lp.num_rows
    print(f"reservation 10^5 servers x 200: to_cpsat {seconds:.2f} s for {rows} rows "
          f"({seconds / rows * 1e6:.0f} us/row)")


def water_filling_judge() -> None:
    import highspy  # noqa: F401

    from fleetplan.instances.allocation.hierarchical import bottlenecked_jobs

    instance = fleetplan.generate("allocation", {"jobs": 16384, "throughput_noise": 0.1}, seed=0)
    matrix = instance.arrays().isolated_allocation()
    stuck, seconds = cpu(bottlenecked_jobs, instance, matrix)
    print(f"water-filling judge, 16,384 distinct jobs, isolated allocation: {seconds:.2f} s "
          f"(bottlenecked fraction {stuck.mean():.3f})")


def judge_algorithms() -> None:
    """The judge's first LP on the isolated allocation, by HiGHS's dual simplex and by PDLP."""
    import highspy
    import numpy as np

    from fleetplan.instances.allocation.hierarchical import RISE_CAP, _feasible_part

    instance = fleetplan.generate("allocation", {"jobs": 16384, "throughput_noise": 0.1}, seed=0)
    arrays = instance.arrays()
    matrix = _feasible_part(arrays, arrays.isolated_allocation())
    share = arrays.num_workers / arrays.num_workers.sum()
    a = arrays.throughput * (arrays.scale_factor / (arrays.throughput @ share))[:, None]
    a = np.where((arrays.throughput > 0) & (arrays.num_workers[None, :] >= arrays.scale_factor[:, None]), a, 0.0)
    floor = (a * matrix).sum(axis=1)
    n, types = a.shape
    job, typ = np.nonzero(a > 0)
    cells = len(job)
    rows = np.concatenate([job, n + job, 2 * n + typ, np.arange(n)])
    cols = np.concatenate([np.arange(cells)] * 3 + [cells + np.arange(n)])
    vals = np.concatenate([-a[job, typ], np.ones(cells), arrays.scale_factor[job], np.ones(n)])
    order = np.lexsort((rows, cols))
    for algorithm in ("simplex", "pdlp"):
        lp = highspy.HighsLp()
        lp.num_col_, lp.num_row_ = cells + n, 2 * n + types
        lp.col_cost_ = np.concatenate([np.zeros(cells), np.ones(n)])
        lp.col_lower_ = np.zeros(cells + n)
        lp.col_upper_ = np.concatenate([np.ones(cells), np.full(n, RISE_CAP * max(1.0, floor.max()))])
        lp.row_lower_ = np.full(2 * n + types, -highspy.kHighsInf)
        lp.row_upper_ = np.concatenate([-floor, np.ones(n), arrays.num_workers])
        lp.sense_ = highspy.ObjSense.kMaximize
        lp.a_matrix_.format_ = highspy.MatrixFormat.kColwise
        lp.a_matrix_.start_ = np.searchsorted(cols[order], np.arange(cells + n + 1)).astype(np.int32)
        lp.a_matrix_.index_ = rows[order].astype(np.int32)
        lp.a_matrix_.value_ = vals[order]
        highs = highspy.Highs()
        highs.setOptionValue("output_flag", False)
        highs.setOptionValue("solver", algorithm)
        highs.passModel(lp)
        _, seconds = cpu(highs.run)
        print(f"judge LP ({cells + n} columns) by {algorithm}: {seconds:.2f} s, "
              f"{highs.modelStatusToString(highs.getModelStatus())}, optimum {highs.getInfo().objective_function_value:.9g}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--skip-judge", action="store_true", help="skip the 16,384-job judge (about 4 s)")
    parser.add_argument("--mast", action="store_true", help="count the batch model's cells at MAST size")
    parser.add_argument("--judge-algorithms", action="store_true",
                        help="the judge's first LP by dual simplex and by PDLP")
    args = parser.parse_args()
    if args.mast:
        mast_cells()
    if args.judge_algorithms:
        judge_algorithms()
    binpack_rates()
    reservation_translation()
    if not args.skip_judge:
        water_filling_judge()


if __name__ == "__main__":
    main()
