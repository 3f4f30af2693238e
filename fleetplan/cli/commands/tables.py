"""The ``import``, ``export`` and ``plot`` sub-commands (wired into :mod:`fleetplan.cli` by
:func:`add_arguments`): a planner's own tables in, plans out as tables, plans as pictures.

::

    fleetplan import allocation --jobs jobs.csv --cluster gpus.csv [--entities F] [--colocations F]
                                [--name NAME] -o cluster.json
    fleetplan import placement --tables t.csv --jobs j.csv --regions r.csv [--settings s.yaml]
                               [--name NAME] -o tables.json
    fleetplan import reservation --server-types F --fault-domains F --racks F --servers F
                                 --reservations F [--settings s.yaml] [--name NAME] -o region.json
    fleetplan import binpack --machines F --workloads F [--running F --holdings F] [--settings s.yaml]
                             [--name NAME] -o region.json
    fleetplan import gpushare --nodes nodes.csv --tasks tasks.csv [--column FIELD=COLUMN] [--source TEXT]
                              [--name NAME] -o cluster.json
    fleetplan import plan plan.csv --instance cluster.json [--policy P] -o plan.json
    fleetplan export plan.json --instance cluster.json [--format csv|parquet] -o plan.csv
    fleetplan export cluster.json [--format csv|parquet] -o DIR      (an instance's own tables)
    fleetplan plot INSTANCE PLAN -o FILE.png

Tables are CSV or Parquet (by suffix, or ``--format``); their column layouts are in
``docs/data-in-out.md``. A bad table raises :class:`InstanceError` naming the file, row and
column (one line, exit code 2). pandas, pyarrow and matplotlib load only when a command runs.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

import fleetplan
from fleetplan.cli.common import EXIT_OK, judge, save_last
from fleetplan.cli.settling import settle
from fleetplan.errors import InstanceError

# fleetplan.instances and the frames module load when a command runs, not for `--help`.

PLOT_SUFFIXES = (".png", ".svg", ".pdf")


def add_arguments(subparsers: Any) -> None:
    """Add ``import``, ``export`` and ``plot`` to an ``argparse`` sub-parser collection."""
    importer = subparsers.add_parser(
        "import", help="build an instance (or a plan) from CSV/Parquet tables",
        description="Build a fleetplan instance from your own tables (CSV or Parquet, by suffix), "
                    "or read a plan table back into a plan file. Column layouts: docs/data-in-out.md.")
    kinds = importer.add_subparsers(dest="import_kind", required=True, metavar="KIND")

    allocation = kinds.add_parser(
        "allocation", help="jobs and GPU types -> an allocation instance (Gavel)",
        description="An allocation instance from a jobs table (id, throughput_<type>, ...) and a "
                    "cluster table (name, count, cost_per_hour).")
    allocation.add_argument("--jobs", required=True, metavar="FILE",
                            help="jobs table: id, throughput_<type> (iterations/s), scale_factor, weight, ...")
    allocation.add_argument("--cluster", required=True, metavar="FILE",
                            help="GPU types table: name, count, cost_per_hour")
    allocation.add_argument("--entities", default=None, metavar="FILE", help="entities table: id, weight, policy")
    allocation.add_argument("--colocations", default=None, metavar="FILE",
                            help="space-sharing table: job_type_a, job_type_b, scale_factor, "
                                 "throughput_<type>_a, throughput_<type>_b")
    _common_import(allocation)
    allocation.set_defaults(handler=handle_import_allocation)

    placement = kinds.add_parser(
        "placement", help="tables, jobs and regions -> a placement instance (Tetris)",
        description="A placement instance from a tables table (id, size_bytes, home), a jobs table "
                    "(id, kind, tables, ...) and a regions table (id, storage_capacity_bytes, "
                    "gpu_supply_<type>, cpu_capacity_<application>, dr_partner).")
    placement.add_argument("--tables", required=True, metavar="FILE", help="data tables: id, size_bytes, home")
    placement.add_argument("--jobs", required=True, metavar="FILE",
                           help="jobs: id, kind, tables (ids separated by ';'), gpu_type, gpu_hours, "
                                "cpu_hours, priority, application, recurring, ...")
    placement.add_argument("--regions", required=True, metavar="FILE",
                           help="regions: id, storage_capacity_bytes, gpu_supply_<type>, "
                                "cpu_capacity_<application>, dr_partner")
    placement.add_argument("--settings", default=None, metavar="FILE",
                           help="YAML or JSON of the scalar fields (weights, home_training_threshold, "
                                "daily_move_quota_bytes, dr_policy, ...); default: the schema's defaults")
    _common_import(placement)
    placement.set_defaults(handler=handle_import_placement)

    reservation = kinds.add_parser(
        "reservation", help="server types, fault domains, racks, servers, reservations -> a reservation instance (RAS)",
        description="A reservation instance from its tables: server types (id, category, rru), fault domains "
                    "(id, datacenter), racks (id, fault_domain), servers (type, rack, current, maintenance, id) "
                    "and reservations (id, capacity_rru, accepts, workload, guarantee, storage_ratio, rru_<type>).")
    for flag, text in (("--server-types", "server types: id, category (gpu, cpu, storage), rru"),
                       ("--fault-domains", "fault domains: id, datacenter"), ("--racks", "racks: id, fault_domain"),
                       ("--servers", "servers: type, rack (a rack id), current (empty: free pool), maintenance, id"),
                       ("--reservations", "reservations: id, capacity_rru, accepts (types separated by ';'), "
                                          "workload, guarantee, storage_ratio, rru_<type>")):
        reservation.add_argument(flag, required=True, metavar="FILE", help=text)
    reservation.add_argument("--settings", default=None, metavar="FILE",
                             help="YAML or JSON of name, weights, disruption_budget, datacenters")
    _common_import(reservation)
    reservation.set_defaults(handler=handle_import_reservation)

    binpack = kinds.add_parser(
        "binpack", help="machines, pending workloads, running jobs -> a binpack instance (RMS)",
        description="A binpack instance from its tables: machines (id, cluster, rack, hardware, gpus, cpus, "
                    "memory_gb), pending workloads one row per job (workload, tenant, priority, job, tasks, "
                    "hardware, gpus_per_task, cpus_per_task, memory_gb_per_task) and optionally running jobs "
                    "(id, workload, tenant, priority, start_hours) and their holdings (job, machine, gpus, cpus, "
                    "memory_gb).")
    binpack.add_argument("--machines", required=True, metavar="FILE",
                         help="machines: id, cluster, rack, hardware, gpus, cpus, memory_gb")
    binpack.add_argument("--workloads", required=True, metavar="FILE",
                         help="pending jobs in GMS order: workload, tenant, priority, job, tasks, hardware, "
                              "gpus_per_task, cpus_per_task, memory_gb_per_task")
    binpack.add_argument("--running", default=None, metavar="FILE",
                         help="running jobs: id, workload, tenant, priority, start_hours")
    binpack.add_argument("--holdings", default=None, metavar="FILE",
                         help="what running jobs hold: job, machine, gpus, cpus, memory_gb")
    binpack.add_argument("--settings", default=None, metavar="FILE",
                         help="YAML or JSON of name, now_hours, clusters, hardware_types")
    _common_import(binpack)
    binpack.set_defaults(handler=handle_import_binpack)

    gpushare = kinds.add_parser(
        "gpushare", help="nodes and tasks -> a gpushare instance (GPU sharing, the FGD paper)",
        description="A gpushare instance from a node table (sn, cpu_milli, memory_mib, gpu, model) and a "
                    "task table in arrival order (name, cpu_milli, memory_mib, num_gpu, gpu_milli, gpu_spec), "
                    "as Alibaba's GPU trace v2023 lays them out.")
    gpushare.add_argument("--nodes", required=True, metavar="FILE", help="nodes: sn, cpu_milli, memory_mib, gpu, model")
    gpushare.add_argument("--tasks", required=True, metavar="FILE",
                          help="tasks: name, cpu_milli, memory_mib, num_gpu, gpu_milli, gpu_spec (optional)")
    gpushare.add_argument("--column", action="append", default=[], metavar="FIELD=COLUMN",
                          help="read FIELD from another column name (repeatable), e.g. cpu_milli=cpu")
    gpushare.add_argument("--source", default="", help="attribution: where the tables come from")
    _common_import(gpushare)
    gpushare.set_defaults(handler=handle_import_gpushare)

    plan = kinds.add_parser(
        "plan", help="a plan table (from `fleetplan export`) -> a plan file",
        description="Read a plan table written by `fleetplan export` (or by hand) back into a plan file.")
    plan.add_argument("table", metavar="TABLE", help="the plan table (.csv or .parquet)")
    plan.add_argument("--instance", required=True, metavar="FILE", help="the instance the plan is for")
    plan.add_argument("--policy", default=None,
                      help="allocation: the policy to judge the plan by (default: the table's policy column)")
    plan.add_argument("-o", "--output", required=True, metavar="FILE", help="plan file to write (JSON)")
    plan.add_argument("--json", action="store_true", help="machine-readable output on stdout")
    plan.set_defaults(handler=handle_import_plan)

    export = subparsers.add_parser(
        "export", help="write a plan (or an instance) as CSV/Parquet tables",
        description="Write a plan as one table (with --instance), or an instance as its tables "
                    "(into the folder -o). Column layouts: docs/data-in-out.md.")
    export.add_argument("file", metavar="FILE", help="a plan file (with --instance) or an instance file")
    export.add_argument("--instance", default=None, metavar="FILE", help="the instance the plan is for")
    export.add_argument("--format", choices=("csv", "parquet"), default=None,
                        help="table format (default: from the -o suffix, else csv)")
    export.add_argument("-o", "--output", required=True, metavar="PATH",
                        help="plan: the table file to write; instance: the folder to write its tables into")
    export.add_argument("--breakdown", default=None, metavar="TABLE",
                        help="with --instance: write the judge's per-item table instead of the plan "
                             "(allocation: jobs, worker_types; placement: regions, region_gpu_types, jobs; "
                             "reservation: reservations; binpack: workloads)")
    export.add_argument("--json", action="store_true", help="machine-readable output on stdout")
    export.set_defaults(handler=handle_export)

    plot = subparsers.add_parser(
        "plot", help="draw a plan: allocation heatmap, placement demand/supply and storage per region, "
                     "reservation guarantees and buffer, binpack GPUs per cluster and workloads",
        description="Draw a plan: for allocation a heatmap of X (job x GPU type) beside each job's "
                    "effective throughput; for placement each region's GPU demand and supply and "
                    "its storage, today and under the plan.")
    plot.add_argument("instance", metavar="INSTANCE", help="instance file")
    plot.add_argument("plan", metavar="PLAN", help="plan file (a `fleetplan solve -o` output)")
    plot.add_argument("-o", "--output", required=True, metavar="FILE",
                      help=f"image to write ({', '.join(PLOT_SUFFIXES)})")
    plot.add_argument("--json", action="store_true", help="machine-readable output on stdout")
    plot.set_defaults(handler=handle_plot)


def _common_import(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--name", default=None, help="instance name (default: the output file's stem)")
    parser.add_argument("-o", "--output", required=True, metavar="FILE", help="instance file to write (JSON)")
    parser.add_argument("--json", action="store_true", help="machine-readable output on stdout")


# --- helpers ------------------------------------------------------------------------------

def _check_output(path: str, *, directory: bool = False, inputs: tuple[str | None, ...] = ()) -> Path:
    """Fail before any work when the output could not be written safely, or would overwrite an
    input (:mod:`fleetplan.instances.outputs` has the rules)."""
    from fleetplan.cli.common import check_outputs

    if directory:
        check_outputs(inputs, folders=[("-o", path)])
    else:
        check_outputs(inputs, files=[("-o", path)])
    return Path(path)


def _report(args: argparse.Namespace, data: dict[str, Any], line: str) -> None:
    if getattr(args, "json", False):
        sys.stdout.write(json.dumps(data, indent=1) + "\n")
    else:
        sys.stdout.write(line + "\n")


def _name(args: argparse.Namespace) -> str:
    return args.name if args.name is not None else Path(args.output).stem


# --- handlers -----------------------------------------------------------------------------

def handle_import_allocation(args: argparse.Namespace) -> int:
    """``fleetplan import allocation``: jobs and GPU tables -> an instance file."""
    from fleetplan.instances.allocation.frames import from_frames

    _check_output(args.output, inputs=(args.jobs, args.cluster, args.entities, args.colocations))
    instance = from_frames(jobs=args.jobs, cluster=args.cluster, entities=args.entities,
                           colocations=args.colocations, name=_name(args))
    _as_loaded(instance, args.jobs)
    save_last(instance, args.output)
    _report(args, {"output": args.output, "kind": "allocation", "jobs": len(instance.jobs),
                   "worker_types": len(instance.worker_types)},
            f"wrote allocation instance '{instance.name}' ({len(instance.jobs)} jobs, "
            f"{len(instance.worker_types)} GPU types) to {args.output}")
    return 0


def handle_import_placement(args: argparse.Namespace) -> int:
    """``fleetplan import placement``: tables, jobs and regions -> an instance file."""
    from fleetplan.instances.placement.frames import from_frames

    _check_output(args.output, inputs=(args.tables, args.jobs, args.regions, args.settings))
    instance = from_frames(tables=args.tables, jobs=args.jobs, regions=args.regions,
                           settings=args.settings, name=args.name, default_name=Path(args.output).stem)
    _as_loaded(instance, args.tables)
    save_last(instance, args.output)
    arrays = instance.arrays()
    _report(args, {"output": args.output, "kind": "placement", "regions": arrays.num_regions,
                   "tables": arrays.num_tables, "jobs": arrays.num_jobs},
            f"wrote placement instance '{instance.name}' ({arrays.num_regions} regions, "
            f"{arrays.num_tables} tables, {arrays.num_jobs} jobs) to {args.output}; traffic weight w1 "
            f"{instance.weights.traffic:.4g} per byte ({_traffic_source(instance)})")
    return 0


def _traffic_source(instance: Any) -> str:
    """Where w1 came from: the settings, or the normalisation generated instances have."""
    from fleetplan.instances.placement.frames import traffic_weight

    arrays = instance.arrays()
    if instance.weights.traffic == traffic_weight(list(arrays.table_size), [arrays.job_tables.tolist()]):
        return "normalised as generated instances are: 1 / bytes the jobs read; settings weights.traffic overrides"
    return "from the settings"


def handle_import_reservation(args: argparse.Namespace) -> int:
    """``fleetplan import reservation``: the region's tables -> an instance file."""
    from fleetplan.instances.reservation.frames import from_frames

    files = (args.server_types, args.fault_domains, args.racks, args.servers, args.reservations)
    _check_output(args.output, inputs=(*files, args.settings))
    instance = from_frames(*files, settings=args.settings, name=args.name, default_name=Path(args.output).stem)
    _as_loaded(instance, args.servers)
    save_last(instance, args.output)
    arrays = instance.arrays()
    _report(args, {"output": args.output, "kind": "reservation", "servers": arrays.num_servers,
                   "reservations": arrays.num_reservations},
            f"wrote reservation instance '{instance.name}' ({arrays.num_servers:,} servers, "
            f"{arrays.num_reservations} reservations) to {args.output}")
    return 0


