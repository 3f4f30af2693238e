"""Sizing, the inverse problem: the cheapest capacity to add so that service targets hold.

``size(instance, targets, buy, budget=None, ...)`` adds purchase variables to the kind's own
model (GPUs per type for ``allocation``, GPU-hours per region and type for ``placement``,
servers per type and datacenter for ``reservation``, machines per cluster for ``binpack``),
minimizes their cost subject to the targets, and solves it exactly with HiGHS (a MIP whose LP
relaxation gives the bound). The sized instance — the same kind, capacity added — is then
checked by the forward solver and the judge: sizing never judges itself.

Each kind's model lives in its own module (:mod:`.allocation`, :mod:`.placement`,
:mod:`.reservation`, :mod:`.binpack`); this module holds what they share: the purchase
options, the result object and the dispatcher.

>>> import fleetplan
>>> from fleetplan.planning import size
>>> instance = fleetplan.load_instance("examples/allocation-gavel-4.1.json")
>>> result = size(instance, ["min_time_share>=1"], ["v100=3", "k80=1"])
>>> result.status, result.additions, result.cost
('optimal', {'v100': 0, 'k80': 1}, 1.0)
"""

from __future__ import annotations

import math
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from fleetplan.errors import InstanceError
from fleetplan.instances.base import finite_or_none
from fleetplan.planning.targets import Target, check_target_value, parse_targets
from fleetplan.solvers.base import STATUSES
from fleetplan.solvers.base import relative_gap as solver_gap

# The solvers' statuses (docs/architecture.md, "Contracts"), read for sizing: optimal (the cost
# is proven minimal and the sized instance meets every target under the policy named), feasible
# (a purchase that meets them, not proven cheapest: `bound` and `gap` say how far it may be),
# time_limit (a limit ended the search: the best purchase so far, or none), infeasible (proven:
# no purchase within the limits meets them; the message names what limits it), error.
SIZING_STATUSES = STATUSES


@dataclass(frozen=True)
class Purchase:
    """``--buy NAME[=PRICE[:MAX]]``: what may be bought, at what unit price, how many at most
    (None: the kind's default price and a limit no target can need more than)."""

    name: str
    price: float | None = None
    maximum: float | None = None

    def __str__(self) -> str:
        price = "" if self.price is None else f"={self.price:g}"
        cap = "" if self.maximum is None else f"{'' if price else '='}:{self.maximum:g}"
        return f"{self.name}{price}{cap}"


def check_purchase(item: Purchase, kind: str) -> Purchase:
    """Refuse a purchase whose PRICE or MAX no instance could hold (above 1e30, or 2^63 units) or
    whose MAX is a fraction of a unit the kind buys whole (it would be floored without a word)."""
    from fleetplan.instances.base import MAX_INTEGER, MAX_MAGNITUDE
    from fleetplan.planning.kinds import planning_kind

    for what, value in (("the price", item.price), ("the maximum", item.maximum)):
        if value is not None and value > MAX_MAGNITUDE:
            raise InstanceError("--buy", f"'{item}': {what} {value:.3g} is out of range (at most {MAX_MAGNITUDE:g})")
    units = planning_kind(kind).whole_units
    if item.maximum is not None and units is not None:
        if not float(item.maximum).is_integer():
            raise InstanceError("--buy", f"'{item}': MAX counts whole {units} for {kind}; give a whole number, "
                                         f"not {item.maximum:g}")
        if item.maximum > MAX_INTEGER:
            raise InstanceError("--buy", f"'{item}': MAX {item.maximum:.3g} is out of range (at most 2^63 - 1 {units})")
    return item


def parse_purchase(text: str | Purchase) -> Purchase:
    """``"h100=3.5:64"`` -> Purchase("h100", 3.5, 64); ``"h100"``, ``"h100=3.5"``, ``"h100=:64"``."""
    if isinstance(text, Purchase):
        return text
    if not isinstance(text, str) or not text.strip() or len(text) > 300:
        raise InstanceError("--buy", f"{str(text)[:60]!r}: expected NAME[=PRICE[:MAX]]")
    name, _, rest = text.partition("=")
    price_text, _, max_text = rest.partition(":")
    name = name.strip()
    if not name:
        raise InstanceError("--buy", f"'{text}': the name is missing (NAME[=PRICE[:MAX]])")

    def number(raw: str, what: str, allow_zero: bool) -> float | None:
        if not raw.strip():
            return None
        try:
            value = float(raw)
        except ValueError:
            raise InstanceError("--buy", f"'{text}': {what} '{raw[:30]}' is not a number") from None
        if not math.isfinite(value) or value < 0 or (value == 0 and not allow_zero):
            raise InstanceError("--buy", f"'{text}': {what} must be a {'non-negative' if allow_zero else 'positive'} "
                                         "finite number")
        return value

    return Purchase(name, number(price_text, "the price", allow_zero=False),
                    number(max_text, "the maximum", allow_zero=True))


