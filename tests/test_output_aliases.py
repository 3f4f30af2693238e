"""No command loses data because two of its paths name one file: every output is checked
against every input and every other output of the same command, before anything runs, however
the paths are spelled (``s.json`` and ``./s.json``, ``sub/../s.json``, a symlink and its target,
two hard links), and no output may lie inside a folder output.

Table-driven over the command line: COMMANDS lists each command that writes, the files it reads
and the outputs it writes; a test checks that the table covers every output option the parser
has, so a new command or output must be added here."""

from __future__ import annotations

import argparse
import itertools
import os
import shutil
from pathlib import Path

import pytest
from conftest import EXAMPLES, ROOT

import fleetplan
from fleetplan.cli import main
from fleetplan.cli.app import build_parser

TABLES = EXAMPLES / "tables"

# IN:NAME is a file of the prepared folder (read by the command); OUT:file and OUT:folder are
# outputs, named by the option just before them (OUT:file.html: a file that must have that suffix).
COMMANDS = {
    "generate": ["generate", "reservation", "--from", "IN:reservation.json", "--event", "growth",
                 "--plan", "IN:reservation-plan.json", "-o", "OUT:file"],
    "solve": ["solve", "IN:gavel.json", "-o", "OUT:file"],
    "size": ["size", "IN:placement.json", "--target", "hp_demand_supply_max<=1", "--buy", "h100",
             "--with-plan", "IN:placement-plan.json", "-o", "OUT:file", "--plan", "OUT:file",
             "--plot", "OUT:file.png", "--report", "OUT:file.html"],
    "whatif": ["whatif", "IN:gavel.json", "--vary", "worker_types.v100.count=1:2:1", "-o", "OUT:folder",
               "--report", "OUT:file.html"],
    "horizon": ["horizon", "IN:gavel.json", "IN:horizon.yaml", "-o", "OUT:file.json", "--plot", "OUT:file.png",
                "--report", "OUT:file.html"],
    "compare": ["compare", "IN:gavel-plan.json", "IN:gavel-plan-2.json", "--instance", "IN:gavel.json",
                "-o", "OUT:file", "--report", "OUT:file.html"],
    "import allocation": ["import", "allocation", "--jobs", "IN:jobs.csv", "--cluster", "IN:gpus.csv",
                          "--entities", "IN:entities.csv", "--colocations", "IN:colocations.csv",
                          "-o", "OUT:file"],
    "import placement": ["import", "placement", "--tables", "IN:tables.csv", "--jobs", "IN:placement-jobs.csv",
                         "--regions", "IN:regions.csv", "--settings", "IN:settings.yaml", "-o", "OUT:file"],
    "import plan": ["import", "plan", "IN:plan.csv", "--instance", "IN:gavel.json", "-o", "OUT:file"],
    "import gpushare": ["import", "gpushare", "--nodes", "IN:nodes.csv", "--tasks", "IN:tasks.csv", "-o", "OUT:file"],
    "import reservation": ["import", "reservation", "--server-types", "IN:server_types.csv", "--fault-domains",
                           "IN:fault_domains.csv", "--racks", "IN:racks.csv", "--servers", "IN:servers.csv",
                           "--reservations", "IN:reservations.csv", "-o", "OUT:file"],
    "import binpack": ["import", "binpack", "--machines", "IN:machines.csv", "--workloads", "IN:workloads.csv",
                       "--running", "IN:running.csv", "--holdings", "IN:holdings.csv", "-o", "OUT:file"],
    "export": ["export", "IN:gavel.json", "-o", "OUT:folder"],
    "export a plan": ["export", "IN:gavel-plan.json", "--instance", "IN:gavel.json", "--format", "csv",
                      "-o", "OUT:file"],
    "plot": ["plot", "IN:gavel.json", "IN:gavel-plan.json", "-o", "OUT:file"],
    "simulate": ["simulate", "mast", "--file", "IN:mast.json", "-o", "OUT:file", "--plot", "OUT:file",
                 "--out", "OUT:folder"],
    "bench": ["bench", "IN:quick.yaml", "-o", "OUT:folder"],
}

# The options that name an output, wherever a command has them (a flag, not a switch).
OUTPUT_OPTIONS = {"-o", "--out", "--plot", "--plan", "--report"}


