"""What binds, where no LP dual exists: estimates by re-solving with one unit more and one less.

LP policies report their capacity prices from the LP itself (``SolveResult.duals``, source
``lp``). For MIPs and heuristics (water filling, hierarchical policies, POP partitions) this
module re-solves the instance with one GPU of a type more and one fewer and reports the
objective's change per GPU in the better direction — labelled ``estimate``: a finite
difference of a whole unit, not a derivative.

>>> import fleetplan
>>> instance = fleetplan.load_instance("examples/allocation-gavel-4.1.json")
>>> result = fleetplan.solve(instance, "max-min-fairness")
>>> duals, source = estimate_duals(instance, "max-min-fairness")
>>> source, sorted(duals["workers"])
('estimate', ['k80', 'v100'])
"""

from __future__ import annotations

from typing import Any


def estimate_duals(instance: Any, solver: str | None = None, *, time_limit: float | None = None, seed: int = 0,
                   threads: int = 1, **options: Any) -> tuple[dict[str, dict[str, float]], str]:
    """Per GPU type of an allocation instance: (objective with one more GPU − objective with
    one fewer) / 2, signed so that positive means more capacity helps. A type with no GPU to
    take away is estimated from the one-more side alone."""
    import fleetplan
    from fleetplan.instances import instance_from_data

    if instance.kind != "allocation":
        raise NotImplementedError("re-solve estimates are offered for allocation instances")
    base = fleetplan.solve(instance, solver, time_limit=time_limit, seed=seed, threads=threads, **options)
    if not base.success or base.evaluation is None:
        return {}, "estimate"
    sign = -1.0 if base.evaluation.sense == "min" else 1.0
    data = instance.model_dump()
    prices: dict[str, float] = {}
    for index, worker in enumerate(instance.worker_types):
        values = []
        for step in (1, -1):
            if worker.count + step < 0:
                values.append(None)
                continue
            changed = {**data, "worker_types": [dict(entry) for entry in data["worker_types"]]}
            changed["worker_types"][index]["count"] = worker.count + step
            try:
                trial = fleetplan.solve(instance_from_data(changed), solver, time_limit=time_limit, seed=seed,
                                        threads=threads, **options)
            except fleetplan.InstanceError:  # one fewer leaves a job nowhere to run
                values.append(None)
                continue
            values.append(trial.objective if trial.success else None)
        up, down = values
        if up is not None and down is not None:
            prices[worker.name] = sign * (up - down) / 2
        elif up is not None:
            prices[worker.name] = sign * (up - base.objective)
    return {"workers": prices}, "estimate"
