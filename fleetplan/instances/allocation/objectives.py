"""How the judge scores an allocation under each policy of Gavel's Table 1 (Gavel §4.1, §4.2).

Each function maps a :class:`PlanView` — the effective throughput every job gets from the plan
and the plan's cost rate — to the objective's terms. They are written from the paper's
formulas, independently of every solver (solvers reformulate them as LPs; the judge does not).

Units: throughput in iterations per second, ``steps_left`` in iterations, times in seconds,
``cost_per_hour`` per worker-hour.

>>> import numpy as np
>>> view = PlanView(throughput=np.array([2.0, 1.0]), equal_share=np.array([1.0, 1.0]),
...                 isolated=np.array([1.0, 1.0]), fastest=np.array([4.0, 2.0]),
...                 scale_factor=np.ones(2), weight=np.ones(2), steps_left=np.array([10.0, 10.0]),
...                 time_elapsed=np.zeros(2), slo_seconds=np.full(2, np.inf),
...                 arrival_rank=np.arange(2), cost_per_hour=1.0)
>>> min_makespan(view)
{'makespan_s': 10.0}
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Literal

import numpy as np


@dataclass(frozen=True)
class PlanView:
    """What the policies' objectives read: per-job effective throughput of the plan, the
    reference throughputs of §4 (equal share, isolated 1/n share, fastest type) and job data."""

    throughput: np.ndarray
    equal_share: np.ndarray
    isolated: np.ndarray
    fastest: np.ndarray
    scale_factor: np.ndarray
    weight: np.ndarray
    steps_left: np.ndarray  # NaN where the instance gives none
    time_elapsed: np.ndarray
    slo_seconds: np.ndarray  # inf where the job has no SLO
    arrival_rank: np.ndarray  # 0 for the first job to arrive
    cost_per_hour: float
    # t^isolated_m of finish-time fairness; None: time_elapsed (the t_m shortcut)
    isolated_time_elapsed: np.ndarray | None = None


def _durations(view: PlanView) -> np.ndarray:
    with np.errstate(divide="ignore", over="ignore"):  # a tiny throughput is an infinite duration
        return np.where(view.throughput > 0, view.steps_left / np.maximum(view.throughput, 1e-300), np.inf)


def max_min_fairness(view: PlanView) -> dict[str, float]:
    """min_m throughput(m, X) / throughput(m, X_equal) * scale_factor_m / w_m (Gavel §4.1)."""
    scores = view.throughput / view.equal_share * view.scale_factor / view.weight
    return {"min_weighted_normalized_throughput": float(scores.min())}


def max_min_fairness_unweighted(view: PlanView) -> dict[str, float]:
    """LAS without weights (Table 1 "LAS"): every job's weight taken as 1."""
    scores = view.throughput / view.equal_share * view.scale_factor
    return {"min_normalized_throughput": float(scores.min())}


def finish_time_fairness(view: PlanView) -> dict[str, float]:
    """max_m rho(m, X), Themis' finish-time fairness (Gavel §4.2)::

        rho(m, X) = (t_m + steps_m / throughput(m, X)) / (t^isolated_m + steps_m / throughput(m, X_isolated))

    X_isolated gives each of the n jobs 1/n of every worker it fits (the isolated allocation);
    t_m is the time the job has trained so far and t^isolated_m the time it would have taken
    under the isolated allocation (the job field ``isolated_time_elapsed``). Without that field
    t^isolated_m = t_m, which is exact only for a job that has always had its isolated share:
    a starved job (t^isolated < t) then looks less behind than it is."""
    isolated_time = view.time_elapsed if view.isolated_time_elapsed is None else view.isolated_time_elapsed
    isolated_finish = isolated_time + view.steps_left / view.isolated
    rho = (view.time_elapsed + _durations(view)) / isolated_finish
    return {"max_finish_time_fairness": float(rho.max())}


def fifo(view: PlanView) -> dict[str, float]:
    """sum_m throughput(m, X) / throughput(m, X_fastest) * (M - m), jobs numbered by arrival
    (Gavel §4.2): the earlier a job arrived, the more its progress on its fastest type counts."""
    priority = len(view.throughput) - view.arrival_rank
    return {"arrival_weighted_fastest_fraction": float((view.throughput / view.fastest * priority).sum())}


def shortest_job_first(view: PlanView) -> dict[str, float]:
    """min_m steps_m / throughput(m, X): the duration of the shortest job (Gavel §4.2)."""
    return {"shortest_duration_s": float(_durations(view).min())}


def min_makespan(view: PlanView) -> dict[str, float]:
    """max_m steps_m / throughput(m, X): when the last active job finishes (Gavel §4.2)."""
    return {"makespan_s": float(_durations(view).max())}


def max_throughput(view: PlanView) -> dict[str, float]:
    """sum_m throughput(m, X) (Gavel §3.1, §4.2)."""
    return {"total_throughput": float(view.throughput.sum())}


def min_cost(view: PlanView) -> dict[str, float]:
    """sum_m throughput(m, X) / cost rate of X (Gavel §4.2): iterations per second bought per
    dollar-per-hour. A pair sharing workers pays for them once."""
    total = float(view.throughput.sum())
    if view.cost_per_hour <= 0:
        return {"throughput_per_cost": 0.0 if total == 0 else float("inf")}
    return {"throughput_per_cost": total / view.cost_per_hour}


@dataclass(frozen=True)
class PolicyObjective:
    """How the judge scores a plan for one policy: the direction, the terms (summed into the
    objective) and which per-job fields the policy needs."""

    sense: Literal["min", "max"]
    terms: Callable[[PlanView], dict[str, float]]
    needs_steps: bool = False
    checks_slo: bool = False


POLICY_OBJECTIVES: dict[str, PolicyObjective] = {
    "max_min_fairness": PolicyObjective("max", max_min_fairness),
    "max_min_fairness_unweighted": PolicyObjective("max", max_min_fairness_unweighted),
    "finish_time_fairness": PolicyObjective("min", finish_time_fairness, needs_steps=True),
    "fifo": PolicyObjective("max", fifo),
    "shortest_job_first": PolicyObjective("min", shortest_job_first, needs_steps=True),
    "min_makespan": PolicyObjective("min", min_makespan, needs_steps=True),
    "max_throughput": PolicyObjective("max", max_throughput),
    "min_cost": PolicyObjective("max", min_cost),
    # Only jobs with an SLO need steps_left, and the instance schema requires it of them.
    "min_cost_slo": PolicyObjective("max", min_cost, checks_slo=True),
}
