"""Sweeps, targets and outputs that cannot work are refused before anything runs: exit code 2,
one line naming the option and what is wrong, nothing written. Each of these ran first and failed
(or answered a different question) before: a strict target read as >=, a fractional or 2^70
purchase limit, whatif values that overflow, a metric no plan has, a suite seed beyond 64 bits,
a folder output that is a symlink (the final rename failed after the whole run)."""

from __future__ import annotations

import shutil

import pytest
import yaml
from conftest import EXAMPLES, ROOT

import fleetplan
from fleetplan.cli import main

INVENTORY = str(EXAMPLES / "inventory-30-jobs.json")
PLACEMENT = str(EXAMPLES / "placement-small.json")
SIZE = ["size", INVENTORY, "--target", "min_time_share>=0.5", "-o", "OUT/sized.json"]

# (what, command line with OUT for the output folder's place, the option named, words the line says)
REFUSED = [
    ("a strict > target", ["size", INVENTORY, "--target", "min_time_share>0.5", "--buy", "v100", "-o", "OUT/s.json"],
     "--target", "strict"),
    ("a strict < target", ["size", PLACEMENT, "--target", "hp_demand_supply_max<1", "--buy", "*/v100",
                           "-o", "OUT/s.json"], "--target", "strict"),
    ("a fractional GPU limit", [*SIZE, "--buy", "v100=1:1.5"], "--buy", "whole number"),
    ("a 2^70 GPU limit", [*SIZE, "--buy", f"v100=1:{2**70}"], "--buy", "out of range"),
    ("a price of 1e31", [*SIZE, "--buy", "v100=1e31"], "--buy", "out of range"),
    ("a sweep of 10^308 points", ["whatif", INVENTORY, "--vary", "jobs.*.weight=0:1e308:1e-300", "-o", "OUT/w"],
     "--vary", "out of range"),
    ("a range of more than 10^308 values", ["whatif", INVENTORY, "--vary", "jobs.*.weight=0:1e30:1e-300",
                                            "-o", "OUT/w"], "--vary", "values (at most"),
    ("a 2^70 worker count", ["whatif", INVENTORY, "--vary", f"worker_types.v100.count={2**70}", "-o", "OUT/w"],
     "--vary", "out of range"),
    ("a factor that overflows", ["whatif", INVENTORY, "--vary", "worker_types.v100.count*=1,1e29", "-o", "OUT/w"],
     "worker_types.v100.count*", "out of range"),
    ("an unknown metric", ["whatif", INVENTORY, "--vary", "worker_types.v100.count=3:4:1", "--metrics",
                           "min_time_share,bogus", "-o", "OUT/w"], "--metrics", "bogus"),
]


@pytest.mark.parametrize(("what", "argv", "option", "words"), REFUSED, ids=[case[0] for case in REFUSED])
def test_refused_at_once_naming_the_option(tmp_path, capsys, what, argv, option, words):
    out = tmp_path / "out"
    out.mkdir()
    code = main([arg.replace("OUT", str(out)) for arg in argv])
    lines = capsys.readouterr().err.strip().splitlines()
    assert code == 2, lines
    assert len(lines) == 1 and lines[0].startswith("error: ") and option in lines[0], lines
    assert words in lines[0], lines
    assert list(out.iterdir()) == []


@pytest.mark.parametrize("seed", [2**63, 2**70])
def test_a_suite_seed_beyond_64_bits_is_refused_before_any_cell(tmp_path, capsys, seed):
    suite = yaml.safe_load((ROOT / "fleetplan" / "benchmarks" / "suites" / "quick.yaml").read_text())
    suite["groups"][0]["seeds"] = [0, seed]
    path = tmp_path / "suite.yaml"
    path.write_text(yaml.safe_dump(suite))
    assert main(["bench", str(path), "-o", str(tmp_path / "results")]) == 2
    line = capsys.readouterr().err.strip()
    assert "groups[0].seeds[1]" in line and "2^63" in line, line
    assert not (tmp_path / "results").exists()


def test_the_largest_seed_still_passes_validation(tmp_path):
    from fleetplan.benchmarks.suite import MAX_SEED, load_suite

    suite = yaml.safe_load((ROOT / "fleetplan" / "benchmarks" / "suites" / "quick.yaml").read_text())
    suite["groups"][0]["seeds"] = [MAX_SEED]
    (tmp_path / "suite.yaml").write_text(yaml.safe_dump(suite))
    assert load_suite(str(tmp_path / "suite.yaml")).groups[0].seeds == [MAX_SEED]


@pytest.mark.parametrize(("flag", "argv"), [
    ("--out", ["simulate", "mast", "--file", str(EXAMPLES / "mast-small.json"), "--out", "LINK"]),
    ("-o", ["export", str(EXAMPLES / "allocation-gavel-4.1.json"), "-o", "LINK"]),
])
def test_a_folder_output_that_is_a_symlink_is_refused_before_the_run(tmp_path, capsys, flag, argv):
    (tmp_path / "empty").mkdir()
    (tmp_path / "link").symlink_to("empty")
    assert main([str(tmp_path / "link") if arg == "LINK" else arg for arg in argv]) == 2
    line = capsys.readouterr().err.strip()
    assert line.startswith(f"error: {flag}") and "symlink" in line, line
    assert (tmp_path / "link").is_symlink() and list((tmp_path / "empty").iterdir()) == []


def test_whole_purchase_limits_and_fractional_gpu_hours_still_size(tmp_path):
    # placement buys GPU-hours: a fractional MAX is an amount, not a count
    assert main(["size", INVENTORY, "--target", "min_time_share>=0.3", "--buy", "v100=1:8",
                 "-o", str(tmp_path / "s.json")]) in (0, 1)
    from fleetplan.planning.sizing import check_purchase, parse_purchase

    check_purchase(parse_purchase("*/v100=1:1.5"), "placement")
    with pytest.raises(fleetplan.InstanceError, match="whole GPUs"):  # the library refuses it too
        fleetplan.planning.size(fleetplan.load_instance(INVENTORY), ["min_time_share>=0.3"], ["v100=1:1.5"])


def test_a_bench_folder_may_still_be_a_symlink(tmp_path):
    from fleetplan.instances.outputs import check_output_folder

    (tmp_path / "results").mkdir()
    (tmp_path / "link").symlink_to("results")
    check_output_folder(tmp_path / "link", [], "-o", existing=("results.csv",))  # written in place: fine
    shutil.rmtree(tmp_path / "results")
