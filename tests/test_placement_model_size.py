"""The memory of the exact placement models, estimated before they are built:
the count of variables and rows against what the CP-SAT builder makes, and an instance whose
model cannot fit refused in one line naming the figure, before any work on a plan.
"""

from __future__ import annotations

import subprocess
import sys
import textwrap

import pytest

import fleetplan
from fleetplan.models.placement import prepare
from fleetplan.models.placement.cpsat import placement_cpsat
from fleetplan.models.placement.size import model_elements, model_estimate


@pytest.mark.parametrize(("regions", "tables", "jobs"), [(3, 60, 60), (5, 300, 300), (8, 200, 400)])
def test_the_count_follows_the_cpsat_model(regions, tables, jobs):
    data = prepare(fleetplan.generate("placement", {"regions": regions, "tables": tables, "jobs": jobs},
                                      seed=1).arrays())
    built = placement_cpsat(data)
    actual = len(built.model.proto.variables) + len(built.model.proto.constraints)
    assert 0.75 * actual <= model_elements(data) <= 1.25 * actual


def test_the_estimate_grows_with_regions_squared_for_spark_jobs():
    small = prepare(fleetplan.generate("placement", {"regions": 4, "tables": 200, "jobs": 200}, seed=0).arrays())
    large = prepare(fleetplan.generate("placement", {"regions": 16, "tables": 200, "jobs": 200}, seed=0).arrays())
    assert model_elements(large) > 6 * model_elements(small)
    estimate = model_estimate([large], "mip-highs")
    assert estimate.memory_bytes > model_estimate([large], "cpsat").memory_bytes > 0
    assert "16 regions" in estimate.describe()


@pytest.mark.skipif(sys.platform != "linux", reason="reads /proc for the process's mapped memory")
def test_a_model_that_cannot_fit_is_refused_in_one_line(tmp_path):
    """Under an address-space limit of what the process maps after importing plus 400 MB, the
    CP-SAT model of 2,000 tables x 20 regions (about 420 MB by the estimate, 380 MB measured)
    with the safety factor does not fit: exit 2, one line with the figure, no plan written,
    within seconds (building it took 36 s)."""
    path, plan = tmp_path / "p.json", tmp_path / "plan.json"
    fleetplan.save(fleetplan.generate("placement", {"regions": 20, "tables": 2000, "jobs": 2000}, seed=0), path)
    script = textwrap.dedent(f"""
        import resource, sys
        import fleetplan.cli.entry, fleetplan, numpy, scipy.sparse, pydantic
        mapped = [int(line.split()[1]) * 1024 for line in open("/proc/self/status") if line.startswith("VmSize:")][0]
        resource.setrlimit(resource.RLIMIT_AS, (mapped + 400 * 2**20, resource.RLIM_INFINITY))
        sys.argv = ["fleetplan", "solve", {str(path)!r}, "--solver", "cpsat", "-o", {str(plan)!r}]
        sys.exit(fleetplan.cli.entry.main())
    """)
    run = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=300)
    assert run.returncode == 2, run.stderr[-2000:]
    assert run.stderr.count("\n") == 1, run.stderr
    assert "too large for this machine" in run.stderr and "cpsat model of 2,000 tables x 20 regions" in run.stderr
    assert "MB of memory" in run.stderr and not plan.exists()
