"""MAST's late-binding auction and the federated early-binding baseline (MAST §4.1-4.3, §5.6).

Both run the same GMS scan (§4.2: <priority, credit>, over-quota workloads demoted to the lowest
level) every ``scan_minutes`` and the same RMS (the ``binpack`` greedy, §4.3) in each region;
they differ in where a workload may go:

* **mast** — late binding: each pass, for each pending workload in GMS order, every region that
  holds its data and has its GPU type computes a plan (free machines first; with preemption
  only when no region fits without it, as a plan without preemption always scores higher), and
  the best-scoring plan wins the auction. When no region holding the data has the hardware, the
  data is replicated to the region of lowest GPU demand/supply and the workload waits for it.
* **federated** — early binding (§4.1, Hydra/Yugong; §5.6: "dispatches a workload to the region
  with the lowest demand over supply rate of the required GPU type"): at arrival the workload is
  bound to the region with the lowest demand/supply of its GPU type (demand: GPUs running plus
  queued there, whatever their priority), among the regions holding its data when
  ``federated_data_aware`` (else among all, replicating). The dispatcher sees that demand as it
  was at its last refresh (``federated_refresh_minutes``, taken after a GMS pass; 0: exact), so
  arrivals between refreshes all go to the region that looked emptiest. The binding is final:
  the region's own queue, in the same GMS order, places the workload with the same RMS, which
  may preempt only inside that region; a preempted workload returns to the same region's queue,
  and nothing moves it when another region frees up (no cross-region preemption or migration).
"""

from __future__ import annotations

import numpy as np

from fleetplan.sim.mast.engine import LOWEST, PENDING, MastSim
from fleetplan.sim.mast.gms import GmsScan


def _open_pass(sim: MastSim) -> tuple[np.ndarray, GmsScan] | None:
    """A GMS pass's start, the same for both schedulers: the pending workloads and their GMS
    scan, with every region's negative cache cleared (it is valid for one pass, §4.3); None when
    nothing is pending."""
    pending = np.flatnonzero(sim.status == PENDING)
    if pending.size == 0:
        return None
    scan = sim.gms(pending)
    for region in sim.regions:
        region.cache.clear()
    return pending, scan


class MastAuction:
    """§4.3's auction over the regions with the data and the hardware type."""

    name = "mast"

    def on_arrival(self, sim: MastSim, w: int, now: float) -> None:
        pass  # late binding: nothing is decided before a pass

    def scan(self, sim: MastSim, now: float, pass_id: int) -> None:
        opened = _open_pass(sim)
        if opened is None:
            return
        pending, scan = opened
        preempt = sim.scenario.preemption
        where = sim.candidates(pending)
        for i in scan.order.tolist():
            w = int(pending[i])
            priority = int(scan.priority[i])
            within = bool(scan.within_quota[i])
            sim.mark(w, within, now)
            candidates = where[i]
            if not candidates:
                targets = np.flatnonzero(sim.capable(w))
                sim.replicate(w, now, int(targets[np.argmin(sim.pressure(targets, w, queued=False))]))
                continue
            template = sim.template(w, priority)
            hw, gpus = int(sim.trace.hardware[w]), int(sim.trace.gpus[w])
            room = [r for r in candidates if sim.regions[r].may_fit(hw, gpus, priority, False)]
            # Without preemption the priority plays no part: one template (the lowest level, whose
            # negative-cache entries any preemption clears) lets the cache serve every level.
            won = self._auction(sim, room, sim.template(w, LOWEST), preemption=False, bound=sim.best_free_key(w))
            if won is None and preempt and priority < LOWEST:
                room = []
                for r in candidates:
                    sim.regions[r].sync(pass_id, now, sim.run_priority, sim.run_start)
                    if sim.regions[r].may_fit(hw, gpus, priority, True):
                        room.append(r)
                won = self._auction(sim, room, template, preemption=True)
            if won is not None:
                sim.start(w, won[0], won[1], won[2], now, priority, within)

    @staticmethod
    def _auction(sim: MastSim, candidates: list[int], template: int, preemption: bool, bound: tuple | None = None):
        """Each candidate region's RMS plans; the best score wins (ties: the first region), the
        others are undone. A plan whose score equals ``bound`` (no plan can score higher) ends
        the auction early: later regions could only tie, and ties go to the first."""
        best = None
        for r in candidates:
            if best is not None and best[2] == bound:
                break
            outcome = sim.regions[r].place(template, preemption)
            if not outcome.placed:
                continue
            key = tuple(option.key for option in outcome.options)
            if best is None or key < best[2]:
                if best is not None:
                    sim.regions[best[0]].undo(best[1], template)
                best = (r, outcome, key)
            else:
                sim.regions[r].undo(outcome, template)
        return None if best is None else (best[0], best[1], template)


