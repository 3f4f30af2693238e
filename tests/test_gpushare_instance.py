"""The gpushare kind: loading and bad input, the judge on hand-built nodes (capacities, whole
GPUs, models, the FGD paper's fragmentation), the expected task mix, and the importer on good
and broken tables."""

from __future__ import annotations

import math

import numpy as np
import pytest
from conftest import EXAMPLES

import fleetplan
from fleetplan.cli import main
from fleetplan.instances import InstanceError, instance_from_data
from fleetplan.instances.gpushare import GpushareInstance, GpusharePlan
from fleetplan.instances.gpushare.fragmentation import (
    instance_mix,
    mix_entries,
    node_fragmentation,
    task_mix,
)


def cluster(tasks: dict | None = None, **extra) -> dict:
    """Two nodes: n0 with 2 T4 GPUs, 16 cores, 64 GiB; n1 with 8 G2 GPUs, 96 cores, 384 GiB."""
    return {"kind": "gpushare", "schema_version": 1,
            "nodes": {"id": ["n0", "n1"], "cpu_milli": [16000, 96000], "memory_mib": [65536, 393216],
                      "gpus": [2, 8], "model": ["T4", "G2"]},
            "tasks": tasks or {"id": ["share", "whole", "multi", "cpu", "t4only"],
                               "cpu_milli": [4000, 8000, 32000, 2000, 4000],
                               "memory_mib": [8192, 16384, 65536, 4096, 8192],
                               "num_gpu": [1, 1, 4, 0, 1], "gpu_milli": [500, 1000, 1000, 0, 300],
                               "gpu_spec": ["", "", "", "", "T4"]},
            **extra}


def plan(task, node, gpus) -> GpusharePlan:
    return GpusharePlan.model_validate({"kind": "gpushare", "assignments": {"task": task, "node": node, "gpus": gpus}})


def test_the_example_loads_and_names_its_source():
    instance = fleetplan.load_instance(EXAMPLES / "gpushare-small.json")
    arrays = instance.arrays()
    assert (arrays.num_nodes, arrays.num_tasks) == (25, 136)
    assert "alibaba/clusterdata" in instance.source and "ATC 2023" in instance.source


@pytest.mark.parametrize(("change", "path", "words"), [
    (lambda d: d["tasks"].__setitem__("gpu_milli", [500, 1000, 500, 0, 300]), "tasks.gpu_milli[2]", "takes them whole"),
    (lambda d: d["tasks"].__setitem__("gpu_milli", [500, 1000, 1000, 10, 300]), "tasks.gpu_milli[3]", "exactly when"),
    (lambda d: d["tasks"].__setitem__("gpu_milli", [1500, 1000, 1000, 0, 300]), "tasks.gpu_milli[0]", "0..1000"),
    (lambda d: d["tasks"].__setitem__("gpu_spec", ["", "", "", "", "T4||G2"]), "tasks.gpu_spec[4]", "empty model"),
    (lambda d: d["nodes"].__setitem__("id", ["n0", "n0"]), "nodes.id[1]", "duplicate"),
    (lambda d: d["nodes"].__setitem__("gpus", [2]), "nodes.gpus", "has 1 entries"),
    (lambda d: d["nodes"].__setitem__("cpu_milli", [-1, 5]), "nodes.cpu_milli[0]", ">= 0"),
])
def test_bad_instances_name_the_json_path(change, path, words):
    data = cluster()
    change(data)
    with pytest.raises(InstanceError) as error:
        instance_from_data(data)
    assert error.value.path == path and words in error.value.reason


def test_the_judge_on_a_hand_built_plan():
    instance = GpushareInstance.model_validate(cluster())
    verdict = fleetplan.evaluate(instance, plan(["share", "whole", "multi", "cpu", "t4only"],
                                                ["n0", "n1", "n1", "n1", "n0"], [[0], [0], [4, 5, 6, 7], [], [0]]))
    assert verdict.feasible, verdict.violations
    assert verdict.objective == 500 + 1000 + 4000 + 300
    m = verdict.metrics
    assert m["tasks_placed"] == 5 and m["tasks_pending"] == 0
    assert math.isclose(m["gpu_allocated_share"], 5800 / 10000)
    assert math.isclose(m["cpu_allocated_share"], (4000 + 8000 + 32000 + 2000 + 4000) / 112000)
    table = verdict.table("nodes")
    assert table.loc["n0", "gpu_milli_used"] == 800 and table.loc["n1", "cpu_milli_used"] == 42000


