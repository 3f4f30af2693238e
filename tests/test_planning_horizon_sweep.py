"""What-if over a horizon's fields: every point is the schedule plan_horizon gives for that
point's horizon (checked point by point), paths and points are checked before anything runs,
sweeps resume, run in worker processes and in Dask's chains, and the command keeps its exit
codes."""

from __future__ import annotations

import json

import pytest

from fleetplan.errors import InstanceError
from fleetplan.instances import instance_from_data
from fleetplan.instances.paths import apply_changes
from fleetplan.planning.horizon import plan_horizon
from fleetplan.planning.horizon.sweep import horizon_whatif

# 2 jobs on 2 GPUs, doubling in period 3 (2 more GPUs needed); prices fall 10% a period.
HORIZON = {"periods": 3, "targets": ["min_time_share>=1"], "demand": {"multipliers": [1, 1, 2]},
           "discount_rate": 0.05, "budget": 2.0, "buy": {"g": {"price": 1.0, "price_decline": 0.1, "lead_time": 1}}}


def fleet(count: int = 2, jobs: int = 2) -> dict:
    return {"kind": "allocation", "schema_version": 1, "name": "hand",
            "worker_types": [{"name": "g", "count": count}],
            "jobs": [{"id": f"j{m}", "throughput": {"g": 1.0}} for m in range(jobs)]}


def test_every_point_is_the_schedule_planned_for_that_horizon():
    varies = ["buy.g.lead_time=0:2:1", "budget=1,2"]
    table = horizon_whatif(fleet(), HORIZON, varies, progress=None, stochastic=False)
    assert [(row["buy.g.lead_time"], row["budget"]) for row in table.rows] == [
        (0, 1), (0, 2), (1, 1), (1, 2), (2, 1), (2, 2)]
    for row in table.rows:
        horizon = apply_changes(HORIZON, {"buy.g.lead_time": row["buy.g.lead_time"], "budget": row["budget"]})
        alone = plan_horizon(instance_from_data(fleet(), "fleet"), horizon, stochastic=False)
        assert row["status"] == alone.status
        if alone.success:
            assert row["cost"] == pytest.approx(alone.cost, rel=1e-9)
            assert row["units_g"] == pytest.approx(sum(n for n in alone.orders().values()))
            assert row["first_g"] == pytest.approx(sum(n for (_, t, _), n in alone.orders().items() if t == 1))
    by_point = {(row["buy.g.lead_time"], row["budget"]): row for row in table.rows}
    # lead time 2: both GPUs must be ordered in period 1, and one unit of budget cannot pay for them
    assert by_point[(2, 1)]["status"] == "infeasible" and "message" in by_point[(2, 1)]
    assert by_point[(2, 2)]["first_g"] == pytest.approx(2.0)
    # lead time 0 orders in period 3 at the lowest price, discounted most
    assert by_point[(0, 2)]["cost"] == pytest.approx(2 * 0.81 / 1.05 ** 2)
    assert table.failed == 1 and table.metrics[:3] == ["cost", "bound", "gap"]


def test_instance_fields_are_varied_after_the_instance_prefix():
    table = horizon_whatif(fleet(), HORIZON, ["instance.worker_types.g.count=2,4"], progress=None,
                           stochastic=False)
    assert [row["units_g"] for row in table.rows] == [pytest.approx(2.0), pytest.approx(0.0)]


def test_paths_and_points_are_checked_before_anything_runs(tmp_path):
    with pytest.raises(InstanceError, match=r"--vary.*buy\.h\.lead_time.*not a field of the horizon"):
        horizon_whatif(fleet(), HORIZON, ["buy.h.lead_time=0,1"], tmp_path / "a", progress=None)
    no_budget = {key: value for key, value in HORIZON.items() if key != "budget"}
    with pytest.raises(InstanceError, match="sets no budget"):
        horizon_whatif(fleet(), no_budget, ["budget=1,2"], tmp_path / "b", progress=None)
    with pytest.raises(InstanceError, match="names a str"):
        horizon_whatif(fleet(), HORIZON, ["targets.0=1"], tmp_path / "c", progress=None)
    with pytest.raises(InstanceError, match="the point buy.g.lead_time=-1") as error:
        horizon_whatif(fleet(), HORIZON, ["buy.g.lead_time=-1,0"], tmp_path / "d", progress=None)
    assert "lead_time" in error.value.path
    with pytest.raises(InstanceError, match="mip_rel_gap"):
        horizon_whatif(fleet(), HORIZON, ["budget=1"], tmp_path / "e", progress=None, mip_rel_gap=1.5)
    assert not any((tmp_path / name).exists() for name in "abcde")


