"""The exact RMS placement model (see :mod:`fleetplan.models.binpack`) in OR-Tools CP-SAT.

CP-SAT takes integers only: GPUs and CPU cores are integers already; memory is scaled by the
power of ten :func:`~fleetplan.models.binpack.memory_scale` finds (demands rounded up, headroom
down when no such power exists, so the model never accepts an over-full machine); youth is
scaled by ``YOUTH_SCALE`` and rounded, so stage 2 may order two plans whose youth differs by
less than about 1e-9 per preempted job differently from the judge.

>>> import fleetplan
>>> from fleetplan.models.binpack import prepare
>>> instance = fleetplan.generate("binpack", {"clusters": 2, "machines": 8, "workloads": 1}, seed=0)
>>> model = binpack_cpsat(prepare(instance, [0]), batch=False)
>>> len(model.stages) >= 3
True
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from fleetplan.models.binpack import BinpackModelData, memory_scale
from fleetplan.models.build_clock import Clock, _Ticker

YOUTH_SCALE = 1e9


@dataclass
class CpsatBinpack:
    """The CP-SAT model, its variables and its lexicographic stages (name, linear expression,
    sense)."""

    model: Any
    z: list
    x: dict[tuple[int, int], Any]
    p: list
    stages: list[tuple[str, Any, str]] = field(default_factory=list)


def binpack_cpsat(data: BinpackModelData, *, batch: bool, deadline: Clock | None = None) -> CpsatBinpack:
    """Build the model; ``batch=False`` requires every workload placed (single-workload RMS).

    ``deadline`` is checked every few hundred variables and rows: at MAST size (20 clusters,
    66,500 machines, 200 workloads) the batch model has 7.3 million (job, machine) cells and the
    build alone ran for minutes; :class:`~fleetplan.models.build_clock.BuildTimeout` when it
    expires on the way."""
    from ortools.sat.python import cp_model

    ticker = _Ticker(deadline)

    model = cp_model.CpModel()
    W, J = len(data.workloads), len(data.job_index)
    z = [model.NewBoolVar(f"z{w}") for w in range(W)]
    if not batch:
        for var in z:
            model.Add(var == 1)
    x: dict[tuple[int, int], Any] = {}
    u: dict[tuple[int, int], Any] = {}
    racks_used = []
    for j in range(J):
        w = int(data.job_workload[j])
        y = {}
        for c in np.unique(data.cluster[data.fit[j] > 0]).tolist():
            y[c] = model.NewBoolVar(f"y{j}_{c}")
        model.Add(sum(y.values()) == z[w])
        rack_vars: dict[int, Any] = {}
        for m in np.flatnonzero(data.fit[j] > 0).tolist():
            ticker.tick()
            cap = int(data.fit[j, m])
            x[(j, m)] = model.NewIntVar(0, cap, f"x{j}_{m}")
            u[(j, m)] = model.NewBoolVar(f"u{j}_{m}")
            model.Add(x[(j, m)] <= cap * u[(j, m)])
            model.Add(x[(j, m)] >= u[(j, m)])
            model.AddImplication(u[(j, m)], y[int(data.cluster[m])])
            rack = int(data.rack[m])
            if rack not in rack_vars:
                rack_vars[rack] = model.NewBoolVar(f"v{j}_{rack}")
            model.AddImplication(u[(j, m)], rack_vars[rack])
        racks_used.extend(rack_vars.values())
        model.Add(sum(x[(j, m)] for m in np.flatnonzero(data.fit[j] > 0).tolist()) == int(data.tasks[j]) * z[w])
    p = [model.NewBoolVar(f"p{r}_{w}") for r, w in data.pairs.tolist()]
    by_running: dict[int, list] = {}
    for k, (r, w) in enumerate(data.pairs.tolist()):
        model.AddImplication(p[k], z[w])
        by_running.setdefault(r, []).append(p[k])
    for group in by_running.values():
        if len(group) > 1:
            model.Add(sum(group) <= 1)
    preempted = {r: sum(group) for r, group in by_running.items()}

    # Capacity per machine and resource, in integers.
    scales = np.array([1.0, 1.0, memory_scale(data)])
    held: dict[int, list[tuple[int, np.ndarray]]] = {}
    for r, m, amount in zip(data.hold_running.tolist(), data.hold_machine.tolist(), data.hold_amount, strict=True):
        if r in preempted:
            held.setdefault(m, []).append((r, amount))
    # The jobs that fit each machine, from the cells (a scan of every (job, machine) pair was
    # 20 million dictionary look-ups at MAST size).
    jobs_on: dict[int, list[int]] = {}
    for j, m in x:
        jobs_on.setdefault(m, []).append(j)
    for m in sorted(jobs_on):  # machine order, as before: the same model row by row
        jobs_here = jobs_on[m]
        for k in range(3):
            ticker.tick()
            load = [int(math.ceil(data.demand[j, k] * scales[k] - 1e-9)) * x[(j, m)] for j in jobs_here
                    if data.demand[j, k] > 0]
            if not load:
                continue
            freed = [int(math.floor(amount[k] * scales[k] + 1e-9)) * preempted[r] for r, amount in held.get(m, [])
                     if amount[k] > 0]
            model.Add(sum(load) - sum(freed) <= int(math.floor(data.headroom[m, k] * scales[k] + 1e-9)))

    stages: list[tuple[str, Any, str]] = []
    if batch:
        stages.append(("placed", sum(z), "max"))
    weights = data.level_weights
    if p and int(weights[0]) * len(preempted) < 2 ** 60:
        stages.append(("levels", sum(int(weights[data.running_level[r]]) * var for r, var in preempted.items()), "min"))
    elif p:  # too many preemptible jobs for one exact weighted sum: one stage per level
        for level in sorted(set(data.running_level[list(preempted)].tolist())):
            stages.append((f"level{level}", sum(var for r, var in preempted.items()
                                                if data.running_level[r] == level), "min"))
    if p:
        stages.append(("youth", sum(int(round(data.running_youth[r] * YOUTH_SCALE)) * var
                                    for r, var in preempted.items()), "min"))
    stages.append(("machines", sum(u.values()), "min"))
    stages.append(("racks", sum(racks_used), "min"))
    return CpsatBinpack(model=model, z=z, x=x, p=p, stages=stages)
