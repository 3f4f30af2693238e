"""fleetplan: optimization models, solvers and simulators for planning GPU fleets for ML training.

The public API::

    import fleetplan
    instance = fleetplan.load_instance("examples/allocation-gavel-example.json")
    result = fleetplan.solve(instance, solver="max-min-fairness", time_limit=60)
    evaluation = fleetplan.evaluate(instance, result.plan)
    fleetplan.save(result.plan, "plan.json")
    fleetplan.solvers("allocation")          # what can solve it
    fleetplan.generate("allocation", {"jobs": 256}, seed=1)
"""

from fleetplan import solvers
from fleetplan.instances import (
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
from fleetplan.solvers import SolveResult, SolverSpec, get_solver, solve

__version__ = "0.1.0"

__all__ = [
    "KINDS", "Evaluation", "InstanceError", "SolveResult", "SolverSpec", "evaluate", "generate",
    "get_solver", "load_instance", "load_plan", "save", "schema", "solve", "solvers", "__version__",
]
