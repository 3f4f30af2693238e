"""Embedding fleetplan's solvers in a scheduler: problems kept between rounds.

A scheduler re-solves nearly the same problem again and again: Gavel's round-based mechanism
re-solves its policy whenever jobs arrive or leave (§5), MAST's RMS places one workload at a
time against a region whose machines and running jobs change between calls (§4.3), and RAS
re-solves every 30 minutes after an event (§2). A *session* keeps the problem between those
calls, takes changes as plain data (numpy columns, DataFrames, dicts), checks only what changed,
and answers each call with the same :class:`~fleetplan.solvers.SolveResult` as
:func:`fleetplan.solve`, judged by the same ``evaluate``. Every session re-solves by ``solve``,
which takes ``time_limit`` (this call's) and ``progress`` as keywords:

* :class:`AllocationSession` — Gavel's policies and water filling (``allocation``);
* :class:`BinpackSession` — the RMS greedy, one workload at a time (``binpack``; ``solve``
  takes the workloads to place, and is also called ``place``, MAST's word for it);
* :class:`ReservationSession` — RAS's re-solve after an event (``reservation``).

:func:`session` makes the right one from an instance or its dict, as :func:`fleetplan.solve`
takes them. :mod:`fleetplan.embed.gavel` puts Gavel's policy interface (dicts in, dicts out) in
front of the allocation session, for Gavel's own scheduler. Where this sits: above :mod:`fleetplan.solvers` (it calls :func:`fleetplan.solve`;
the solvers read its warm-start hints through :mod:`fleetplan.solvers.warm`, a context variable,
and never import this package), beside :mod:`fleetplan.sim` and :mod:`fleetplan.planning`.
``docs/embedding.md`` has a scheduler loop, the measured latencies and what is thread-safe.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

_CLASSES = {"AllocationSession": "fleetplan.embed.allocation", "BinpackSession": "fleetplan.embed.binpack",
            "ReservationSession": "fleetplan.embed.reservation"}

__all__ = ["AllocationSession", "BinpackSession", "ReservationSession", "session"]

if TYPE_CHECKING:
    from fleetplan.embed.allocation import AllocationSession
    from fleetplan.embed.binpack import BinpackSession
    from fleetplan.embed.reservation import ReservationSession


def __getattr__(name: str) -> Any:
    if name in _CLASSES:
        value = getattr(importlib.import_module(_CLASSES[name]), name)
        globals()[name] = value
        return value
    raise AttributeError(f"module 'fleetplan.embed' has no attribute '{name}'")


def session(instance: Any, solver: str | None = None, **kwargs: Any) -> Any:
    """A session of ``instance``'s kind (an instance or its dict, as :func:`fleetplan.solve`
    takes), solved with ``solver`` and ``kwargs`` (``time_limit``, ``seed``, ``threads``, the
    solver's options) every call.

    >>> import fleetplan
    >>> rounds = fleetplan.session(fleetplan.load_instance("examples/allocation-gavel-4.1.json"))
    >>> type(rounds).__name__, rounds.solve().status
    ('AllocationSession', 'optimal')
    """
    from fleetplan.instances import KINDS, InstanceError, instance_from_data

    if isinstance(instance, dict):
        instance = instance_from_data(instance, "instance")
    kind = getattr(instance, "kind", None)
    if kind not in KINDS or KINDS[kind].session is None:
        raise InstanceError("kind", f"sessions exist for {', '.join(session_kinds())}; not for '{kind}'")
    return KINDS[kind].load("session").from_instance(instance, solver=solver, **kwargs)


def session_kinds() -> list[str]:
    """The kinds whose registration names a session class (``ProblemKind.session``)."""
    from fleetplan.instances import KINDS

    return [name for name in KINDS if KINDS[name].session]
