"""`fleetplan bench headline`: a spec's rows re-run (tiny Python commands here, no benchmark),
their figures read by regex or JSON key, the median of the runs, the flag beyond the noise band,
the rewrite of the Markdown table, and bad specs refused in one line with exit code 2."""

from __future__ import annotations

import json

import pytest
import yaml

from fleetplan.benchmarks.headline import (
    HeadlineSpec,
    change_pct,
    format_like,
    read_figure,
    rewrite,
    run_rows,
)
from fleetplan.cli import main

TABLE = """# Results

| claim | figure | measured beside it | command | when (commit) |
|---|---|---|---|---|
| Speed of a | **2.0 s** CPU | b | `a` | 2026-01-01 (abc1234) |
| Ratio of b | **4.0x / 10.0x** faster at 1,000 / 2,000 jobs | c | `b` | 2026-01-01 (abc1234) |
| Round trip | **p50 10.0 ms, p99 20.0 ms** (the solve 5 ms) | - | `c` | 2026-01-01 (abc1234) |
| Count | a plan on **1,200 of 1,300** | - | `d` | 2026-01-01 (abc1234) |

Text after the table.
"""

# Each run of `values.py` prints the next of its values (a counter file keeps the place), so the
# runs differ and the median is checkable.
VALUES = """import json, pathlib, sys
place = pathlib.Path(sys.argv[1])
values = json.loads(sys.argv[2])
n = int(place.read_text()) if place.exists() else 0
place.write_text(str(n + 1))
print("noise before the figure")
print(json.dumps({"ratio": {"small": values[n % len(values)], "large": 10 * values[n % len(values)]}}))
"""


def rows() -> list[dict]:
    return [
        {"id": "a", "row": "Speed of a", "command": "{python} -c \"print('took 2.1 s')\"",
         "regex": "took ([0-9.]+) s", "runs": 1, "noise_pct": 10, "minutes": 0.5},
        {"id": "b", "row": "Ratio of b", "command": "{python} values.py b.count [4.0,8.0,5.0]",
         "json": ["ratio.small", "ratio.large"], "runs": 3, "noise_pct": 20, "minutes": 6},
        {"id": "c", "row": "Round trip",
         "command": "{python} -c \"import json; print(json.dumps({'p50_ms': 10.94, 'p99_ms': 19.0}))\"",
         "json": ["p50_ms", "p99_ms"], "old_regex": "p50 ([0-9.]+) ms, p99 ([0-9.]+) ms", "runs": 2,
         "minutes": 2},
        {"id": "d", "row": "Count", "command": "{python} -c \"print('1234.6 and 1300')\"",
         "regex": "([0-9.]+) and ([0-9]+)", "runs": 1, "noise_pct": 0, "minutes": 40},
    ]


@pytest.fixture
def folder(tmp_path):
    (tmp_path / "RESULTS.md").write_text(TABLE)
    (tmp_path / "values.py").write_text(VALUES)
    (tmp_path / "headline.yaml").write_text(yaml.safe_dump({"results": "RESULTS.md", "rows": rows()}))
    return tmp_path


def outcomes_by_id(folder, **kwargs):
    spec = HeadlineSpec.load(folder / "headline.yaml")
    return {outcome.row.id: outcome for outcome in run_rows(spec, spec.rows, **kwargs)}


def test_figures_are_read_by_regex_and_json_key_and_the_median_of_the_runs_is_taken(folder):
    found = outcomes_by_id(folder)
    assert found["a"].old == [2.0] and found["a"].new == [2.1]
    assert found["b"].runs == [[4.0, 40.0], [8.0, 80.0], [5.0, 50.0]]
    assert found["b"].old == [4.0, 10.0] and found["b"].new == [5.0, 50.0]  # medians, number by number
    assert found["c"].old == [10.0, 20.0] and found["c"].new == [10.94, 19.0]
    assert found["d"].old == [1200.0, 1300.0]  # thousands separators read
    assert all(len(outcome.load) == 2 for outcome in found.values())  # before and after each row


def test_changes_beyond_the_noise_band_are_flagged(folder):
    found = outcomes_by_id(folder)
    assert found["a"].changes == pytest.approx([5.0]) and not found["a"].flagged  # within 10 %
    assert found["b"].changes == pytest.approx([25.0, 400.0]) and found["b"].flagged
    assert found["c"].changes == pytest.approx([9.4, -5.0]) and not found["c"].flagged  # default band 10 %
    assert found["d"].flagged  # band 0: any change
    assert change_pct(0.0, 0.0) == 0.0 and change_pct(0.0, 1.0) == float("inf")


