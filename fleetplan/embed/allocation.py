"""An allocation problem kept between scheduling rounds (Gavel §5's round-based mechanism).

Gavel re-solves its policy whenever the set of jobs changes and hands the allocation X to a
round-based mechanism. A scheduler that embeds fleetplan keeps an :class:`AllocationSession`:

>>> import numpy as np
>>> from fleetplan.embed import AllocationSession
>>> session = AllocationSession({"v100": 1, "k80": 1}, {
...     "id": ["a", "b"], "throughput": np.array([[4.0, 1.0], [2.0, 1.5]])})
>>> session.solve().status
'optimal'
>>> session.add_jobs({"id": ["c"], "throughput_v100": [3.0], "throughput_k80": [1.0]})
>>> session.remove_jobs(["a"])
>>> session.set_workers({"k80": 2})                    # a K80 came back
>>> result = session.solve()
>>> result.status, result.plan.job_ids
('optimal', ['b', 'c'])

What a round pays for is the change, not the whole problem:

* **checks of the change only** — new or changed rows are checked column by column with numpy
  (:mod:`fleetplan.instances.allocation.columns`: the file schema's rules, naming the same paths);
  a change of worker counts re-checks only that every job still fits somewhere (one vectorised
  pass, and none unless a count falls below a job's scale factor), and keeps the arrays the
  solver and the judge read: the jobs' columns, and which types each job fits while no count
  crosses a scale factor. A change that would make the problem invalid raises
  :class:`~fleetplan.instances.InstanceError` and leaves the session as it was;
* **no per-job objects** — jobs live in numpy columns; the instance handed to the solver is a
  column instance whose arrays are the session's;
* **a warm start** — the capacity prices (and level) of the last round's LP start this round's
  price decomposition (:mod:`fleetplan.solvers.allocation.price_decomposition.separable`), skipping the
  interior-point method that finds them cold. Where the jobs are the same ones (only worker
  counts or a job's numbers changed), the last answer's structure is tried before any prices:
  every job on the vertex it had, the same few jobs free in one small LP, and the same
  certificate (:mod:`fleetplan.solvers.allocation.price_decomposition.separable_structure`). The decomposition's
  certificate proves the new optimum whatever the start, so a warm answer is the cold answer
  (tests compare them after random sequences of changes); a start that does not certify is
  dropped for a cold one.
  Policies solved by the full LP (min cost, SJF, below 1,000 distinct jobs) and water filling
  take no hint: they re-solve from the columns, without the revalidation.

The result is the same :class:`~fleetplan.solvers.SolveResult` as ``fleetplan.solve``'s, judged
by the same ``evaluate``; a session with no jobs solves to the empty plan (no judge runs: there is
nothing to score, so ``objective`` is None).

**What the session holds is its own.** Columns handed in are copied, and the session's columns
are read-only arrays: a scheduler that edits its own table in place after a call changes nothing
here, and cannot slip a weight of -5 past the checks. A change goes through the same checks as
the instance file's (:mod:`fleetplan.instances.allocation.columns`: NaN, infinities, bounds). In
an update, a NaN throughput is refused rather than read as "cannot run there" (which it means in
a new job's columns): in a change, a missing value means "unchanged", so a NaN there is a bad
measurement, not an answer.

**Threads.** Calls from several threads are serialised (:mod:`fleetplan.embed.locking`): none is
lost, and a change waits for a running solve. Separate sessions in separate threads run in
parallel.
"""

from __future__ import annotations

import threading
from collections.abc import Mapping, Sequence
from dataclasses import replace
from typing import Any, ClassVar

import numpy as np

from fleetplan.embed.locking import serialised
from fleetplan.instances.allocation import (
    KIND,
    AllocationArrays,
    AllocationInstance,
    AllocationPlan,
)
from fleetplan.instances.allocation.columns import (
    THROUGHPUT,
    ColumnAllocationInstance,
    JobColumns,
    check_jobs,
    cluster_parts,
    job_arrays,
    read_job_columns,
    to_columns,
)
from fleetplan.instances.base import InstanceError
from fleetplan.solvers import warm
from fleetplan.solvers.base import Progress, SolveResult, check_time_limit, get_solver, solve


