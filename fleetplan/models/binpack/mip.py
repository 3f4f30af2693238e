"""The exact RMS placement model (see :mod:`fleetplan.models.binpack`) as a Pyomo MIP for HiGHS.

The same variables, rows and lexicographic stages as the CP-SAT model, in real numbers: memory
and youth need no scaling. Level weights ``base ** (6 - level)`` stay below 2 ** 53 for the
small regions the exact models are for (when they would not, one stage per level is used).

>>> import fleetplan
>>> from fleetplan.models.binpack import prepare
>>> instance = fleetplan.generate("binpack", {"clusters": 2, "machines": 8, "workloads": 1}, seed=0)
>>> mip = binpack_mip(prepare(instance, [0]), batch=False)
>>> [name for name, _, _ in mip.stages][-2:]
['machines', 'racks']
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np

from fleetplan.models.binpack import PYOMO_BUILD_S_PER_CELL, BinpackModelData
from fleetplan.models.build_clock import BuildTimeout, Clock, _Ticker


@dataclass
class MipBinpack:
    model: Any
    stages: list[tuple[str, Any, str]] = field(default_factory=list)


def binpack_mip(data: BinpackModelData, *, batch: bool, deadline: Clock | None = None,
                seconds_left: float | None = None) -> MipBinpack:
    """Build the Pyomo model; ``batch=False`` requires every workload placed.

    ``deadline`` is checked every few hundred rows (:class:`BuildTimeout` when it expires); a
    model whose cells would take longer than ``seconds_left`` to create (at
    :data:`~fleetplan.models.binpack.PYOMO_BUILD_S_PER_CELL`) is not started, since Pyomo
    creates each variable set in one call that cannot be interrupted."""
    import pyomo.environ as pyo

    ticker = _Ticker(deadline)
    cells = int((data.fit > 0).sum())
    if seconds_left is not None and cells * PYOMO_BUILD_S_PER_CELL > seconds_left:
        raise BuildTimeout(f"a model of {cells} cells cannot be built in {seconds_left:.2f} s")

    model = pyo.ConcreteModel()
    W, J = len(data.workloads), len(data.job_index)
    model.z = pyo.Var(range(W), domain=pyo.Binary)
    if not batch:
        for w in range(W):
            model.z[w].fix(1)
    slots = [(j, m) for j in range(J) for m in np.flatnonzero(data.fit[j] > 0).tolist()]
    model.x = pyo.Var(slots, domain=pyo.NonNegativeIntegers, bounds=lambda _m, j, m: (0, int(data.fit[j, m])))
    model.u = pyo.Var(slots, domain=pyo.Binary)
    clusters = sorted({(j, int(data.cluster[m])) for j, m in slots})
    model.y = pyo.Var(clusters, domain=pyo.Binary)
    racks = sorted({(j, int(data.rack[m])) for j, m in slots})
    model.v = pyo.Var(racks, domain=pyo.Binary)
    model.p = pyo.Var(range(len(data.pairs)), domain=pyo.Binary)
    rows = model.rows = pyo.ConstraintList()
    for j, m in slots:
        ticker.tick()
        rows.add(model.x[j, m] <= int(data.fit[j, m]) * model.u[j, m])
        rows.add(model.x[j, m] >= model.u[j, m])
        rows.add(model.u[j, m] <= model.y[j, int(data.cluster[m])])
        rows.add(model.u[j, m] <= model.v[j, int(data.rack[m])])
    clusters_of: dict[int, list[int]] = {}
    for j, c in clusters:
        clusters_of.setdefault(j, []).append(c)
    machines_of: dict[int, list[int]] = {}
    for j, m in slots:
        machines_of.setdefault(j, []).append(m)
    for j in range(J):
        ticker.tick()
        w = int(data.job_workload[j])
        # Per job, its own cells (a scan of every cell per job was quadratic).
        rows.add(sum(model.y[j, c] for c in clusters_of.get(j, [])) == model.z[w])
        rows.add(sum(model.x[j, m] for m in machines_of.get(j, [])) == int(data.tasks[j]) * model.z[w])
    by_running: dict[int, list[int]] = {}
    for k, (r, w) in enumerate(data.pairs.tolist()):
        rows.add(model.p[k] <= model.z[w])
        by_running.setdefault(r, []).append(k)
    for group in by_running.values():
        if len(group) > 1:
            rows.add(sum(model.p[k] for k in group) <= 1)
    preempted = {r: sum(model.p[k] for k in group) for r, group in by_running.items()}
    held: dict[int, list[tuple[int, np.ndarray]]] = {}
    for r, m, amount in zip(data.hold_running.tolist(), data.hold_machine.tolist(), data.hold_amount, strict=True):
        if r in preempted:
            held.setdefault(m, []).append((r, amount))
    jobs_on: dict[int, list[int]] = {}
    for j, m in slots:
        jobs_on.setdefault(m, []).append(j)
    for m, jobs in jobs_on.items():
        for k in range(3):
            ticker.tick()
            load = [float(data.demand[j, k]) * model.x[j, m] for j in jobs if data.demand[j, k] > 0]
            if load:
                freed = [float(amount[k]) * preempted[r] for r, amount in held.get(m, []) if amount[k] > 0]
                rows.add(sum(load) - sum(freed) <= float(data.headroom[m, k]))

    stages: list[tuple[str, Any, str]] = []
    if batch:
        stages.append(("placed", sum(model.z[w] for w in range(W)), "max"))
    weights = data.level_weights
    if preempted and int(weights[0]) * len(preempted) < 2 ** 50:
        stages.append(("levels", sum(float(weights[data.running_level[r]]) * e for r, e in preempted.items()), "min"))
    elif preempted:
        for level in sorted(set(data.running_level[list(preempted)].tolist())):
            stages.append((f"level{level}", sum(e for r, e in preempted.items() if data.running_level[r] == level),
                           "min"))
    if preempted:
        stages.append(("youth", sum(float(data.running_youth[r]) * e for r, e in preempted.items()), "min"))
    stages.append(("machines", sum(model.u[s] for s in slots), "min"))
    stages.append(("racks", sum(model.v[k] for k in racks), "min"))
    return MipBinpack(model=model, stages=stages)


def read_mip(mip: MipBinpack, data: BinpackModelData) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(z (W,), x (J, M), p (P,)) from the model's loaded values."""
    model = mip.model
    z = np.array([model.z[w].value or 0.0 for w in range(len(data.workloads))])
    x = np.zeros(data.fit.shape)
    for (j, m), var in model.x.items():
        x[j, m] = var.value or 0.0
    p = np.array([model.p[k].value or 0.0 for k in range(len(data.pairs))])
    return z, x, p