def test_runs_overrides_the_spec(folder):
    found = outcomes_by_id(folder, runs=1)
    assert found["b"].runs == [[4.0, 40.0]]


def test_rewrite_puts_the_figures_date_commit_and_load_in_the_table(folder):
    found = outcomes_by_id(folder)
    text = rewrite(TABLE, list(found.values()), "2026-11-28", "def5678")
    lines = text.split("\n")
    assert lines[4].startswith("| Speed of a | **2.1 s** CPU | b | `a` | 2026-11-28 (def5678), load ")
    # each number written as the one it replaces; the text around the bold figure kept
    assert "| **5.0x / 50.0x** faster at 1,000 / 2,000 jobs |" in lines[5]
    assert "| **p50 10.9 ms, p99 19.0 ms** (the solve 5 ms) |" in lines[6]
    assert "a plan on **1,235 of 1,300** |" in lines[7]
    assert lines[:4] == TABLE.split("\n")[:4] and lines[8:] == TABLE.split("\n")[8:]
    assert format_like("1,000", 1234.6) == "1,235" and format_like("0.18", 0.2) == "0.20"
    assert format_like("+2.8", 2.84) == "+2.8" and format_like("+0.3", -0.12) == "-0.1"
    assert format_like("-2", 0.4) == "0" and format_like("+1,000", 1500) == "+1,500"
    assert format_like("826", 14349) == "14,349" and format_like("826", 9390) == "9390"


def test_a_failed_or_silent_command_fails_its_row_only(folder):
    spec = yaml.safe_load((folder / "headline.yaml").read_text())
    spec["rows"][0]["command"] = "{python} -c \"import sys; sys.exit('broken here')\""
    spec["rows"][1]["command"] = "{python} -c \"print('no figure')\""
    spec["rows"][2]["command"] = "{python} $FLEETPLAN_TEST_UNSET_VARIABLE"
    (folder / "headline.yaml").write_text(yaml.safe_dump(spec))
    found = outcomes_by_id(folder)
    assert found["a"].new is None and "exit code 1: broken here" in found["a"].error
    assert found["b"].new is None and "no JSON object line" in found["b"].error
    assert found["c"].new is None and "FLEETPLAN_TEST_UNSET_VARIABLE is not set" in found["c"].error
    assert found["d"].new == [1234.6, 1300.0]


def test_read_figure_reports_a_missing_key():
    spec = HeadlineSpec.from_data({"results": "R.md", "rows": [{"id": "x", "row": "x", "command": "c",
                                                                "json": "a.b", "minutes": 1}]}, ".")
    assert read_figure(spec.rows[0], json.dumps({"a": {"b": 3}}) + "\n", "") == [3.0]
    with pytest.raises(ValueError, match="no key 'a.b'"):
        read_figure(spec.rows[0], json.dumps({"a": 3}), "")


def test_cli_prints_the_table_writes_and_exits_0(folder, capsys):
    assert main(["bench", "headline", "--spec", str(folder / "headline.yaml"), "--rows", "a", "b",
                 "--write"]) == 0
    out = capsys.readouterr().out
    assert "beyond ±20%" in out and "+25.0% / +400.0%" in out and "+5.0%" in out
    text = (folder / "RESULTS.md").read_text()
    assert "| Speed of a | **2.1 s** CPU |" in text and "**5.0x / 50.0x**" in text
    assert "**p50 10.0 ms, p99 20.0 ms**" in text  # a row not selected stays as it was


def test_cli_exits_1_when_a_row_fails(folder, capsys):
    spec = yaml.safe_load((folder / "headline.yaml").read_text())
    spec["rows"][0]["command"] = "{python} -c \"print('nothing')\""
    (folder / "headline.yaml").write_text(yaml.safe_dump(spec))
    assert main(["bench", "headline", "--spec", str(folder / "headline.yaml"), "--rows", "a", "d"]) == 1
    assert "failed" in capsys.readouterr().out


def test_dry_run_runs_nothing(folder, capsys):
    spec = yaml.safe_load((folder / "headline.yaml").read_text())
    spec["rows"][0]["command"] = "{python} -c \"open('ran', 'w')\""
    (folder / "headline.yaml").write_text(yaml.safe_dump(spec))
    assert main(["bench", "headline", "--spec", str(folder / "headline.yaml"), "--dry-run"]) == 0
    out = capsys.readouterr().out
    assert "4 / 10" in out and "1200 / 1300" in out and "dry run" in out
    assert not (folder / "ran").exists() and not (folder / "b.count").exists()


