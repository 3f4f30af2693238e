"""Sizing MIPs of the allocation kind: integer GPUs to buy per type, with Gavel's allocation X as
variables of the same model (Gavel §3.1's constraints, capacity made a variable).

The model, over job classes (identical jobs share variables, as in the policies' LPs)::

    minimize   sum_k price_k * add_k
    subject to floor <= sum_k X[m, k] <= 1                            (each job's time)
               sum_m scale_factor_m * X[m, k] - add_k <= count_k      (each type's workers)
               w[k, s] = [count_k + add_k >= s]                       (type k open to jobs of scale s)
                   add_k >= (s - count_k) w[k, s],  add_k <= s - count_k - 1 + MAX_k w[k, s]
               X[m, k] <= upper * w[k, s_m]                           (gang: only on an open type)
               sum_k w[k, s_m] >= 1 for a job no type serves today    (the sized instance is valid)
               the targets, below
               sum_k price_k * add_k <= budget,   0 <= add_k <= MAX_k integer

A target's reference may depend on what is bought, and the model keeps that exact where it can:

* ``min_throughput_vs_fastest>=v`` — the job's fastest type is the fastest *open* type: a row
  ``throughput(m, X) >= v * T[m, k] * w[k, s_m]`` per type not open today. Exact.
* ``min_speedup_over_isolated>=v`` — the isolated share is ``min(A, B)`` (its fractions are
  normalised once they sum past 1): ``A = sum_k T[m, k] (count_k + add_k) / (n s_m)`` over the
  open types, ``B`` the average of the open types' T weighted by their workers. That is not
  linear in the purchase. Where it reduces to ``A`` over fixed types (no type the job could
  open, fractions that cannot sum past 1) the row is exact; elsewhere two models bracket it: the
  *restriction* asks ``A`` over every type the job could ever use (at least the true reference:
  what it admits meets the target), the *relaxation* asks ``min(A over today's types, the job's
  slowest usable type)`` (at most the true reference: every purchase that meets the target is
  admitted, so its optimum bounds the cost from below).
* ``min_time_share``, ``slo_missed_jobs<=0``, ``makespan_s<=T``, ``total_throughput>=S`` — fixed
  floors on X: exact.

``role="restriction"`` and ``role="relaxation"`` build the two sides; where every row is exact
they are the same model and :attr:`SizingModel.exact` is True. With every ``MAX`` 0 the model is
the LP "does an allocation meeting the targets exist on this cluster", exact for every target:
sizing's own check of a purchase.

>>> import fleetplan, numpy as np
>>> instance = fleetplan.load_instance("examples/allocation-gavel-4.1.json")
>>> from fleetplan.planning.targets import parse_target
>>> model = build_sizing_model(instance.arrays(), [parse_target("min_time_share>=1", "allocation")],
...                            price=np.array([3.0, 1.0]), cap=np.array([3.0, 1.0]))
>>> model.exact, model.lp.num_cols > 2
(True, True)
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from typing import Any, Literal, Protocol

import numpy as np

from fleetplan.instances.allocation import AllocationArrays
from fleetplan.lazy import lazy_module
from fleetplan.models.allocation.policies import AllocationSpace, aggregate_jobs, build_space
from fleetplan.models.linear import INF, LinearProgram

sp = lazy_module("scipy.sparse")

Role = Literal["restriction", "relaxation"]


class TargetLike(Protocol):
    """A service target as sizing reads it (``fleetplan.planning.targets.Target``)."""

    metric: str
    value: float


@dataclasses.dataclass
class SizingModel:
    """The MIP and how to read it back: ``lp``'s columns are X (``n_x``), then ``add`` per type,
    then the binaries. ``representative``/``inverse`` map job classes to jobs."""

    lp: LinearProgram
    representative: np.ndarray
    inverse: np.ndarray
    space: AllocationSpace
    n_x: int
    n_types: int
    exact: bool
    role: Role
    notes: list[str]

    def additions(self, values: np.ndarray) -> np.ndarray:
        """The integer purchase in a solution vector."""
        return np.rint(values[self.n_x: self.n_x + self.n_types]).astype(int)

    def allocation(self, values: np.ndarray) -> np.ndarray:
        """The model's own X as a (jobs, types) matrix, every job given its class's shares."""
        matrix, _ = self.space.split(values[: self.n_x])
        return np.clip(matrix[self.inverse], 0.0, 1.0)


def build_sizing_model(arrays: AllocationArrays, targets: Sequence[TargetLike], price: np.ndarray,
                       cap: np.ndarray, budget: float | None = None, *, role: Role = "restriction") -> SizingModel:
    """The sizing MIP of the module docstring, as sparse arrays for HiGHS."""
    count = np.asarray(arrays.num_workers, dtype=float)
    cap = np.asarray(cap, dtype=float)
    most = dataclasses.replace(arrays, num_workers=count + cap, fit_workers=None, isolated_override=None)
    representative, inverse, multiplicity = aggregate_jobs(arrays.throughput, arrays.scale_factor,
                                                           arrays.steps_left, arrays.slo_seconds)
    reps = _subset(most, representative)
    space = build_space(reps, multiplicity=multiplicity)
    n_x, n_types, n_classes = space.n_cols, len(price), len(representative)
    scale = reps.scale_factor.astype(float)
    usable = reps.throughput > 0
    open_today = usable & (count[None, :] >= scale[:, None])
    could_open = usable & ~open_today & ((count + cap)[None, :] >= scale[:, None])
    gates = sorted({(int(k), float(scale[m])) for m, k in zip(*np.nonzero(could_open), strict=True)})
    gate_of = {gate: i for i, gate in enumerate(gates)}
    builder = _Rows(n_x, n_types, len(gates))
    notes: list[str] = []
    exact = True

    share_floor = next((t.value for t in targets if t.metric == "min_time_share"), 0.0)
    builder.add(x=space.time, low=np.full(n_classes, share_floor), high=np.ones(n_classes))
    builder.add(x=space.workers, add=-sp.identity(n_types, format="csr"), low=np.full(n_types, -INF), high=count)
    _add_gates(builder, space, reps, gates, gate_of, count, cap, open_today, could_open)
    floor = _fixed_floors(reps, targets, open_today)
    for target in targets:
        if target.metric == "min_throughput_vs_fastest" and target.value > 0:
            _add_fastest_rows(builder, space, reps, target.value, open_today, could_open, gate_of, floor)
        elif target.metric == "min_speedup_over_isolated" and target.value > 0:
            target_exact = _add_isolated_rows(builder, space, reps, target.value, len(arrays.job_ids), count, cap,
                                              open_today, could_open, floor, role)
            if not target_exact:
                exact = False
                notes.append("a job's isolated share moves with the purchase beyond the linear range: "
                             f"min_speedup_over_isolated is bracketed (this model is the {role})")
        elif target.metric == "total_throughput":
            row = sp.csr_matrix((space.measured.T @ space.multiplicity).reshape(1, -1))
            builder.add(x=row, low=np.array([target.value]), high=np.array([INF]))
    if np.any(floor > 0):
        jobs = np.flatnonzero(floor > 0)
        builder.add(x=space.measured[jobs], low=floor[jobs], high=np.full(len(jobs), INF))
    if budget is not None:
        builder.add(add=sp.csr_matrix(price.reshape(1, -1)), low=np.array([-INF]), high=np.array([budget]))
    lp = builder.program(price, space.column_upper(), cap)
    return SizingModel(lp, representative, inverse, space, n_x, n_types, exact, role, notes)


class _Rows:
    """Row blocks over the columns [X | add | extra binaries], stacked once at the end."""

    def __init__(self, n_x: int, n_types: int, n_gates: int) -> None:
        self.n_x, self.n_types, self.n_gates = n_x, n_types, n_gates
        self.n_extra = 0  # per-class disjunction binaries, appended after the gates
        self.blocks: list[tuple[Any, Any, Any, Any]] = []
        self.lower: list[np.ndarray] = []
        self.upper: list[np.ndarray] = []

    def new_binaries(self, count: int) -> int:
        first = self.n_gates + self.n_extra
        self.n_extra += count
        return first

    def add(self, *, low: np.ndarray, high: np.ndarray, x: Any = None, add: Any = None, binary: Any = None) -> None:
        """Rows ``low <= x @ X + add @ add + binary @ b <= high`` (``binary`` indexes gates, then extras)."""
        self.blocks.append((x, add, binary, len(low)))
        self.lower.append(np.asarray(low, dtype=float))
        self.upper.append(np.asarray(high, dtype=float))

    def program(self, price: np.ndarray, x_upper: np.ndarray, cap: np.ndarray) -> LinearProgram:
        n_binary = self.n_gates + self.n_extra
        stacked = []
        for x, add, binary, rows in self.blocks:
            parts = [x if x is not None else sp.csr_matrix((rows, self.n_x)),
                     add if add is not None else sp.csr_matrix((rows, self.n_types))]
            if binary is None:
                parts.append(sp.csr_matrix((rows, n_binary)))
            else:
                binary = sp.csr_matrix(binary)
                parts.append(sp.hstack([binary, sp.csr_matrix((rows, n_binary - binary.shape[1]))], format="csr"))
            stacked.append(sp.hstack(parts, format="csr"))
        n = self.n_x + self.n_types + n_binary
        lp = LinearProgram(
            cost=np.concatenate([np.zeros(self.n_x), price, np.zeros(n_binary)]),
            matrix=sp.vstack(stacked, format="csr"), row_lower=np.concatenate(self.lower),
            row_upper=np.concatenate(self.upper), col_lower=np.zeros(n),
            col_upper=np.concatenate([x_upper, cap, np.ones(n_binary)]), sense="min",
            integrality=np.concatenate([np.zeros(self.n_x), np.ones(self.n_types + n_binary)]).astype(int),
            names={"x": slice(0, self.n_x), "add": slice(self.n_x, self.n_x + self.n_types)})
        lp.check()
        return lp


def _add_gates(builder: _Rows, space: AllocationSpace, reps: AllocationArrays, gates: list[tuple[int, float]],
               gate_of: dict[tuple[int, float], int], count: np.ndarray, cap: np.ndarray, open_today: np.ndarray,
               could_open: np.ndarray) -> None:
    """w[k, s] = [count_k + add_k >= s] both ways; X only on open types; a type for every job."""
    n_gates = len(gates)
    if n_gates:
        types = np.array([k for k, _ in gates])
        need = np.array([s - count[k] for k, s in gates])
        rows = np.arange(n_gates)
        add_part = sp.csr_matrix((np.ones(n_gates), (rows, types)), shape=(n_gates, len(count)))
        # add_k - (s - count_k) w >= 0: an open gate has its workers
        builder.add(add=add_part, binary=sp.csr_matrix((-need, (rows, rows)), shape=(n_gates, n_gates)),
                    low=np.zeros(n_gates), high=np.full(n_gates, INF))
        # add_k - MAX_k w <= s - count_k - 1: enough workers open the gate
        builder.add(add=add_part, binary=sp.csr_matrix((-cap[types], (rows, rows)), shape=(n_gates, n_gates)),
                    low=np.full(n_gates, -INF), high=need - 1)
        column_upper = space.column_upper()
        gated = [(c, gate_of[(int(space.single_type[c]), float(reps.scale_factor[space.single_job[c]]))])
                 for c in range(space.n_singles) if could_open[space.single_job[c], space.single_type[c]]]
        if gated:
            columns, which = np.array([c for c, _ in gated]), np.array([g for _, g in gated])
            rows = np.arange(len(gated))
            builder.add(x=sp.csr_matrix((np.ones(len(gated)), (rows, columns)), shape=(len(gated), space.n_cols)),
                        binary=sp.csr_matrix((-column_upper[columns], (rows, which)), shape=(len(gated), n_gates)),
                        low=np.full(len(gated), -INF), high=np.zeros(len(gated)))
    # A job no type serves today needs one opened (else the sized instance leaves it nowhere).
    stranded = np.flatnonzero(~open_today.any(axis=1))
    if len(stranded) and not n_gates:  # no type can ever serve them: no purchase is valid
        builder.add(x=sp.csr_matrix((len(stranded), space.n_cols)), low=np.ones(len(stranded)),
                    high=np.full(len(stranded), INF))
    elif len(stranded):
        entries = [(i, gate_of[(int(k), float(reps.scale_factor[m]))])
                   for i, m in enumerate(stranded) for k in np.flatnonzero(could_open[m])]
        rows_of = np.array([i for i, _ in entries], dtype=int)
        cols_of = np.array([g for _, g in entries], dtype=int)
        builder.add(binary=sp.csr_matrix((np.ones(len(entries)), (rows_of, cols_of)), shape=(len(stranded), n_gates)),
                    low=np.ones(len(stranded)), high=np.full(len(stranded), INF))


def _fixed_floors(reps: AllocationArrays, targets: Sequence[TargetLike], open_today: np.ndarray) -> np.ndarray:
    """Per class, the throughput floor that no purchase moves: SLOs, the makespan, and the fastest
    type open today (for ``min_throughput_vs_fastest``)."""
    floor = np.zeros(len(reps.job_ids))
    for target in targets:
        if target.metric == "min_throughput_vs_fastest":
            floor = np.maximum(floor, target.value * np.where(open_today, reps.throughput, 0.0).max(axis=1))
        elif target.metric == "slo_missed_jobs":
            with np.errstate(invalid="ignore"):
                need = np.where(np.isfinite(reps.slo_seconds), reps.steps_left / reps.slo_seconds, 0.0)
            floor = np.maximum(floor, need)
        elif target.metric == "makespan_s":
            floor = np.maximum(floor, reps.steps_left / target.value)
    return floor


def _add_fastest_rows(builder: _Rows, space: AllocationSpace, reps: AllocationArrays, value: float,
                      open_today: np.ndarray, could_open: np.ndarray, gate_of: dict[tuple[int, float], int],
                      floor: np.ndarray) -> None:
    """throughput(m, X) >= v * T[m, k] * w[k, s_m] for each type k the job may open that is faster
    than its fastest open type today."""
    rows, gates, coefficients = [], [], []
    for m, k in zip(*np.nonzero(could_open), strict=True):
        wanted = value * reps.throughput[m, k]
        if wanted > floor[m] * (1 + 1e-12):
            rows.append(m)
            gates.append(gate_of[(int(k), float(reps.scale_factor[m]))])
            coefficients.append(-wanted)
    if rows:
        n = len(rows)
        builder.add(x=space.measured[np.array(rows)],
                    binary=sp.csr_matrix((coefficients, (np.arange(n), gates)), shape=(n, builder.n_gates)),
                    low=np.zeros(n), high=np.full(n, INF))


def _add_isolated_rows(builder: _Rows, space: AllocationSpace, reps: AllocationArrays, value: float, n_jobs: int,
                       count: np.ndarray, cap: np.ndarray, open_today: np.ndarray, could_open: np.ndarray,
                       floor: np.ndarray, role: Role) -> bool:
    """Rows for ``throughput(m, X) >= v * isolated(m)`` (module docstring); True where exact."""
    per_worker = reps.throughput / (n_jobs * reps.scale_factor[:, None])  # A's coefficient per worker
    today_fraction = (open_today * (count + cap)[None, :]).sum(axis=1) / (n_jobs * reps.scale_factor)
    moves = (could_open.any(axis=1)) | (open_today & (cap[None, :] > 0)).any(axis=1)
    never_normalized = ~could_open.any(axis=1) & (today_fraction <= 1 + 1e-12)
    fixed = ~moves
    # Fixed types and no purchase that touches them: the reference is today's, exactly.
    if fixed.any():
        fractions = open_today * count[None, :] / (n_jobs * reps.scale_factor[:, None])
        isolated = (reps.throughput * fractions).sum(axis=1) / np.maximum(fractions.sum(axis=1), 1.0)
        floor[fixed] = np.maximum(floor[fixed], value * isolated[fixed])
    linear = moves & never_normalized
    exact = not (moves & ~never_normalized).any()
    # A over today's open types, linear in add: exact where it cannot normalise and no type opens.
    a_today = np.where(open_today, per_worker, 0.0)
    if role == "restriction":
        # Every type the job could use, as if open: at least the true reference.
        chosen = np.flatnonzero(moves)
        coefficient = np.where(open_today | could_open, per_worker, 0.0)[chosen]
        _add_linear_isolated(builder, space, chosen, value, coefficient, count)
        return exact
    if linear.any():
        chosen = np.flatnonzero(linear)
        _add_linear_isolated(builder, space, chosen, value, a_today[chosen], count)
    loose = np.flatnonzero(moves & ~never_normalized)
    if len(loose):
        # throughput >= v * min(A_today, slowest usable type): a disjunction, one binary per class.
        usable = open_today | could_open
        slowest = np.where(usable, reps.throughput, np.inf).min(axis=1)[loose]
        slowest = np.where(np.isfinite(slowest), slowest, 0.0)
        a_most = (a_today[loose] * (count + cap)[None, :]).sum(axis=1)
        first = builder.new_binaries(len(loose))
        rows = np.arange(len(loose))
        n_binary = builder.n_gates + builder.n_extra
        pick = sp.csr_matrix((np.ones(len(loose)), (rows, first + rows)), shape=(len(loose), n_binary))
        # thr - v A_today(add) + v A_most u >= v A_today(count)... written with add as a column:
        builder.add(x=space.measured[loose], add=sp.csr_matrix(-value * a_today[loose]),
                    binary=pick.multiply(value * a_most[:, None]).tocsr(),
                    low=value * (a_today[loose] @ count), high=np.full(len(loose), INF))
        builder.add(x=space.measured[loose], binary=pick.multiply(-value * slowest[:, None]).tocsr(),
                    low=np.zeros(len(loose)), high=np.full(len(loose), INF))
    return exact


def _add_linear_isolated(builder: _Rows, space: AllocationSpace, classes: np.ndarray, value: float,
                         coefficient: np.ndarray, count: np.ndarray) -> None:
    """throughput(m, X) - v * sum_k c[m, k] add_k >= v * sum_k c[m, k] count_k."""
    if len(classes):
        builder.add(x=space.measured[classes], add=sp.csr_matrix(-value * coefficient),
                    low=value * (coefficient @ count), high=np.full(len(classes), INF))


def _subset(arrays: AllocationArrays, jobs: np.ndarray) -> AllocationArrays:
    return AllocationArrays(
        job_ids=[arrays.job_ids[m] for m in jobs], worker_types=arrays.worker_types,
        throughput=arrays.throughput[jobs], scale_factor=arrays.scale_factor[jobs], weight=arrays.weight[jobs],
        num_workers=arrays.num_workers, cost_per_hour=arrays.cost_per_hour, steps_left=arrays.steps_left[jobs],
        time_elapsed=arrays.time_elapsed[jobs], slo_seconds=arrays.slo_seconds[jobs])


# --- the service frontier ------------------------------------------------------------------

# Service metrics whose best value over every allocation of a cluster is one LP, and how.
FRONTIER_METRICS = ("min_time_share", "min_throughput_vs_fastest", "min_speedup_over_isolated", "total_throughput",
                    "makespan_s")


def build_frontier_lp(arrays: AllocationArrays, metric: str) -> tuple[LinearProgram, Any]:
    """The LP whose optimum is the best ``metric`` any allocation of this cluster reaches (no
    policy: the sizing model run forward), and a function from its optimum to the metric.

    Columns: X over job classes, then a level ``t`` (for ``total_throughput`` none): maximise
    ``t`` subject to every job's time share >= t (``min_time_share``), throughput >= t times its
    fastest type's / its isolated share's (the other two minima), throughput >= t times its steps
    (``makespan_s`` = 1 / t), or the sum of throughputs.
    """
    if metric not in FRONTIER_METRICS:
        raise ValueError(f"no frontier for {metric} (known: {', '.join(FRONTIER_METRICS)})")
    representative, _, multiplicity = aggregate_jobs(arrays.throughput, arrays.scale_factor, arrays.steps_left,
                                                     arrays.slo_seconds)
    reps = _subset(arrays, representative)
    space = build_space(reps, multiplicity=multiplicity)
    n_x, n_classes = space.n_cols, len(representative)
    level = metric != "total_throughput"
    n = n_x + int(level)
    blocks = [sp.hstack([space.time, sp.csr_matrix((n_classes, int(level)))]),
              sp.hstack([space.workers, sp.csr_matrix((len(arrays.num_workers), int(level)))])]
    lower = [np.zeros(n_classes), np.full(len(arrays.num_workers), -INF)]
    upper = [np.ones(n_classes), np.asarray(arrays.num_workers, dtype=float)]
    if level:
        reference = {"min_time_share": None, "min_throughput_vs_fastest": reps.fastest_throughput,
                     "min_speedup_over_isolated": arrays.isolated_throughput[representative],
                     "makespan_s": reps.steps_left}[metric]
        rows = space.time if reference is None else space.measured
        scale = np.ones(n_classes) if reference is None else np.asarray(reference, dtype=float)
        blocks.append(sp.hstack([rows, sp.csr_matrix(-scale.reshape(-1, 1))]))
        lower.append(np.zeros(n_classes))
        upper.append(np.full(n_classes, INF))
        cost = np.concatenate([np.zeros(n_x), [1.0]])
    else:
        cost = np.asarray(space.measured.T @ space.multiplicity).ravel()
    lp = LinearProgram(cost=cost, matrix=sp.vstack(blocks, format="csr"), row_lower=np.concatenate(lower),
                       row_upper=np.concatenate(upper), col_lower=np.zeros(n),
                       col_upper=np.concatenate([space.column_upper(), [INF] * int(level)]), sense="max")
    lp.check()

    def value(objective: float) -> float:
        if metric == "makespan_s":
            return 1.0 / objective if objective > 0 else float("inf")
        return objective

    return lp, value
