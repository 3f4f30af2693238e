"""fgd-cpu-aware: FGD whose ties go to the node where a task strands the least idle GPU milli
for want of CPU. Its key and scores on cases computed by hand, and a tiny cluster where FGD's
name ties strand a GPU and this policy places every task a feasible plan places."""

from __future__ import annotations

import numpy as np

import fleetplan
from fleetplan.instances.gpushare import GpushareInstance, GpusharePlan
from fleetplan.instances.gpushare.evaluate import evaluate
from fleetplan.instances.gpushare.fragmentation import instance_mix
from fleetplan.solvers.gpushare.engine import ClusterState, place_in_order
from fleetplan.solvers.gpushare.online.fgd import FGD
from fleetplan.solvers.gpushare.online.fgd_cpu_aware import (
    FGDCpuAware,
    cpu_aware_key,
    cpu_per_gpu_milli,
    cpu_stranded_milli,
)
from tests.test_gpushare_policies import ALL, shape, state_of

# One shape of one whole GPU and 8 cores: 8 milli-cores per GPU milli.
EIGHT_CORES_PER_GPU = [{"cpu_milli": 8000, "num_gpu": 1, "gpu_milli": 1000, "weight": 1.0}]


def test_the_ratio_and_the_stranded_milli_by_hand():
    state = state_of([(16000, 2, [1000, 1000])], mix=EIGHT_CORES_PER_GPU)
    assert cpu_per_gpu_milli(state.mix) == 8.0
    # 2,000 idle milli, 16,000 milli-cores serve 2,000 at 8 per milli: none stranded; with
    # 8,000 left they serve 1,000: 1,000 stranded; a CPU surplus strands nothing.
    assert cpu_stranded_milli(np.array([16000, 8000, 40000]), np.array([2000, 2000, 2000]), 8.0).tolist() == \
        [0.0, 1000.0, 0.0]
    # a mix of CPU tasks only: no ratio, nothing stranded
    cpu_only = state_of([(16000, 2, [1000, 1000])], mix=[{"cpu_milli": 1000, "num_gpu": 0, "gpu_milli": 0,
                                                          "weight": 1.0}])
    assert cpu_per_gpu_milli(cpu_only.mix) == 0.0
    assert cpu_stranded_milli(np.array([0]), np.array([2000]), 0.0).tolist() == [0.0]


def test_a_cpu_task_goes_where_it_strands_no_gpu():
    # Node 0: 2 idle GPUs, 20,000 milli-cores: stranded 0 before, after an 8,000 task
    # 2000 - 12000 / 8 = 500: key 999 - 500 = 499. Node 1: 2 idle GPUs, 24,000: 0 before,
    # 2000 - 16000 / 8 = 0 after: key 999. Node 2: both GPUs used: nothing to strand, 999.
    # FGD scores 50 on all three (every node still hosts the mix's shape after the task).
    state = state_of([(20000, 2, [1000, 1000]), (24000, 2, [1000, 1000]), (16000, 2, [0, 0])],
                     mix=EIGHT_CORES_PER_GPU)
    task = shape(8000, 0, 0)
    assert FGD().scores(state, ALL(3), task).tolist() == [50, 50, 50]
    assert cpu_aware_key(state, ALL(3), task).tolist() == [499, 999, 999]
    assert FGDCpuAware().scores(state, ALL(3), task).tolist() == [50499, 50999, 50999]


def test_the_key_only_breaks_fgd_ties():
    # A whole-GPU task of 8 cores, FGD 50 on all three nodes: node 0 (GPUs [1000, 600]) keeps F
    # at 600; node 1 (free, 16 cores) and node 2 (one free GPU, 12 cores) keep F at 0. Keys:
    # node 0 strands 0 before (16000 / 8 = 2000 serve its 1,600 idle milli) and 0 after (8000 / 8
    # = 1000 serve the 600 left); node 1 0 -> 0 (1000 idle, 1000 served); node 2 has no idle GPU
    # after. All keys 999: the first name still wins, as under FGD.
    state = state_of([(16000, 2, [1000, 600]), (16000, 2, [1000, 1000]), (12000, 1, [1000])],
                     mix=EIGHT_CORES_PER_GPU)
    task = shape(8000, 1, 1000)
    plain = FGD().scores(state, ALL(3), task)
    assert plain.tolist() == [50, 50, 50]
    assert FGDCpuAware().scores(state, ALL(3), task).tolist() == (plain * 1000 + 999).tolist()
    # A higher FGD score wins whatever the key: a 500-milli task on node 0's 600 GPU
    # (F 600 -> 100: int(100 sigmoid(0.5)) = 62) against 37 on the free nodes.
    sharing = shape(1000, 1, 500)
    assert FGD().scores(state, ALL(2), sharing).tolist() == [62, 37]
    mixed = FGDCpuAware().scores(state, ALL(2), sharing)
    assert (mixed // 1000).tolist() == [62, 37] and int(np.argmax(mixed)) == 0


def _one_cpu_task_then_four_gpu_tasks() -> GpushareInstance:
    """Two 2-GPU T4 nodes, ``n0`` of 8 cores and ``n1`` of 16; a CPU-only task of 4 cores
    arrives first, then four tasks of one GPU and 4 cores each (the mix: that GPU shape)."""
    return GpushareInstance.model_validate({
        "kind": "gpushare",
        "nodes": {"id": ["n0", "n1"], "cpu_milli": [8000, 16000], "memory_mib": [100, 100], "gpus": [2, 2],
                  "model": ["T4", "T4"]},
        "tasks": {"id": ["cpu", "g1", "g2", "g3", "g4"], "cpu_milli": [4000] * 5, "memory_mib": [1] * 5,
                  "num_gpu": [0, 1, 1, 1, 1], "gpu_milli": [0, 1000, 1000, 1000, 1000]},
        "mix": [{"cpu_milli": 4000, "num_gpu": 1, "gpu_milli": 1000, "weight": 1.0}]})


def test_where_fgd_strands_a_gpu_the_cpu_aware_ties_place_every_task():
    """By hand: FGD scores the CPU task 50 on both nodes (each still hosts a 4-core GPU task
    after it), so the name sends it to n0, whose 4 cores left serve one of its two GPUs: one
    GPU task stays pending. The key: on n0 the task strands 2000 - 4000 / 4 = 1000 milli (key
    0), on n1 none (16000 - 4000 serve 3,000 milli > 2,000: key 999), so it goes to n1 and all
    five tasks fit — the placement every feasible plan that places everything makes."""
    instance = _one_cpu_task_then_four_gpu_tasks()
    mix = instance_mix(instance)
    by_fgd = place_in_order(ClusterState(instance.arrays(), mix), FGD(), seed=0).task_node
    assert by_fgd[0] == 0 and (by_fgd == -1).sum() == 1
    state = ClusterState(instance.arrays(), mix)
    outcome = place_in_order(state, FGDCpuAware(), seed=0)
    assert outcome.task_node.tolist()[0] == 1 and (outcome.task_node >= 0).all()
    plan = GpusharePlan.from_arrays(instance, outcome.task_node, outcome.task_gpus)
    verdict = evaluate(instance, plan)
    assert verdict.feasible and verdict.metrics["tasks_pending"] == 0
    assert state.allocated_milli == 4000
    # the registered solver makes the same plan, judged by the same evaluate
    result = fleetplan.solve(instance, "fgd-cpu-aware")
    assert result.evaluation.feasible and result.plan.assignments == plan.assignments
