"""The planner's commands tried from outside: bad input is one line naming the flag (exit 2),
no plan is exit 1, and what the terminal prints agrees with the JSON and the report."""


import json
import math

import pytest
from conftest import EXAMPLES

import fleetplan
from fleetplan.cli.app import main
from fleetplan.errors import InstanceError
from fleetplan.planning import size

INVENTORY = str(EXAMPLES / "inventory-30-jobs.json")


def test_size_without_a_target_is_refused_not_sized_to_nothing(tmp_path, capsys):
    # A forgotten --target used to print "optimal ... nothing to buy" and exit 0.
    sized = tmp_path / "sized.json"
    assert main(["size", INVENTORY, "--buy", "v100", "-o", str(sized)]) == 2
    err = capsys.readouterr().err
    assert "--target" in err and len(err.strip().splitlines()) == 1 and not sized.exists()
    with pytest.raises(InstanceError, match="at least one target"):
        size(fleetplan.load_instance(INVENTORY), [], ["v100"])


def test_size_unknown_policy_names_the_flag(capsys):
    assert main(["size", INVENTORY, "--target", "min_time_share>=0.5", "--buy", "k80", "--policy", "nosuch"]) == 2
    err = capsys.readouterr().err.strip()
    assert err.startswith("error: --policy:") and "nosuch" in err and len(err.splitlines()) == 1



def test_size_infeasible_prints_no_inf_and_agrees_with_its_json(capsys):
    argv = ["size", INVENTORY, "--target", "min_time_share>=0.5", "--buy", "v100", "--budget", "1"]
    assert main(argv) == 1
    out = capsys.readouterr().out
    assert "infeasible" in out and "inf " not in out.replace("infeasible", "") and "nan" not in out
    assert main([*argv, "--json"]) == 1
    data = json.loads(capsys.readouterr().out, parse_constant=lambda text: pytest.fail(f"{text} in JSON"))
    assert data["status"] == "infeasible" and data["bound"] is None
    assert "bound -" in out  # the terminal's "-" is the JSON's null


def test_numbers_never_print_inf_or_nan():
    from fleetplan.cli.display.numbers import fmt_measure, fmt_number

    for value in (math.inf, -math.inf, math.nan):
        assert fmt_number(value) == "-"
        assert fmt_measure("cost", value) == "-"
    # an infinite VSS has a meaning: the mean scenario's orders leave a scenario unservable
    assert "inf" not in fmt_measure("vss", math.inf) and "mean" in fmt_measure("vss", math.inf)



def test_horizon_sweep_says_what_an_infinite_vss_means(tmp_path, capsys):
    # At 30% growth the mean scenario's orders leave the fast case unservable: VSS is infinite,
    # which the report printed as "inf" and --json as Infinity (not JSON); the CSV keeps it.
    report = tmp_path / "sweep.html"
    assert main(["horizon", INVENTORY, str(EXAMPLES / "horizon-1-year.yaml"), "--policy", "none",
                 "--vary", "scenarios.cases.fast.demand.growth=0.3", "-o", str(tmp_path / "sweep"),
                 "--report", str(report), "--json"]) == 0
    data = json.loads(capsys.readouterr().out, parse_constant=lambda text: pytest.fail(f"{text} in JSON"))
    assert data["rows"][0]["vss"] is None and "inf" in (tmp_path / "sweep" / "whatif.csv").read_text()
    page = report.read_text()
    assert "mean plan unservable" in page and ">inf<" not in page


def test_sweep_table_prints_no_inf_and_names_what_ran():
    from rich.console import Console

    from fleetplan.cli.planning.output import render_sweep
    from fleetplan.planning.whatif import WhatIfResult

    console = Console(width=300, record=True)
    result = WhatIfResult(rows=[{"growth": 0.3, "status": "feasible", "cost": 60885.4, "vss": math.inf},
                                {"growth": 100000.0, "status": "feasible", "cost": 1.0, "vss": 2.0}],
                          varied=["growth"], metrics=["cost", "vss"], solver="the horizon model")
    render_sweep(console, result)
    text = console.export_text()
    assert "mean plan unservable" in text and " inf " not in text and "60,885" in text
    # a varied value as a planner writes it: 100,000, not 100000.0
    assert "100,000" in text and "100000.0" not in text