@dataclass
class SizingResult:
    """What :func:`size` returns (the same fields for every kind).

    ``additions`` maps each purchasable item to the units bought (GPUs, GPU-hours, servers,
    machines); ``cost`` is their price; ``bound`` a proven lower bound on the cheapest purchase
    that meets the targets, ``gap`` the relative distance. ``sized_instance`` is the instance
    with the capacity added; ``plan`` its plan under ``policy`` (the forward solver's, judged),
    and ``metrics`` that plan's evaluation metrics; ``checks`` says per target whether it holds.
    """

    status: str
    kind: str
    targets: list[Target]
    additions: dict[str, float] = field(default_factory=dict)
    cost: float | None = None
    bound: float | None = None
    gap: float | None = None
    sized_instance: Any = None
    plan: Any = None
    policy: str | None = None
    metrics: dict[str, float] = field(default_factory=dict)
    checks: dict[str, bool] = field(default_factory=dict)
    message: str = ""
    log: list[str] = field(default_factory=list)
    wall_s: float = 0.0
    stats: dict[str, float] = field(default_factory=dict)
    # The unit of each purchasable's count: "GPU", "GPU-hours/day", "bytes", "server", "machine".
    units: dict[str, str] = field(default_factory=dict)
    # Under a named policy: the policy-free answer ({"additions", "cost", "bound"}), which
    # bounds the policy's from below and is printed beside it where they differ.
    policy_free: dict[str, Any] | None = None

    @property
    def success(self) -> bool:
        return self.status in ("optimal", "feasible", "time_limit") and self.sized_instance is not None

    def to_dict(self) -> dict[str, Any]:
        return {
            "kind": self.kind, "status": self.status, "targets": [str(t) for t in self.targets],
            "additions": self.additions, "cost": finite_or_none(self.cost), "bound": finite_or_none(self.bound),
            "gap": finite_or_none(self.gap), "policy": self.policy, "checks": self.checks,
            "metrics": {name: finite_or_none(value) for name, value in self.metrics.items()},
            "message": self.message, "log": self.log, "wall_s": self.wall_s, "stats": self.stats,
            "policy_free": self.policy_free, "units": self.units,
        }


def relative_gap(cost: float | None, bound: float | None) -> float | None:
    """The solvers' gap (:func:`fleetplan.solvers.base.relative_gap`) of a purchase's cost and its
    bound, the bound first clamped to [0, cost]: no purchase costs less than nothing, and a
    bound above the cost found is the cost (a MIP's bound is within its tolerance of it)."""
    if cost is None or bound is None:
        return None
    return solver_gap(cost, min(max(bound, 0.0), cost))