def handle_import_binpack(args: argparse.Namespace) -> int:
    """``fleetplan import binpack``: machines, workloads (and running jobs) -> an instance file."""
    from fleetplan.instances.binpack.frames import from_frames

    if args.holdings is not None and args.running is None:
        raise InstanceError("--holdings", "needs --running (the running jobs the holdings name)")
    _check_output(args.output, inputs=(args.machines, args.workloads, args.running, args.holdings, args.settings))
    instance = from_frames(args.machines, args.workloads, args.running, args.holdings, settings=args.settings,
                           name=args.name, default_name=Path(args.output).stem)
    _as_loaded(instance, args.machines)
    save_last(instance, args.output)
    arrays = instance.arrays()
    _report(args, {"output": args.output, "kind": "binpack", "machines": arrays.num_machines,
                   "running": arrays.num_running, "workloads": len(instance.workloads)},
            f"wrote binpack instance '{instance.name}' ({arrays.num_machines:,} machines, {arrays.num_running} "
            f"running jobs, {len(instance.workloads)} pending workloads) to {args.output}")
    return 0


def handle_import_gpushare(args: argparse.Namespace) -> int:
    """``fleetplan import gpushare``: node and task tables -> an instance file."""
    from fleetplan.instances.gpushare.frames import from_frames

    columns: dict[str, str] = {}
    for text in args.column:
        field, equals, column = text.partition("=")
        if not equals or not field or not column:
            raise InstanceError("--column", f"expected FIELD=COLUMN, got {text!r}")
        columns[field.strip()] = column.strip()
    _check_output(args.output, inputs=(args.nodes, args.tasks))
    instance = from_frames(nodes=args.nodes, tasks=args.tasks, columns=columns, name=_name(args), source=args.source)
    _as_loaded(instance, args.tasks)
    save_last(instance, args.output)
    arrays = instance.arrays()
    _report(args, {"output": args.output, "kind": "gpushare", "nodes": arrays.num_nodes, "gpus": int(arrays.node_gpus.sum()),
                   "tasks": arrays.num_tasks},
            f"wrote gpushare instance '{instance.name}' ({arrays.num_nodes} nodes, {int(arrays.node_gpus.sum())} GPUs, "
            f"{arrays.num_tasks} tasks) to {args.output}")
    return 0