BAD_ROWS = [
    ({"command": None}, "rows[0].command: required"),
    ({"json": ["x"]}, "rows[0]: give exactly one of `regex`"),
    ({"regex": "took [0-9.]+"}, "rows[0].regex: needs a capture group"),
    ({"regex": "took ([0-9.]+"}, "rows[0].regex: not a regular expression"),
    ({"runs": 0}, "rows[0].runs: expected a whole number >= 1"),
    ({"noise_pct": -1}, "rows[0].noise_pct: expected a finite number >= 0"),
    ({"colour": "red"}, "rows[0].colour: unknown field"),
    ({"id": "b"}, "rows[1].id: 'b' is used twice"),
    ({"row": "No such row"}, "a.row: no table row of the results file starts with 'No such row'"),
    ({"regex": "(a) (b)"}, "the results file's figure '2.0 s' has 1 numbers, the spec reads 2"),
    ({"minutes": None}, "rows[0].minutes: required: the row's expected wall minutes"),
    ({"minutes": 0}, "rows[0].minutes: expected a finite number of minutes > 0"),
    ({"minutes": "ten"}, "rows[0].minutes: expected a finite number of minutes > 0"),
    ({"minutes": True}, "rows[0].minutes: expected a finite number of minutes > 0"),
    ({"file": ""}, "rows[0].file: expected the path of a file the command writes"),
    ({"manual": "read off a plot"}, "rows[0].command: a `manual` row is never run: give only id, row and manual"),
    ({"manual": " ", "command": None, "regex": None, "runs": None, "noise_pct": None, "minutes": None},
     "rows[0].manual: required: a non-empty string (why no command"),
]


@pytest.mark.parametrize(("change", "message"), BAD_ROWS)
def test_a_bad_spec_is_one_line_and_exit_code_2(folder, capsys, change, message):
    spec = {"results": "RESULTS.md", "rows": rows()}
    spec["rows"][0].update(change)
    spec["rows"][0] = {key: value for key, value in spec["rows"][0].items() if value is not None}
    (folder / "headline.yaml").write_text(yaml.safe_dump(spec))
    assert main(["bench", "headline", "--spec", str(folder / "headline.yaml"), "--dry-run"]) == 2
    err = capsys.readouterr().err.strip()
    assert message in err and "\n" not in err and "Traceback" not in err
    assert not (folder / "b.count").exists()


@pytest.mark.parametrize(("argv", "message"), [
    (["--rows", "zz"], "--rows: no row 'zz'"),
    (["--runs", "0"], "--runs: must be at least 1"),
    (["--dry-run", "--write"], "--write: a dry run measures nothing to write"),
    (["--spec", "NOWHERE"], "--spec: cannot read"),
    (["--spec", "NOT_YAML"], "not YAML"),
    (["--max-minutes", "0"], "--max-minutes: expected a finite number of minutes > 0, got '0'"),
    (["--max-minutes", "soon"], "--max-minutes: expected a finite number of minutes > 0, got 'soon'"),
    (["--max-minutes", "inf"], "--max-minutes: expected a finite number of minutes > 0"),
    (["--max-minutes", "nan"], "--max-minutes: expected a finite number of minutes > 0"),
])
def test_bad_arguments_are_one_line_and_exit_code_2(folder, capsys, argv, message):
    (folder / "bad.yaml").write_text("rows: [a: b: c\n")
    argv = [str(folder / "nowhere.yaml") if a == "NOWHERE" else str(folder / "bad.yaml") if a == "NOT_YAML" else a
            for a in argv]
    spec = [] if "--spec" in argv else ["--spec", str(folder / "headline.yaml")]
    assert main(["bench", "headline", *spec, *argv]) == 2
    err = capsys.readouterr().err.strip()
    assert message in err and "\n" not in err


def test_headline_flags_belong_to_headline(capsys):
    assert main(["bench", "quick", "--dry-run"]) == 2
    assert "--dry-run: only with `fleetplan bench headline`" in capsys.readouterr().err
    assert main(["bench", "quick", "--max-minutes", "5"]) == 2
    assert "--max-minutes: only with `fleetplan bench headline`" in capsys.readouterr().err


