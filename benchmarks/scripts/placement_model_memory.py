"""Peak memory of building the exact placement models, beside the count of
variables and rows that fleetplan/models/placement/size.py estimates before building; as in
benchmarks/results/reliability.md ("Memory of the exact placement models"). One size per process:

    .venv/bin/python benchmarks/scripts/placement_model_memory.py cpsat 20 2000 2000
    .venv/bin/python benchmarks/scripts/placement_model_memory.py mip 5 500 500

Arguments: back-end (cpsat or mip), regions, tables, jobs (seed 0).
"""

from __future__ import annotations

import json
import resource
import sys
import time

import fleetplan
from fleetplan.models.placement import prepare
from fleetplan.models.placement.size import model_elements


def main() -> None:
    backend, regions, tables, jobs = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4])
    data = prepare(fleetplan.generate("placement", {"regions": regions, "tables": tables, "jobs": jobs},
                                      seed=0).arrays())
    if backend == "mip":
        import pyomo.environ as pyo

        from fleetplan.models.placement.mip import placement_mip
    else:
        from fleetplan.models.placement.cpsat import placement_cpsat
    before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    started = time.perf_counter()
    if backend == "mip":
        model = placement_mip(data)
        variables = sum(1 for _ in model.component_data_objects(pyo.Var))
        rows = sum(1 for _ in model.component_data_objects(pyo.Constraint))
    else:
        model = placement_cpsat(data)
        variables, rows = len(model.model.proto.variables), len(model.model.proto.constraints)
    peak = (resource.getrusage(resource.RUSAGE_SELF).ru_maxrss - before) * 1024  # Linux: kB
    print(json.dumps({"backend": backend, "regions": regions, "tables": tables, "jobs": jobs,
                      "peak_mb": round(peak / 1e6, 1), "variables": variables, "rows": rows,
                      "estimated_elements": model_elements(data),
                      "bytes_per_element": round(peak / model_elements(data)),
                      "build_s": round(time.perf_counter() - started, 1)}))


if __name__ == "__main__":
    main()