def size(instance: Any, targets: Sequence[str | Target], buy: Sequence[str | Purchase], *,
         budget: float | None = None, policy: str | None = None, time_limit: float | None = None,
         threads: int = 1, seed: int = 0, started: float | None = None, **options: Any) -> SizingResult:
    """The cheapest capacity to add to ``instance`` so that every target holds.

    Parameters
    ----------
    instance : an instance (or a dict in the instance file's layout)
    targets : ``"METRIC>=VALUE"`` strings (or :class:`Target`); :data:`~fleetplan.planning.targets.TARGETABLE`
        lists each kind's metrics
    buy : ``"NAME[=PRICE[:MAX]]"`` strings (or :class:`Purchase`): what may be bought. Names are
        GPU types (allocation), ``REGION/GPU_TYPE`` (placement), ``DATACENTER/SERVER_TYPE`` or
        ``SERVER_TYPE`` (reservation), cluster ids (binpack), GPU models (gpushare: a node like the
        cluster's most common one of that model)
    budget : the most the purchase may cost (None: no limit)
    policy : the forward solver that must meet the targets on the sized instance (the kind's
        default solver when None)
    time_limit : seconds for the whole sizing, checks included
    started : a ``time.perf_counter()`` reading from which ``time_limit`` counts (default: now),
        as in :func:`fleetplan.solve`: a caller that spent part of its limit before calling
        (the command line: the process's start-up, loading the file) passes when it began
    **options : the kind's sizing options (see each kind's module)

    Returns a :class:`SizingResult`.

    >>> import fleetplan
    >>> result = size(fleetplan.load_instance("examples/allocation-gavel-4.1.json"), ["min_time_share>=1"],
    ...               ["v100=3", "k80=1"])
    >>> result.status, result.additions, result.cost, result.gap
    ('optimal', {'v100': 0, 'k80': 1}, 1.0, 0.0)
    """
    from fleetplan.instances import instance_from_data
    from fleetplan.planning.kinds import planning_kind
    from fleetplan.solvers.base import check_time_limit

    began = time.perf_counter()
    if started is None:
        started = began
    elif isinstance(started, bool) or not isinstance(started, (int, float)) or not math.isfinite(started):
        raise InstanceError("started", f"{started!r}: must be a time.perf_counter() reading")
    if isinstance(instance, dict):
        instance = instance_from_data(instance, "instance")
    parsed = [t if isinstance(t, Target) else None for t in targets]
    if not parsed or any(t is None for t in parsed):  # no target at all is refused there, not sized to nothing
        parsed = parse_targets([str(t) for t in targets], instance.kind)
    else:  # Target objects from Python: the value rules parse_target applies to text
        for target in parsed:
            check_target_value(target)
    purchases = [check_purchase(parse_purchase(item), instance.kind) for item in buy]
    if not purchases:
        raise InstanceError("--buy", "name at least one thing that may be bought (--buy NAME[=PRICE[:MAX]])")
    names = [p.name for p in purchases]
    if len(set(names)) != len(names):
        raise InstanceError("--buy", f"'{next(n for n in names if names.count(n) > 1)}' is named twice")
    if budget is not None and (isinstance(budget, bool) or not isinstance(budget, (int, float))
                               or not math.isfinite(budget) or budget < 0):
        raise InstanceError("--budget", f"{budget!r}: must be a non-negative finite number")
    time_limit = check_time_limit(time_limit)
    if policy is not None:  # named by its flag, before any model is built
        _check_policy(policy, instance.kind)
    sizer = planning_kind(instance.kind).sizer()
    result: SizingResult = sizer(instance, parsed, purchases, budget=budget, policy=policy, time_limit=time_limit,
                                 threads=threads, seed=seed, started=started, **options)
    if result.bound is not None:  # no purchase costs less than nothing; the bound of a found purchase is at most its cost
        result.bound = max(result.bound, 0.0) if result.cost is None else min(max(result.bound, 0.0), result.cost)
        result.gap = relative_gap(result.cost, result.bound)
    result.wall_s = time.perf_counter() - began
    return result


def _check_policy(policy: Any, kind: str) -> None:
    """``policy`` names a forward solver of ``kind``; otherwise one error naming ``--policy``."""
    from fleetplan.solvers.base import get_solver

    if not isinstance(policy, str) or not policy:
        raise InstanceError("--policy", f"{policy!r}: name a solver of {kind} (`fleetplan solvers {kind}`)")
    try:
        get_solver(kind, policy)
    except InstanceError as error:
        raise InstanceError("--policy", error.reason) from None


def time_left(limit: float | None, started: float) -> float | None:
    """Seconds left of ``limit`` since ``started`` (at least 0.01), or None without a limit."""
    return seconds_until(None if limit is None else started + limit)


def seconds_until(deadline: float | None) -> float | None:
    """Seconds to ``deadline`` (a ``time.perf_counter()`` reading; at least 0.01, so a solver
    given it still returns what it has), or None without one."""
    return None if deadline is None else max(deadline - time.perf_counter(), 0.01)


def check_max_points(max_points: object) -> int:
    """The ``max_points`` sizing option: how many purchases the lattice search may check."""
    if isinstance(max_points, bool) or not isinstance(max_points, int) or not 0 <= max_points <= 10**7:
        raise InstanceError("max_points", f"{max_points!r}: must be an integer from 0 to 10,000,000")
    return max_points


def check_targets(targets: Sequence[Target], metrics: dict[str, float]) -> dict[str, bool]:
    """Per target (as text), whether ``metrics`` meet it."""
    return {str(target): target.holds(metrics) for target in targets}


def describe_misses(targets: Sequence[Target], metrics: dict[str, float]) -> str:
    """``"min_time_share 47.00% < 50.00%"`` for each missed target, joined: each number in its
    metric's one format (a fraction as a percentage, as the tables print it)."""
    from fleetplan.instances.glossary import format_value

    missed = []
    for target in targets:
        if not target.holds(metrics):
            measured = metrics.get(target.metric)
            shown = "missing" if measured is None else format_value(target.metric, measured)
            missed.append(f"{target.metric} {shown} {'<' if target.op == '>=' else '>'} "
                          f"{format_value(target.metric, target.value)}")
    return ", ".join(missed)


__all__ = ["Purchase", "SizingResult", "SIZING_STATUSES", "check_max_points", "check_purchase", "check_targets", "describe_misses",
           "parse_purchase", "relative_gap", "seconds_until", "size", "time_left"]