def test_dry_run_lists_each_rows_minutes_and_the_planned_total(folder, capsys):
    assert main(["bench", "headline", "--spec", str(folder / "headline.yaml"), "--dry-run", "--json"]) == 0
    data = json.loads(capsys.readouterr().out)
    assert [row["minutes"] for row in data["rows"]] == [0.5, 6, 2, 40]
    assert data["planned_minutes"] == 48.5 and not any(row["skipped"] for row in data["rows"])
    # --runs scales a row's minutes: b's 6 minutes are for its 3 runs
    assert main(["bench", "headline", "--spec", str(folder / "headline.yaml"), "--dry-run", "--json",
                 "--runs", "1"]) == 0
    data = json.loads(capsys.readouterr().out)
    assert [row["minutes"] for row in data["rows"]] == [0.5, 2, 1, 40] and data["planned_minutes"] == 43.5
    assert main(["bench", "headline", "--spec", str(folder / "headline.yaml"), "--dry-run",
                 "--max-minutes", "5"]) == 0
    out = capsys.readouterr().out
    assert "planned: 2 rows, about 2.5 min; skipped, over --max-minutes 5: b (6 min), d (40 min)" in out
    assert "(skipped)" in out


def test_max_minutes_skips_the_long_rows_and_the_total_is_printed_first(folder, capsys):
    assert main(["bench", "headline", "--spec", str(folder / "headline.yaml"), "--max-minutes", "2.5",
                 "--write"]) == 0
    captured = capsys.readouterr()
    assert captured.err.startswith("planned: 2 rows, about 2.5 min; skipped, over --max-minutes 2.5: "
                                   "b (6 min), d (40 min)\n")
    assert not (folder / "b.count").exists()  # b was not run
    text = (folder / "RESULTS.md").read_text()
    assert "| Speed of a | **2.1 s** CPU |" in text and "**p50 10.9 ms, p99 19.0 ms**" in text
    assert "**4.0x / 10.0x**" in text and "**1,200 of 1,300**" in text  # skipped rows kept


def test_a_manual_row_is_listed_never_run_and_counts_as_covered(folder, capsys):
    from fleetplan.benchmarks.headline import uncovered_rows

    spec = {"results": "RESULTS.md", "rows": rows()[:3]}
    (folder / "headline.yaml").write_text(yaml.safe_dump(spec))
    lines = TABLE.replace("# Results\n", "# Results\n\n## Headline\n").split("\n")
    assert uncovered_rows(lines, HeadlineSpec.load(folder / "headline.yaml")) == ["Count"]
    spec["rows"].append({"id": "d", "row": "Count", "manual": "read off a plot"})
    (folder / "headline.yaml").write_text(yaml.safe_dump(spec))
    loaded = HeadlineSpec.load(folder / "headline.yaml")
    assert uncovered_rows(lines, loaded) == []
    assert [outcome.row.id for outcome in run_rows(loaded, loaded.rows, runs=1)] == ["a", "b", "c"]
    assert main(["bench", "headline", "--spec", str(folder / "headline.yaml"), "--dry-run"]) == 0
    out = capsys.readouterr().out
    assert "manual: read off a plot" in out and "manual, never run: d" in out


def test_a_figure_is_read_from_a_file_the_command_writes(folder):
    spec = yaml.safe_load((folder / "headline.yaml").read_text())
    spec["rows"][0]["command"] = "{python} -c \"open('{tmp}/out.txt', 'w').write('took 2.3 s')\""
    spec["rows"][0]["file"] = "{tmp}/out.txt"
    spec["rows"][2]["command"] = ("{python} -c \"import json; json.dump({'p50_ms': 9.0, 'p99_ms': 30.0}, "
                                  "open('{tmp}/r.json', 'w'), indent=1); print('{}')\"")
    spec["rows"][2]["file"] = "{tmp}/r.json"
    spec["rows"][3]["file"] = "{tmp}/never-written.txt"
    (folder / "headline.yaml").write_text(yaml.safe_dump(spec))
    found = outcomes_by_id(folder)
    assert found["a"].new == [2.3]  # regex on the file, not on the (empty) output
    assert found["c"].new == [9.0, 30.0]  # an indented JSON file, not stdout's empty object
    assert found["d"].new is None and "cannot read {tmp}/never-written.txt" in found["d"].error


def test_the_repository_spec_finds_every_row_of_results_md():
    from pathlib import Path

    spec = HeadlineSpec.load(Path(__file__).parents[1] / "benchmarks" / "headline.yaml")
    from fleetplan.benchmarks.headline import old_figure

    lines = spec.results.read_text().split("\n")
    for row in spec.rows:
        cell, numbers = old_figure(lines, row)
        assert len(numbers) == (0 if row.manual else row.numbers), row.id