@pytest.mark.parametrize(("assign", "constraint"), [
    ((["share", "t4only"], ["n0", "n0"], [[0], [0]]), None),  # 500 + 300 on one GPU: fits
    ((["whole", "share"], ["n0", "n0"], [[0], [0]]), "gpu_capacity"),  # a whole GPU shared
    ((["multi"], ["n1"], [[0, 1, 2]]), "gpu_count"),  # 3 GPUs for a 4-GPU task
    ((["multi"], ["n1"], [[0, 1, 2, 2]]), "gpu_count"),  # a GPU twice
    ((["whole"], ["n0"], [[5]]), "gpu_count"),  # n0 has GPUs 0 and 1 only
    ((["whole"], ["n0"], [[0, 0]]), "gpu_count"),
    ((["t4only"], ["n1"], [[0]]), "gpu_model"),
    ((["multi", "whole"], ["n1", "n1"], [[0, 1, 2, 3], [0]]), "gpu_capacity"),
])
def test_the_judge_finds_each_broken_constraint(assign, constraint):
    instance = GpushareInstance.model_validate(cluster())
    verdict = fleetplan.evaluate(instance, plan(*assign))
    assert {v.constraint for v in verdict.violations} == ({constraint} if constraint else set())


def test_cpu_and_memory_capacities_are_judged():
    tasks = {"id": ["a", "b"], "cpu_milli": [10000, 10000], "memory_mib": [40000, 40000], "num_gpu": [0, 0],
             "gpu_milli": [0, 0]}
    instance = GpushareInstance.model_validate(cluster(tasks))
    verdict = fleetplan.evaluate(instance, plan(["a", "b"], ["n0", "n0"], [[], []]))
    found = {v.constraint: v.amount for v in verdict.violations}
    assert found == {"cpu_capacity": 4000, "memory_capacity": 80000 - 65536}


def test_a_plan_naming_an_unknown_task_or_placing_one_twice_is_refused():
    instance = GpushareInstance.model_validate(cluster())
    with pytest.raises(InstanceError, match="unknown task"):
        fleetplan.evaluate(instance, plan(["nope"], ["n0"], [[0]]))
    with pytest.raises(InstanceError, match="placed twice"):
        fleetplan.evaluate(instance, plan(["share", "share"], ["n0", "n1"], [[0], [0]]))


def test_fragmentation_by_hand():
    """The paper's measure (frag.go): per mix shape, all idle milli when the shape cannot run on
    the node, else the idle milli of GPUs with too little left; weighted by the mix."""
    # Mix: 60 % tasks of 500 milli and 4 cores, 40 % CPU tasks of 1 core.
    mix = task_mix(mix_entries(np.array([4000] * 3 + [1000] * 2), np.array([1, 1, 1, 0, 0]),
                               np.array([500, 500, 500, 0, 0]), [""] * 5), ["T4"])
    assert mix.weight.tolist() == [0.6, 0.4]
    gpu_left = np.array([[300, 1000], [300, 200], [800, 0]])
    cpu_left = np.array([8000, 8000, 2000])
    frag = node_fragmentation(cpu_left, gpu_left, np.zeros(3, dtype=int), mix)
    # node 0: shape 1 runs (GPU 1), loses 300; CPU tasks count all 1300 idle.
    # node 1: no GPU has 500 left: all 500 idle lost for both shapes.
    # node 2: 2 cores left < 4: shape 1 loses all 800; CPU tasks all 800.
    assert frag.tolist() == pytest.approx([0.6 * 300 + 0.4 * 1300, 500.0, 800.0])


def test_the_mix_is_the_popular_shapes_covering_95_percent():
    cpu = np.array([1000] * 50 + [2000] * 30 + [3000] * 16 + [4000] * 4)
    entries = mix_entries(cpu, np.ones(100, dtype=int), np.full(100, 1000), [""] * 100)
    assert [e.cpu_milli for e in entries] == [1000, 2000, 3000]  # 96 % covered after three
    assert [e.weight for e in entries] == pytest.approx([50 / 96, 30 / 96, 16 / 96])