def handle_import_plan(args: argparse.Namespace) -> int:
    """``fleetplan import plan``: a plan table -> a plan file."""
    from fleetplan.instances import get_kind
    from fleetplan.instances.frames import plan_from_frame

    _check_output(args.output, inputs=(args.table, args.instance))
    instance = fleetplan.load_instance(args.instance)
    kind = get_kind(instance.kind)
    if args.policy is not None and "policy" not in kind.plan_type.model_fields:
        raise InstanceError("--policy", f"only allocation plans have a policy (this is a {instance.kind} instance)")
    if args.policy is not None:
        plan = kind.load("frames").plan_from_frame(instance, args.table, policy=args.policy)
    else:
        plan = plan_from_frame(instance, args.table)
    _as_loaded(plan, args.table)
    # The judge reads the plan as `evaluate` will (an unknown --policy was written, then refused).
    judge(instance, plan, args.instance, args.table)
    save_last(plan, args.output)
    _report(args, {"output": args.output, "kind": plan.kind},
            f"wrote {plan.kind} plan to {args.output}")
    return 0


def _as_loaded(obj: Any, source: str) -> None:
    """Refuse what the file would be refused for when read back: an import writes only files
    that load (a `count` of 2^63 and a share of 1e308 were written, then refused by `solve`
    and `evaluate`)."""
    from fleetplan.instances import instance_from_data
    from fleetplan.instances.base import InstanceBase, parse_json_text, to_json_text, validate_model

    label = f"{source} (as written)"
    data = parse_json_text(to_json_text(obj), label)
    if isinstance(obj, InstanceBase):
        instance_from_data(data, label)
    else:
        validate_model(type(obj), data, label)


