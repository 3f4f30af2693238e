"""Sizing a gpushare cluster (fleetplan size): the purchase makes every task place under the
policy, the pooled bound is below its cost, bad targets and offers are refused; the trace's
peak of concurrent demand."""

from __future__ import annotations

import pytest

import fleetplan
from fleetplan.benchmarks.experiments.gpushare import peak_tasks
from fleetplan.planning import size


@pytest.mark.parametrize("seed", [3, 4])
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
