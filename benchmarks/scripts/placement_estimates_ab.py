"""The Tetris climb's batch estimates against another checkout's, in one process (issue 14 §4).

    .venv/bin/python benchmarks/scripts/placement_estimates_ab.py p1e5.json BEFORE_DIR

Runs the hill climb (no replicas) on this checkout; at every batch estimate the gains are also
computed by ``BEFORE_DIR``'s ``first_pass.table_gains(state, tables, cache=True)`` (the code
before ``estimates.py``, with its own pair cache, forgotten as that code forgot it), the two
checked equal bit for bit and timed on the same calls, in alternating order. Prints the
objective and both totals in seconds (wall clock, ``time.perf_counter``). ``BEFORE_DIR`` is made
with ``mkdir DIR && git archive 5377792 fleetplan | tar -x -C DIR``. Timing both inside one
process on the same calls removes most of the noise of a machine shared with other runs.
"""

from __future__ import annotations

import importlib.util
import sys
import time
from pathlib import Path

import numpy as np


def main() -> None:
    instance_path, before = sys.argv[1], Path(sys.argv[2])
    import fleetplan
    import fleetplan.solvers.placement.estimates as estimates
    from fleetplan.instances import load_instance
    from fleetplan.solvers.placement.state import TetrisState

    spec = importlib.util.spec_from_file_location(
        "before_first_pass", before / "fleetplan" / "solvers" / "placement" / "first_pass.py")
    old = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(old)

    class Own:
        """The state with a pair cache of its own (the old code's tuples)."""

        def __init__(self, state: TetrisState) -> None:
            object.__setattr__(self, "state", state)
            object.__setattr__(self, "pair_cache", {})

        def __getattr__(self, name: str):
            return getattr(self.state, name)

        def __setattr__(self, name: str, value) -> None:
            setattr(self.state, name, value)

    views: dict[int, Own] = {}
    forget = TetrisState._forget

    def forget_both(state: TetrisState, table: int, jobs: np.ndarray) -> None:
        forget(state, table, jobs)
        view = views.get(id(state))
        if view is None or not view.pair_cache:
            return
        view.pair_cache.pop(table, None)
        if jobs.size:
            a = state.arrays
            lengths = a.job_ptr[jobs + 1] - a.job_ptr[jobs]
            pair = np.repeat(a.job_ptr[jobs] - np.cumsum(lengths) + lengths, lengths) + np.arange(lengths.sum())
            for other in a.job_tables[pair].tolist():
                view.pair_cache.pop(other, None)

    seconds = {"after": 0.0, "before": 0.0}
    new = estimates.cached_gains

    calls = [0]

    def both(state: TetrisState, tables: np.ndarray) -> np.ndarray:
        view = views.setdefault(id(state), Own(state))
        order = ("after", "before") if calls[0] % 2 else ("before", "after")
        calls[0] += 1
        out = {}
        for name in order:
            start = time.perf_counter()
            out[name] = new(state, tables) if name == "after" else old.table_gains(view, tables, cache=True)[0]
            seconds[name] += time.perf_counter() - start
        assert np.array_equal(out["after"], out["before"])
        return out["after"]

    TetrisState._forget = forget_both
    estimates.cached_gains = both
    result = fleetplan.solve(load_instance(instance_path), "hill-climb", replicas=False)
    print({"objective": result.objective, "calls": calls[0], **{k: round(v, 3) for k, v in seconds.items()}})


if __name__ == "__main__":
    main()
