"""The experiment-grid runner (python -m fleetplan.benchmarks.experiments.gpushare) on a tiny
trace folder: runs, --resume, the bounds, the tables and the paper's results beside ours."""

from __future__ import annotations

import csv

from fleetplan.benchmarks.experiments.gpushare import (
    draw_sensitivity,
    main,
    paper_table,
    sensitivity_table,
)

NODES = "sn,cpu_milli,memory_mib,gpu,model\n" + "".join(
    f"n{i},{32000 if i % 2 else 96000},262144,{2 if i % 2 else 8},{'T4' if i % 2 else 'G2'}\n" for i in range(4))
TASKS = "name,cpu_milli,memory_mib,num_gpu,gpu_milli,gpu_spec\n" + "".join(
    f"t{j},{4000 + 1000 * (j % 5)},8192,{[0, 1, 1, 2][j % 4]},{[0, 500, 1000, 1000][j % 4]},\n" for j in range(30))


def folder(tmp_path):
    data = tmp_path / "data"
    data.mkdir()
    (data / "openb_node_list_gpu_node.csv").write_text(NODES)
    (data / "openb_pod_list_default.csv").write_text(TASKS)
    return data


def test_the_grid_runs_resumes_and_bounds(tmp_path, capsys):
    data, out = folder(tmp_path), tmp_path / "out"
    argv = ["--data", str(data), "--traces", "default", "--policies", "fgd", "best-fit", "--seeds", "1", "2",
            "--out", str(out), "--bound"]
    assert main(argv) == 0
    printed = capsys.readouterr().out
    rows = list(csv.DictReader((out / "summary.csv").open()))
    assert len(rows) == 4 and {r["policy"] for r in rows} == {"fgd", "best-fit"}
    assert (out / "curves-default.png").exists() and (out / "default" / "fgd" / "1" / "curve.csv").exists()
    bounds = list(csv.DictReader((out / "bounds.csv").open()))
    for b in bounds:
        assert float(b["bound_gpu_pct_at_end"]) >= float(b["offline_gpu_pct_at_end"]) - 1e-9
    assert "offline plan at end" in printed
    record = out / "default" / "fgd" / "1" / "run.json"
    before = record.stat().st_mtime_ns
    assert main([*argv, "--resume"]) == 0
    assert record.stat().st_mtime_ns == before  # not run again


def test_a_missing_trace_file_is_exit_2(tmp_path, capsys):
    assert main(["--data", str(tmp_path), "--traces", "default", "--out", str(tmp_path / "o")]) == 2
    assert "no openb_node_list_gpu_node.csv" in capsys.readouterr().err


def test_the_papers_runs_beside_ours(tmp_path):
    header = "workload,sc_policy,tune,seed," + ",".join(str(p) for p in range(131))
    line = "openb_pod_list_default,06-FGD,1.3,42," + ",".join("95.0" for _ in range(131))
    (tmp_path / "analysis_allo_discrete.csv").write_text(f"{header}\n{line}\n")
    (tmp_path / "analysis_frag_discrete.csv").write_text(f"{header}\n{line.replace('95.0', '4.5')}\n")
    rows = [{"trace": "default", "policy": "fgd", "allocated_gpu_pct": "95.5", "fragmentation_gpu_pct": "4.0"}]
    assert "| default | fgd | 95.50 | 95.00 | 4.00 | 4.50 |" in paper_table(rows, tmp_path)


def test_the_sensitivity_figures_read_the_unallocated_gpus_at_100_percent(tmp_path):
    # The paper's Figures 11-14 plot 100 - allocation at column "100" (not "130").
    header = "workload,sc_policy,tune,seed," + ",".join(str(p) for p in range(131))
    lines = [f"openb_pod_list_gpushare40,06-FGD,1.3,{seed}," + ",".join(
        "90.0" if p != 100 else allocated for p in range(131)) for seed, allocated in ((42, "97.0"), (43, "95.0"))]
    (tmp_path / "analysis_allo_discrete.csv").write_text("\n".join([header, *lines]) + "\n")
    rows = [{"trace": "gpushare40", "policy": "fgd", "seed": seed, "allocated_gpu_pct_at_100": allocated}
            for seed, allocated in ((1, "96.5"), (2, "96.0"))]
    table = sensitivity_table(rows, tmp_path)
    assert "| gpushare40 (40%) | 3.75 / 4.00 |" in table  # ours 100 - 96.25, theirs 100 - 96
    assert "| fgd | 1 | 0.25 | 0.25 | -0.25 |" in table
    assert "| gpushare60 (60%) | - / - |" in table
    assert draw_sensitivity(tmp_path, rows, tmp_path).stat().st_size > 0


def test_the_optimum_at_100_percent_per_seed(tmp_path, capsys):
    data, out = folder(tmp_path), tmp_path / "out"
    assert main(["--data", str(data), "--traces", "default", "--seeds", "1", "--optimum", "--out", str(out)]) == 0
    row = next(csv.DictReader((out / "optimum.csv").open()))
    assert float(row["plan_gpu_pct"]) <= float(row["bound_gpu_pct"]) + 1e-9
    assert float(row["plan_gpu_pct"]) <= float(row["arrived_gpu_pct"]) <= 100.0 + 1e-9
    assert "| default | 1 |" in capsys.readouterr().out


def test_the_optimum_at_the_end_of_the_arrivals_places_no_less_than_at_100_percent(tmp_path):
    data = folder(tmp_path)
    rows = {}
    for at in ("100", "end"):
        out = tmp_path / at
        assert main(["--data", str(data), "--traces", "default", "--seeds", "1", "--optimum", "--optimum-at", at,
                     "--out", str(out)]) == 0
        rows[at] = next(csv.DictReader((out / "optimum.csv").open()))
    assert rows["end"]["at"] == "end" and float(rows["end"]["arrived_gpu_pct"]) > 100.0
    assert float(rows["end"]["plan_gpu_pct"]) >= float(rows["100"]["plan_gpu_pct"]) - 1e-9
    assert float(rows["end"]["plan_gpu_pct"]) <= float(rows["end"]["bound_gpu_pct"]) + 1e-9 <= 100.0 + 1e-6