def test_every_headline_row_of_results_md_has_a_spec_entry():
    from pathlib import Path

    from fleetplan.benchmarks.headline import headline_lines, uncovered_rows

    spec = HeadlineSpec.load(Path(__file__).parents[1] / "benchmarks" / "headline.yaml")
    lines = spec.results.read_text().split("\n")
    assert len(headline_lines(lines)) >= 30  # the table was found, not an empty section
    assert uncovered_rows(lines, spec) == []
    manual = [row.id for row in spec.rows if row.manual]
    assert len(manual) <= 3, manual  # a command for nearly every row


def test_json_prints_the_rows_and_the_exit_code(folder, capsys):
    assert main(["bench", "headline", "--spec", str(folder / "headline.yaml"), "--rows", "b", "--json"]) == 0
    data = json.loads(capsys.readouterr().out)
    [row] = data["rows"]
    assert data["exit_code"] == 0 and row["id"] == "b" and row["new"] == [5.0, 50.0] and row["flagged"]
    assert row["change_pct"] == pytest.approx([25.0, 400.0]) and len(row["load"]) == 2
    assert data["planned_minutes"] == 6 and data["skipped"] == [] and data["manual"] == []
    assert main(["bench", "headline", "--spec", str(folder / "headline.yaml"), "--rows", "a", "b", "--json",
                 "--max-minutes", "1"]) == 0
    data = json.loads(capsys.readouterr().out)
    assert [row["id"] for row in data["rows"]] == ["a"] and data["skipped"] == ["b"] and data["planned_minutes"] == 0.5


def test_suite_flags_are_refused_with_headline(folder, capsys):
    assert main(["bench", "headline", "--spec", str(folder / "headline.yaml"), "--repeats", "2"]) == 2
    assert "--repeats: not a flag of `fleetplan bench headline`" in capsys.readouterr().err


ROOT = __import__("pathlib").Path(__file__).parents[1]