def test_a_sweeps_gap_column_prints_as_the_sizing_line_does():
    # "0.00%" in a horizon sweep's gap column where `size` and `horizon` print "0%" below 1e-6
    from fleetplan.cli.display.numbers import fmt_gap, fmt_measure

    for gap in (0.0, 1e-9, 0.00125, 0.5):
        assert fmt_measure("gap", gap) == fmt_measure("gap", gap, 4) == fmt_gap(gap)
    assert fmt_measure("gap", 0.0) == "0%" and fmt_measure("gap", 0.00125) == "0.125%"


@pytest.mark.parametrize("vary,named", [("nosuch.field=1:3:1", "nosuch"), ("worker_types.h100.count=1,2", "h100")])
def test_whatif_unknown_field_names_the_flag(tmp_path, capsys, vary, named):
    out = tmp_path / "sweep"
    assert main(["whatif", INVENTORY, "--vary", vary, "-o", str(out)]) == 2
    err = capsys.readouterr().err.strip()
    assert err.startswith("error: --vary:") and named in err and len(err.splitlines()) == 1 and not out.exists()


def test_horizon_unknown_policy_names_the_flag(tmp_path, capsys):
    horizon = str(EXAMPLES / "horizon-1-year.yaml")
    for extra in ([], ["--vary", "budget=1e5", "-o", str(tmp_path / "sweep")]):
        assert main(["horizon", INVENTORY, horizon, "--policy", "nosuch", *extra]) == 2
        err = capsys.readouterr().err.strip()
        assert err.startswith("error: --policy:") and "nosuch" in err and len(err.splitlines()) == 1
    assert not (tmp_path / "sweep").exists()


def test_horizon_file_that_is_empty_or_an_instance_is_one_line(tmp_path, capsys):
    empty = tmp_path / "empty.yaml"
    empty.write_text("# nothing yet\n")
    assert main(["horizon", INVENTORY, str(empty)]) == 2
    err = capsys.readouterr().err.strip()
    assert err == f"error: {empty}: the file is empty: a horizon is a mapping of fields (periods, targets, buy, ...)"
    # the arguments swapped: one line saying so, not one per field of the instance
    assert main(["horizon", INVENTORY, INVENTORY, "-o", str(tmp_path / "s.json")]) == 2
    err = capsys.readouterr().err.strip()
    assert "instance first" in err and len(err.splitlines()) == 1 and not (tmp_path / "s.json").exists()


def test_compare_report_says_what_the_terminal_says(tmp_path, capsys, monkeypatch):
    # The report wrote "0 same", "0 pp same" and "... not comparable" where the terminal wrote
    # "same" and the objectives' names: one table, two wordings.
    import html
    import re

    instance = fleetplan.load_instance(INVENTORY)
    paths = []
    for name in ("max-min-fairness", "max-throughput"):
        paths.append(tmp_path / f"{name}.json")
        fleetplan.save(fleetplan.solve(instance, name).plan, paths[-1])
    monkeypatch.setenv("COLUMNS", "300")
    report = tmp_path / "compare.html"
    assert main(["compare", *map(str, paths), "--instance", INVENTORY, "--report", str(report)]) == 0
    out = capsys.readouterr().out
    terminal = {}
    for line in out.splitlines():
        cells = [cell.strip() for cell in line.strip("│ ").split("│")]
        if len(cells) == 5:
            terminal[cells[0]] = cells[4]
    page = {}
    for row in re.findall(r"<tr>(.*?)</tr>", report.read_text(), re.S):
        cells = [html.unescape(re.sub("<.*?>", "", cell)).strip() for cell in re.findall(r"<td[^>]*>(.*?)</td>", row, re.S)]
        if len(cells) == 5:
            page[cells[0]] = cells[4]
    assert terminal["cost_per_hour"] == page["cost_per_hour"] == "same"
    assert page["min_time_share"] == terminal["min_time_share"] and "pp worse" in page["min_time_share"]
    assert page["objective"] == terminal["objective"]
    shared = set(terminal) & set(page)
    assert len(shared) > 10 and all(terminal[name] == page[name] for name in shared)