class Federated:
    """Early binding to the region of lowest demand/supply; per-region queues."""

    name = "federated"

    def __init__(self) -> None:
        self.view: np.ndarray | None = None  # (R, H) demand the dispatcher last saw
        self.seen_at = -np.inf

    def _pressure(self, sim: MastSim, regions: np.ndarray, w: int) -> np.ndarray:
        if sim.scenario.federated_refresh_minutes <= 0 or self.view is None:
            return sim.pressure(regions, w, queued=True)
        h = sim.trace.hardware[w]
        return self.view[regions, h] / np.maximum(sim.fleet.gpus[regions, h], 1e-9)

    def _refresh(self, sim: MastSim, now: float) -> None:
        """Take the dispatcher's view of demand (running plus queued GPUs) when it is due."""
        every = sim.scenario.federated_refresh_minutes / 60.0
        if every > 0 and (self.view is None or now >= self.seen_at + every - 1e-9):
            self.view = sim.running_gpus + sim.queued_gpus
            self.seen_at = now

    def on_arrival(self, sim: MastSim, w: int, now: float) -> None:
        capable = sim.capable(w)
        candidates = np.flatnonzero(capable & sim.data[w]) if sim.scenario.federated_data_aware else np.zeros(0, int)
        if candidates.size == 0:
            candidates = np.flatnonzero(capable)
        r = int(candidates[np.argmin(self._pressure(sim, candidates, w))])
        sim.bound[w] = r
        sim.queued_gpus[r, sim.trace.hardware[w]] += sim.trace.gpus[w]
        if not sim.data[w, r]:
            sim.replicate(w, now, r)

    def scan(self, sim: MastSim, now: float, pass_id: int) -> None:
        self._place(sim, now, pass_id)
        self._refresh(sim, now)

    def _place(self, sim: MastSim, now: float, pass_id: int) -> None:
        opened = _open_pass(sim)
        if opened is None:
            return
        pending, scan = opened
        preempt = sim.scenario.preemption
        for i in scan.order.tolist():
            w = int(pending[i])
            priority = int(scan.priority[i])
            within = bool(scan.within_quota[i])
            sim.mark(w, within, now)
            r = int(sim.bound[w])
            region = sim.regions[r]
            hw, gpus = int(sim.trace.hardware[w]), int(sim.trace.gpus[w])
            template = sim.template(w, LOWEST)  # as in MastAuction: the free pass ignores priority
            outcome = region.place(template, preemption=False) if region.may_fit(hw, gpus, priority, False) else None
            if (outcome is None or not outcome.placed) and preempt and priority < LOWEST:
                region.sync(pass_id, now, sim.run_priority, sim.run_start)
                template = sim.template(w, priority)
                if region.may_fit(hw, gpus, priority, True):
                    outcome = region.place(template, preemption=True)
            if outcome is not None and outcome.placed:
                sim.start(w, r, outcome, template, now, priority, within)


SCHEDULERS = {"mast": MastAuction, "federated": Federated}

__all__ = ["SCHEDULERS", "Federated", "MastAuction"]