def _load_instance_or_say_plan(path: str) -> Any:
    """The instance at ``path``; a plan there gets a hint to pass ``--instance``."""
    try:
        return fleetplan.load_instance(path)
    except InstanceError as error:
        instance_error = error
    try:
        fleetplan.load_plan(path)
    except InstanceError:
        raise instance_error from None
    raise InstanceError("", "is a plan, not an instance: pass --instance INSTANCE.json to "
                            "export it as a table", path)


def handle_export(args: argparse.Namespace) -> int:
    """``fleetplan export``: a plan as one table, or an instance as its tables."""
    if args.instance is not None:
        return _export_plan(args)
    if args.breakdown is not None:
        raise InstanceError("--breakdown", "needs the plan and its instance (--instance FILE)")
    _check_output(args.output, directory=True, inputs=(args.file,))
    fmt = args.format or "csv"
    instance = _load_instance_or_say_plan(args.file)
    from fleetplan.instances.frames import instance_to_frames, write_table
    from fleetplan.instances.outputs import atomic_write_text, building_folder

    frames = instance_to_frames(instance)
    # Built aside and renamed into place: a full disk or a signal leaves no half-written folder.
    with building_folder(args.output, flag="-o") as building:
        names = []
        for name, frame in frames.items():
            if name == "settings":
                import yaml

                atomic_write_text(building / "settings.yaml", yaml.safe_dump(frame, sort_keys=False))
                names.append("settings.yaml")
            else:
                names.append(write_table(frame, building / f"{name}.{fmt}", fmt).name)
    settle(EXIT_OK)
    written = [str(Path(args.output) / name) for name in names]
    _report(args, {"output": written, "kind": instance.kind, "format": fmt},
            f"wrote {instance.kind} instance tables: {', '.join(written)}")
    return 0