def owned(columns: JobColumns) -> JobColumns:
    """``columns`` with every array copied and made read-only: the caller's arrays (which
    reading may have kept as they were) can change no more what the session holds."""
    copies: dict[str, Any] = {}
    for name in JobColumns.__dataclass_fields__:
        value = getattr(columns, name)
        if isinstance(value, np.ndarray):
            value = value.copy()
            value.flags.writeable = False
        copies[name] = value
    return JobColumns(**copies)


def _carry(source: AllocationArrays, target: AllocationArrays, names: Sequence[str]) -> None:
    """Hand ``target`` the readings ``source`` has made already of ``names`` (cached properties
    the caller knows to be the same for both)."""
    for name in names:
        if name in source.__dict__:  # functools.cached_property's own slot
            target.__dict__[name] = source.__dict__[name]


def _no_nan_throughput(changes: Mapping[str, Any], types: list[str]) -> None:
    """An update's throughputs: NaN is refused (in new columns it means "cannot run there";
    in a change, where a missing value means "unchanged", it is a bad measurement)."""
    for name, value in changes.items():
        if name != "throughput" and not (name.startswith(THROUGHPUT) and name[len(THROUGHPUT):] in types):
            continue
        array = np.asarray(value)
        if array.dtype.kind != "f" or not np.isnan(array).any():
            continue
        where = np.argwhere(np.isnan(array))[0]
        row = int(where[0])
        column = types[int(where[1])] if name == "throughput" and array.ndim == 2 else name[len(THROUGHPUT):]
        raise InstanceError(f"update_jobs[{row}].throughput.{column}", "must be a finite number >= 0, got nan "
                            "(give 0 for a type the job cannot use)")


