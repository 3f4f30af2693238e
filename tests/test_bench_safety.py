"""Unsafe inputs to `fleetplan bench`: a YAML alias bomb, a suite name
that is a path, a sweep that fails to start, and who the Dask executor trusts."""

from __future__ import annotations

import shutil
import subprocess
import time
from pathlib import Path

import pytest

from fleetplan.benchmarks import suite as suite_module
from fleetplan.benchmarks import sweep
from fleetplan.benchmarks.suite import MAX_YAML_NODES, output_folder, parse_suite
from fleetplan.benchmarks.sweep import run_sweep
from fleetplan.cli import main
from fleetplan.instances import InstanceError
from fleetplan.runs import executors
from fleetplan.runs.executors import DaskSecurity, dask_security, is_loopback, scheduler_host


def alias_bomb(levels: int = 12) -> str:
    """Each anchor is a list of nine aliases to the previous one: 9**levels values, ~1.3 KB."""
    lines = ["a0: &a0 [x, x, x, x, x, x, x, x, x]"]
    for level in range(1, levels):
        lines.append(f"a{level}: &a{level} [" + ", ".join([f"*a{level - 1}"] * 9) + "]")
    lines.append(f"name: bomb\ngroups: [{{kind: allocation, generator: {{jobs: *a{levels - 1}}}}}]")
    return "\n".join(lines) + "\n"


def test_an_alias_bomb_is_refused_at_once():
    text = alias_bomb()
    assert len(text) < 2000
    started = time.process_time()  # CPU: expanding the aliases would take hours of it
    with pytest.raises(InstanceError, match="alias bomb"):
        parse_suite(text, "bomb.yaml")
    assert time.process_time() - started < 2


def test_an_alias_bomb_leaves_nothing_behind(tmp_path, capsys):
    bomb = tmp_path / "bomb.yaml"
    bomb.write_text(alias_bomb())
    assert main(["bench", str(bomb), "-o", str(tmp_path / "out")]) == 2
    assert "alias bomb" in capsys.readouterr().err
    assert not (tmp_path / "out").exists()


def test_moderate_aliases_still_work():
    # Anchors are legitimate YAML: one generator block shared by two groups.
    suite = parse_suite("name: t\ngroups:\n  - {kind: allocation, generator: &g {jobs: [4, 8]}}\n"
                        "  - {kind: allocation, name: b, generator: *g}\n")
    assert [group.generator for group in suite.groups] == [{"jobs": [4, 8]}, {"jobs": [4, 8]}]


def test_a_recursive_alias_is_refused():
    with pytest.raises(InstanceError, match="refers to itself"):
        parse_suite("name: &n [*n]\ngroups: [{kind: allocation}]")


def test_a_sweep_too_large_to_expand_is_refused_before_expanding():
    values = "[" + ", ".join(str(i + 1) for i in range(100)) + "]"
    text = (f"name: t\ngroups: [{{kind: allocation, generator: {{jobs: {values}, workers_per_type: {values}, "
            f"entities: {values}}}}}]")
    started = time.process_time()  # CPU: a loaded machine stretches wall time whatever the check does
    with pytest.raises(InstanceError, match="more than 100,000 cells"):
        parse_suite(text)
    assert time.process_time() - started < 2


def test_node_bound_is_on_the_expanded_document(monkeypatch):
    monkeypatch.setattr(suite_module, "MAX_YAML_NODES", 1000)
    flat = "name: t\ndescription: [" + ", ".join(["x"] * 1000) + "]\ngroups: [{kind: allocation}]"
    with pytest.raises(InstanceError, match="expands to more than 1,000"):
        parse_suite(flat)
    # 30 aliases of a 40-value list: 80 nodes in the file, 1,200 once expanded.
    shared = "a: &a [" + ", ".join(["x"] * 40) + "]\nb: [" + ", ".join(["*a"] * 30) + "]\n"
    with pytest.raises(InstanceError, match="expands to more than 1,000"):
        parse_suite(shared + "name: t\ngroups: [{kind: allocation}]")
    assert MAX_YAML_NODES >= 10_000  # the real bound leaves room for any hand-written suite


@pytest.mark.parametrize(("name", "folder"), [
    ("../escape", "escape"), ("/etc/passwd", "etc-passwd"), ("..", "suite"), ("a/../../b", "a-..-..-b"),
    ("standard", "standard"), (".hidden", "hidden"),
])
def test_a_suite_name_is_one_folder_inside_the_results_root(tmp_path, name, folder):
    root = tmp_path / "bench-results"
    path = output_folder(name, root)
    assert path == root / folder
    assert path.resolve().parent == root.resolve()


