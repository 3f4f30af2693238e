"""The moves of a plan that came as a whole (the exact solvers' home regions): one :class:`Move`
per table whose home differs from today's, with why — the gain and each term's change — as the
hill climb records its own moves, so every placement plan can say what moved and what it bought.

The moves are replayed from today's placement in order of size (largest first) on the hill
climb's incremental state (:class:`~fleetplan.solvers.placement.climb.state.TetrisState`): each move's
gain is the objective's fall when it is applied after the ones before it, so the gains add up to
the whole plan's fall (Expression 8's interactions make a single table's share depend on that
order; the total does not). A replayed move may pass through a state the hill climb would refuse
(a region briefly over its storage while another table has not yet left): the gain is still the
change of the objective.

>>> import fleetplan
>>> instance = fleetplan.load_instance("examples/placement-small.json")
>>> result = fleetplan.solve(instance, "hill-climb")
>>> moves = moves_between(instance, result.plan.home_array(instance))
>>> today = fleetplan.instances.evaluate_current(instance).objective
>>> abs(sum(move.gain for move in moves) - (today - result.objective)) < 1e-9 * today
True
"""

from __future__ import annotations

import numpy as np

from fleetplan.instances.placement import Move, PlacementInstance
from fleetplan.solvers.hill_climb import Candidate
from fleetplan.solvers.placement.climb.state import TERMS, TetrisState


def moves_between(instance: PlacementInstance, home: np.ndarray) -> list[Move]:
    """The moves from today's placement to ``home`` (one per table that moved), gains adding
    up to the objective's fall."""
    a = instance.arrays()
    home = np.asarray(home, dtype=np.int64)
    changed = np.flatnonzero(home != a.table_home)
    if changed.size == 0:
        return []
    order = changed[np.argsort(-a.table_size[changed], kind="stable")]
    state = TetrisState(instance)
    moves = []
    for table in order.tolist():
        target = int(home[table])
        _, delta, _ = state._candidates(table)
        terms = {name: float(delta[k, target]) for k, name in enumerate(TERMS)}
        gain = -sum(terms.values())
        source = int(state.home[table])
        state.apply(Candidate(table, target, gain, terms, source=source))
        moves.append(Move.model_construct(table=a.table_ids[table], source=a.region_ids[source],
                                          target=a.region_ids[target], bytes=float(a.table_size[table]),
                                          gain=gain, terms=terms))
    return moves


__all__ = ["moves_between"]
