"""A tiny simulator for the harness tests (not registered in fleetplan.sim; tests monkeypatch
``fleetplan.sim._MODULES`` to name it). Jobs arrive at rate 1 and are served one at a time;
``fifo`` serves in arrival order, ``shortest`` the shortest waiting job first; ``crash`` raises."""

from __future__ import annotations

import numpy as np
from pydantic import Field

from fleetplan.instances.base import StrictModel
from fleetplan.sim.engine import EventQueue, SimResult, SimulatorSpec


class ToyScenario(StrictModel):
    jobs: int = Field(default=5, ge=1, le=10_000)
    mean_size: float = Field(default=1.0, gt=0)


def simulate(scenario: ToyScenario, scheduler: str, seed: int) -> SimResult:
    if scheduler == "crash":
        raise RuntimeError("the toy simulator crashed on purpose")
    rng = np.random.default_rng(seed)
    sizes = rng.exponential(scenario.mean_size, scenario.jobs)
    queue = EventQueue()
    for job in range(scenario.jobs):
        queue.push(float(job), "arrive", job)
    waiting: list[int] = []
    clock, busy_until, waits, events = 0.0, 0.0, [], 0
    while queue or waiting:
        if queue and (not waiting or queue.peek_time() <= busy_until):
            clock, _, job = queue.pop()
            waiting.append(job)
            events += 1
            continue
        clock = max(clock, busy_until)
        pick = min(waiting, key=lambda j: sizes[j]) if scheduler == "shortest" else waiting[0]
        waiting.remove(pick)
        waits.append(clock - pick)
        busy_until = clock + sizes[pick]
        events += 1
    return SimResult(simulator="toy", scheduler=scheduler, seed=seed,
                     metrics={"avg_wait_s": float(np.mean(waits)), "jobs": float(scenario.jobs)},
                     series={"time": np.arange(len(waits), dtype=float), "wait": np.array(waits)},
                     events=events, sim_time=float(busy_until))


SIMULATOR = SimulatorSpec(name="toy", simulate=simulate, scenario_type=ToyScenario,
                          schedulers=("fifo", "shortest", "crash"), description="toy single-server queue",
                          report_metrics=("jobs",))
