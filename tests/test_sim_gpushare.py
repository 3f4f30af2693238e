"""The gpushare simulator (the FGD paper's inflation experiment): the inflation procedure, the
curves reproduced from the seed, the curve rows, the final plan through the judge, and
``fleetplan simulate gpushare`` writing curve.csv."""

from __future__ import annotations

import csv
import json

import numpy as np
import pytest
from conftest import EXAMPLES

import fleetplan
from fleetplan import sim
from fleetplan.cli import main
from fleetplan.sim.gpushare import POLICIES, arrivals, inflate, load_trace


def test_inflation_tunes_up_to_the_target_and_keeps_the_simulators_quirk():
    per_gpu = np.array([1000, 500, 1000, 0])
    total = np.array([2000, 500, 1000, 0])  # a 2-GPU task, a sharing task, one GPU, a CPU task
    order = inflate(per_gpu, total, capacity=4000, ratio=1.3, rng=np.random.default_rng(0))
    assert sorted(order[:4].tolist()) == [0, 1, 2, 3]  # the trace first, shuffled
    arrived = int(total[order].sum())
    assert arrived <= 5200 + 1000  # the test reads per-GPU milli, the sum adds the total: may pass by a GPU
    # it stopped at the first draw whose per-GPU milli would pass the target
    assert arrived + 0 > 5200 - 1000


def test_inflation_tunes_down_a_trace_above_the_target():
    total = np.full(10, 1000)
    order = inflate(total, total, capacity=5000, ratio=1.0, rng=np.random.default_rng(3))
    assert len(order) == 5 and len(set(order.tolist())) == 5


def test_the_curves_reproduce_from_the_seed_and_differ_across_seeds():
    first = sim.run("gpushare", {"inflation": 1.3}, "fgd", seed=42)
    again = sim.run("gpushare", {"inflation": 1.3}, "fgd", seed=42)
    other = sim.run("gpushare", {"inflation": 1.3}, "fgd", seed=43)
    for name in ("allocated_gpu_pct", "fragmentation_gpu_pct"):
        assert np.array_equal(first.series[name], again.series[name])
    assert not np.array_equal(first.series["allocated_gpu_pct"], other.series["allocated_gpu_pct"])


@pytest.mark.parametrize("policy", POLICIES)
def test_one_row_per_arrived_percent_and_the_end_is_the_judges(policy):
    result = sim.run("gpushare", {"inflation": 1.3}, policy, seed=1)
    s = result.series
    assert s["arrived_pct"].tolist() == list(range(131))
    assert s["allocated_gpu_pct"][0] == 0.0
    assert np.all(np.diff(s["allocated_gpu_pct"]) >= 0)  # no departures
    assert np.all(s["allocated_gpu_pct"] <= s["arrived_pct"] + 1e-9)
    # the last row is the judge's verdict on the final plan (metrics come from evaluate)
    assert s["allocated_gpu_pct"][-1] == pytest.approx(result.metrics["allocated_gpu_pct"])
    assert s["fragmentation_gpu_pct"][-1] == pytest.approx(result.metrics["fragmentation_gpu_pct"])
    assert result.metrics["arrived_gpu_pct"] <= 130.0 + 100.0 * 8000 / (116 * 1000)


def test_the_empty_cluster_reads_the_mix_share_of_cpu_tasks_as_fragmented():
    """frag.go counts every idle GPU as fragmented for a CPU task of the mix, so at 0 % arrived
    the fragmentation is at least the CPU tasks' weight in the mix (more where some shapes do not
    fit a node at all); it is the judge's reading of the empty plan."""
    from fleetplan.instances.gpushare import GpusharePlan

    trace = load_trace(sim.get_simulator("gpushare").scenario({}))
    instance = arrivals(trace, np.arange(trace.arrays().num_tasks))
    cpu_weight = sum(e.weight for e in instance.mix if e.num_gpu == 0)
    empty = fleetplan.evaluate(instance, GpusharePlan()).metrics["fragmentation_share"]
    result = sim.run("gpushare", {"inflation": 1.3}, "random", seed=0)
    assert result.series["fragmentation_gpu_pct"][0] == pytest.approx(100 * empty)
    assert 100 * empty >= 100 * cpu_weight > 5


