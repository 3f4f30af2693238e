"""The next RAS instance after an event, from files (MAST §2 "Dynamic clusters": RAS re-runs
when datacenters come online, fault domains go into maintenance, reservations grow or hardware
is refreshed).

``fleetplan generate reservation --from FILE --event EVENT [--NAME VALUE ...] [--plan PLAN.json]
[--seed K] -o NEXT.json`` calls :func:`next_instance_from_files`: it loads FILE, makes PLAN (if
given) today's assignment — RAS re-solves from its last plan — or else keeps FILE's today's
assignment, and applies EVENT through :func:`~fleetplan.instances.reservation.generate.apply_event`
with ``--seed`` as the event's seed. Every mistake is an :class:`~fleetplan.instances.InstanceError`
(one line, exit 2, nothing written): an unknown event, a missing ``--from`` file, a parameter the
event does not take or a value out of its range, a plan of another region.
"""

from __future__ import annotations

from typing import Any

from fleetplan.instances.base import InstanceError, validate_model
from fleetplan.instances.reservation import ReservationInstance, ReservationPlan

# The CLI's short names and the generator's names of each event.
EVENT_ALIASES = {
    "new-datacenter": "new-datacenter",
    "maintenance": "fault-domain-maintenance", "fault-domain-maintenance": "fault-domain-maintenance",
    "growth": "reservation-growth", "reservation-growth": "reservation-growth",
    "hardware-refresh": "hardware-refresh",
}
# The generator parameters each event reads (see ReservationParams); the others are refused,
# since they would be silently ignored.
EVENT_PARAMETERS = {
    "new-datacenter": ("new_datacenter_size", "servers_per_rack"),
    "fault-domain-maintenance": (),
    "reservation-growth": ("growth_share", "growth_factor"),
    "hardware-refresh": (),
}
# The command's own flags, which arrive among the parameters (they are not generator parameters).
FLAGS = ("from", "event", "plan")


def event_name(value: Any) -> str:
    """The generator's name of an event given on the command line (short or long form)."""
    if not isinstance(value, str) or value not in EVENT_ALIASES:
        known = "new-datacenter, maintenance, growth, hardware-refresh"
        raise InstanceError("--event", f"unknown event {value!r} (known: {known})")
    return EVENT_ALIASES[value]


def next_instance_from_files(params: dict[str, Any], seed: int = 0) -> ReservationInstance:
    """The instance after ``params['event']`` applied to the instance in ``params['from']``
    (today's assignment: the plan in ``params['plan']`` if given); the other entries of ``params``
    are the event's parameters (``--growth-factor 1.5``)."""
    from fleetplan.instances import load_instance, load_plan
    from fleetplan.instances.reservation.generate import (
        ReservationParams,
        apply_event,
        with_assignment,
    )

    if "event" not in params:
        raise InstanceError("--event", "required with --from (one of new-datacenter, maintenance, "
                                       "growth, hardware-refresh)")
    event = event_name(params["event"])
    if "from" not in params or params["from"] is True:
        raise InstanceError("--from", f"the instance file the '{params['event']}' event applies to is required")
    source = str(params["from"])
    rest = {name: value for name, value in params.items() if name not in FLAGS}
    allowed = EVENT_PARAMETERS[event]
    for name in rest:
        if name not in allowed:
            takes = ", ".join("--" + a.replace("_", "-") for a in allowed) or "no parameters"
            raise InstanceError(f"--{name.replace('_', '-')}", f"not a parameter of the '{params['event']}' "
                                f"event (it takes {takes})")
    event_params = validate_model(ReservationParams, rest, "event parameters")
    instance = load_instance(source)
    if not isinstance(instance, ReservationInstance):
        raise InstanceError("kind", f"is '{instance.kind}'; events apply to reservation instances", source)
    if "plan" in params:
        plan_source = str(params["plan"])
        plan = load_plan(plan_source)
        if not isinstance(plan, ReservationPlan):
            raise InstanceError("kind", f"is '{plan.kind}'; a reservation plan is needed", plan_source)
        try:
            plan.assignment_array(instance)  # the plan belongs to this region
        except InstanceError as error:
            raise InstanceError(error.path, f"{error.reason} (not a plan of {source})", plan_source) from None
        instance = with_assignment(instance, plan)
    return apply_event(instance, event, seed=seed, params=event_params)  # type: ignore[arg-type]