def test_an_interrupted_sweep_resumes_and_refuses_another(tmp_path):
    out = tmp_path / "sweep"
    first = horizon_whatif(fleet(), HORIZON, ["budget=2,3"], out, progress=None, stochastic=False, plot=False)
    lines = (out / "results.csv").read_text().splitlines()
    (out / "results.csv").write_text("\n".join(lines[:-1]) + "\n")  # the last point never finished
    again = horizon_whatif(fleet(), HORIZON, ["budget=2,3"], out, progress=None, stochastic=False, plot=False,
                           resume=True)
    assert [row["cost"] for row in again.rows] == [row["cost"] for row in first.rows]
    with pytest.raises(InstanceError, match="another sweep"):
        horizon_whatif(fleet(), HORIZON, ["discount_rate=0,0.1"], out, progress=None, resume=True)


def test_worker_processes_and_dask_chains_give_the_same_table(tmp_path):
    from fleetplan.runs import executors

    local = horizon_whatif(fleet(), HORIZON, ["buy.g.lead_time=0,1"], progress=None, stochastic=False)
    forked = horizon_whatif(fleet(), HORIZON, ["buy.g.lead_time=0,1"], tmp_path / "w", progress=None,
                            stochastic=False, workers=2, plot=False)
    assert [row["cost"] for row in forked.rows] == pytest.approx([row["cost"] for row in local.rows])
    # What a Dask worker runs for a chain: the data sent once, every point answered by its runner.
    from fleetplan.planning.horizon.sweep import RUNNER
    from fleetplan.runs.cells import Cell

    text = json.dumps({"instance": fleet(), "horizon": HORIZON})
    cells = [Cell(suite="s", group="horizon", kind="allocation", instance=f"p{lead}", params={"buy.g.lead_time": lead},
                  seed=0, solver="horizon", label="horizon", options={"stochastic": False}, repeat=0, time_limit=30,
                  runner=RUNNER).to_json() for lead in (0, 1)]
    rows = json.loads(executors.chain_task(text, json.dumps(cells)))
    assert [float(row["objective"]) for row in rows] == pytest.approx([row["cost"] for row in local.rows])
    distributed = pytest.importorskip("dask.distributed")
    with distributed.LocalCluster(n_workers=1, threads_per_worker=1, processes=True, host="127.0.0.1",
                                  dashboard_address=None) as cluster:
        on_dask = horizon_whatif(fleet(), HORIZON, ["buy.g.lead_time=0,1"], tmp_path / "d", progress=None,
                                 stochastic=False, executor="dask", address=cluster.scheduler_address, plot=False)
    assert [row["cost"] for row in on_dask.rows] == pytest.approx([row["cost"] for row in local.rows])


def test_a_runner_outside_fleetplan_is_refused():
    from fleetplan.runs.cells import Cell, run_cell

    cell = Cell(suite="s", group="g", kind="allocation", instance="i", params={}, seed=0, solver="x", label="x",
                options={}, repeat=0, time_limit=1, runner="os:system")
    row = run_cell(cell, preload=False)
    assert row["status"] == "error" and "not a fleetplan.MODULE:FUNCTION" in row["message"]


def test_the_command_sweeps_and_keeps_its_exit_codes(tmp_path, capsys):
    from fleetplan.cli import main

    instance = tmp_path / "fleet.json"
    instance.write_text(json.dumps(fleet()))
    horizon = tmp_path / "h.yaml"
    horizon.write_text(json.dumps(HORIZON))
    out = tmp_path / "sweep"
    code = main(["horizon", str(instance), str(horizon), "--vary", "buy.g.lead_time=0,1", "--no-stochastic",
                 "-o", str(out), "--report", str(tmp_path / "r.html"), "--json"])
    assert code == 0
    answer = json.loads(capsys.readouterr().out)
    assert [row["status"] for row in answer["rows"]] == ["optimal", "optimal"]
    assert {path.name for path in out.iterdir()} >= {"whatif.csv", "whatif.parquet", "whatif.png", "results.csv"}
    assert "purchase schedule" in (tmp_path / "r.html").read_text()
    # every point without a schedule: exit 1
    assert main(["horizon", str(instance), str(horizon), "--vary", "buy.g.lead_time=2", "--vary", "budget=1",
                 "-o", str(tmp_path / "none"), "--json"]) == 1
    capsys.readouterr()
    # flags that belong to one schedule or to a sweep: exit 2, one line, nothing written
    for argv in (["--vary", "budget=1,2"],  # no -o DIR
                 ["--vary", "budget=1,2", "-o", str(tmp_path / "p"), "--plot", str(tmp_path / "p.png")],
                 ["--workers", "2"],
                 ["--vary", "budget=x", "-o", str(tmp_path / "q")]):
        assert main(["horizon", str(instance), str(horizon), *argv]) == 2, argv
        error = capsys.readouterr().err.strip().splitlines()
        assert len(error) == 1, error
    assert not (tmp_path / "p").exists() and not (tmp_path / "q").exists()
