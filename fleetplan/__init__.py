"""fleetplan: optimization models, solvers and simulators for planning GPU fleets for ML training.

The public API::

    import fleetplan
    instance = fleetplan.load_instance("examples/allocation-gavel-4.1.json")
    result = fleetplan.solve(instance, solver="max-min-fairness", time_limit=60)
    evaluation = fleetplan.evaluate(instance, result.plan)
    fleetplan.save(result.plan, "plan.json")
    fleetplan.list_solvers("allocation")     # what can solve it
    fleetplan.generate("allocation", {"jobs": 256}, seed=1)
    fleetplan.from_frames("allocation", jobs="jobs.csv", cluster="gpus.csv")   # your own tables
    fleetplan.to_frame(instance, result.plan)                                  # a plan as a DataFrame
    fleetplan.describe_metric("min_time_share")                                # meaning, unit, direction
    rounds = fleetplan.session(instance)                                       # kept between rounds
    rounds.add_jobs(columns); rounds.solve()                                   # docs/embedding.md
    fleetplan.size(instance, ["min_time_share>=0.5"], ["v100=3", "k80=1"])     # the cheapest purchase
    fleetplan.whatif(instance, ["worker_types.v100.count=1:4:1"]).rows         # a sweep, as a table
    fleetplan.marginal_values(instance)                                        # one GPU more / fewer
    fleetplan.compare({"a": (instance, plan_a), "b": (instance, plan_b)})     # plans side by side

Every function taking an instance or a plan takes the model or a plain dict in the file's
layout; every input error is an :class:`InstanceError`, a ``ValueError``.

Names load on first use (PEP 562), so ``import fleetplan`` costs almost nothing and a command's
``--help`` answers at once; solver back-ends load only when a solver that needs them runs.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

__version__ = "0.2.0"

# public name -> module that defines it
_EXPORTS = {
    "KINDS": "fleetplan.instances", "Evaluation": "fleetplan.instances",
    "InstanceError": "fleetplan.instances", "evaluate": "fleetplan.instances",
    "generate": "fleetplan.instances", "load_instance": "fleetplan.instances",
    "load_plan": "fleetplan.instances", "save": "fleetplan.instances", "schema": "fleetplan.instances",
    "OutputError": "fleetplan.errors",
    "SolveResult": "fleetplan.solvers", "SolverSpec": "fleetplan.solvers",
    "get_solver": "fleetplan.solvers", "list_solvers": "fleetplan.solvers", "solve": "fleetplan.solvers",
    "from_frames": "fleetplan.instances.frames", "to_frame": "fleetplan.instances.frames",
    "to_frames": "fleetplan.instances.frames", "plan_from_frame": "fleetplan.instances.frames",
    "describe_metric": "fleetplan.instances.glossary",
    "session": "fleetplan.embed",
    "size": "fleetplan.planning.sizing", "SizingResult": "fleetplan.planning.sizing",
    "whatif": "fleetplan.planning.whatif", "compare": "fleetplan.planning.compare",
    "marginal_values": "fleetplan.planning.marginal", "service_frontier": "fleetplan.planning.frontier",
    "plan_horizon": "fleetplan.planning.horizon", "HorizonResult": "fleetplan.planning.horizon",
    "horizon_whatif": "fleetplan.planning.horizon.sweep",
}
_SUBMODULES = {"solvers", "instances", "models", "sim", "benchmarks", "embed", "planning"}

__all__ = sorted([*_EXPORTS, "solvers", "__version__"])

if TYPE_CHECKING:
    from fleetplan.embed import session  # noqa: F401
    from fleetplan.errors import OutputError  # noqa: F401
    from fleetplan.instances import (  # noqa: F401
        KINDS,
        Evaluation,
        InstanceError,
        evaluate,
        generate,
        load_instance,
        load_plan,
        save,
        schema,
    )
    from fleetplan.instances.frames import from_frames, plan_from_frame, to_frame, to_frames  # noqa: F401
    from fleetplan.instances.glossary import describe_metric  # noqa: F401
    from fleetplan.planning.compare import compare  # noqa: F401
    from fleetplan.planning.frontier import service_frontier  # noqa: F401
    from fleetplan.planning.horizon import HorizonResult, plan_horizon  # noqa: F401
    from fleetplan.planning.horizon.sweep import horizon_whatif  # noqa: F401
    from fleetplan.planning.marginal import marginal_values  # noqa: F401
    from fleetplan.planning.sizing import SizingResult, size  # noqa: F401
    from fleetplan.planning.whatif import whatif  # noqa: F401
    from fleetplan.solvers import SolveResult, SolverSpec, get_solver, list_solvers, solve  # noqa: F401


def __getattr__(name: str) -> Any:
    if name in _EXPORTS:
        value = getattr(importlib.import_module(_EXPORTS[name]), name)
    elif name in _SUBMODULES:
        value = importlib.import_module(f"fleetplan.{name}")
    else:
        raise AttributeError(f"module 'fleetplan' has no attribute '{name}'")
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted({*globals(), *__all__})
