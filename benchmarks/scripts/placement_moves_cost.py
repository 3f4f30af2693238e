"""What listing an exact placement plan's moves costs: ``moves_between`` replays
the tables that moved, largest first, on the hill climb's incremental state. Run:
``.venv/bin/python benchmarks/scripts/placement_moves_cost.py TABLES`` (a generated instance of
20 regions and TABLES tables and jobs, seed 1; the hill climb's plan; median of 3 replays)."""
import statistics
import sys
import time

import fleetplan
from fleetplan.solvers.placement.exact.moves import moves_between

tables = int(sys.argv[1])
instance = fleetplan.generate("placement", {"regions": 20, "tables": tables, "jobs": tables}, seed=1)
plan = fleetplan.solve(instance, "hill-climb").plan
home = plan.home_array(instance)
moved = int((home != instance.arrays().table_home).sum())
times = []
for _ in range(3):
    started = time.perf_counter()
    moves = moves_between(instance, home)
    times.append(time.perf_counter() - started)
today = fleetplan.instances.evaluate_current(instance).objective
after = fleetplan.evaluate(instance, plan).objective
print(f"tables={tables} moved={moved} moves={len(moves)} median_s={statistics.median(times):.3f} "
      f"runs={[round(t, 3) for t in times]} gains_sum={sum(m.gain for m in moves):.6g} fall={today - after:.6g}")