class AllocationSession:
    """An allocation problem (Gavel §3-4) kept between rounds: change it, then :meth:`solve`.

    Parameters
    ----------
    worker_types : the cluster: ``{name: count}``, a list of ``{"name", "count",
        "cost_per_hour"}`` dicts as in the instance file, or a DataFrame with those columns
    jobs : the jobs as columns (a mapping of column name to values, or a DataFrame; see
        :mod:`fleetplan.instances.allocation.columns`); may be empty
    entities, colocations : as in the instance file (optional)
    solver : an allocation solver (``fleetplan.list_solvers("allocation")``); None: the default
    time_limit, seed, threads, **options : as for :func:`fleetplan.solve`, used every round
    name : the instances' name
    warm_start : hand the last round's prices to this round's solve (False: every round cold)
    """

    kind: ClassVar[str] = KIND  # the problem kind it holds

    def __init__(self, worker_types: Any, jobs: Any = None, *, entities: Any = None, colocations: Any = None,
                 solver: str | None = None, time_limit: float | None = None, seed: int = 0, threads: int = 1,
                 name: str = "", warm_start: bool = True, **options: Any) -> None:
        self._spec = get_solver("allocation", solver)
        self._options = self._spec.check_options(options)
        self.time_limit = check_time_limit(time_limit)
        self.seed, self.threads, self.name = seed, threads, name
        self._types, self._entities, self._colocations = cluster_parts(worker_types, entities, colocations)
        self._counts = np.array([t.count for t in self._types], dtype=float)
        if jobs is None:
            jobs = {"id": np.zeros(0, dtype=object), "throughput": np.zeros((0, len(self._types)))}
        columns = owned(read_job_columns(jobs, self.worker_types))
        check_jobs(columns, self._counts, self._entity_ids)
        self._columns = columns
        self._lock = threading.RLock()
        self._ids = set(columns.id.tolist())  # the job ids, kept as jobs come and go
        self._warm = warm.WarmStart() if warm_start else None
        self._index: dict[str, int] | None = None  # see _row_of
        self._instance: ColumnAllocationInstance | None = None
        self._arrays: AllocationArrays | None = None  # see _arrays_now
        self._scale_factors: np.ndarray | None = None  # see _scales
        self.rounds = 0

    def summary(self) -> dict[str, Any]:
        """What the session holds now, in a few numbers (the service's answer about it)."""
        return {"jobs": len(self), "workers": self.workers, "rounds": self.rounds}

    @classmethod
    def from_instance(cls, instance: AllocationInstance | dict[str, Any], **kwargs: Any) -> AllocationSession:
        """A session starting from an instance (or its dict, validated as ``fleetplan.solve``
        would); ``kwargs`` as for the constructor."""
        if isinstance(instance, dict):
            from fleetplan.instances import instance_from_data

            instance = instance_from_data(instance, "instance")
        if not isinstance(instance, AllocationInstance):
            raise InstanceError("kind", f"is '{getattr(instance, 'kind', '?')}'; an allocation instance is needed")
        session = cls(instance.worker_types, None, entities=instance.entities, colocations=instance.colocations,
                      name=kwargs.pop("name", instance.name), **kwargs)
        session._columns = owned(to_columns(instance))  # validated with the instance
        session._ids = set(session._columns.id.tolist())
        # The instance's arrays (to_columns read them) are the first round's, on the session's own
        # read-only throughput table: built once, with whatever the instance has read of them
        # already (which types each job fits, its isolated share: a solve of it read them).
        session._arrays = replace(instance.arrays(), throughput=session._columns.throughput,
                                  weight=session._columns.weight)
        _carry(instance.arrays(), session._arrays, ("runnable", "runnable_throughput", "fastest_throughput",
                                                    "isolated_throughput"))
        return session

    # --- what the session holds -------------------------------------------------------------
    @property
    def worker_types(self) -> list[str]:
        return [t.name for t in self._types]

    @property
    def workers(self) -> dict[str, int]:
        """Workers of each type now."""
        return {t.name: t.count for t in self._types}

    @property
    def job_ids(self) -> list[str]:
        return self._columns.id.tolist()

    @property
    def columns(self) -> JobColumns:
        """The jobs as columns (read-only: change them through the methods below)."""
        return self._columns

    def __len__(self) -> int:
        return len(self._columns)

    @property
    def solver(self) -> str:
        return self._spec.name

    @property
    def _entity_ids(self) -> set[str]:
        return {e.id for e in self._entities}

    @serialised
    def instance(self) -> ColumnAllocationInstance:
        """The problem now, as an allocation instance (the one :meth:`solve` hands the solver)."""
        if len(self._columns) == 0:
            raise InstanceError("jobs", "must list at least one job (the session has none)")
        if self._instance is None:
            self._instance = ColumnAllocationInstance.from_parts(
                list(self._types), self._columns, list(self._entities), list(self._colocations), self.name,
                self._arrays_now())
        return self._instance

    def _scales(self) -> np.ndarray:
        """The jobs' distinct scale factors, sorted (kept until the jobs change): a count that
        passes none of them leaves every job fitting the types it fit."""
        if self._scale_factors is None:
            self._scale_factors = np.unique(self._columns.scale_factor).astype(float)
        return self._scale_factors

    def _arrays_now(self) -> AllocationArrays:
        """The solvers' and the judge's arrays of the jobs and cluster now. When only the
        cluster changed since the last ones (new worker counts or prices: a what-if, a GPU
        bought), they are the last ones with the new counts, and what depends on the jobs and
        on which types each job fits — ``runnable``, ``runnable_throughput``,
        ``fastest_throughput`` — is carried over where no count crossed a job's scale factor
        (one GPU more or fewer of 16,384 jobs' types: 0.5 ms of rebuilding and 1.4 ms of the
        judge's and the solver's reading, each re-solve)."""
        last, types = self._arrays, self._types
        counts = np.array([t.count for t in types], dtype=float)
        prices = np.array([t.cost_per_hour for t in types], dtype=float)
        if last is None:
            arrays = job_arrays(self._columns, types, self._colocations)
        elif np.array_equal(counts, last.num_workers) and np.array_equal(prices, last.cost_per_hour):
            arrays = last  # the cluster is back as it was (a what-if's base, solved again)
        else:
            arrays = replace(last, num_workers=counts, cost_per_hour=prices)
            scales = self._scales()
            if np.array_equal(np.searchsorted(scales, last.num_workers, side="right"),
                              np.searchsorted(scales, counts, side="right")):
                # Every job fits the same types: the same cells, the same fastest type.
                _carry(last, arrays, ("runnable", "runnable_throughput", "fastest_throughput"))
        self._arrays = arrays
        return arrays

    # --- changes ------------------------------------------------------------------------------
    @property
    def _row_of(self) -> dict[str, int]:
        """Job id -> row, rebuilt (one pass in C) after jobs left, extended when jobs arrive."""
        if self._index is None:
            self._index = dict(zip(self._columns.id.tolist(), range(len(self._columns)), strict=True))
        return self._index

    def _rows(self, ids: Any, what: str) -> np.ndarray:
        wanted = np.asarray(ids, dtype=object).reshape(-1).tolist()
        row_of = self._row_of
        try:
            rows = np.fromiter((row_of[job] for job in wanted), dtype=np.int64, count=len(wanted))
        except (KeyError, TypeError):
            k = next(k for k, job in enumerate(wanted) if not isinstance(job, str) or job not in row_of)
            raise InstanceError(f"{what}[{k}]", f"unknown job {wanted[k]!r}") from None
        if len(set(wanted)) != len(wanted):
            raise InstanceError(what, "names a job twice")
        return rows

    def _commit(self, columns: JobColumns, *, ids_changed: bool) -> None:
        for name in JobColumns.__dataclass_fields__:  # new arrays made here: read-only, as owned()'s
            value = getattr(columns, name)
            if isinstance(value, np.ndarray):
                value.flags.writeable = False
        self._columns = columns
        self._instance = None
        self._arrays = self._scale_factors = None
        if ids_changed:
            self._index = None

    def _forget_structure(self) -> None:
        """Jobs came or went: the last answer's per-job structure (each job's vertex, the free
        jobs; the third part of a max-min hint) no longer lines up with the rows, so only the
        prices are kept (a misaligned structure would be rejected by its certificate, at a cost)."""
        if self._warm is None:
            return
        for hints in (self._warm.previous, self._warm.current):
            for key, hint in hints.items():
                if isinstance(hint, tuple) and len(hint) > 2:
                    hints[key] = hint[:2]

    @serialised
    def add_jobs(self, jobs: Any) -> None:
        """Jobs arrive: ``jobs`` as columns (a mapping or a DataFrame, the layout of the
        constructor's). Checked row by row against the cluster and the jobs already here."""
        new = owned(read_job_columns(jobs, self.worker_types))
        if len(new) == 0:
            return
        check_jobs(new, self._counts, self._entity_ids, taken=self._ids)
        first, row_of = len(self._columns), self._index
        self._commit(self._columns.concat(new), ids_changed=False)
        self._forget_structure()
        added = new.id.tolist()
        self._ids.update(added)
        if row_of is not None:  # rows of the jobs here stay; the new ones follow
            row_of.update(zip(added, range(first, first + len(new)), strict=True))

    @serialised
    def remove_jobs(self, ids: Sequence[str] | np.ndarray) -> None:
        """Jobs leave (finished, cancelled): their ids."""
        rows = self._rows(ids, "remove_jobs")
        if len(rows) == 0:
            return
        keep = np.ones(len(self._columns), dtype=bool)
        keep[rows] = False
        self._ids.difference_update(self._columns.id[rows].tolist())
        self._commit(self._columns.take(keep), ids_changed=True)
        self._forget_structure()

    @serialised
    def update_jobs(self, changes: Any) -> None:
        """Jobs change: ``changes`` as columns with ``id`` and the columns that change (steps left,
        time elapsed, a throughput re-measured as ``throughput_<type>``, weight, ...); the other
        columns of those jobs stay. The changed rows are checked as new ones would be."""
        changes = dict(changes) if isinstance(changes, Mapping) else {
            str(name): changes[name].to_numpy() for name in changes.columns}
        if "id" not in changes:
            raise InstanceError("update_jobs.id", "is required: the ids of the jobs that change")
        _no_nan_throughput(changes, self.worker_types)
        rows = self._rows(changes["id"], "update_jobs.id")
        if len(rows) == 0:
            return
        old = self._columns.take(rows)
        merged: dict[str, Any] = {"id": old.id}
        if "throughput" not in changes:
            for j, name in enumerate(self.worker_types):
                merged[THROUGHPUT + name] = old.throughput[:, j]
        for name in ("scale_factor", "weight", "steps_left", "arrival_time", "time_elapsed",
                     "isolated_time_elapsed", "slo_hours", "job_type", "entity"):
            value = getattr(old, name)
            if value is not None:
                merged[name] = value
        for name, value in changes.items():
            if name != "id":
                merged[name] = value
        new = owned(read_job_columns(merged, self.worker_types, path="update_jobs"))
        check_jobs(new, self._counts, self._entity_ids, path="update_jobs")
        self._commit(self._columns.replaced(rows, new), ids_changed=False)

    @serialised
    def set_workers(self, counts: Mapping[str, int], cost_per_hour: Mapping[str, float] | None = None) -> None:
        """GPUs fail or return, or are bought: the new worker count of each type named (the
        others stay), and optionally new prices. Every job must still fit on some type."""
        known = self.worker_types
        for name in [*counts, *(cost_per_hour or {})]:
            if name not in known:
                raise InstanceError(f"worker_types.{name}", f"unknown worker type (known: {', '.join(known)})")
        if not cost_per_hour and all(type(count) is int and count >= 0 for count in counts.values()) and \
                any(counts.get(t.name, t.count) > 0 for t in self._types):
            # Whole counts >= 0 and a worker left: what the schema would check of them (anything
            # else goes through it below, for its own error). A what-if's new counts, 0.3 ms less.
            types = [t.model_copy(update={"count": counts[t.name]}) if t.name in counts else t for t in self._types]
        else:
            rows: list[dict[str, Any]] = []
            for t in self._types:
                data = t.model_dump()
                if t.name in counts:
                    data["count"] = counts[t.name]
                if cost_per_hour and t.name in cost_per_hour:
                    data["cost_per_hour"] = cost_per_hour[t.name]
                rows.append(data)
            types, _, _ = cluster_parts(rows, self._entities, self._colocations)
        new_counts = np.array([t.count for t in types], dtype=float)
        c = self._columns
        # Every job fits somewhere now (checked at each change), so only counts that cross a
        # job's scale factor downwards can leave one without a type.
        scales = self._scales()
        crossed = np.any(np.searchsorted(scales, new_counts, side="right")
                         < np.searchsorted(scales, self._counts, side="right"))
        runnable = ((c.throughput > 0) & (new_counts[None, :] >= c.scale_factor[:, None])).any(axis=1) \
            if crossed and len(c) else np.ones(len(c), dtype=bool)
        if not runnable.all():
            m = int(np.flatnonzero(~runnable)[0])
            raise InstanceError("worker_types", f"job '{c.id[m]}' could run on no worker type with these counts "
                                f"(it needs {c.scale_factor[m]} workers of a type it has a throughput on): "
                                "remove it first")
        self._types, self._counts = types, new_counts
        self._instance = None

    # --- solving -----------------------------------------------------------------------------
    @serialised
    def solve(self, *, time_limit: float | None = None, progress: Progress | None = None) -> SolveResult:
        """Solve the problem as it is now, warm-started from the last round (see the module
        docstring). ``time_limit``: this round's (default: the session's). With no jobs, the
        empty plan."""
        if len(self._columns) == 0:
            self.rounds += 1
            return self._empty_result()
        instance = self.instance()
        with warm.hints(self._warm) as hints:
            result = solve(instance, self._spec.name, time_limit=self.time_limit if time_limit is None else time_limit,
                           seed=self.seed, threads=self.threads, progress=progress, **self._options)
        if hints is not None:
            result.stats["warm_hints_used"] = float(hints.offered)
            if self.rounds > 0 and hints.offered == 0:
                # A scheduler watching its round times should know this one left the fast path.
                result.log.append(f"session: round {self.rounds + 1} ran cold: {self._spec.name} took no warm "
                                  "start (below the price decomposition's size, or solved by the full LP)")
        if result.plan is not None:
            self._policy = result.plan.policy
        self.rounds += 1
        return result

    def _empty_result(self) -> SolveResult:
        """No jobs: the empty plan, trivially optimal; nothing to judge (the judge scores jobs)."""
        policy = getattr(self, "_policy", self._spec.name.replace("-", "_"))
        plan = AllocationPlan(solver=self._spec.name, options=dict(self._options), policy=policy, job_ids=[],
                              worker_types=self.worker_types, allocation=[])
        return SolveResult(status="optimal", plan=plan, solver=self._spec.name, kind="allocation",
                           message="no jobs: the empty plan")

    @serialised
    def warm_start(self) -> dict[Any, Any]:
        """The warm start the last round left (a copy), for :meth:`start_from` to hand to a
        later round: e.g. every what-if of one base, each from the base's rather than from the
        what-if before it, so they can run in any order (or in parallel) with the same answers."""
        return {} if self._warm is None else dict(self._warm.current or self._warm.previous)

    @serialised
    def start_from(self, hints: dict[Any, Any]) -> None:
        """The next round starts from ``hints`` (from :meth:`warm_start`) instead of the last round's."""
        if self._warm is not None:
            self._warm.previous, self._warm.current = dict(hints), dict(hints)

    @serialised
    def forget_warm_start(self) -> None:
        """The next round starts cold (e.g. after a change that moves every price)."""
        if self._warm is not None:
            self._warm.forget()