@pytest.mark.parametrize(("row_id", "argv"), [
    ("gavel-73", ["headline_figures.py", "gavel73", "benchmarks/gavel73"]),
    ("astraea-load", ["headline_figures.py", "astraea", "benchmarks/astraea-load"]),
    ("tetris-days", ["headline_figures.py", "tetris-days", "benchmarks/tetris-days", "benchmarks/tetris-days-lns"]),
    ("parsync-figure3", ["headline_figures.py", "parsync", "benchmarks/parsync/figure3-paper.jsonl"]),
    ("mast-federated", ["mast_federated.py", "--report", "--out", "benchmarks/mast/federated"]),
])
def test_the_rows_readers_give_the_recorded_figures_from_the_committed_tables(row_id, argv):
    """Each experiment row's figure, read as the spec reads it from the tables the experiment's
    script wrote and the repository keeps, is the figure RESULTS.md quotes, digit for digit."""
    import subprocess
    import sys

    from fleetplan.benchmarks.headline import old_figure, replace_numbers

    spec = HeadlineSpec.load(ROOT / "benchmarks" / "headline.yaml")
    [row] = [row for row in spec.rows if row.id == row_id]
    done = subprocess.run([sys.executable, str(ROOT / "benchmarks" / "scripts" / argv[0]), *argv[1:]], cwd=ROOT,
                          capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    cell, _ = old_figure(spec.results.read_text().split("\n"), row)
    assert replace_numbers(cell, row, read_figure(row, done.stdout, done.stderr)) == cell


def _figures(*argv: str) -> dict:
    import subprocess
    import sys

    done = subprocess.run([sys.executable, str(ROOT / "benchmarks" / "scripts" / "headline_figures.py"), *argv],
                          cwd=ROOT, capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout)


def test_the_readers_of_the_grid_the_optimum_the_duals_and_the_time_limits(tmp_path):
    grid, paper = tmp_path / "runs", tmp_path / "paper"
    paper.mkdir()
    (paper / "analysis_allo_discrete.csv").write_text(
        "workload,sc_policy,130\nopenb_pod_list_default,06-FGD,95.0\nopenb_pod_list_default,06-FGD,95.2\n"
        "openb_pod_list_default,01-Random,86.0\nopenb_pod_list_cpu050,06-FGD,90.0\n")
    grid.mkdir()
    (grid / "summary.csv").write_text("trace,policy,seed,allocated_gpu_pct\ndefault,fgd,42,95.3\n"
                                      "default,fgd,43,95.5\ndefault,random,42,86.5\ndefault,fgd-cpu-aware,42,99\n")
    for seed in (42, 43):
        (grid / "default" / "fgd" / str(seed)).mkdir(parents=True)
        (grid / "default" / "fgd" / str(seed) / "run.json").write_text(json.dumps({"wall_s": 60.0}))
    found = _figures("gpushare-grid", str(grid), str(paper))
    # random: |86.5 - 86.0|; fgd: |95.4 - 95.1|; fgd-cpu-aware has no paper runs, cpu050 no runs of ours
    assert found["largest_points"] == pytest.approx(0.5) and found["fgd_largest_points"] == pytest.approx(0.3)
    assert found["traces"] == 1 and found["runs"] == 2 and found["grid_minutes"] >= 1.0

    (tmp_path / "optimum.csv").write_text("trace,seed,arrived_gpu_pct,plan_gpu_pct,bound_gpu_pct,gap_points,wall_s\n"
                                          "default,42,99.99,96.87,96.89,0.021,183.2\ndefault,43,99.99,96.9,96.91,0.01,19\n")
    assert _figures("gpushare-optimum", str(tmp_path)) == {
        "seeds": 2, "plan_min": 96.87, "plan_max": 96.9, "bound_min": 96.89, "bound_max": 96.91,
        "gap_points_max": 0.021, "wall_s_min": 19.0, "wall_s_max": 183.2}

    duals = tmp_path / "duals.jsonl"
    duals.write_text("\n".join(json.dumps({"what": "duals", "jobs": 512, "solver": s, "added": a})
                               for s, a in (("max-min-fairness", -0.021), ("max-throughput", 0.0))) + "\n")
    assert _figures("duals", str(duals)) == {"added_pct_min": -2.1, "added_pct_max": 0.0, "solves": 2}

    runs = tmp_path / "runs.jsonl"
    runs.write_text("\n".join(json.dumps({"kind": k, "solver": s, "limit": limit, "wall": w, "cpu": c})
                               for k, s, limit, w, c in (
                                   ("simulate", "cluster", 2, 2.2, 0.7), ("simulate", "cluster", 2, 2.4, 0.7),
                                   ("simulate", "cluster", 2, 2.3, 0.7), ("simulate", "mast", 5, 4.9, 3),
                                   ("allocation", "las", 2, 3.0, 1.1), ("allocation", "fifo", 2, 2.0, 0.9),
                                   ("allocation", "las", 5, 2.0, 2.0))) + "\n")
    found = _figures("time-limits", str(runs))
    # the median of the three cluster runs (2.3 s) is 0.3 s past its limit; mast ends 0.1 s early
    assert found["simulate_within_s"] == pytest.approx(0.3)
    assert (found["allocation_2s_cpu_min"], found["allocation_2s_cpu_max"]) == (0.9, 1.1)


def test_the_load_is_read_while_a_long_command_runs_and_a_time_out_ends_it(folder, monkeypatch):
    # A row's load range was its two ends only: a 44-minute grid read "load 0.8-1.2" while other
    # work had the machine at 2.6-3.6 for most of it. The command sleeps past several readings.
    import fleetplan.benchmarks.headline as headline

    monkeypatch.setattr(headline, "LOAD_SAMPLE_S", 0.05)
    slow = {"id": "s", "row": "Speed", "regex": "took ([0-9.]+) s", "runs": 1, "minutes": 1,
            "command": "{python} -c \"import time; time.sleep(0.4); print('took 1.5 s')\""}
    (folder / "headline.yaml").write_text(yaml.safe_dump({"results": "RESULTS.md", "rows": [slow]}))
    spec = HeadlineSpec.load(folder / "headline.yaml")
    [outcome] = run_rows(spec, spec.rows)
    assert outcome.error is None and outcome.runs == [[1.5]]
    assert len(outcome.load) >= 3  # before, at least one reading while it slept, after
    stuck = {**slow, "timeout_s": 0.2, "command": "{python} -c \"import time; time.sleep(30)\""}
    (folder / "headline.yaml").write_text(yaml.safe_dump({"results": "RESULTS.md", "rows": [stuck]}))
    spec = HeadlineSpec.load(folder / "headline.yaml")
    [outcome] = run_rows(spec, spec.rows)
    assert outcome.error == "run 1: no answer within 0.2 s" and outcome.runs == []
