"""Options several solvers share are declared once, as an option group (a frozen dataclass):
each field is an option of every solver that takes the group — listed, validated (one line
naming it, exit 2) and documented as if the solver had declared it — and reaches the solver as
one instance of the group. One name per option: the LP's own options say ``decomposition``, as
the user does."""

from __future__ import annotations

import dataclasses
import inspect
from dataclasses import dataclass
from pathlib import Path

import pytest

import fleetplan
import fleetplan.solvers.allocation as allocation_solvers
from fleetplan.cli import main
from fleetplan.solvers.allocation import policies
from fleetplan.solvers.allocation.lp import AllocationLpOptions, LpOptions
from fleetplan.solvers.base import register
from fleetplan.solvers.options import option_group, option_specs, pack_options

GAVEL = str(Path(__file__).resolve().parents[1] / "examples" / "allocation-gavel-4.1.json")
LP_FIELDS = [field.name for field in dataclasses.fields(AllocationLpOptions)]


@option_group
@dataclass(frozen=True)
class Pair:
    """A group for the tests below (module level: its solvers' annotations name it)."""

    refine: bool = True
    patience: int = 3


PAIR_DEFAULT = Pair(patience=5)


def lp_solvers():
    return [spec for spec in fleetplan.list_solvers("allocation") if "backend" in spec.option_specs]


def test_every_allocation_solver_with_lp_options_takes_the_one_group():
    specs = lp_solvers()
    assert len(specs) >= 18  # every Gavel policy, aware and agnostic
    for spec in specs:
        parameters = inspect.signature(spec.function).parameters
        assert parameters["lp"].annotation in ("AllocationLpOptions", AllocationLpOptions), spec.name
        assert not set(parameters) & set(LP_FIELDS), f"{spec.name} restates an LP option"
        listed = list(spec.option_specs)
        assert listed[: len(LP_FIELDS)] == LP_FIELDS, spec.name
        for name in LP_FIELDS:
            assert spec.option_specs[name].meaning, f"{spec.name}: {name} has no meaning"
    defaults = {spec.name: spec.options["refine"] for spec in specs}
    assert defaults["max-min-fairness"] is True and defaults["fifo"] is False


def test_options_given_flat_reach_the_solver_as_one_group(monkeypatch):
    seen: dict = {}

    class Reached(Exception):
        pass

    def spy(instance, driver, **arguments):
        seen.update(arguments)
        raise Reached

    monkeypatch.setattr(policies, "solve_policy", spy)
    monkeypatch.setattr(allocation_solvers, "solve_policy", spy)
    instance = fleetplan.load_instance(GAVEL)
    for spec in lp_solvers():
        seen.clear()
        with pytest.raises(Reached):
            fleetplan.solve(instance, spec.name, partitions=2, decomposition="none", aggregate=False)
        lp = seen["lp"]
        assert isinstance(lp, AllocationLpOptions), spec.name
        assert (lp.partitions, lp.decomposition, lp.aggregate) == (2, "none", False), spec.name
        assert lp.refine is spec.options["refine"] and lp.backend == "highspy", spec.name
        assert not set(seen) & set(LP_FIELDS), spec.name


def test_a_group_option_is_recorded_on_the_plan_as_given():
    instance = fleetplan.load_instance(GAVEL)
    result = fleetplan.solve(instance, "fifo", aggregate=False, decomposition="none")
    assert result.success
    assert result.plan.options["aggregate"] is False and result.plan.options["decomposition"] == "none"
    assert "lp" not in result.plan.options


@pytest.mark.parametrize("solver,option,expected", [
    ("fifo", "partitions=0", "options.partitions: 0 is not allowed: must be an int >= 1"),
    ("finish-time-fairness", "decomposition=separable", "options.decomposition: 'separable' is not allowed"),
    ("min-makespan-binary-search", "tolerance=1.5",
     "options.tolerance: 1.5 is not allowed: must be a float > 0 and < 1"),
    ("water-filling", "bottleneck_test=cplex", "options.bottleneck_test: 'cplex' is not allowed"),
])
def test_a_bad_value_is_one_line_naming_the_option_and_exit_2(solver, option, expected, capsys, tmp_path):
    out = tmp_path / "plan.json"
    assert main(["solve", GAVEL, "--solver", solver, "--option", option, "-o", str(out)]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and expected in err[0]
    assert not out.exists()


def test_the_lp_runs_options_extend_the_group_with_one_name_per_option():
    names = [field.name for field in dataclasses.fields(LpOptions)]
    assert names[: len(LP_FIELDS)] == LP_FIELDS and "method" not in names
    run = LpOptions.of(AllocationLpOptions(decomposition="prices", refine=False), threads=2, seed=5)
    assert (run.decomposition, run.refine, run.threads, run.seed) == ("prices", False, 2, 5)


def test_a_group_must_be_frozen_and_an_option_declared_once():
    @dataclass
    class Loose:
        x: int = 1

    with pytest.raises(TypeError, match="frozen dataclass"):
        option_group(Loose)

    def clash(instance, *, time_limit=None, seed=0, threads=1, progress, pair: Pair = PAIR_DEFAULT,
              refine: bool = False):
        """A solver that restates a field of its group."""

    with pytest.raises(TypeError, match="option 'refine' is declared twice"):
        register("allocation", "clash-test-only", description="x", exact=False)(clash)
    assert all(spec.name != "clash-test-only" for spec in fleetplan.list_solvers("allocation"))

    def grouped(instance, *, time_limit=None, seed=0, threads=1, progress, pair: Pair = PAIR_DEFAULT):
        """A solver with a group."""

    assert {name: spec.default for name, spec in option_specs(grouped).items()} == {"refine": True, "patience": 5}
    assert pack_options(grouped, {}) == {}
    assert pack_options(grouped, {"refine": False}) == {"pair": Pair(refine=False, patience=5)}


def test_the_gpushare_scoring_policies_declare_their_ties_option_once():
    from fleetplan.solvers.gpushare.run import NODE_TIES_MEANING

    specs = {spec.name: spec for spec in fleetplan.list_solvers("gpushare")}
    instance = fleetplan.generate("gpushare", {"nodes": 8, "tasks": 60}, seed=0)
    for name in ("best-fit", "dot-product", "gpu-clustering", "gpu-packing"):
        ties = specs[name].option_specs["ties"]
        assert (ties.type_text, ties.default, ties.meaning) == ("one of 'name', 'random'", "name", NODE_TIES_MEANING)
        assert specs[name].function.__module__.endswith(name.replace("-", "_"))
        # The option reaches the scheduling loop: random ties follow the seed, name ties do not.
        plans = {(ties, seed): fleetplan.solve(instance, name, seed=seed, ties=ties).plan.assignments
                 for ties in ("name", "random") for seed in (0, 1)}
        assert plans[("name", 0)] == plans[("name", 1)] and plans[("random", 0)] != plans[("random", 1)], name
    assert "ties" not in specs["random"].option_specs
