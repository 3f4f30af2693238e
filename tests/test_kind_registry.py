"""What a kind is, told once (fleetplan/instances/__init__.py): every registered kind has each
entry a command needs, every entry it names resolves, and no module outside the registries
branches on a kind's name."""

from __future__ import annotations

import ast
import inspect
import io
from pathlib import Path

import pytest
from rich.console import Console

import fleetplan
from fleetplan.instances import KINDS, get_kind

PACKAGE = Path(__file__).resolve().parent.parent / "fleetplan"
EXAMPLES = {"allocation": "allocation-gavel-4.1.json", "placement": "placement-small.json",
            "reservation": "reservation-small.json", "binpack": "binpack-small.json",
            "gpushare": "gpushare-small.json"}


def test_every_kind_has_an_example_here():
    assert set(EXAMPLES) == set(KINDS)


@pytest.mark.parametrize("name", sorted(KINDS))
def test_every_kind_has_what_the_commands_need(name):
    """`fleetplan solve` (solver modules, a default solver, a view), `fleetplan plot` (a plot)."""
    from fleetplan.cli.display.views import KindView

    kind = get_kind(name)
    assert kind.name == name
    assert kind.solver_modules, f"{name}: no solver modules registered"
    specs = fleetplan.list_solvers(name)
    assert specs and all(spec.kind == name for spec in specs)
    assert fleetplan.get_solver(name).kind == name
    assert callable(kind.load("plot"))
    assert list(inspect.signature(kind.load("plot")).parameters)[:3] == ["instance", "plan", "path"]
    view = kind.load("cli_view")
    assert isinstance(view, type) and issubclass(view, KindView)


@pytest.mark.parametrize("name", sorted(KINDS))
def test_every_optional_entry_resolves(name):
    """What a kind may leave out (tables, sessions, the demo's choices, an exact order) is
    whole when given: a module with every function, a session with every operation, solvers
    that exist, metrics the glossary knows."""
    from fleetplan.instances.glossary import describe

    kind = get_kind(name)
    if kind.frames is not None:
        module = kind.load("frames")
        for function in ("from_frames", "to_frames", "plan_to_frame", "plan_from_frame"):
            assert callable(getattr(module, function)), f"{kind.frames} lacks {function}"
    if kind.session is not None:
        session = kind.load("session")
        assert session.kind == name
        assert callable(session.from_instance) and callable(session.summary)
        assert callable(session.solve)
        assert kind.session_operations
        missing = [op for op in kind.session_operations if not callable(getattr(session, op, None))]
        assert not missing, f"{name} session lacks the operations {missing}"
    else:
        assert not kind.session_operations
    known = {spec.name for spec in fleetplan.list_solvers(name)}
    assert set(kind.demo_solvers) <= known
    demo_cells = set(kind.load("cli_view")().demo_row(_verdict(name)))
    unknown = [metric for metric in (*kind.demo_metrics, *kind.lead_metrics)
               if metric not in demo_cells and describe(metric, name) is None]
    assert not unknown, f"metrics the glossary does not know: {unknown}"
    assert (kind.order_key is None) == (kind.order_difference is None) == (kind.objective_note is None) \
        == (kind.score_name is None)


@pytest.mark.parametrize("name", sorted(KINDS))
def test_every_kind_renders_through_its_view(name):
    """The command line's tables for a judged plan of each kind, through the registration only."""
    from fleetplan.cli.display.render import (
        render_capacity_at_limit,
        render_evaluations,
        render_fleet_cost,
        render_plan,
        render_result,
    )

    instance, result = _solved(name)
    console = Console(file=io.StringIO(), width=120)
    render_result(console, result)
    render_fleet_cost(console, instance, result.evaluation)
    render_plan(console, instance, result.plan, result.evaluation, result.evaluation)
    render_evaluations(console, {"a": result.evaluation, "b": result.evaluation}, "verdicts")
    render_capacity_at_limit(console, result.evaluation)
    text = console.file.getvalue()
    assert "verdicts" in text and "objective" in text
    if get_kind(name).objective_note:
        assert get_kind(name).objective_note[:40] in text.replace("\n", " ")


def test_a_kind_without_an_entry_is_refused_in_one_line():
    from dataclasses import replace

    kind = replace(get_kind("gpushare"), plot=None)
    with pytest.raises(fleetplan.InstanceError, match="no plot for the 'gpushare' kind"):
        kind.load("plot")


# --- no branch on a kind's name ---------------------------------------------------------------

# The registries tell each kind's facts; a per-kind table anywhere else is a second telling.
REGISTRIES = {
    "instances/__init__.py",  # the kinds themselves
    "instances/glossary.py",  # the metrics, per scope (a kind or a simulator): one entry each
    "planning/kinds.py",  # what planning needs of each kind
    "planning/targets.py",  # the metrics a sizing target may name, per kind (planning's registry)
}


def _kind_literals(node: ast.AST) -> list[str]:
    items = node.elts if isinstance(node, (ast.Tuple, ast.List, ast.Set)) else [node]
    return [item.value for item in items if isinstance(item, ast.Constant) and item.value in KINDS]