def _export_plan(args: argparse.Namespace) -> int:
    from fleetplan.instances.frames import plan_to_frame, write_table

    target = _check_output(args.output, inputs=(args.file, args.instance))
    from fleetplan.instances.frames import PARQUET_SUFFIXES, table_format

    known_suffix = target.suffix.lower() in (".csv", *PARQUET_SUFFIXES)
    if not known_suffix and args.format is None:
        raise InstanceError("-o", f"{args.output}: a plan table is a .csv or .parquet file "
                                  "(or give --format for a path without that suffix, such as a device)")
    fmt = table_format(target, args.format)
    if args.format is not None and known_suffix and table_format(target) != args.format:
        raise InstanceError("-o", f"{args.output}: the suffix says {table_format(target)} but --format is {args.format}")
    instance = fleetplan.load_instance(args.instance)
    plan = fleetplan.load_plan(args.file)
    if args.breakdown is not None:
        # One of the judge's per-item tables, as the evaluation computed it.
        tables = judge(instance, plan, args.instance, args.file).breakdown
        if args.breakdown not in tables:
            raise InstanceError("--breakdown", f"unknown table '{args.breakdown}' (a {plan.kind} plan has: "
                                               f"{', '.join(tables) or 'none'})")
        import pandas as pd

        frame = pd.DataFrame(tables[args.breakdown])
        what = f"the {args.breakdown} table of the {plan.kind} plan"
    else:
        frame = plan_to_frame(instance, plan)
        what = f"{plan.kind} plan"
    write_table(frame, target, fmt)
    settle(EXIT_OK)
    _report(args, {"output": str(target), "kind": plan.kind, "format": fmt, "rows": len(frame)},
            f"wrote {what} as a {fmt} table ({len(frame)} rows) to {target}")
    return 0


def handle_plot(args: argparse.Namespace) -> int:
    """``fleetplan plot``: draw a plan against its instance."""
    target = _check_output(args.output, inputs=(args.instance, args.plan))
    suffix = target.suffix.lower()
    if suffix not in PLOT_SUFFIXES:
        raise InstanceError("-o", f"{args.output}: unknown image type '{suffix or '(none)'}' "
                                  f"(known: {', '.join(PLOT_SUFFIXES)})")
    instance = fleetplan.load_instance(args.instance)
    plan = fleetplan.load_plan(args.plan)
    from fleetplan.plotting import plot_plan

    figure = plot_plan(instance, plan)
    from fleetplan.instances.outputs import atomic_write

    atomic_write(target, lambda temporary: figure.savefig(temporary, dpi=120, format=suffix[1:]), suffix)
    settle(EXIT_OK)
    _report(args, {"output": str(target), "kind": plan.kind}, f"wrote {plan.kind} plot to {target}")
    return 0
