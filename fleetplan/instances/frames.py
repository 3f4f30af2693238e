"""Tables in and out, for any kind: a plan as a table and back, an instance as its tables.

Each kind has a module turning tables into its instance and its plans into tables
(:mod:`fleetplan.instances.allocation.frames`, :mod:`fleetplan.instances.placement.frames`),
built on the shared readers and writers of :mod:`fleetplan.instances.tables` (re-exported here:
:func:`read_table`, :func:`write_table`, :func:`table_format`). The column layouts are
documented in ``docs/data-in-out.md``.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from fleetplan.instances.base import InstanceError
from fleetplan.instances.tables import (  # noqa: F401  (re-exported: the public entry points)
    PARQUET_SUFFIXES,
    Table,
    read_table,
    table_format,
    write_table,
)

if TYPE_CHECKING:
    import pandas as pd

    from fleetplan.instances.base import InstanceBase, PlanBase


# --- kind dispatch ------------------------------------------------------------------------

def _kind_module(kind: str) -> Any:
    if kind == "allocation":
        from fleetplan.instances.allocation import frames as allocation_frames

        return allocation_frames
    if kind == "placement":
        from fleetplan.instances.placement import frames as placement_frames

        return placement_frames
    raise InstanceError("kind", f"no table readers or writers for the '{kind}' kind "
                                "(known: allocation, placement)")


def plan_to_frame(instance: InstanceBase, plan: PlanBase) -> pd.DataFrame:
    """A plan as one table (the layout of its kind; see ``docs/data-in-out.md``)."""
    if plan.kind != instance.kind:
        raise InstanceError("kind", f"a plan of kind '{plan.kind}' cannot go with an instance of kind '{instance.kind}'")
    return _kind_module(instance.kind).plan_to_frame(instance, plan)


def plan_from_frame(instance: InstanceBase, source: Any) -> PlanBase:
    """Read a plan table (a DataFrame or a CSV/Parquet file) back into the kind's plan."""
    return _kind_module(instance.kind).plan_from_frame(instance, source)


def instance_to_frames(instance: InstanceBase) -> dict[str, Any]:
    """An instance as its tables (and, for placement, a ``settings`` dict)."""
    return _kind_module(instance.kind).to_frames(instance)
