"""Every period solved by the policy the planner runs, and judged: the schedule guarantees that
*an* allocation meets the targets; this says whether the policy's own does."""

from __future__ import annotations

from typing import Any

from fleetplan.errors import InstanceError

# From this many jobs in a period the policy's solves of the periods run in forked processes.
POLICY_PARALLEL_JOBS = 1000


def checked_policy(kind: Any, kind_name: str, policy: str | None) -> str | None:
    """The policy to check each period under (None: none), its name checked before solving."""
    if policy is None or not hasattr(kind, "policy_outcome"):
        if policy not in (None, "default"):
            raise InstanceError("policy", f"a {kind_name} plan has no policy to check (no allocation policy runs it)")
        return None
    from fleetplan.solvers import get_solver

    if policy == "default":
        return get_solver(kind_name, None).name
    if not isinstance(policy, str):
        raise InstanceError("policy", f"expected a solver name, got {type(policy).__name__}")
    try:
        return get_solver(kind_name, policy).name
    except InstanceError as error:
        raise InstanceError("policy", error.reason) from None


def check_under_policy(result: Any, kind: Any, policy: str, seed: int, threads: int) -> str:
    """Solve every period by ``policy``, judge it, keep its checks in the period rows, and the
    message's note: where the policy's own allocation misses a target the schedule met."""
    from fleetplan.runs.shared import free_workers, run_shared

    def outcome_of(row: dict[str, Any]) -> dict[str, Any]:
        judged = result.plans[(row["scenario"], row["period"])]
        return kind.policy_outcome(row["period"] - 1, judged["instance"], policy, seed=seed, threads=threads)

    # The periods' solves are independent: on large fleets they are shared over the free cores
    # (forked processes hold the period instances already); a small fleet's solve is faster
    # than a fork.
    first = result.plans[(result.periods[0]["scenario"], result.periods[0]["period"])]["instance"]
    workers = free_workers(len(result.periods)) if len(first.jobs) >= POLICY_PARALLEL_JOBS else 1
    misses = []
    for row, outcome in zip(result.periods, run_shared(outcome_of, result.periods, workers), strict=True):
        row.update(policy=policy, policy_metrics=outcome["metrics"], policy_checks=outcome["checks"])
        missed = [name for name, ok in outcome["checks"].items() if not ok]
        if missed or not outcome["metrics"]:
            misses.append((row, missed))
    if not misses:
        return f"; {policy}'s own allocation meets them too in every {result.period_name}"
    row, missed = misses[0]
    where = f"{result.period_name} {row['period']}" + (f" ({row['scenario']})" if len(result.scenarios) > 1 else "")
    shown = ", ".join(f"{name} ({_measured_text(row['policy_metrics'], name)})" for name in missed) or "no plan"
    more = f" and {len(misses) - 1} other {result.period_name}(s)" if len(misses) > 1 else ""
    return (f"; but under {policy}, the policy that runs, {where}{more} miss: {shown} — the schedule meets the "
            f"targets with the model's allocation, not the policy's (size --policy answers one period exactly)")


def _measured_text(metrics: dict[str, float], target: str) -> str:
    metric = target.split(">=")[0].split("<=")[0].strip()
    value = metrics.get(metric)
    return "-" if value is None else f"{metric} {value:.4g}"
