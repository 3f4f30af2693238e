"""What-if points warm-started from the point before, against cold points (one process, the
`whatif()` function without the figure, 3 runs each, alternating; CPU seconds of the process).

Runs against commit dbba97c, where the in-process sweep used the hints (reverted since: it was
slower, benchmarks/results/planning.md): `git worktree add /tmp/dbba97c dbba97c`, then this
script with that tree first on PYTHONPATH. On later commits both sides run cold.
"""
import contextlib
import statistics
import tempfile
import time
from pathlib import Path

import fleetplan
from fleetplan.planning.whatif import whatif
from fleetplan.solvers import warm

tmp = Path(tempfile.mkdtemp())
inst = fleetplan.generate("allocation", {"jobs": 16384, "throughput_noise": 0.1}, seed=0)
fleetplan.save(inst, tmp / "i.json")
count = inst.worker_types[0].count
step = max(1, count // 20)
name = inst.worker_types[0].name
orig = warm.hints
@contextlib.contextmanager
def off(state):
    with orig(None) as h:
        yield h
res = {True: [], False: []}
for rep in range(3):
    for on in (True, False):
        warm.hints = orig if on else off
        t = time.process_time()
        r = whatif(tmp / "i.json", [f"worker_types.{name}.count={step}:{step*20}:{step}"], tmp / f"s{rep}{on}", progress=None, plot=False)
        res[on].append(time.process_time() - t)
        objs = [row["objective"] for row in r.rows]
    print("warm" if on else "cold", objs[:3])
print({k: statistics.median(v) for k, v in res.items()}, res)
