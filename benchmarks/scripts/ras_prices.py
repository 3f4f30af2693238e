"""The Lagrangian bound of the RAS model (fleetplan/solvers/reservation/lagrangian.py) as a
function of the disruption budget's price, on a generated region: for each price, every
reservation's MIP alone (moves priced, the others out of the supply rows), the bound, and the
servers the solutions move against the budget (the bound's slope in the price). The prices the
search of ``mip-highs`` tries come from that slope's sign. benchmarks/results/reservation.md
("The price of a move") has what it gave.

    .venv/bin/python benchmarks/scripts/ras_prices.py 20000 100 0,1,2.135,2.935,3,4.5 --datacenters 6
"""

from __future__ import annotations

import argparse
import os
import time

import numpy as np

from fleetplan.instances import generate
from fleetplan.models.reservation import build
from fleetplan.solvers.reservation.bounded import bounded_mip
from fleetplan.solvers.reservation.lagrangian import (
    budget_row,
    lagrangian_bound,
    servers_moved,
    subproblem,
)
from fleetplan.solvers.reservation.neighbourhood import column_reservation


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("servers", type=int)
    parser.add_argument("reservations", type=int)
    parser.add_argument("prices", help="comma-separated prices per server moved (`none`: no price alone)")
    parser.add_argument("--datacenters", type=int, default=6)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--per", type=float, default=2.5, help="seconds per reservation's MIP (default 2.5)")
    parser.add_argument("--solve", type=float, default=None, metavar="S",
                        help="then `mip-highs` on the region for S seconds (large_columns=0: the large path), "
                             "its price search's best bound, the passes and how far the plan is above it")
    args = parser.parse_args()
    region = generate("reservation", {"servers": args.servers, "reservations": args.reservations,
                                      "datacenters": args.datacenters}, seed=args.seed)
    arrays = region.arrays()
    model = build(arrays)
    lp, csc = model.lp, model.lp.matrix.tocsc()
    owner, budget = column_reservation(model, arrays), budget_row(lp)
    room = 0.0 if budget is None else float(lp.row_upper[budget])
    print(f"{args.servers} servers, {args.reservations} reservations: budget {room:.0f} servers", flush=True)
    for price in (float(p) for p in args.prices.split(",") if args.prices != "none"):
        wall, bounds, moved, capped = time.perf_counter(), [], 0.0, 0
        for reservation in range(arrays.num_reservations):
            cols = np.flatnonzero(owner == reservation)
            ran = bounded_mip(subproblem(lp, csc, cols, budget, price), time.perf_counter() + args.per, 1, 0, 1e-4)
            bounds.append(ran.bound)
            capped += "Optimal" not in ran.status
            if ran.values is not None:
                moved += servers_moved(lp, cols, ran.values)
        bound = lagrangian_bound(np.array(bounds), lp, budget, price, model.constant)
        print(f"price {price:g}: bound {bound:.6g}, servers moved {moved:.0f} (slope {moved - room:+.0f}), "
              f"{capped} MIPs at their cap, {time.perf_counter() - wall:.1f} s wall (the MIPs run in child processes), "
              f"load {os.getloadavg()[0]:.2f}", flush=True)


    if args.solve is not None:
        search(region, args.solve)


def search(region, seconds: float) -> None:
    """``mip-highs`` with its price search, as a user runs it: the bound, the passes, the plan."""
    import re

    import fleetplan

    wall = time.perf_counter()
    result = fleetplan.solve(region, "mip-highs", time_limit=seconds, large_columns=0)
    passes = sum(1 for line in result.log if re.search(r"Lagrangian bound \(moves priced at", line))
    above = (result.objective - result.bound) / result.objective
    print(f"mip-highs {seconds:g} s: {result.status}, bound {result.bound:.6g} ({passes} passes), plan "
          f"{result.objective:.6g}, {100 * above:.2f} % above it; {time.perf_counter() - wall:.1f} s wall, "
          f"load {os.getloadavg()[0]:.2f}", flush=True)


if __name__ == "__main__":
    main()
