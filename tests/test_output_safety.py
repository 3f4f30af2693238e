"""Outputs never destroy what is at their path (reliability issue, data-loss items 1-5).

Every special file is made by the test inside its own temporary folder, never the machine's
own ``/dev`` nodes: a character device made with ``mknod`` (as root; skipped otherwise), a FIFO,
symlinks, folders. Full disks are ``RLIMIT_FSIZE`` on a child process.
"""

import json
import os
import resource
import shutil
import stat
import subprocess
import sys
import threading
import time

import pytest
from conftest import EXAMPLES, ROOT

import fleetplan
from fleetplan.cli import main
from fleetplan.errors import OutputError
from fleetplan.instances.outputs import atomic_write_text, building_folder

GAVEL = str(EXAMPLES / "allocation-gavel-4.1.json")
BINPACK = str(EXAMPLES / "binpack-small.json")
TABLES = EXAMPLES / "tables" / "allocation"


def null_device(folder):
    """A character device like /dev/null (major 1, minor 3), made inside ``folder``."""
    path = folder / "nulldev"
    try:
        os.mknod(path, stat.S_IFCHR | 0o666, os.makedev(1, 3))
    except PermissionError:
        pytest.skip("making a device node needs root")
    return path


# Every writer of the command line, as (arguments before -o, arguments after) with OUT for the
# output path. Each must leave a special file, a directory or a dangling link as it was.
def writers(tmp_path):
    plan = tmp_path / "plan.json"
    assert main(["solve", GAVEL, "-o", str(plan)]) == 0
    return {
        "solve": ["solve", GAVEL, "-o", "OUT"],
        "generate": ["generate", "allocation", "--jobs", "4", "-o", "OUT"],
        "simulate -o": ["simulate", "parsync", "--schedulers", "2", "--slots", "200", "--duration_s", "2", "-o", "OUT"],
        "simulate --plot": ["simulate", "parsync", "--schedulers", "2", "--slots", "200", "--duration_s", "2", "--plot", "OUT"],
        "export": ["export", str(plan), "--instance", GAVEL, "--format", "csv", "-o", "OUT"],
        "import allocation": ["import", "allocation", "--jobs", str(TABLES / "jobs.csv"),
                              "--cluster", str(TABLES / "gpus.csv"), "-o", "OUT"],
        "plot": ["plot", GAVEL, str(plan), "-o", "OUT"],
    }


def test_a_character_device_is_written_in_place_never_replaced(tmp_path, capsys):
    device = null_device(tmp_path)
    for name, argv in writers(tmp_path).items():
        if name in ("simulate --plot", "plot"):
            continue  # a picture's suffix is checked first: a device has none (next test)
        code = main([str(device) if arg == "OUT" else arg for arg in argv])
        assert code == 0, (name, capsys.readouterr().err)
        assert stat.S_ISCHR(os.lstat(device).st_mode), f"{name} replaced the device with a file"


def test_a_picture_into_a_device_must_name_its_format(tmp_path, capsys):
    device = null_device(tmp_path)
    assert main(["plot", GAVEL, str(tmp_path / "missing.json"), "-o", str(device)]) == 2
    assert "unknown image type" in capsys.readouterr().err
    assert stat.S_ISCHR(os.lstat(device).st_mode)


def test_generate_into_mknod_device_reproduction(tmp_path):
    """The issue's reproduction: `mknod nulldev c 1 3 && fleetplan generate allocation --jobs 4
    -o nulldev` left a 1,926-byte regular file."""
    device = null_device(tmp_path)
    result = subprocess.run([sys.executable, "-m", "fleetplan", "generate", "allocation", "--jobs", "4",
                             "-o", "nulldev"], cwd=tmp_path, capture_output=True, text=True, timeout=120)
    assert result.returncode == 0, result.stderr
    assert stat.S_ISCHR(os.lstat(device).st_mode)


def test_a_fifo_with_a_reader_gets_the_output_in_place(tmp_path):
    fifo = tmp_path / "pipe"
    os.mkfifo(fifo)
    received = []
    reader = threading.Thread(target=lambda: received.append(fifo.read_bytes()))
    reader.start()
    time.sleep(0.3)  # the reader is waiting in open() before the writer looks for it
    try:
        atomic_write_text(fifo, '{"hello": 1}\n')
    finally:
        reader.join(timeout=10)
    assert received == [b'{"hello": 1}\n']
    assert stat.S_ISFIFO(os.lstat(fifo).st_mode)


def test_a_fifo_without_a_reader_is_refused_not_blocked_on(tmp_path, capsys):
    fifo = tmp_path / "pipe"
    os.mkfifo(fifo)
    assert main(["generate", "allocation", "--jobs", "4", "-o", str(fifo)]) == 2
    assert "no reader" in capsys.readouterr().err
    assert stat.S_ISFIFO(os.lstat(fifo).st_mode)


