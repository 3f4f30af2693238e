"""A region kept between RAS re-solves (MAST §2: RAS re-runs every 30 minutes and after events).

RAS assigns a region's servers to reservations and re-solves from its last plan: servers go
into maintenance and come back, reservations grow, datacenters come online. A
:class:`ReservationSession` keeps the region:

>>> import fleetplan
>>> region = fleetplan.generate("reservation", {"servers": 400, "reservations": 6, "datacenters": 2}, seed=0)
>>> session = fleetplan.session(region, "mip-highs")
>>> session.solve().status                            # the plan becomes today's assignment
'optimal'
>>> session.set_maintenance(session.servers_in_fault_domain(0))        # a fault domain goes out
>>> session.set_request(session.reservation_ids[0], 1.3 * session.request(session.reservation_ids[0]))
>>> session.solve().status                            # 30 minutes later: moves counted from the last plan
'optimal'

What a re-solve does not pay again: the region's 10^5 server rows are validated once; a
maintenance change or a new request is checked where it lands (numpy over the servers named, a
reservation's number) and the instance's arrays are updated in place of being rebuilt. The
previous plan is the start: it becomes today's assignment when applied, and the exact solvers
(``mip-highs``, ``cpsat``) take today's assignment as their MIP start (``warm_start="current"``,
the session's default for them; pass another ``warm_start`` to change it). Events that reshape
the region (:meth:`event`: a new datacenter, a hardware refresh) take the general path and
validate the instance afresh. The answer is a cold ``fleetplan.solve`` of the same instance
with the same options (tests compare them after random sequences of events).
"""

from __future__ import annotations

import threading
from collections.abc import Sequence
from dataclasses import replace
from typing import Any, ClassVar

import numpy as np

from fleetplan.embed.locking import serialised
from fleetplan.instances.base import InstanceError
from fleetplan.instances.reservation import KIND, ReservationInstance, ReservationPlan
from fleetplan.solvers.base import Progress, SolveResult, check_time_limit, get_solver, solve


