"""Running a sizing model: one HiGHS MIP (or LP) with its proven bound, shared by every kind's sizer."""

from __future__ import annotations

import math
from typing import Any

from fleetplan.models.linear import INF, LinearProgram


def solve_sizing_mip(lp: LinearProgram, time_limit: float | None, threads: int, seed: int, gap: float,
                     start: Any = None) -> dict[str, Any]:
    """Solve a sizing model with HiGHS to the relative ``gap``: the status, the solution's values
    (None when there is none), its objective, a proven lower bound (HiGHS's dual bound, or the
    objective less the gap once optimal) and the log lines, named as the sizing's. ``start``: a
    feasible solution (every column) for HiGHS to begin from."""
    from fleetplan.solvers import highs as runner

    highs = runner.new_highs(time_limit, threads, seed)
    runner.pass_lp(highs, lp, "simplex")
    highs.setOptionValue("mip_rel_gap", float(gap))
    if start is not None:
        import highspy

        solution = highspy.HighsSolution()
        solution.col_value = [float(v) for v in start]
        solution.value_valid = True
        highs.setSolution(solution)
    outcome = runner.run(highs)
    info = highs.getInfo()
    bound = float(info.mip_dual_bound) if math.isfinite(info.mip_dual_bound) else None
    if outcome.status == "optimal" and outcome.objective is not None:
        bound = max(bound if bound is not None else -INF, outcome.objective * (1 - gap) - 1e-9)
        bound = min(bound, outcome.objective)
    return {"status": outcome.status, "values": outcome.values, "objective": outcome.objective,
            "bound": bound, "log": [line.replace("HiGHS:", "sizing MIP (HiGHS):") for line in outcome.log],
            "solve_s": outcome.solve_s}
