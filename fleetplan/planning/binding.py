"""What binds, where no LP dual exists: estimates by re-solving with one unit more (and less).

LP policies report their capacity prices from the LP itself (``SolveResult.duals``, source
``lp``). For MIPs and heuristics this module re-solves the instance with one unit of each
capacity more — and, for allocation, one fewer — and reports the objective's change per unit in
its better direction, labelled ``estimate``: a finite difference of a whole unit, not a
derivative. The units are what sizing buys:

* allocation — one GPU of a type (``workers``; central difference of one more and one fewer);
* reservation — one rack of a server type in a datacenter's first fault domain (``servers``,
  per server of the rack).

Placement has no unit a re-solve could add meaningfully (its objective's overload term is a
sigmoid of GPU-hours), and binpack's objective is an encoded lexicographic score: for those,
the judge's breakdowns say what is short and ``fleetplan size`` what it takes.

>>> import fleetplan
>>> instance = fleetplan.load_instance("examples/allocation-gavel-4.1.json")
>>> duals, source = estimate_duals(instance, "max-min-fairness")
>>> source, sorted(duals["workers"])
('estimate', ['k80', 'v100'])
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any

import numpy as np


def estimate_duals(instance: Any, solver: str | None = None, *, time_limit: float | None = None, seed: int = 0,
                   threads: int = 1, **options: Any) -> tuple[dict[str, dict[str, float]], str]:
    """Per capacity unit of the instance's kind: the objective gained by one unit more (see the
    module docstring); positive means more capacity helps."""
    import fleetplan
    from fleetplan.instances import as_instance

    instance = as_instance(instance)
    variants = {"allocation": _allocation_units, "reservation": _reservation_units}
    if instance.kind not in variants:
        raise NotImplementedError(f"re-solve estimates are offered for {', '.join(variants)} instances")

    def objective(trial: Any) -> float | None:
        try:
            result = fleetplan.solve(trial, solver, time_limit=time_limit, seed=seed, threads=threads, **options)
        except fleetplan.InstanceError:  # e.g. one GPU fewer leaves a job nowhere to run
            return None
        return result.objective if result.success else None

    base = fleetplan.solve(instance, solver, time_limit=time_limit, seed=seed, threads=threads, **options)
    if not base.success or base.evaluation is None or base.objective is None:
        return {}, "estimate"
    sign = -1.0 if base.evaluation.sense == "min" else 1.0
    family, units = variants[instance.kind](instance)
    prices: dict[str, float] = {}
    for name, more, fewer, per in units:
        up = objective(more)
        down = objective(fewer) if fewer is not None else None
        if up is not None and down is not None:
            prices[name] = sign * (up - down) / 2 / per
        elif up is not None:
            prices[name] = sign * (up - base.objective) / per
    return {family: prices}, "estimate"


Unit = tuple[str, Any, Any, float]  # name, instance with one unit more, with one fewer (or None), units per step


def _allocation_units(instance: Any) -> tuple[str, Iterator[Unit]]:
    from fleetplan.planning.sizing.allocation import sized_instance

    def units() -> Iterator[Unit]:
        for k, worker in enumerate(instance.worker_types):
            step = np.zeros(len(instance.worker_types), dtype=int)
            step[k] = 1
            fewer = _tolerant(sized_instance, instance, -step) if worker.count >= 1 else None
            yield worker.name, sized_instance(instance, step), fewer, 1.0

    return "workers", units()


def _reservation_units(instance: Any) -> tuple[str, Iterator[Unit]]:
    from fleetplan.planning.sizing.reservation import _rack_size, sized_instance

    arrays = instance.arrays()
    rack = _rack_size(instance)

    def units() -> Iterator[Unit]:
        for d, datacenter in enumerate(arrays.dc_ids):
            fds = np.flatnonzero(arrays.fd_dc == d)
            if not fds.size:
                continue
            for t, kind in enumerate(arrays.type_ids):
                if not arrays.accepts[:, t].any():
                    continue
                more = sized_instance(instance, np.array([t]), np.array([fds[0]]), np.array([1]), rack)
                yield f"{datacenter}/{kind}", more, None, float(rack)

    return "servers", units()


def _tolerant(build: Callable[..., Any], *args: Any) -> Any:
    import fleetplan

    try:
        return build(*args)
    except fleetplan.InstanceError:
        return None
