"""Sizing a gpushare cluster (fleetplan size): the purchase makes every task place under the
policy, the bound (pooled, and node by node on today's nodes) is below the cheapest purchase
that places every task (a brute force over every purchase, each checked by an exact program),
``infeasible`` only when proven, bad targets and offers are refused; the trace's peak of
concurrent demand."""

from __future__ import annotations

import itertools
import math

import pytest

import fleetplan
from fleetplan.benchmarks.experiments.gpushare import peak_tasks
from fleetplan.models.gpushare.exact import exact_model
from fleetplan.planning import size
from fleetplan.planning.sizing import parse_purchase
from fleetplan.planning.sizing.gpushare import node_templates, with_nodes


def places_every_task(instance) -> bool:
    """Brute force: the exact program of the instance, counting tasks placed instead of GPU milli."""
    from fleetplan.solvers.highs import new_highs, pass_lp, run

    model = exact_model(instance)
    a = instance.arrays()
    model.lp.cost = (model.is_node_choice | (a.task_num_gpu[model.task] == 1)).astype(float)
    highs = new_highs(None, 1, 0)
    pass_lp(highs, model.lp, "simplex")
    outcome = run(highs)
    return outcome.objective is not None and outcome.objective >= a.num_tasks - 0.5


def cheapest_by_brute_force(instance, buy: list[str]) -> float:
    offers = node_templates(instance, [parse_purchase(b) for b in buy])
    purchases = itertools.product(*[range(int(offer[5]) + 1) for offer in offers])
    for counts in sorted(purchases, key=lambda c: sum(n * offer[4] for n, offer in zip(c, offers, strict=True))):
        if places_every_task(with_nodes(instance, offers, counts)):
            return sum(n * offer[4] for n, offer in zip(counts, offers, strict=True))
    return math.inf


def check_against_brute_force(instance, buy: list[str]):
    cheapest = cheapest_by_brute_force(instance, buy)
    try:
        result = size(instance, ["tasks_pending<=0"], buy, time_limit=60)
    except fleetplan.InstanceError as error:  # a task no node of today's or of the offers' fits
        assert cheapest == math.inf and "fits no node" in str(error)
        return None, cheapest
    if result.status == "infeasible":
        assert cheapest == math.inf
    else:
        assert result.bound <= cheapest + 1e-9
    if result.status in ("optimal", "feasible"):
        assert fleetplan.evaluate(result.sized_instance, result.plan).metrics["tasks_pending"] == 0
        assert result.cost >= cheapest - 1e-9
    if result.status == "optimal":
        assert result.cost == pytest.approx(cheapest)
    return result, cheapest


@pytest.mark.parametrize("seed", [2, 3, 5, pytest.param(7, marks=pytest.mark.slow), 21])
def test_the_bound_and_the_status_against_every_purchase(seed):
    instance = fleetplan.generate("gpushare", {"nodes": 3, "tasks": 22}, seed=seed)
    models = sorted({instance.arrays().models[m] for m in instance.arrays().node_model})
    check_against_brute_force(instance, [f"{model}={1 + i}:2" for i, model in enumerate(models)])


@pytest.mark.slow
@pytest.mark.parametrize("seed", range(30, 60))
def test_the_bound_and_the_status_against_every_purchase_more_seeds(seed):
    instance = fleetplan.generate("gpushare", {"nodes": 3, "tasks": 24}, seed=seed)
    models = sorted({instance.arrays().models[m] for m in instance.arrays().node_model})
    check_against_brute_force(instance, [f"{model}={1 + i}:2" for i, model in enumerate(models)])


def cpu_bound_cluster(tasks: int) -> object:
    # Two nodes like a (four GPUs, CPU for two of the 3-core tasks each) and one like b (one GPU,
    # plenty of CPU): node by node they hold five one-GPU tasks; pooled, a's 16 cores hold five.
    from fleetplan.instances import instance_from_data

    return instance_from_data({
        "kind": "gpushare", "schema_version": 1, "name": "cpu-bound",
        "nodes": {"id": ["a1", "a2", "b"], "cpu_milli": [8000, 8000, 100000], "memory_mib": [65536] * 3,
                  "gpus": [4, 4, 1], "model": ["G2", "G2", "T4"]},
        "tasks": {"id": [f"t{i}" for i in range(tasks)], "cpu_milli": [3000] * tasks, "memory_mib": [1024] * tasks,
                  "num_gpu": [1] * tasks, "gpu_milli": [1000] * tasks, "gpu_spec": [""] * tasks}})


