"""Gavel's scheduler: a registered allocation policy turned into rounds (Gavel §5, Algorithm 1).

Whenever the set of active jobs changes, the policy's LP is re-solved through
:func:`fleetplan.solve` on an :class:`~fleetplan.instances.allocation.AllocationInstance` of the
active jobs (their remaining steps, time elapsed, scale factors and measured throughputs), giving
X[m, j], the share of wall-clock time job m should spend on type j.

Every round (``round_s``, 6 minutes in Gavel §7) the mechanism computes the share f[m, j] of
the time since the allocation was computed that m actually ran on j, takes priorities
X / f (infinite where X > 0 and f = 0, 0 where X = 0), and walks the (job, type) pairs by
decreasing priority (ties: larger X first), giving a pair its type when the job is not yet
scheduled and enough GPUs of that type remain (Algorithm 1). The chosen jobs are then placed
largest first, consolidated (§5, last paragraph). Gavel's paper divides by the type's total
time sum_m t_mj instead; dividing by the elapsed time compares f with X in X's own units,
which is what Gavel's implementation does.

``gavel-ideal`` is §7.5's ideal baseline: every job progresses continuously at exactly
sum_j T[m, j] X[m, j] (no rounds, no gang constraint, no placement).
"""

from __future__ import annotations

import numpy as np

from fleetplan.instances.base import InstanceError
from fleetplan.sim.cluster.engine import RUNNING, Decision, Scheduler, Sim


class GavelScheduler(Scheduler):
    name = "gavel"
    agnostic = False
    renews_when_nothing_fits = False  # the mechanism rotates jobs between types every round

    def __init__(self, scenario, trace, seed):
        super().__init__(scenario, trace, seed)
        self.interval = self.lease = float(scenario.round_s)
        self.policy = scenario.policy + ("-agnostic" if self.agnostic else "")
        from fleetplan.solvers import get_solver

        get_solver("allocation", self.policy)  # unknown policy: InstanceError before the run
        self.seed = seed
        self.solved_for = np.zeros(0, dtype=int)
        self.X = np.zeros((0, len(trace.worker_types)))
        self.t_reset = 0.0
        self.snapshot = np.zeros((len(trace), len(trace.worker_types)))
        self.solves = 0
        self.solve_s = 0.0

    def allocation(self, sim: Sim, jobs: np.ndarray) -> np.ndarray:
        """X for ``jobs`` (re-solved only when the job set changed)."""
        if len(jobs) == len(self.solved_for) and np.array_equal(jobs, self.solved_for):
            return self.X
        from fleetplan.instances.allocation import AllocationInstance
        from fleetplan.solvers import solve

        trace = sim.trace
        types = trace.worker_types
        data = {
            "kind": "allocation",
            "worker_types": [{"name": t, "count": int(c)} for t, c in zip(types, sim.cluster.total, strict=True)],
            "jobs": [{
                "id": str(int(m)),
                "throughput": {t: float(trace.throughput[m, j]) for j, t in enumerate(types)},
                "scale_factor": int(trace.gpus[m]),
                "steps_left": float(max(sim.left[m], 1e-6)),
                "arrival_time": float(trace.submit[m]),
                "time_elapsed": float(max(sim.now - trace.submit[m], 0.0)),
            } for m in jobs],
        }
        instance = AllocationInstance.model_validate(data)
        result = solve(instance, solver=self.policy, seed=self.seed)
        if result.plan is None:
            raise InstanceError("policy", f"policy '{self.policy}' found no allocation: {result.message}")
        self.solves += 1
        self.solve_s += result.wall_s
        self.X = np.clip(result.plan.matrix(instance), 0.0, 1.0)
        self.solved_for = jobs.copy()
        self.t_reset = sim.now
        self.snapshot = sim.time_on_type.copy()
        return self.X

    def decide(self, decision: Decision) -> None:
        sim = decision.sim
        jobs = sim.active
        X = self.allocation(sim, jobs)
        elapsed = sim.now - self.t_reset
        got = sim.time_on_type[jobs] - self.snapshot[jobs]
        f = got / elapsed if elapsed > 0 else np.zeros_like(got)
        with np.errstate(divide="ignore", invalid="ignore"):
            priority = np.where(X > 1e-9, np.where(f > 0, X / np.where(f > 0, f, 1.0), np.inf), 0.0)
        rows, cols = np.nonzero(priority > 0)
        order = np.lexsort((cols, rows, -X[rows, cols], -priority[rows, cols]))
        remaining = np.array([decision.free(j) for j in range(len(sim.trace.worker_types))])
        gpus = sim.trace.gpus
        chosen: dict[int, int] = {}
        for k in order:  # Algorithm 1
            m = int(jobs[rows[k]])
            j = int(cols[k])
            if m in chosen or gpus[m] > remaining[j]:
                continue
            chosen[m] = j
            remaining[j] -= gpus[m]
            if not remaining.any():
                break
        for m in sorted(chosen, key=lambda m: (-gpus[m], m)):
            decision.place(m, chosen[m])


class GavelAgnosticScheduler(GavelScheduler):
    name = "gavel-agnostic"
    agnostic = True


class GavelIdealScheduler(GavelScheduler):
    """Gavel §7.5's ideal baseline: jobs receive the allocation X exactly, as a fluid."""

    name = "gavel-ideal"
    fluid = True

    def __init__(self, scenario, trace, seed):
        super().__init__(scenario, trace, seed)
        self.interval = 0.0
        self.lease = np.inf

    def decide_fluid(self, sim: Sim) -> None:
        sim.admit_arrivals()
        sim.refresh_active()
        jobs = sim.active
        if len(jobs) == 0:
            return
        X = self.allocation(sim, jobs)
        trace = sim.trace
        sim.status[jobs] = RUNNING
        first = ~sim.ever_ran[jobs]
        sim.first_start[jobs[first]] = sim.now
        sim.ever_ran[jobs] = True
        sim.rate[jobs] = (X * trace.throughput[jobs]).sum(axis=1)
        sim.held[jobs] = X.sum(axis=1) * trace.gpus[jobs]
        sim.resume_at[jobs] = sim.now
