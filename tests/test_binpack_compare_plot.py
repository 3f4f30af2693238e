"""``python -m fleetplan.benchmarks.experiments.binpack --plot FILE.png``."""

from __future__ import annotations

import json

import pytest

from fleetplan.benchmarks.experiments import binpack as compare


def test_plot_writes_a_png_on_a_tiny_run(tmp_path, capsys):
    target = tmp_path / "gaps.png"
    assert compare.main(["--regions", "3", "--batch-regions", "1", "--time-limit", "10",
                         "--plot", str(target)]) == 0
    report = json.loads(capsys.readouterr().out)
    data = target.read_bytes()
    assert data[:8] == b"\x89PNG\r\n\x1a\n"
    width, height = int.from_bytes(data[16:20], "big"), int.from_bytes(data[20:24], "big")
    assert width >= 1500 and height >= 1000  # 150 dpi on a 14 x 10.5 inch figure
    gap = report["greedy_gap"]
    assert sum(gap["by_case"].values()) == gap["compared"] == 3
    assert len(report["batch_loss"]["per_region"]) == 1
    assert not list(tmp_path.glob(".gaps.png.*"))  # no temporary left behind


def test_plot_rejects_a_name_that_is_not_png(tmp_path):
    with pytest.raises(SystemExit) as stopped:
        compare.main(["--regions", "1", "--batch-regions", "0", "--plot", str(tmp_path / "gaps.svg")])
    assert stopped.value.code == 2
    assert not (tmp_path / "gaps.svg").exists()
