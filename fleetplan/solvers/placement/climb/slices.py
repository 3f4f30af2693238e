"""Per-slice sums of the Tetris climb's GPU demand (MAST §3.3, Expressions 7-8), kept per state
version: what :mod:`~fleetplan.solvers.placement.climb.first_pass`'s gains and :mod:`~fleetplan.solvers.placement.climb.gain_kernels` both read."""

from __future__ import annotations

from typing import Any

import numpy as np

from fleetplan.instances.placement.evaluate import sigmoid

TetrisState = Any  # fleetplan.solvers.placement.climb.state.TetrisState (imports point one way)


def slice_sums(state: TetrisState, demand: np.ndarray) -> tuple[np.ndarray, ...]:
    """Per slice of ``demand`` (the state's demand or ``odemand``): Σd, sigmoid of each
    region's overload (R, S), Σd², Σd·σ, Σσ², Σd·sigmoid; kept until the state changes (its
    ``version``)."""
    key = "_slice_sums" if demand is state.demand else "_overload_sums"
    cached = getattr(state, key, None)
    if cached is not None and cached[0] == state.version:
        return cached[1]
    share = state.supply_share
    sig = sigmoid(np.maximum(0.0, demand - state.supply) / state.arrays.sigmoid_scale)
    sums = (demand.sum(axis=0), sig, np.square(demand).sum(axis=0), (demand * share).sum(axis=0),
            np.square(share).sum(axis=0), (demand * sig).sum(axis=0))
    setattr(state, key, (state.version, sums))
    return sums