def test_a_symlink_is_followed_and_stays_a_link(tmp_path):
    real = tmp_path / "plans" / "v3.json"
    real.parent.mkdir()
    real.write_text("old")
    link = tmp_path / "latest.json"
    link.symlink_to(real)
    assert main(["solve", GAVEL, "-o", str(link)]) == 0
    assert link.is_symlink() and os.readlink(link) == str(real)
    assert json.loads(real.read_text())["kind"] == "allocation"


def test_a_symlink_to_a_device_writes_the_device(tmp_path):
    device = null_device(tmp_path)
    link = tmp_path / "out.json"
    link.symlink_to(device)
    assert main(["generate", "allocation", "--jobs", "4", "-o", str(link)]) == 0
    assert link.is_symlink() and stat.S_ISCHR(os.lstat(device).st_mode)


@pytest.mark.parametrize("what", ["dangling symlink", "directory", "file as parent"])
def test_every_writer_refuses_unwritable_targets_with_exit_2(tmp_path, capsys, what):
    for name, argv in writers(tmp_path).items():
        case = tmp_path / name.replace(" ", "_")
        case.mkdir()
        if what == "dangling symlink":
            target = case / "out.png"
            target.symlink_to(case / "nowhere.png")
        elif what == "directory":
            target = case / "out.png"
            target.mkdir()
        else:
            (case / "file").write_text("x")
            target = case / "file" / "out.png"
        before = sorted(os.listdir(case))
        code = main([str(target) if arg == "OUT" else arg for arg in argv])
        err = capsys.readouterr().err
        assert code == 2, (name, err)
        assert len(err.strip().splitlines()) == 1 and "internal error" not in err, (name, err)
        assert sorted(os.listdir(case)) == before, name


def test_a_block_device_is_refused(tmp_path):
    device = tmp_path / "disk"
    try:
        os.mknod(device, stat.S_IFBLK | 0o600, os.makedev(7, 250))
    except PermissionError:
        pytest.skip("making a device node needs root")
    with pytest.raises(OutputError, match="block device"):
        atomic_write_text(device, "x")


def test_a_replaced_file_keeps_its_permissions(tmp_path):
    target = tmp_path / "plan.json"
    target.write_text("old")
    target.chmod(0o640)
    atomic_write_text(target, "new")
    assert target.read_text() == "new" and stat.S_IMODE(target.stat().st_mode) == 0o640


def test_save_creates_a_missing_parent_folder(tmp_path):
    instance = fleetplan.load_instance(GAVEL)
    fleetplan.save(instance, tmp_path / "out" / "deeper" / "cluster.json")
    assert fleetplan.load_instance(tmp_path / "out" / "deeper" / "cluster.json").name == instance.name


# --- item 2: an output that is an input -----------------------------------------------------

def test_simulate_output_equal_to_its_scenario_file_is_refused(tmp_path, capsys):
    scenario = tmp_path / "scenario.json"
    shutil.copy(EXAMPLES / "mast-small.json", scenario)
    before = scenario.read_bytes()
    assert main(["simulate", "mast", "--file", str(scenario), "-o", str(scenario)]) == 2
    assert "also an input of this command" in capsys.readouterr().err
    assert scenario.read_bytes() == before


def test_simulate_plot_onto_its_scenario_file_is_refused(tmp_path, capsys):
    scenario = tmp_path / "scenario.png"
    shutil.copy(EXAMPLES / "mast-small.json", scenario)
    before = scenario.read_bytes()
    assert main(["simulate", "mast", "--file", str(scenario), "--plot", str(scenario)]) == 2
    assert scenario.read_bytes() == before


@pytest.mark.parametrize("argv", [
    ["solve", GAVEL, "-o", GAVEL],
    ["import", "plan", "PLAN", "--instance", GAVEL, "-o", "PLAN"],
    ["export", "PLAN", "--instance", GAVEL, "-o", "PLAN"],
])
def test_outputs_that_are_inputs_are_refused(tmp_path, capsys, argv):
    plan = tmp_path / "plan.csv"
    plan.write_text("job,worker_type,fraction\n")
    before = {path: open(path, "rb").read() for path in (GAVEL, plan)}
    assert main([str(plan) if arg == "PLAN" else arg for arg in argv]) == 2
    assert "also an input of this command" in capsys.readouterr().err
    assert {path: open(path, "rb").read() for path in before} == before


def test_bench_resume_with_the_suite_file_inside_the_folder_under_a_written_name(tmp_path, capsys):
    folder = tmp_path / "results"
    folder.mkdir()
    suite = folder / "run.json"  # a name the sweep writes
    suite.write_text((ROOT / "fleetplan" / "benchmarks" / "suites" / "quick.yaml").read_text())
    assert main(["bench", str(suite), "-o", str(folder), "--resume"]) == 2
    assert "also an input of this command" in capsys.readouterr().err


# --- item 3: a full disk leaves nothing half-written ----------------------------------------

def _limited(max_bytes):
    def apply():
        resource.setrlimit(resource.RLIMIT_FSIZE, (max_bytes, max_bytes))
    return apply


