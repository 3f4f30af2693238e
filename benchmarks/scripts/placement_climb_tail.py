"""Where the hill climb's time goes at scale, and what its stopping rule keeps: the climb alone
(as ``fleetplan solve --solver hill-climb`` runs it, without replicas, the judge or writing) on
an instance file or Parquet folder, with ``stop_window`` and ``stop_gain`` as given (0 0: climb
until the queue is empty or the quota is used). Prints the climb's CPU and wall seconds, moves,
why it stopped and the model objective, then the objective and CPU seconds after every
CHECKPOINT moves. Run:
``.venv/bin/python benchmarks/scripts/placement_climb_tail.py p1m 1024 1e-4`` (p1m: the folder
``fleetplan export p1m.json --format parquet -o p1m`` wrote)."""
import sys
import time

import fleetplan
from fleetplan.solvers.placement import _climb, instance_terms_start
from fleetplan.solvers.placement.climb.state import TetrisState

CHECKPOINT = 4000

path = sys.argv[1]
stop = (int(sys.argv[2]), float(sys.argv[3])) if len(sys.argv) > 3 else (0, 0.0)
instance = fleetplan.load_instance(path)
cpu_at: list[float] = []
apply = TetrisState.apply


def timed_apply(self, move):
    apply(self, move)
    cpu_at.append(time.process_time())


TetrisState.apply = timed_apply
wall, cpu = time.perf_counter(), time.process_time()
state, climb, _ = _climb(instance, True, None, lambda fraction, message: None, None, True, False, stop)
wall, cpu_end = time.perf_counter() - wall, time.process_time()
start = sum(instance_terms_start(instance).values())
print(f"stop={stop} climb_cpu_s={cpu_end - cpu:.1f} climb_wall_s={wall:.1f} moves={len(climb.applied)} "
      f"stopped_by={climb.stopped_by} objective={sum(state.objective_terms.values()):.6f}")
gain = 0.0
for k, move in enumerate(climb.applied, start=1):
    gain += move.gain
    if k % CHECKPOINT == 0 or k == len(climb.applied):
        print(f"  after {k} moves: objective {start - gain:.5f}, {cpu_at[k - 1] - cpu:.1f} s CPU")
