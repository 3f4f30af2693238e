"""The offline side: the pooled relaxation's bound against a brute force on tiny clusters (equal
where pooling loses nothing, above it everywhere) and above every policy's plan; the offline
greedy's plan through the judge."""

from __future__ import annotations

import itertools

import numpy as np
import pytest

import fleetplan
from fleetplan.instances.gpushare import GpushareInstance
from fleetplan.solvers.gpushare.offline import allocation_bound

POLICIES = ["fgd", "random", "dot-product", "gpu-clustering", "gpu-packing", "best-fit", "offline-greedy"]


_BRUTE_FORCE: dict[str, int] = {}


def brute_force(instance: GpushareInstance) -> int:
    """The most GPU milli any plan places: every task pending or on a node's GPUs, tried all.
    Tried once per instance: the exact model's and the pattern bound's properties below draw the
    same tiny clusters."""
    key = instance.model_dump_json()
    if key not in _BRUTE_FORCE:
        _BRUTE_FORCE[key] = _try_every_plan(instance)
    return _BRUTE_FORCE[key]


def _try_every_plan(instance: GpushareInstance) -> int:
    a = instance.arrays()
    options = []
    for j in range(a.num_tasks):
        mine = [None]
        for i in range(a.num_nodes):
            if a.task_num_gpu[j] > 0 and not a.task_access[j, a.node_model[i]]:
                continue
            for gpus in itertools.combinations(range(int(a.node_gpus[i])), int(a.task_num_gpu[j])):
                mine.append((i, gpus))
        options.append(mine)
    best = 0
    for choice in itertools.product(*options):
        cpu = [0] * a.num_nodes
        memory = [0] * a.num_nodes
        gpu: dict[tuple[int, int], int] = {}
        placed = 0
        for j, pick in enumerate(choice):
            if pick is None:
                continue
            i, gpus = pick
            cpu[i] += int(a.task_cpu[j])
            memory[i] += int(a.task_memory[j])
            for g in gpus:
                gpu[(i, g)] = gpu.get((i, g), 0) + int(a.task_gpu_milli[j])
            placed += int(a.task_num_gpu[j] * a.task_gpu_milli[j])
        if (all(c <= a.node_cpu[i] and m <= a.node_memory[i] for i, (c, m) in enumerate(zip(cpu, memory, strict=True)))
                and all(v <= 1000 for v in gpu.values())):
            best = max(best, placed)
    return best


def tiny(nodes: list[tuple[int, int]], tasks: list[tuple[int, int, int]]) -> GpushareInstance:
    """Nodes (CPU milli, GPUs) of model T4 and tasks (CPU milli, GPUs, milli)."""
    return GpushareInstance.model_validate({
        "kind": "gpushare",
        "nodes": {"id": [f"n{i}" for i in range(len(nodes))], "cpu_milli": [n[0] for n in nodes],
                  "memory_mib": [1000] * len(nodes), "gpus": [n[1] for n in nodes], "model": ["T4"] * len(nodes)},
        "tasks": {"id": [f"t{j}" for j in range(len(tasks))], "cpu_milli": [t[0] for t in tasks],
                  "memory_mib": [100] * len(tasks), "num_gpu": [t[1] for t in tasks],
                  "gpu_milli": [t[2] for t in tasks]}})


@pytest.mark.parametrize(("nodes", "tasks"), [
    ([(8000, 2)], [(4000, 1, 1000), (4000, 1, 1000), (2000, 1, 1000)]),  # CPU binds: 2 of 3
    ([(8000, 4)], [(2000, 2, 1000), (2000, 2, 1000), (6000, 1, 1000)]),
    ([(16000, 2)], [(1000, 1, 600), (1000, 1, 600), (1000, 1, 400), (1000, 1, 400)]),
])
def test_the_bound_equals_a_brute_force_where_pooling_loses_nothing(nodes, tasks):
    instance = tiny(nodes, tasks)
    assert allocation_bound(instance).bound_milli == brute_force(instance)


@pytest.mark.parametrize("seed", range(6))
def test_the_bound_is_above_the_brute_force_and_every_policy(seed):
    instance = fleetplan.generate("gpushare", {"nodes": 2, "tasks": 5, "sharing_share": 0.5}, seed=seed)
    if instance.arrays().node_gpus.sum() > 6:  # keep the brute force small
        instance = fleetplan.generate("gpushare", {"nodes": 1, "tasks": 5, "sharing_share": 0.5}, seed=seed)
    bound = allocation_bound(instance).bound_milli
    assert bound >= brute_force(instance)
    for solver in POLICIES:
        assert fleetplan.solve(instance, solver, seed=seed).objective <= bound + 1e-9


@pytest.mark.parametrize("seed", [0, 1])
def test_the_bound_is_above_every_policy_on_crowded_clusters(seed):
    instance = fleetplan.generate("gpushare", {"nodes": 15, "tasks": 250, "gpuspec_share": 0.2}, seed=seed)
    result = fleetplan.solve(instance, "offline-greedy", seed=seed)
    assert result.evaluation.feasible and result.bound is not None and 0 <= result.gap < 1
    for solver in POLICIES[:-1]:
        assert fleetplan.solve(instance, solver, seed=seed).objective <= result.bound