def test_a_missed_target_is_written_as_the_tables_write_it():
    # "misses min_time_share 0.128828 < 0.5" beside a table that prints 12.88% and 50.00%
    result = size(fleetplan.load_instance(INVENTORY), ["min_time_share>=0.5"], ["v100", "p100", "k80"])
    assert "misses min_time_share 12.88% < 50.00%" in result.message and "0.128828" not in result.message


def test_size_report_writes_the_purchase_as_the_terminal_does(tmp_path, capsys, monkeypatch):
    # Storage bought was "1.65658e+12 bytes" in the report and "1.66 TB" on the terminal.
    import html
    import re

    data = json.loads((EXAMPLES / "placement-small.json").read_text())
    for region in data["regions"]:
        region["storage_capacity_bytes"] *= 0.5
    instance = tmp_path / "half-storage.json"
    instance.write_text(json.dumps(data))
    monkeypatch.setenv("COLUMNS", "200")
    report = tmp_path / "size.html"
    assert main(["size", str(instance), "--target", "storage_over_capacity_bytes<=0", "--buy", "region0/storage=1e-9",
                 "--buy", "*/h100=2", "--report", str(report)]) == 0
    out = capsys.readouterr().out
    rows = [[html.unescape(re.sub("<.*?>", "", cell)).strip() for cell in re.findall(r"<td[^>]*>(.*?)</td>", row, re.S)]
            for row in re.findall(r"<tr>(.*?)</tr>", report.read_text(), re.S)]
    bought = [row for row in rows if row and row[0] == "region0/storage"]
    assert bought == [["region0/storage", "1.66 TB", ""]] and "1.66 TB" in out and "e+12" not in report.read_text()


def test_size_sweep_checks_every_target_value_before_sizing(monkeypatch, capsys):
    # A target value out of range (a time share of 2) was found only when its point came up,
    # after the points before it had been sized, and the error named --target, not --vary.
    import fleetplan.planning.sizing.sweep as sweep

    sized = []
    monkeypatch.setattr(sweep, "size", lambda *args, **kwargs: sized.append(args) or pytest.fail("sized"))
    assert main(["size", INVENTORY, "--target", "min_time_share>=0.6", "--buy", "k80",
                 "--vary", "target.min_time_share=0.5,2"]) == 2
    err = capsys.readouterr().err.strip()
    assert err.startswith("error: --vary:") and "min_time_share=2" in err and len(err.splitlines()) == 1
    assert not sized


