"""CPU cost of the steps the time-limit budgets estimate (issue 15 item 4; benchmarks/RESULTS.md,
"Time limits"): building the binpack models per (job, machine) cell, translating the reservation
model for CP-SAT per row, and the water-filling judge's bottleneck LP at 16,384 distinct jobs.

    .venv/bin/python benchmarks/scripts/time_limit_costs.py [--skip-judge]

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


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--skip-judge", action="store_true", help="skip the 16,384-job judge (about 4 s)")
    args = parser.parse_args()
    binpack_rates()
    reservation_translation()
    if not args.skip_judge:
        water_filling_judge()


if __name__ == "__main__":
    main()