def _branches_on_a_kind(tree: ast.AST) -> list[tuple[int, str]]:
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Compare):
            names = [name for operand in (node.left, *node.comparators) for name in _kind_literals(operand)]
            if names:
                found.append((node.lineno, f"compares with {names}"))
        elif isinstance(node, ast.match_case) and isinstance(node.pattern, ast.MatchValue):
            names = _kind_literals(node.pattern.value)
            if names:
                found.append((node.pattern.lineno, f"matches {names}"))
        elif isinstance(node, ast.Dict):
            names = [name for key in node.keys if key is not None for name in _kind_literals(key)]
            if len(names) >= 2:
                found.append((node.lineno, f"a table keyed by {names}"))
    return found


def test_no_module_outside_the_registries_branches_on_a_kind():
    found = []
    for path in sorted(PACKAGE.rglob("*.py")):
        relative = path.relative_to(PACKAGE).as_posix()
        if relative in REGISTRIES:
            continue
        found += [f"fleetplan/{relative}:{line} {what}"
                  for line, what in _branches_on_a_kind(ast.parse(path.read_text(encoding="utf-8")))]
    assert not found, ("branches on a kind's name (tell the fact in the kind's registration instead):\n"
                       + "\n".join(found))


@pytest.mark.parametrize("source", ['if kind == "binpack":\n    pass\n', 'x = scope in ("allocation", "other")\n',
                                    'T = {"allocation": 1, "placement": 2}\n',
                                    'match k:\n    case "reservation":\n        pass\n'])
def test_the_branch_check_sees_each_form(source):
    assert _branches_on_a_kind(ast.parse(source))


def _solved(name: str):
    """A judged plan of the kind's example: today's where the kind has one, else its default solver's."""
    instance = fleetplan.load_instance(f"examples/{EXAMPLES[name]}")
    kind = get_kind(name)
    if kind.current_plan is not None:
        from fleetplan.solvers import SolveResult

        plan = kind.current_plan(instance)
        evaluation = fleetplan.evaluate(instance, plan)
        return instance, SolveResult(status="feasible", plan=plan, solver="keep", kind=name, evaluation=evaluation,
                                     objective=evaluation.objective)
    return instance, fleetplan.solve(instance, time_limit=10, seed=0)


def _verdict(name: str):
    return _solved(name)[1].evaluation


# --- sessions: the embed package and the service read the registration ---------------------------

def test_sessions_exist_where_the_registration_names_them():
    from fleetplan.embed import session_kinds
    from fleetplan.service.schemas import check_fields

    assert session_kinds() == [name for name in KINDS if KINDS[name].session]
    gpushare = fleetplan.load_instance(f"examples/{EXAMPLES['gpushare']}")
    with pytest.raises(fleetplan.InstanceError, match="sessions exist for allocation, binpack, reservation; "
                                                      "not for 'gpushare'"):
        fleetplan.session(gpushare)
    with pytest.raises(fleetplan.InstanceError, match="sessions exist for allocation, binpack and reservation; "
                                                      "not for 'gpushare'"):
        check_fields("session_create", {"instance": gpushare.model_dump()}, 60.0)


def test_the_service_session_calls_solve_and_the_registered_operations():
    """A worker's side of ``/v1/sessions``: every session re-solves by ``solve``; binpack's
    places the request's ``workloads`` (refused without them, naming the field); a change not
    in the kind's operations is refused, listing them."""
    from fleetplan.service import sessions

    data = fleetplan.load_instance(f"examples/{EXAMPLES['binpack']}").model_dump()
    try:
        summary = sessions.create({"instance": data, "solver": "rms-greedy"}, "s-binpack")
        assert summary["kind"] == "binpack" and summary["solver"] == "rms-greedy"
        assert set(summary) >= {"running", "machines", "calls"} and summary["calls"] == 0
        with pytest.raises(fleetplan.InstanceError, match="required to solve with a binpack session") as error:
            sessions.solve({}, "s-binpack", time_limit=5)
        assert error.value.path == "workloads"
        with pytest.raises(fleetplan.InstanceError, match=r"not a change of a binpack session \(known: finish, "):
            sessions.patch({"changes": [{"op": "add_jobs"}]}, "s-binpack")
        workload = data["workloads"][0]
        answer = sessions.solve({"workloads": [workload], "apply": False}, "s-binpack", time_limit=5)
        assert answer["kind"] == "binpack" and answer["status"] in ("optimal", "feasible", "infeasible")
        assert sessions.summary("s-binpack", sessions.HELD["s-binpack"])["calls"] == 1
    finally:
        sessions.delete("s-binpack")


@pytest.mark.parametrize("name,flags", [("gpushare", ["--max-points", "3"]), ("placement", ["--max-points", "3"]),
                                        ("allocation", ["--replan"])])
def test_sizing_options_a_kind_does_not_take_are_refused_in_one_line(name, flags, capsys):
    """The kind's sizer declares its options (its signature): the command refuses the others
    before sizing, exit 2, one line naming the option."""
    from fleetplan.cli.app import main

    targets = {"gpushare": "tasks_pending<=0", "placement": "hp_demand_supply_max<=1",
               "allocation": "min_time_share>=0.5"}
    code = main(["size", f"examples/{EXAMPLES[name]}", "--target", targets[name], "--buy", "x", *flags])
    lines = capsys.readouterr().err.strip().splitlines()
    assert code == 2 and len(lines) == 1 and lines[0].startswith("error: --") and flags[0] in lines[0], lines


def test_a_kind_stays_hashable():
    """A registration is a frozen value, usable as a key (a cache over kinds), as it was."""
    assert len({KINDS[name] for name in KINDS}) == len(KINDS)