def test_an_empty_plan_leaves_every_task_pending_and_the_mix_can_be_given():
    given = cluster(mix=[{"cpu_milli": 1000, "num_gpu": 1, "gpu_milli": 1000, "weight": 1.0}])
    instance = GpushareInstance.model_validate(given)
    verdict = fleetplan.evaluate(instance, GpusharePlan())
    assert verdict.metrics["tasks_pending"] == 5 and verdict.metrics["fragmentation_milli"] == 0.0
    assert len(instance_mix(instance)) == 1
    with pytest.raises(InstanceError, match="sum to 1"):
        instance_from_data(cluster(mix=[{"cpu_milli": 1, "num_gpu": 0, "gpu_milli": 0, "weight": 0.5}]))


# --- the importer --------------------------------------------------------------------------

NODES = "sn,cpu_milli,memory_mib,gpu,model\nn0,16000,65536,2,T4\nn1,96000,393216,8,G2\n"
TASKS = ("name,cpu_milli,memory_mib,num_gpu,gpu_milli,gpu_spec,qos,pod_phase,creation_time,deletion_time,"
         "scheduled_time\nt0,4000,8192,1,500,,LS,Running,0,100,0\nt1,8000,16384,2,1000,T4|G2,BE,Failed,5,,5\n")


def _import(tmp_path, nodes=NODES, tasks=TASKS, *extra):
    (tmp_path / "nodes.csv").write_text(nodes)
    (tmp_path / "tasks.csv").write_text(tasks)
    out = tmp_path / "cluster.json"
    code = main(["import", "gpushare", "--nodes", str(tmp_path / "nodes.csv"), "--tasks",
                 str(tmp_path / "tasks.csv"), *extra, "-o", str(out)])
    return code, out


def test_import_reads_the_trace_layout(tmp_path):
    code, out = _import(tmp_path)
    assert code == 0
    instance = fleetplan.load_instance(out)
    assert instance.nodes.id == ["n0", "n1"] and instance.tasks.gpu_spec == ["", "T4|G2"]
    assert instance.tasks.num_gpu == [1, 2]


def test_import_maps_other_column_names(tmp_path):
    code, out = _import(tmp_path, NODES.replace("cpu_milli", "cpu"), TASKS, "--column", "cpu_milli=cpu")
    assert code == 2  # the mapping applies to both tables: tasks have no 'cpu' column
    code, out = _import(tmp_path, NODES.replace("model", "gpu_model"), TASKS, "--column", "model=gpu_model")
    assert code == 0 and fleetplan.load_instance(out).nodes.model == ["T4", "G2"]


@pytest.mark.parametrize(("nodes", "tasks", "words"), [
    (NODES, TASKS.replace("t1,8000", "t1,lots"), "tasks.csv: row 2 (line 3), column 'cpu_milli'"),
    (NODES, TASKS.replace(",2,1000,T4|G2", ",2,500,T4|G2"), "tasks.csv: row 2 (line 3), column 'gpu_milli'"),
    (NODES.replace("n1,96000", "n0,96000"), TASKS, "nodes.csv: row 2 (line 3), column 'sn'"),
    (NODES.replace("model", "colour"), TASKS, "nodes.csv: column 'model': required column is missing"),
    (NODES, TASKS.replace("name,", "title,"), "tasks.csv: column 'name': required column is missing"),
    (NODES.replace("sn,", "sn,rack,").replace("n0,", "n0,1,").replace("n1,", "n1,2,"), TASKS,
     "nodes.csv: column 'rack': unknown column"),
])
def test_import_errors_name_file_line_and_column(tmp_path, capsys, nodes, tasks, words):
    code, out = _import(tmp_path, nodes, tasks)
    assert code == 2 and not out.exists()
    err = capsys.readouterr().err
    assert words in err and "Traceback" not in err and len(err.strip().splitlines()) == 1


def test_a_nodes_fragmentation_does_not_depend_on_its_batch():
    """Equal to the last bit alone or among others: FGD truncates scores, so an ulp moves a choice."""
    instance = fleetplan.generate("gpushare", {"nodes": 40, "tasks": 300, "gpuspec_share": 0.3}, seed=4)
    a = instance.arrays()
    mix = instance_mix(instance)
    rng = np.random.default_rng(0)
    gpu_left = np.where(np.arange(8)[None, :] < a.node_gpus[:, None], rng.integers(0, 1001, (40, 8)), 0)
    cpu_left = rng.integers(0, 96001, 40)
    together = node_fragmentation(cpu_left, gpu_left, a.node_model, mix)
    alone = [node_fragmentation(cpu_left[i:i + 1], gpu_left[i:i + 1], a.node_model[i:i + 1], mix)[0] for i in range(40)]
    assert together.tolist() == alone