class ReservationSession:
    """A RAS region kept between re-solves; see the module docstring.

    Parameters
    ----------
    region : a reservation instance (or its dict)
    solver : a reservation solver (default: the kind's default)
    time_limit, seed, threads, **options : as for :func:`fleetplan.solve`, used every re-solve
    """

    kind: ClassVar[str] = KIND  # the problem kind it holds

    def __init__(self, region: ReservationInstance | dict[str, Any], *, solver: str | None = None,
                 time_limit: float | None = None, seed: int = 0, threads: int = 1, **options: Any) -> None:
        from_data = isinstance(region, dict)
        if from_data:
            from fleetplan.instances import instance_from_data

            region = instance_from_data(region, "instance")
        if not isinstance(region, ReservationInstance):
            raise InstanceError("kind", f"is '{getattr(region, 'kind', '?')}'; a reservation instance is needed")
        self._spec = get_solver("reservation", solver)
        if "warm_start" in self._spec.options and "warm_start" not in options:
            options["warm_start"] = "current"  # the last plan, once applied, is today's assignment
        self._options = self._spec.check_options(options)
        self.time_limit = check_time_limit(time_limit)
        self.seed, self.threads = seed, threads
        # The session's own copy: the caller's later edits of its instance do not reach it.
        self._instance = region.model_copy(deep=True) if not from_data else region
        self.solves = 0
        self._lock = threading.RLock()  # calls from several threads run one at a time

    def summary(self) -> dict[str, Any]:
        """What the session holds now, in a few numbers (the service's answer about it)."""
        return {"reservations": len(self.reservation_ids), "solves": self.solves}

    @classmethod
    def from_instance(cls, instance: ReservationInstance | dict[str, Any], **kwargs: Any) -> ReservationSession:
        return cls(instance, **kwargs)

    # --- what the session holds ----------------------------------------------------------------
    @serialised
    def instance(self) -> ReservationInstance:
        """The region now (today's assignment included)."""
        return self._instance

    @property
    def reservation_ids(self) -> list[str]:
        return list(self._instance.arrays().res_ids)

    def request(self, reservation: str) -> float:
        return float(self._instance.arrays().res_request[self._reservation(reservation)])

    def servers_in_fault_domain(self, fault_domain: int | str) -> np.ndarray:
        """Row numbers of the servers of a fault domain (its row or id)."""
        arrays = self._instance.arrays()
        f = fault_domain if isinstance(fault_domain, int) else arrays.fd_ids.index(fault_domain)
        return np.flatnonzero(arrays.server_fd == f)

    def _reservation(self, reservation: str) -> int:
        ids = self._instance.arrays().res_ids
        if reservation not in ids:
            raise InstanceError("reservation", f"unknown reservation {reservation!r}")
        return ids.index(reservation)

    def _server_rows(self, servers: Sequence[int] | Sequence[str] | np.ndarray, what: str) -> np.ndarray:
        arrays = self._instance.arrays()
        values = np.asarray(servers)
        if values.dtype.kind in "iu":
            bad = (values < 0) | (values >= arrays.num_servers)
            if bad.any():
                k = int(np.flatnonzero(bad)[0])
                raise InstanceError(f"{what}[{k}]", f"server row {values[k]} does not exist ({arrays.num_servers} servers)")
            return values.astype(np.int64)
        ids = self._instance.servers.id
        if ids is None:
            raise InstanceError(what, "the region's servers have no ids: give row numbers")
        index = {name: row for row, name in enumerate(ids)}
        rows = []
        for k, name in enumerate(values.tolist()):
            if name not in index:
                raise InstanceError(f"{what}[{k}]", f"unknown server {name!r}")
            rows.append(index[name])
        return np.asarray(rows, dtype=np.int64)

    def _replace(self, fields: dict[str, Any], **arrays_changes: Any) -> None:
        """A new instance with ``fields`` replaced and its arrays changed in place of rebuilt."""
        old = self._instance.arrays()
        instance = self._instance.model_copy(update=fields)
        instance._arrays = replace(old, _cache=dict(old._cache), **arrays_changes)
        self._instance = instance

    # --- changes ------------------------------------------------------------------------------
    @serialised
    def set_maintenance(self, servers: Sequence[int] | Sequence[str] | np.ndarray, on: bool = True) -> None:
        """Servers go into maintenance (``on``) or come back: rows or ids. In maintenance a server
        counts for nothing and RAS leaves it where it is."""
        rows = self._server_rows(servers, "set_maintenance")
        mask = self._instance.arrays().server_maintenance.copy()
        mask[rows] = bool(on)
        columns = self._instance.servers.model_copy(update={"maintenance": mask.tolist()})
        self._replace({"servers": columns}, server_maintenance=mask)

    @serialised
    def set_request(self, reservation: str, capacity_rru: float) -> None:
        """A reservation asks for another capacity (RRU at its guarantee level)."""
        r = self._reservation(reservation)
        if isinstance(capacity_rru, bool) or not isinstance(capacity_rru, (int, float, np.floating)) or \
                not np.isfinite(capacity_rru) or capacity_rru < 0:
            raise InstanceError(f"reservations[{r}].capacity_rru", f"{capacity_rru!r} is not allowed: must be a finite number >= 0")
        reservations = list(self._instance.reservations)
        reservations[r] = reservations[r].model_copy(update={"capacity_rru": float(capacity_rru)})
        request = self._instance.arrays().res_request.copy()
        request[r] = float(capacity_rru)
        self._replace({"reservations": reservations}, res_request=request)

    @serialised
    def assign(self, plan: ReservationPlan) -> None:
        """Make ``plan`` today's assignment (:meth:`solve` does it with its own plan)."""
        current = plan.assignment_array(self._instance)  # checks the plan against the region
        columns = self._instance.servers.model_copy(update={"current": list(plan.assignment)})
        self._replace({"servers": columns}, server_current=current)

    @serialised
    def event(self, name: str, *, seed: int = 0, **params: Any) -> None:
        """Apply a generator event (``new-datacenter``, ``fault-domain-maintenance``,
        ``reservation-growth``, ``hardware-refresh``; see
        :func:`fleetplan.instances.reservation.generate.apply_event`); the region is validated
        afresh (the general path)."""
        from fleetplan.instances.base import validate_model
        from fleetplan.instances.reservation.events import event_name
        from fleetplan.instances.reservation.generate import ReservationParams, apply_event

        event_params = validate_model(ReservationParams, params, "event parameters")
        self._instance = apply_event(self._instance, event_name(name), seed=seed, params=event_params)

    # --- solving -------------------------------------------------------------------------------
    @serialised
    def solve(self, *, apply: bool = True, time_limit: float | None = None,
              progress: Progress | None = None) -> SolveResult:
        """Re-solve the region now; with ``apply`` (default) a feasible plan becomes today's
        assignment, from which the next re-solve counts its moves. ``time_limit``: this
        re-solve's (default: the session's)."""
        result = solve(self._instance, self._spec.name, time_limit=self.time_limit if time_limit is None else time_limit,
                       seed=self.seed, threads=self.threads, progress=progress, **self._options)
        self.solves += 1
        if apply and result.plan is not None and result.evaluation is not None and result.evaluation.feasible:
            self.assign(result.plan)
        return result