def test_a_suite_named_like_a_path_writes_inside_bench_results(tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    folders = []

    def record(suite, out, **kwargs):  # the sweep itself is tested elsewhere; where it writes is the point
        folders.append(out)
        return []

    monkeypatch.setattr(sweep, "run_sweep", record)  # command imports it from sweep when it runs
    for name in ("../../escaped", "/tmp/abs"):
        suite = tmp_path / "evil.yaml"
        suite.write_text(f"name: {name}\ngroups: [{{kind: allocation, generator: {{jobs: 4}}}}]\n")
        assert main(["bench", str(suite), "--no-report"]) == 0, capsys.readouterr().err
    assert folders == [Path("bench-results/escaped"), Path("bench-results/tmp-abs")]


def test_a_sweep_that_fails_to_start_leaves_no_folder(tmp_path, monkeypatch):
    suite = parse_suite("name: t\ngroups: [{kind: allocation, generator: {jobs: 4}, solvers: [{name: max-min-fairness}]}]")

    def broken(*args, **kwargs):
        raise RuntimeError("executor could not start")

    monkeypatch.setattr(sweep.executors, "run_local", broken)
    out = tmp_path / "deep" / "out"
    with pytest.raises(RuntimeError):
        run_sweep(suite, out, progress=None, save_plans=True)
    assert not (tmp_path / "deep").exists()
    # A folder the user made beforehand is kept, but emptied of what the sweep wrote.
    out.mkdir(parents=True)
    with pytest.raises(RuntimeError):
        run_sweep(suite, out, progress=None)
    assert out.is_dir() and list(out.iterdir()) == []


def test_an_unreachable_scheduler_leaves_no_folder(tmp_path, monkeypatch):
    pytest.importorskip("dask.distributed")
    monkeypatch.setattr(executors, "CONNECT_TIMEOUT_S", 1.0)
    suite = parse_suite("name: t\ngroups: [{kind: allocation, generator: {jobs: 4}, solvers: [{name: max-min-fairness}]}]")
    with pytest.raises(InstanceError, match="cannot reach the Dask scheduler"):
        run_sweep(suite, tmp_path / "out", executor="dask", address="tcp://127.0.0.1:9", progress=None)
    assert not (tmp_path / "out").exists()


@pytest.mark.parametrize(("address", "host", "loopback"), [
    ("tcp://127.0.0.1:8786", "127.0.0.1", True), ("tls://localhost:8786", "localhost", True),
    ("tcp://[::1]:8786", "::1", True), ("127.0.0.5:8786", "127.0.0.5", True),
    ("tcp://10.0.0.7:8786", "10.0.0.7", False), ("tls://sched.example.org:8786", "sched.example.org", False),
    ("tcp://localhost.evil.org:8786", "localhost.evil.org", False),
])
def test_loopback_is_decided_from_the_address_alone(address, host, loopback):
    assert scheduler_host(address)[1] == host
    assert is_loopback(host) is loopback


def test_plain_tcp_to_another_machine_needs_insecure():
    with pytest.raises(InstanceError, match="refusing plain TCP"):
        dask_security("tcp://10.0.0.7:8786")
    assert dask_security("tcp://10.0.0.7:8786", insecure=True) is None
    assert dask_security("tcp://127.0.0.1:8786") is None
    with pytest.raises(InstanceError, match="unsupported scheme"):
        dask_security("ucx://127.0.0.1:8786")
    with pytest.raises(InstanceError, match="use tls://"):
        dask_security("tcp://127.0.0.1:8786", DaskSecurity(ca_file="ca.pem"))


def test_tls_needs_a_ca_and_whole_key_pairs(tmp_path):
    dask = pytest.importorskip("dask")
    pytest.importorskip("dask.distributed")
    with dask.config.set({"distributed.comm.tls.ca-file": None}):
        with pytest.raises(InstanceError, match="needs a CA file"):
            dask_security("tls://10.0.0.7:8786")
    ca = tmp_path / "ca.pem"
    ca.write_text("x")
    with pytest.raises(InstanceError, match="go together"):
        dask_security("tls://10.0.0.7:8786", DaskSecurity(ca_file=str(ca), cert=str(ca)))
    with pytest.raises(InstanceError, match="file not found"):
        dask_security("tls://10.0.0.7:8786", DaskSecurity(ca_file=str(tmp_path / "missing.pem")))
    security = dask_security("tls://10.0.0.7:8786", DaskSecurity(ca_file=str(ca)))
    assert security.require_encryption and security.tls_ca_file == str(ca)
    with dask.config.set({"distributed.comm.tls.ca-file": str(ca)}):
        assert dask_security("tls://10.0.0.7:8786").tls_ca_file == str(ca)


def test_cli_refuses_a_remote_plain_tcp_scheduler(tmp_path, capsys):
    out = tmp_path / "out"
    assert main(["bench", "quick", "-o", str(out), "--executor", "dask", "--address", "tcp://10.9.8.7:8786"]) == 2
    error = capsys.readouterr().err
    assert "refusing plain TCP" in error and "\n" not in error.strip()
    assert main(["bench", "quick", "-o", str(out), "--tls-ca-file", "x.pem"]) == 2
    assert "only the dask executor" in capsys.readouterr().err
    assert not out.exists()


def _make_certificates(folder):
    """A CA, and a certificate for 127.0.0.1 signed by it (scheduler, workers and client)."""
    def run(*args):
        subprocess.run(["openssl", *args], check=True, capture_output=True, cwd=folder)

    run("req", "-x509", "-newkey", "rsa:2048", "-nodes", "-keyout", "ca.key", "-out", "ca.pem",
        "-days", "2", "-subj", "/CN=fleetplan-test-ca")
    (folder / "ext.cnf").write_text("subjectAltName=IP:127.0.0.1,DNS:localhost\n")
    run("req", "-newkey", "rsa:2048", "-nodes", "-keyout", "node.key", "-out", "node.csr",
        "-subj", "/CN=127.0.0.1")
    run("x509", "-req", "-in", "node.csr", "-CA", "ca.pem", "-CAkey", "ca.key", "-CAcreateserial",
        "-out", "node.pem", "-days", "2", "-extfile", "ext.cnf")
    # A second CA that signed nothing here: trusting it must fail the handshake.
    run("req", "-x509", "-newkey", "rsa:2048", "-nodes", "-keyout", "other.key", "-out", "other.pem",
        "-days", "2", "-subj", "/CN=someone-else")


@pytest.mark.slow
def test_a_tls_cluster_runs_the_sweep_and_a_wrong_ca_is_refused(tmp_path, capsys):
    distributed = pytest.importorskip("dask.distributed")
    if shutil.which("openssl") is None:
        pytest.skip("openssl not installed")
    from distributed.security import Security

    _make_certificates(tmp_path)
    pem, key, ca = str(tmp_path / "node.pem"), str(tmp_path / "node.key"), str(tmp_path / "ca.pem")
    security = Security(tls_ca_file=ca, tls_scheduler_cert=pem, tls_scheduler_key=key, tls_worker_cert=pem,
                        tls_worker_key=key, tls_client_cert=pem, tls_client_key=key, require_encryption=True)
    suite = tmp_path / "s.yaml"
    suite.write_text("name: s\ngroups: [{kind: allocation, generator: {jobs: 4}, solvers: [{name: max-min-fairness}]}]\n")
    with distributed.LocalCluster(n_workers=1, threads_per_worker=1, processes=True, host="127.0.0.1",
                                  protocol="tls://", security=security, dashboard_address=None) as cluster:
        address = cluster.scheduler_address
        assert address.startswith("tls://127.0.0.1:")
        code = main(["bench", str(suite), "-o", str(tmp_path / "ok"), "--executor", "dask", "--address", address,
                     "--tls-ca-file", ca, "--tls-cert", pem, "--tls-key", key, "--no-report"])
        assert code == 0, capsys.readouterr().err
        rows = (tmp_path / "ok" / "results.csv").read_text().splitlines()
        assert len(rows) == 2 and ",optimal," in rows[1]
        wrong = tmp_path / "wrong"
        started = time.monotonic()
        code = main(["bench", str(suite), "-o", str(wrong), "--executor", "dask", "--address", address,
                                      "--tls-ca-file", str(tmp_path / "other.pem"), "--tls-cert", pem,
                                      "--tls-key", key, "--no-report"])
        assert code == 2 and time.monotonic() - started < 60
        assert "cannot reach the Dask scheduler" in capsys.readouterr().err
        assert not wrong.exists()
    assert executors.DaskSecurity(ca).given