def test_the_arrivals_instance_passes_the_judge_with_the_simulators_plan():
    trace = fleetplan.load_instance(EXAMPLES / "gpushare-small.json")
    rng = np.random.default_rng(5)
    a = trace.arrays()
    instance = arrivals(trace, inflate(a.task_gpu_milli, a.task_gpu_milli_total, a.gpu_milli_capacity, 1.3, rng))
    assert instance.arrays().task_gpu_milli_total.sum() > a.task_gpu_milli_total.sum()
    result = fleetplan.solve(instance, "fgd")
    assert result.evaluation.feasible


def test_simulate_gpushare_out_writes_the_curve(tmp_path, capsys):
    out = tmp_path / "run"
    code = main(["simulate", "gpushare", "--policy", "best-fit", "--seed", "42", "--inflation", "1.3",
                 "--out", str(out), "--json"])
    assert code == 0
    assert sorted(p.name for p in out.iterdir()) == ["curve.csv", "gpushare.png", "result.json"]
    rows = list(csv.DictReader((out / "curve.csv").open()))
    assert list(rows[0]) == ["arrived_pct", "allocated_gpu_pct", "fragmentation_gpu_pct"]
    assert [float(r["arrived_pct"]) for r in rows] == list(range(131))
    assert json.loads((out / "result.json").read_text())["scheduler"] == "best-fit"


@pytest.mark.parametrize(("argv", "words"), [
    (["--policy", "tetris"], "--policy: unknown policy 'tetris'"),
    (["--policy", "fgd", "--scheduler", "random"], "disagree"),
    (["--nodes", "/nonexistent.csv"], "give both"),
    (["--inflation", "0"], "inflation"),
    (["--node-names", "sorted"], "node_names"),
])
def test_bad_simulator_input_is_one_line_exit_2(argv, words, capsys):
    assert main(["simulate", "gpushare", *argv]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and words in err[0]


def test_name_ties_follow_the_simulators_renamed_nodes_drawn_with_the_seed(tmp_path):
    """The paper's simulator prefixes each node's name with a random number before the run, so
    the node that wins name ties is random per seed. Two nodes of 8 cores, n0 a P100 and n1 a
    T4; a CPU-only task of 8 cores (GpuPacking scores it 0 on both) arrives before a task of one
    P100: when the tie sends the CPU task to n0 the P100 task finds no node (0 % allocated), when
    to n1 it takes one of the cluster's 4 GPUs (25 %). The trace's names always pick n0."""
    path = tmp_path / "two.json"
    path.write_text(json.dumps({
        "schema_version": 1, "kind": "gpushare",
        "nodes": {"id": ["n0", "n1"], "cpu_milli": [8000, 8000], "memory_mib": [100, 100], "gpus": [2, 2],
                  "model": ["P100", "T4"]},
        "tasks": {"id": ["cpu", "p100"], "cpu_milli": [8000, 4000], "memory_mib": [1, 1], "num_gpu": [0, 1],
                  "gpu_milli": [0, 1000], "gpu_spec": ["", "P100"]}}))
    scenario = {"instance": str(path), "inflation": 0.25, "shuffle": False}  # the two tasks, in file order

    def allocated(names: str) -> set[float]:
        return {sim.run("gpushare", {**scenario, "node_names": names}, "gpu-packing", seed=seed)
                .metrics["allocated_gpu_pct"] for seed in range(20)}

    assert allocated("trace") == {0.0}
    assert allocated("shuffled") == {0.0, 25.0}
    assert sim.get_simulator("gpushare").scenario({}).node_names == "shuffled"  # the paper's is the default


TRACE = EXAMPLES.resolve().parent.parent.parent / "shared" / "data" / "alibaba-gpu-v2023"


@pytest.mark.slow
@pytest.mark.skipif(not (TRACE / "openb_pod_list_default.csv").exists(), reason="the trace is not on this machine")
def test_the_full_trace_imports_and_every_policy_runs_the_experiment():
    from fleetplan.instances.gpushare.frames import from_frames

    trace = from_frames(TRACE / "openb_node_list_gpu_node.csv", TRACE / "openb_pod_list_default.csv")
    a = trace.arrays()
    assert (a.num_nodes, int(a.node_gpus.sum()), a.num_tasks) == (1213, 6212, 8152)
    scenario = {"nodes": str(TRACE / "openb_node_list_gpu_node.csv"),
                "tasks": str(TRACE / "openb_pod_list_default.csv"), "inflation": 1.3}
    allocated = {}
    for policy in POLICIES:
        result = sim.run("gpushare", scenario, policy, seed=42)
        assert result.series["arrived_pct"][-1] == 130.0
        allocated[policy] = result.metrics["allocated_gpu_pct"]
    assert min(allocated.values()) > 80 and allocated["random"] == min(allocated.values())