@pytest.fixture(scope="module")
def inputs(tmp_path_factory) -> Path:
    """One valid file of every input kind (the commands would run on them)."""
    folder = tmp_path_factory.mktemp("inputs")
    for name, source in {"gavel.json": "allocation-gavel-4.1.json", "placement.json": "placement-small.json",
                         "reservation.json": "reservation-small.json", "mast.json": "mast-small.json"}.items():
        shutil.copy(EXAMPLES / source, folder / name)
    for name, source in {"jobs.csv": "allocation/jobs.csv", "gpus.csv": "allocation/gpus.csv",
                         "tables.csv": "placement/tables.csv", "placement-jobs.csv": "placement/jobs.csv",
                         "regions.csv": "placement/regions.csv", "settings.yaml": "placement/settings.yaml"}.items():
        shutil.copy(TABLES / source, folder / name)
    (folder / "entities.csv").write_text("id,weight,policy\n")
    (folder / "horizon.yaml").write_text("periods: 2\ntargets: ['min_time_share>=0.5']\nbuy: {k80: {price: 1}}\n")
    (folder / "nodes.csv").write_text("sn,cpu_milli,memory_mib,gpu,model\nn0,32000,131072,2,V100M16\n")
    (folder / "tasks.csv").write_text("name,cpu_milli,memory_mib,num_gpu,gpu_milli,gpu_spec\nt0,1000,1024,1,0,\n")
    (folder / "colocations.csv").write_text("job_a,job_b,worker_type,throughput_a,throughput_b\n")
    shutil.copy(ROOT / "fleetplan" / "benchmarks" / "suites" / "quick.yaml", folder / "quick.yaml")
    from fleetplan.instances.frames import to_frames, write_table

    for example in ("reservation-small.json", "binpack-small.json"):
        for name, frame in to_frames(fleetplan.load_instance(EXAMPLES / example)).items():
            if name != "settings":
                write_table(frame, folder / f"{name}.csv")
    for name, instance, solver in (("gavel-plan.json", "gavel.json", "max-min-fairness"),
                                   ("gavel-plan-2.json", "gavel.json", "max-throughput"),
                                   ("placement-plan.json", "placement.json", "greedy"),
                                   ("reservation-plan.json", "reservation.json", "greedy")):
        result = fleetplan.solve(fleetplan.load_instance(folder / instance), solver, time_limit=30)
        fleetplan.save(result.plan, folder / name)
    assert main(["export", str(folder / "gavel-plan.json"), "--instance", str(folder / "gavel.json"),
                 "--format", "csv", "-o", str(folder / "plan.csv")]) == 0
    return folder


def _outputs(argv: list[str]) -> list[tuple[int, str, str]]:
    """(position, flag, 'file' or 'folder') of each output in a COMMANDS line."""
    return [(index, argv[index - 1], token.split(":")[1].split(".")[0]) for index, token in enumerate(argv)
            if token.startswith("OUT:")]


def _snapshot(folder: Path) -> dict[str, object]:
    """Everything under ``folder``: each file's bytes, each link's target, each folder."""
    found: dict[str, object] = {}
    for path in sorted(folder.rglob("*")):
        key = str(path.relative_to(folder))
        if path.is_symlink():
            found[key] = ("link", os.readlink(path))
        elif path.is_dir():
            found[key] = "folder"
        else:
            found[key] = path.read_bytes()
    return found


def _work(tmp_path: Path, inputs: Path, monkeypatch) -> Path:
    work = tmp_path / "work"
    shutil.copytree(inputs, work / "in")
    (work / "sub").mkdir()
    monkeypatch.chdir(work)
    return work


def _line(argv: list[str], outputs: dict[int, str]) -> list[str]:
    """The command line: inputs from in/, the outputs at ``outputs`` (by position) as given,
    the others at names of their own."""
    line = []
    for index, token in enumerate(argv):
        if token.startswith("IN:"):
            line.append(f"in/{token[3:]}")
        elif token.startswith("OUT:"):
            suffix = token.partition(".")[2] or ("png" if token == "OUT:file" else "")
            line.append(outputs.get(index, f"own-{index}.{suffix}" if suffix else f"own-{index}"))
        else:
            line.append(token)
    return line


def _refused(argv: list[str], work: Path, capsys, flags: tuple[str, ...]) -> None:
    before = _snapshot(work)
    code = main(argv)
    err = capsys.readouterr().err
    assert code == 2, (argv, err)
    assert any(phrase in err for phrase in ("also an input", "names the same file", "is inside the")), (argv, err)
    assert any(flag in err for flag in flags), (argv, err)
    assert len(err.strip().splitlines()) == 1, err
    assert _snapshot(work) == before, argv