@pytest.mark.parametrize("seed", range(8))
def test_the_exact_model_equals_a_brute_force_on_tiny_clusters(seed):
    instance = fleetplan.generate("gpushare", {"nodes": 1 + seed % 2, "tasks": 5, "sharing_share": 0.5,
                                               "multi_gpu_share": 0.2, "gpuspec_share": 0.3}, seed=seed)
    if instance.arrays().node_gpus.sum() > 6:
        instance = fleetplan.generate("gpushare", {"nodes": 1, "tasks": 5, "sharing_share": 0.5}, seed=seed + 100)
    exact = fleetplan.solve(instance, "mip-highs")
    assert exact.status == "optimal" and exact.evaluation.feasible
    assert exact.objective == brute_force(instance)
    assert allocation_bound(instance).bound_milli >= exact.objective


@pytest.mark.parametrize("seed", range(3))
def test_the_exact_model_bounds_every_policy(seed):
    instance = fleetplan.generate("gpushare", {"nodes": 3, "tasks": 14, "sharing_share": 0.5,
                                               "multi_gpu_share": 0.1}, seed=seed)
    exact = fleetplan.solve(instance, "mip-highs")
    assert exact.status == "optimal" and exact.evaluation.feasible
    for solver in POLICIES:
        assert fleetplan.solve(instance, solver, seed=seed).objective <= exact.objective


# The node-pattern bound and plan (offline-patterns): per node, not pooled.

def test_the_pattern_bound_sees_what_pooling_cannot():
    """Two identical nodes of 4 cores and 2 GPUs, three whole-GPU tasks of 2.5 cores: pooled,
    7.5 of 8 cores and 3 of 4 GPUs fit all three (3,000 milli); per node only one task fits
    (two need 5 cores), so no plan places more than 2,000 and the patterns say so."""
    instance = tiny([(4000, 2), (4000, 2)], [(2500, 1, 1000)] * 3)
    assert allocation_bound(instance).bound_milli == 3000
    result = fleetplan.solve(instance, "offline-patterns")
    assert brute_force(instance) == 2000
    assert result.bound == 2000 and result.objective == 2000 and result.status == "optimal"


@pytest.mark.parametrize("seed", range(8))
def test_the_pattern_bound_is_above_a_brute_force_and_its_plan_is_judged_feasible(seed):
    instance = fleetplan.generate("gpushare", {"nodes": 1 + seed % 2, "tasks": 5, "sharing_share": 0.5,
                                               "multi_gpu_share": 0.2, "gpuspec_share": 0.3}, seed=seed)
    if instance.arrays().node_gpus.sum() > 6:
        instance = fleetplan.generate("gpushare", {"nodes": 1, "tasks": 5, "sharing_share": 0.5}, seed=seed + 100)
    result = fleetplan.solve(instance, "offline-patterns", seed=seed)
    best = brute_force(instance)
    assert result.evaluation.feasible and result.objective <= best <= result.bound + 1e-6
    assert result.bound <= allocation_bound(instance).bound_milli + 1e-6  # never looser than pooling


def test_a_bound_cut_short_is_still_a_bound():
    """The Lagrangian value of any round bounds every plan: one round from single-task patterns
    (the deadline already past) still lies above the optimum."""
    from fleetplan.models.gpushare.patterns import pattern_classes
    from fleetplan.solvers.deadline import Deadline
    from fleetplan.solvers.gpushare.offline.patterns import pattern_bound

    instance = fleetplan.generate("gpushare", {"nodes": 3, "tasks": 14, "sharing_share": 0.5,
                                               "multi_gpu_share": 0.1}, seed=1)
    classes = pattern_classes(instance)
    cut = pattern_bound(classes, np.zeros(0, dtype=np.int64), np.zeros((len(classes.shape_count), 0), dtype=np.int64),
                        deadline=Deadline(0.0))
    assert cut.rounds == 1
    assert cut.bound_milli >= fleetplan.solve(instance, "mip-highs").objective - 1e-6


@pytest.mark.parametrize(("pricing", "seed", "limit"), [("relaxed", 0, None), ("relaxed", 1, None), ("packed", 1, 2.0)])
def test_the_pattern_plan_and_bound_frame_every_policy_on_crowded_clusters(pricing, seed, limit):
    """Relaxed pricing converges fast here; packed pricing on eight-GPU nodes with many sharing
    shapes is cut by the time limit, and the bound it reports is still above every plan."""
    instance = fleetplan.generate("gpushare", {"nodes": 15, "tasks": 250, "gpuspec_share": 0.2,
                                               "sharing_share": 0.6}, seed=seed)
    result = fleetplan.solve(instance, "offline-patterns", seed=seed, time_limit=limit, pricing=pricing)
    assert result.evaluation.feasible and result.objective == result.evaluation.objective
    for solver in POLICIES:
        assert fleetplan.solve(instance, solver, seed=seed).objective <= result.bound + 1e-6
    assert result.objective >= fleetplan.solve(instance, "fgd", seed=seed).objective


def test_packed_pricing_packs_gpu_by_gpu_where_the_cuts_cannot():
    """One node of 2 GPUs, two 650-milli and four 400-milli sharing tasks. GPU by GPU the best
    is two 400s on each GPU, 1,600 milli (a 650 leaves room for no 400). The relaxed pricing's
    rows allow one 650 and three 400s: 1,850 milli within 2,000, one task above 500 per GPU and
    four above 333 within 2 per GPU each; so its bound is 1,850, the packed one 1,600."""
    instance = tiny([(16000, 2)], [(1000, 1, 650)] * 2 + [(1000, 1, 400)] * 4)
    assert brute_force(instance) == 1600
    packed = fleetplan.solve(instance, "offline-patterns")
    relaxed = fleetplan.solve(instance, "offline-patterns", pricing="relaxed")
    assert packed.bound == pytest.approx(1600) and packed.objective == 1600 and packed.status == "optimal"
    assert relaxed.bound == pytest.approx(1850) and relaxed.objective == 1600