def test_compare_names_each_plans_policy(tmp_path, capsys, monkeypatch):
    instance = fleetplan.load_instance(INVENTORY)
    paths = []
    for name in ("max-min-fairness", "max-throughput"):
        paths.append(tmp_path / ("a.json" if name == "max-min-fairness" else "b.json"))
        fleetplan.save(fleetplan.solve(instance, name).plan, paths[-1])
    monkeypatch.setenv("COLUMNS", "300")
    report = tmp_path / "compare.html"
    assert main(["compare", *map(str, paths), "--instance", INVENTORY, "--report", str(report)]) == 0
    title = "allocation plans compared with a (max-min-fairness): b (max-throughput)"
    assert title in capsys.readouterr().out and f"<title>{title}</title>" in report.read_text()
    assert main(["compare", *map(str, paths), "--instance", INVENTORY, "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["solvers"] == {"a": "max-min-fairness", "b": "max-throughput"}
    # a plan with an instance of another kind: "a plan of kind allocation", not "a allocation plan"
    assert main(["compare", str(paths[0]), "--instance", str(EXAMPLES / "binpack-small.json")]) == 2
    assert "a plan of kind allocation needs an instance of kind allocation" in capsys.readouterr().err


def test_horizon_report_amounts_are_the_terminals(tmp_path, capsys, monkeypatch):
    # The report wrote capex 7,527.2 and opex 13,030.5 where the terminal wrote 7,527 and 13,030.
    import html
    import re

    monkeypatch.setenv("COLUMNS", "300")
    report = tmp_path / "horizon.html"
    assert main(["horizon", INVENTORY, str(EXAMPLES / "horizon-1-year.yaml"), "--no-stochastic", "--policy", "none",
                 "--report", str(report)]) == 0
    terminal = {}
    for line in capsys.readouterr().out.splitlines():
        cells = [cell.strip() for cell in line.strip("│ ").split("│")]
        if len(cells) >= 8 and cells[1].isdigit():
            terminal[(cells[0], cells[1])] = (cells[6], cells[7])  # capex, opex
    page = {}
    for row in re.findall(r"<tr>(.*?)</tr>", report.read_text(), re.S):
        cells = [html.unescape(re.sub("<.*?>", "", cell)).strip() for cell in re.findall(r"<td[^>]*>(.*?)</td>", row, re.S)]
        if len(cells) == 6 and cells[1].isdigit():  # the periods table (the orders table has 8 columns)
            page[(cells[0], cells[1])] = (cells[2], cells[3])
    assert len(terminal) == 8 and page == terminal


def test_horizon_storage_is_written_in_gb_and_tb(tmp_path, capsys, monkeypatch):
    # Placement's storage columns printed 5,521,935,940,332 (bytes) beside GPU-hours.
    import re

    monkeypatch.setenv("COLUMNS", "300")
    report = tmp_path / "horizon.html"
    assert main(["horizon", str(EXAMPLES / "placement-small.json"), str(EXAMPLES / "horizon-placement.yaml"),
                 "--report", str(report)]) == 0
    out = capsys.readouterr().out
    assert "5.52 TB" in out and "storage in GB/TB" in out and not re.search(r"\d{1,3}(,\d{3}){3,}", out)
    page = re.sub(r'src="data:[^"]*"', "", report.read_text())
    assert "TB" in page and not re.search(r"\d{1,3}(,\d{3}){3,}", page)


def test_horizon_message_writes_orders_as_a_planner_does():
    from types import SimpleNamespace

    from fleetplan.planning.horizon import _order_summary

    result = SimpleNamespace(period_name="quarter", scenarios=[{"name": "base"}],
                             orders=lambda: {("base", 1, "region0/storage"): 320272285538.0,
                                             ("base", 1, "region0/h100"): 149.852, ("base", 2, "region0/a100"): 2000.0})
    text = _order_summary(result)
    assert "320 GB region0/storage in quarter 1" in text and "149.852 region0/h100" in text
    assert "2,000 region0/a100 in quarter 2" in text and "e+" not in text


def test_horizon_that_does_not_fit_the_instance_is_refused_before_any_point(tmp_path, capsys, monkeypatch):
    # An unknown target metric, or a GPU type the instance lacks, is found only against the
    # instance: the sweep ran every point to the same "invalid input" (exit 1), and the plain
    # command's error did not name the horizon file.
    import fleetplan.planning.horizon.sweep as sweep

    monkeypatch.setattr(sweep, "_sweep", lambda *args, **kwargs: pytest.fail("the points ran"))
    text = (EXAMPLES / "horizon-1-year.yaml").read_text()
    for name, changed, named in (("metric.yaml", text.replace("min_throughput_vs_fastest>=0.3", "nosuch>=1"), "nosuch"),
                                 ("type.yaml", text.replace("  k80: {opex", "  h100: {opex"), "existing.h100")):
        horizon = tmp_path / name
        horizon.write_text(changed)
        assert main(["horizon", INVENTORY, str(horizon), "--policy", "none", "--vary", "budget=1e5",
                     "-o", str(tmp_path / "sweep")]) == 2
        err = capsys.readouterr().err.strip()
        assert named in err and len(err.splitlines()) == 1 and not (tmp_path / "sweep").exists()
        assert main(["horizon", INVENTORY, str(horizon), "--policy", "none"]) == 2
        err = capsys.readouterr().err.strip()
        assert err.startswith(f"error: {horizon}:") and named in err


def test_binding_table_shows_each_metrics_change_at_its_own_scale(capsys, monkeypatch):
    # binpack's objective is an encoded score near 2.8e14: the table printed every metric change
    # below 1e-9 of it (one preemption fewer, four GPUs idle) as "0", and the objective's change
    # as -16,777,217, a number that means nothing to a planner.
    monkeypatch.setenv("COLUMNS", "250")
    assert main(["solve", str(EXAMPLES / "binpack-small.json"), "--binding"]) == 0
    out = capsys.readouterr().out
    rows = [[cell.strip() for cell in line.strip("│ ").split("│")] for line in out.splitlines()
            if line.startswith("│ dc")]
    assert rows and all(row[2] == "-1 priority-3 preemptions / no idle machine" and row[3] == "-1 / -"
                        and row[4] == "+4 / -"
                        for row in rows)
    assert "16,777" not in out


def test_gpushare_nothing_to_buy_says_so():
    # "optimal: 0 nodes bought for 0; the bound ... proves no purchase under 0 places every task"
    result = size(fleetplan.load_instance(str(EXAMPLES / "gpushare-small.json")), ["tasks_pending<=0"], ["T4"])
    assert result.status == "optimal" and result.cost == 0
    assert result.message == "nothing to buy: offline-greedy places every task on today's nodes"


def test_reservation_nothing_to_buy_does_not_speak_of_racks_bought():
    result = size(fleetplan.load_instance(str(EXAMPLES / "reservation-small.json")), ["shortfall_rru<=0"], ["gpu-h100"])
    assert result.status == "optimal" and not any(result.additions.values())
    assert result.message.startswith("nothing to buy; the instance meets every target under")


def test_size_sweep_json_is_json_when_a_point_is_infeasible(capsys):
    # An infeasible point's bound went out as Infinity, which no JSON parser reads.
    assert main(["size", INVENTORY, "--target", "min_time_share>=0.6", "--buy", "k80", "--vary", "budget=0,100",
                 "--json"]) == 0
    data = json.loads(capsys.readouterr().out, parse_constant=lambda text: pytest.fail(f"{text} in JSON"))
    assert [row["status"] for row in data["rows"]] == ["infeasible", "optimal"] and data["rows"][0]["bound"] is None


def test_a_stopped_box_search_states_the_bound_it_reports():
    # With no points to check, the log said "no purchase cheaper than 0 can pass" beside a bound
    # of 3.6 (the policy-free minimum), and "the cheapest of 1 rays".
    result = size(fleetplan.load_instance(INVENTORY), ["min_time_share>=0.5"], ["k80"], policy="max-min-fairness",
                  max_points=0)
    assert result.status == "feasible" and result.bound == pytest.approx(3.6)
    stopped = next(line for line in result.log if line.startswith("boxes: stopped"))
    assert stopped.endswith("no purchase cheaper than 3.6 can pass")
    assert not any("1 rays" in line for line in result.log)


def test_size_sweep_table_names_the_policy(capsys, monkeypatch):
    # The picture's title named the policy ("under no policy"); the terminal's table did not.
    monkeypatch.setenv("COLUMNS", "200")
    assert main(["size", INVENTORY, "--target", "min_time_share>=0.6", "--buy", "k80", "--vary", "price.k80=1"]) == 0
    assert "sizing against price.k80 (under no policy)" in capsys.readouterr().out


@pytest.mark.parametrize(("target", "rule"), [
    (("min_time_share", ">=", 1.5), "at most 1"),
    (("makespan_s", "<=", 0.0), "positive number of seconds"),
])
def test_a_target_given_as_an_object_keeps_the_value_rules_of_a_target_given_as_text(target, rule):
    # The rules live in one place (targets.check_target_value); a Target built in Python skips the
    # text parser, so size() applies them to it before any sizer runs.
    from fleetplan.planning.targets import Target

    instance = fleetplan.load_instance(INVENTORY)
    for given in (Target(*target), f"{target[0]}{target[1]}{target[2]:g}"):
        with pytest.raises(InstanceError, match=rule) as error:
            size(instance, [given], ["k80"])
        assert error.value.path == "--target"