def _input_spellings(work: Path, name: str) -> list[str]:
    """The input ``in/NAME`` spelled four ways: as given, through ``..``, a symlink, a hard link."""
    link, hard = work / f"link-{name}", work / f"hard-{name}"
    if not link.is_symlink():
        link.symlink_to(Path("in") / name)
        os.link(work / "in" / name, hard)
    return [f"in/{name}", f"./sub/../in/{name}", link.name, hard.name]


@pytest.mark.parametrize("command", sorted(COMMANDS))
def test_no_output_may_be_an_input(command, inputs, tmp_path, monkeypatch, capsys):
    argv = COMMANDS[command]
    work = _work(tmp_path, inputs, monkeypatch)
    names = [token[3:] for token in argv if token.startswith("IN:")]
    for (position, flag, _), name in itertools.product(_outputs(argv), names):
        for spelling in _input_spellings(work, name):
            _refused(_line(argv, {position: spelling}), work, capsys, (flag,))


def _pair_spellings(work: Path, first: str, second: str) -> list[tuple[str, str]]:
    """Two outputs naming one new or existing file (or folder), spelled differently."""
    pairs = [("x.out", "./x.out"), ("x.out", "sub/../x.out"), (str(work / "x.out"), "x.out")]
    if first == second == "file":
        (work / "old.out").write_text("old")
        if not (work / "old-link.out").is_symlink():
            (work / "old-link.out").symlink_to("old.out")
            os.link(work / "old.out", work / "old-hard.out")
        pairs += [("old.out", "old-link.out"), ("old-hard.out", "old.out")]
    elif first == second == "folder":
        (work / "empty").mkdir(exist_ok=True)
        pairs += [("empty", "./empty")]
    return pairs


@pytest.mark.parametrize("command", sorted(name for name, argv in COMMANDS.items() if len(_outputs(argv)) > 1))
def test_no_two_outputs_may_name_one_file(command, inputs, tmp_path, monkeypatch, capsys):
    argv = COMMANDS[command]
    work = _work(tmp_path, inputs, monkeypatch)
    for (first, first_flag, first_type), (second, second_flag, second_type) in itertools.combinations(_outputs(argv), 2):
        for one, other in _pair_spellings(work, first_type, second_type):
            _refused(_line(argv, {first: one, second: other}), work, capsys, (first_flag, second_flag))
            _refused(_line(argv, {first: other, second: one}), work, capsys, (first_flag, second_flag))


@pytest.mark.parametrize("command", sorted(name for name, argv in COMMANDS.items()
                                           if any(kind == "folder" for _, _, kind in _outputs(argv))
                                           and len(_outputs(argv)) > 1))
def test_no_output_may_lie_inside_a_folder_output(command, inputs, tmp_path, monkeypatch, capsys):
    argv = COMMANDS[command]
    work = _work(tmp_path, inputs, monkeypatch)
    (work / "results").mkdir()
    outputs = _outputs(argv)
    for folder, folder_flag, kind in outputs:
        if kind != "folder":
            continue
        for position, flag, _ in outputs:
            if position != folder:
                for inside in ("results/a.png", "./sub/../results/a.png"):
                    _refused(_line(argv, {folder: "results", position: inside}), work, capsys, (flag, folder_flag))


def _commands(parser: argparse.ArgumentParser, prefix: tuple[str, ...] = ()) -> dict[tuple[str, ...], argparse.ArgumentParser]:
    found = {prefix: parser} if prefix else {}
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for name, sub in action.choices.items():
                found.update(_commands(sub, (*prefix, name)))
    return found


def test_the_table_covers_every_output_option_of_every_command():
    covered = set()
    for argv in COMMANDS.values():
        words = tuple(token for token in argv[:2] if not token.startswith(("IN:", "-")))
        for _, flag, _ in _outputs(argv):
            covered.add((words, flag))
    missing = []
    for path, parser in _commands(build_parser()).items():
        for action in parser._actions:
            if action.nargs != 0 and OUTPUT_OPTIONS & set(action.option_strings):
                flag = next(option for option in action.option_strings if option in OUTPUT_OPTIONS)
                if not any(words[:len(path)] == path and covered_flag in action.option_strings
                           for words, covered_flag in covered):
                    missing.append((" ".join(path), flag))
    assert missing == []