def test_the_node_by_node_bound_sees_what_pooling_misses(monkeypatch):
    instance = cpu_bound_cluster(6)
    result, cheapest = check_against_brute_force(instance, ["T4=1:3"])
    assert cheapest == 1 and result.bound == 1 and result.status == "optimal"
    from fleetplan.planning.sizing import gpushare

    monkeypatch.setattr(gpushare, "_shortfall", lambda *args, **options: (0.0, 0.0))
    assert size(instance, ["tasks_pending<=0"], ["T4=1:3"], time_limit=60).bound == 0  # pooled alone


def test_infeasible_only_when_proven():
    # The greedy placement misses here with every offer at its MAX, yet a purchase of 6 places
    # every task: not proven impossible, so time_limit with the bound, not infeasible.
    instance = fleetplan.generate("gpushare", {"nodes": 3, "tasks": 22}, seed=5)
    result, cheapest = check_against_brute_force(instance, ["P100=1:2", "T4=2:2"])
    assert cheapest == 6 and result.status == "time_limit" and result.bound == 6
    assert not result.success and "not proven impossible" in result.message
    # Eight tasks on the CPU-bound cluster: one more node like a passes the pooled rows (24 cores
    # for 24) and the GPUs bought, but holds two of the three missing: proven short, node by node.
    proven, cheapest = check_against_brute_force(cpu_bound_cluster(8), ["G2=4:1"])
    assert cheapest == math.inf and proven.status == "infeasible" and "proven" in proven.message


@pytest.mark.parametrize("seed", [3, pytest.param(4, marks=pytest.mark.slow)])
def test_the_purchase_places_every_task(seed):
    instance = fleetplan.generate("gpushare", {"nodes": 6, "tasks": 120}, seed=seed)
    assert fleetplan.solve(instance, "offline-greedy").evaluation.metrics["tasks_pending"] > 0
    result = size(instance, ["tasks_pending<=0"], ["G2=8", "T4=2"], time_limit=60)
    assert result.status in ("optimal", "feasible") and result.checks == {"tasks_pending<=0": True}
    assert result.bound <= result.cost == 8 * result.additions["G2"] + 2 * result.additions["T4"]
    verdict = fleetplan.evaluate(result.sized_instance, result.plan)
    assert verdict.feasible and verdict.metrics["tasks_pending"] == 0


def test_nothing_to_buy_when_everything_fits():
    instance = fleetplan.load_instance("examples/gpushare-small.json")
    result = size(instance, ["tasks_pending<=0"], ["G2"])
    assert result.status == "optimal" and result.cost == 0 and result.additions == {"G2": 0.0}


@pytest.mark.parametrize(("target", "buy", "words"), [
    ("tasks_pending<=3", "G2", "only tasks_pending<=0"),
    ("tasks_pending<=0", "H100", "no node of GPU model 'H100'"),
])
def test_bad_sizing_input_names_the_option(target, buy, words):
    instance = fleetplan.load_instance("examples/gpushare-small.json")
    with pytest.raises(fleetplan.InstanceError, match=words):
        size(instance, [target], [buy])


def test_the_peak_is_the_most_demand_alive_at_once(tmp_path):
    path = tmp_path / "tasks.csv"
    path.write_text("name,cpu_milli,memory_mib,num_gpu,gpu_milli,creation_time,deletion_time\n"
                    "a,1,1,1,1000,0,10\nb,1,1,2,1000,5,20\nc,1,1,1,500,10,30\nd,1,1,0,0,12,13\n")
    header, rows, at, demand = peak_tasks(path)
    # at 5..10: a and b (3,000 milli); at 10, a leaves as c arrives: b and c (2,500)
    assert at == 5 and demand == 3000 and [r[0] for r in rows] == ["a", "b"]
