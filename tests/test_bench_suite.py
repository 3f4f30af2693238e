"""Suite files: expansion, `solvers: all`, and one-line errors naming the YAML path."""

from __future__ import annotations

import pytest

import fleetplan
from fleetplan.benchmarks.suite import (
    bundled_suites,
    expand_cells,
    instance_name,
    load_suite,
    parse_suite,
)
from fleetplan.cli import main
from fleetplan.instances import InstanceError

GOOD = """
name: t
groups:
  - kind: allocation
    generator: {jobs: [4, 8], multi_gpu: [false, true], workers_per_type: 2}
    seeds: [0, 3]
    repeats: 2
    time_limit: 5
    solvers:
      - {name: max-min-fairness, label: las-ipm, options: {lp_algorithm: ipm}}
      - {name: max-min-fairness}
"""


def test_expansion_is_the_cartesian_product_in_order():
    suite = parse_suite(GOOD)
    cells = expand_cells(suite)
    assert len(cells) == 2 * 2 * 2 * 2 * 2  # jobs x multi_gpu x seeds x solvers x repeats
    assert [cell.order for cell in cells] == list(range(len(cells)))
    assert len({cell.key for cell in cells}) == len(cells)
    first = cells[0]
    assert first.params == {"jobs": 4, "multi_gpu": False, "workers_per_type": 2}
    assert first.instance == 'allocation[jobs=4,multi_gpu=false,workers_per_type=2]'
    assert (first.label, first.options, first.time_limit) == ("las-ipm", {"lp_algorithm": "ipm"}, 5.0)
    assert [cell.repeat for cell in cells[:2]] == [0, 1]
    assert len(expand_cells(suite, repeats=1)) == len(cells) // 2


def test_instance_names_are_canonical():
    assert instance_name("allocation", {"b": [1, 2], "a": True}) == 'allocation[a=true,b=[1,2]]'
    assert instance_name("allocation", {}) == "allocation[]"


def test_solvers_all_comes_from_the_registry():
    suite = parse_suite("name: t\ngroups: [{kind: allocation, generator: {jobs: 4}}]")
    assert [cell.solver for cell in expand_cells(suite)] == [spec.name for spec in fleetplan.list_solvers("allocation")]


def test_a_wrapped_list_passes_a_list_parameter():
    suite = parse_suite("name: t\ngroups: [{kind: allocation, generator: {jobs: 4, worker_types: [[v100, k80]]}, "
                        "solvers: all}]")
    assert expand_cells(suite)[0].params["worker_types"] == ["v100", "k80"]


def test_bundled_suites_load():
    assert {"quick", "standard", "paper"} <= set(bundled_suites())
    for name in bundled_suites():
        assert expand_cells(load_suite(name))


@pytest.mark.parametrize(("text", "path", "reason"), [
    ("name: t\ngroups: [{kind: nope}]", "groups[0].kind", "unknown problem kind 'nope'"),
    ("name: t\ngroups: [{kind: allocation, solvers: [{name: nope}]}]", "groups[0].solvers[0].name", "unknown solver 'nope'"),
    ("name: t\ngroups: [{kind: allocation, solvers: [{name: max-min-fairness, options: {speed: 3}}]}]",
     "groups[0].solvers[0].options.speed", "unknown option"),
    ("name: t\ngroups: [{kind: allocation, solvers: [{name: max-min-fairness}, {name: max-min-fairness}]}]",
     "groups[0].solvers[1].label", "duplicate label"),
    ("name: t\ngroups: [{kind: allocation, generator: {jobs: [4, 0]}}]", "groups[0].generator.jobs", ""),
    ("name: t\ngroups: [{kind: allocation, generator: {jobz: 4}}]", "groups[0].generator.jobz", "unknown field"),
    ("name: t\ngroups: [{kind: allocation, generator: {jobs: []}}]", "groups[0].generator.jobs", "sweeps nothing"),
    ("name: t\ngroups: [{kind: allocation, seeds: [1, 1]}]", "groups[0].seeds[1]", "duplicate seed"),
    ("name: t\ngroups: [{kind: allocation, time_limit: -1}]", "groups[0].time_limit", ""),
    ("name: t\ngroups: [{kind: allocation, repeat: 3}]", "groups[0].repeat", "unknown field"),
    ("name: t\ngroups: [{kind: allocation}, {kind: allocation}]", "", ""),  # two unnamed groups are fine
    ("name: t\ngroups: [{kind: allocation, name: a}, {kind: allocation, name: a}]", "groups[1].name", "duplicate group"),
    ("groups: [{kind: allocation}]", "name", "required field is missing"),
    ("name: t\ngroups: []", "groups", ""),
    ("- just a list", "$", "expected a mapping"),
    ("name: t\ngroups: [{kind: allocation\n", "", "malformed YAML at line"),
])
def test_bad_suites_name_the_yaml_path(text, path, reason):
    if not path and not reason:
        parse_suite(text)
        return
    with pytest.raises(InstanceError) as caught:
        parse_suite(text, "s.yaml")
    assert caught.value.path == path
    assert reason in caught.value.reason
    assert "\n" not in str(caught.value) and str(caught.value).startswith("s.yaml: ")


def test_missing_suite_lists_the_bundled_ones():
    with pytest.raises(InstanceError, match="bundled: .*quick"):
        load_suite("no-such-suite")
    with pytest.raises(InstanceError, match="file not found"):
        load_suite("no/such/file.yaml")


def test_cli_errors_are_one_line_with_exit_code_2(tmp_path, capsys):
    bad = tmp_path / "bad.yaml"
    bad.write_text("name: t\ngroups: [{kind: allocation, solvers: [{name: nope}]}]\n")
    assert main(["bench", str(bad), "-o", str(tmp_path / "out")]) == 2
    error = capsys.readouterr().err.strip()
    assert error.startswith("error: ") and "groups[0].solvers[0].name" in error and "\n" not in error
    assert not (tmp_path / "out").exists()
    assert main(["bench", "quick", "--executor", "dask"]) == 2
    assert "--address" in capsys.readouterr().err
    assert main(["bench", "report"]) == 2
    assert main(["bench", "report", str(tmp_path / "nothing")]) == 2
    assert "no results table" in capsys.readouterr().err