def test_export_on_a_full_disk_leaves_no_folder_and_one_line(tmp_path):
    """`export INSTANCE -o DIR` wrote some tables and stopped with an internal error."""
    out = tmp_path / "tables"
    result = subprocess.run([sys.executable, "-m", "fleetplan", "export", str(EXAMPLES / "allocation-64-jobs.json"),
                             "-o", str(out)], capture_output=True, text=True, timeout=120,
                            preexec_fn=_limited(2000), env={**os.environ, "PYTHONDONTWRITEBYTECODE": "1"})
    assert result.returncode == 2, result.stderr
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and "internal error" not in lines[0] and "ulimit -f" in lines[0], lines
    assert not out.exists()
    assert os.listdir(tmp_path) == []


def test_solve_on_a_full_disk_writes_nothing(tmp_path):
    out = tmp_path / "plan.json"
    result = subprocess.run([sys.executable, "-m", "fleetplan", "generate", "allocation", "--jobs", "200",
                             "-o", str(out)], capture_output=True, text=True, timeout=120,
                            preexec_fn=_limited(4096), env={**os.environ, "PYTHONDONTWRITEBYTECODE": "1"})
    assert result.returncode == 2, result.stderr
    assert "Traceback" not in result.stderr and len(result.stderr.strip().splitlines()) == 1
    assert os.listdir(tmp_path) == []


def test_a_failure_inside_a_folder_build_removes_it(tmp_path):
    target = tmp_path / "out"
    with pytest.raises(RuntimeError), building_folder(target) as building:
        (building / "a.csv").write_text("x")
        raise RuntimeError("stop")
    assert os.listdir(tmp_path) == []


# --- item 4: existing folders ---------------------------------------------------------------

def test_export_into_a_non_empty_folder_is_refused(tmp_path, capsys):
    folder = tmp_path / "tables"
    folder.mkdir()
    (folder / "jobs.csv").write_text("mine")
    assert main(["export", GAVEL, "-o", str(folder)]) == 2
    assert "not empty" in capsys.readouterr().err
    assert (folder / "jobs.csv").read_text() == "mine" and os.listdir(folder) == ["jobs.csv"]


def test_export_into_an_empty_folder_fills_it(tmp_path):
    folder = tmp_path / "tables"
    folder.mkdir()
    assert main(["export", GAVEL, "-o", str(folder)]) == 0
    assert {"jobs.csv", "cluster.csv"} <= set(os.listdir(folder))


def test_bench_resume_on_another_suites_folder_is_refused(tmp_path, capsys):
    suite_a = tmp_path / "a.yaml"
    suite_b = tmp_path / "b.yaml"
    for path, name in ((suite_a, "suite-a"), (suite_b, "suite-b")):  # one cell each: the folder is the point
        path.write_text(f"name: {name}\ngroups:\n  - name: g-{name}\n    kind: allocation\n"
                        "    generator: {jobs: 3}\n    seeds: [0]\n    time_limit: 10\n"
                        "    solvers: [{name: max-min-fairness}]\n")
    out = tmp_path / "results"
    assert main(["bench", str(suite_a), "-o", str(out), "--no-plots"]) == 0
    before = (out / "results.csv").read_text()
    capsys.readouterr()
    assert main(["bench", str(suite_b), "-o", str(out), "--resume", "--no-plots"]) == 2
    err = capsys.readouterr().err
    assert "suite-a" in err and len(err.strip().splitlines()) == 1
    assert (out / "results.csv").read_text() == before


def test_bench_output_that_is_a_file_is_refused(tmp_path, capsys):
    target = tmp_path / "results"
    target.write_text("mine")
    assert main(["bench", "quick", "-o", str(target)]) == 2
    err = capsys.readouterr().err
    assert "not a directory" in err and "internal error" not in err
    assert target.read_text() == "mine"


# --- item 5: exit code and files agree ------------------------------------------------------

def test_binpack_with_nothing_placeable_writes_no_plan(tmp_path, capsys):
    data = json.loads(open(BINPACK).read())
    for workload in data["workloads"]:
        for job in workload["jobs"]:
            job["tasks"] = 10**6  # more than the region holds
    instance = tmp_path / "full.json"
    instance.write_text(json.dumps(data))
    out = tmp_path / "plan.json"
    code = main(["solve", str(instance), "-o", str(out)])
    assert code == 1, capsys.readouterr()
    assert not out.exists()


def test_dev_stdout_redirected_to_a_file_gets_the_output_through_the_descriptor(tmp_path):
    out = tmp_path / "captured.txt"
    with open(out, "w") as stream:
        result = subprocess.run([sys.executable, "-m", "fleetplan", "generate", "allocation", "--jobs", "2",
                                 "-o", "/dev/stdout"], stdout=stream, stderr=subprocess.PIPE, text=True,
                                timeout=120)
    assert result.returncode == 0, result.stderr
    text = out.read_text()
    assert text.startswith("{") and text.rstrip().endswith("to /dev/stdout")
    assert json.loads(text[:text.rindex("}") + 1])["kind"] == "allocation"
