"""The user's entry points for tables, whatever the kind: :func:`from_frames` (tables -> an
instance), :func:`to_frame` / :func:`plan_to_frame` (a plan -> one table) and back
(:func:`plan_from_frame`), :func:`to_frames` (an instance -> its tables). They call the
kind's own module, which its registration names (``ProblemKind.frames``:
:mod:`fleetplan.instances.allocation.frames`, :mod:`fleetplan.instances.placement.frames`,
:mod:`fleetplan.instances.reservation.frames`, :mod:`fleetplan.instances.binpack.frames`) and
which holds the column layouts (``docs/data-in-out.md``).

The machinery those modules share — reading a CSV/Parquet file or DataFrame cell by cell with
errors that name the row and column, writing atomically — is :mod:`fleetplan.instances.tables`
(re-exported here: :func:`read_table`, :func:`write_table`, :func:`table_format`).
"""

from __future__ import annotations

from pathlib import Path
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
    """The kind's table module (its registration's ``frames``)."""
    from fleetplan.instances import KINDS, get_kind

    spec = get_kind(kind)
    if spec.frames is None:
        known = ", ".join(name for name in sorted(KINDS) if KINDS[name].frames)
        raise InstanceError("kind", f"no table readers or writers for the '{kind}' kind (known: {known})")
    return spec.load("frames")


def load_folder(folder: str | Path) -> InstanceBase:
    """The instance whose tables are in ``folder`` (Parquet, else CSV; ``settings.yaml`` where the
    kind has settings), its kind told by the tables there (each kind's registration names its
    ``folder_tables``; the kind asking for the most tables is tried first); what
    :func:`fleetplan.load_instance` reads for a folder. Raises :class:`InstanceError`."""
    folder = Path(folder)

    def find(name: str) -> Path | None:
        for suffix in (".parquet", ".csv"):
            if (folder / f"{name}{suffix}").is_file():
                return folder / f"{name}{suffix}"
        return None

    from fleetplan.instances import KINDS

    readers = sorted((spec for spec in KINDS.values() if spec.folder_tables),
                     key=lambda spec: (-len(spec.folder_tables[0]), spec.name))  # type: ignore[index]
    for spec in readers:
        required, optional = spec.folder_tables  # type: ignore[misc]
        found = {name: find(name) for name in (*required, *optional)}
        if any(found[name] is None for name in required):
            continue
        tables = {name: str(path) for name, path in found.items() if path is not None}
        settings = next((folder / f"settings{suffix}" for suffix in (".yaml", ".yml", ".json")
                         if (folder / f"settings{suffix}").is_file()), None)
        reader = spec.load("folder_reader") if spec.folder_reader else _kind_module(spec.name).from_folder
        return reader(folder, tables, None if settings is None else str(settings))
    wanted = "; ".join(f"{spec.name}: {', '.join(spec.folder_tables[0])}" for spec in readers)  # type: ignore[index]
    raise InstanceError("", f"a folder is read as an instance's tables, as `fleetplan export` writes them "
                            f"(.parquet or .csv), and these were not all found ({wanted})", str(folder))


def from_frames(kind: str, /, **tables: Any) -> InstanceBase:
    """An instance of ``kind`` from its tables, each a DataFrame or a ``.csv``/``.parquet`` path
    (``fleetplan.from_frames("allocation", jobs=..., cluster=...)``; the tables each kind reads
    are in ``docs/data-in-out.md``). Raises :class:`InstanceError` naming the table, row and
    column of a bad cell.

    >>> instance = from_frames("allocation", jobs="examples/tables/allocation/jobs.csv",
    ...                        cluster="examples/tables/allocation/gpus.csv")
    >>> instance.kind
    'allocation'
    """
    import inspect

    reader = _kind_module(kind).from_frames
    known = [name for name in inspect.signature(reader).parameters]
    unknown = sorted(set(tables) - set(known))
    if unknown:
        raise InstanceError(unknown[0], f"not a table or setting of the {kind} kind (known: {', '.join(known)})")
    missing = [name for name, parameter in inspect.signature(reader).parameters.items()
               if parameter.default is inspect.Parameter.empty and name not in tables]
    if missing:
        raise InstanceError(missing[0], f"the {kind} kind needs this table")
    return reader(**tables)


def to_frame(instance: InstanceBase | dict[str, Any], plan: PlanBase | dict[str, Any]) -> pd.DataFrame:
    """A plan as one table (the top-level name of :func:`plan_to_frame`).

    >>> import fleetplan
    >>> instance = fleetplan.load_instance("examples/allocation-gavel-4.1.json")
    >>> frame = to_frame(instance, fleetplan.solve(instance).plan)
    >>> len(frame)
    3
    """
    return plan_to_frame(instance, plan)


def to_frames(instance: InstanceBase | dict[str, Any]) -> dict[str, Any]:
    """An instance as its tables (the top-level name of :func:`instance_to_frames`).

    >>> import fleetplan
    >>> frames = to_frames(fleetplan.load_instance("examples/allocation-gavel-4.1.json"))
    >>> sorted(frames)[:2]
    ['cluster', 'jobs']
    """
    return instance_to_frames(instance)


def plan_to_frame(instance: InstanceBase | dict[str, Any], plan: PlanBase | dict[str, Any]) -> pd.DataFrame:
    """A plan as one table (the layout of its kind; see ``docs/data-in-out.md``)."""
    from fleetplan.instances import as_instance, as_plan

    instance, plan = as_instance(instance), as_plan(plan)
    if plan.kind != instance.kind:
        raise InstanceError("kind", f"a plan of kind '{plan.kind}' cannot go with an instance of kind '{instance.kind}'")
    return _kind_module(instance.kind).plan_to_frame(instance, plan)


def plan_from_frame(instance: InstanceBase | dict[str, Any], source: Any) -> PlanBase:
    """Read a plan table (a DataFrame or a CSV/Parquet file) back into the kind's plan.

    >>> import fleetplan
    >>> instance = fleetplan.load_instance("examples/allocation-gavel-4.1.json")
    >>> plan = fleetplan.solve(instance).plan
    >>> plan_from_frame(instance, to_frame(instance, plan)).kind
    'allocation'
    """
    from fleetplan.instances import as_instance

    instance = as_instance(instance)
    return _kind_module(instance.kind).plan_from_frame(instance, source)


def instance_to_frames(instance: InstanceBase | dict[str, Any]) -> dict[str, Any]:
    """An instance as its tables (and, for placement, a ``settings`` dict)."""
    from fleetplan.instances import as_instance

    instance = as_instance(instance)
    return _kind_module(instance.kind).to_frames(instance)
