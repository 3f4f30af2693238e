"""What the exact placement models (:mod:`.mip`, :mod:`.cpsat`) will take in memory, estimated
from :class:`~fleetplan.models.placement.PlacementData` before they are built,
so that an instance whose model cannot fit in this machine's memory is refused at once, with
the figure, instead of being built until the machine runs out.

The models' size is dominated by the traffic block (Figure 4, Expressions 1-4): per table one
choice of region; per multi-table ML job and region one indicator with an implication per table;
per Spark/Presto job and region an indicator, a majority row against every other region and a
local indicator per (table, region). :func:`model_elements` counts those variables and rows as
the CP-SAT builder makes them (the GPU and storage levels add one variable and row per level
and region); the bytes per element were measured on this machine (benchmarks/results/reliability.md,
"Memory of the exact placement models"): CP-SAT about 450 bytes, the Pyomo model HiGHS reads
about 1.75 kB (Pyomo's objects).
"""

from __future__ import annotations

from fleetplan.instances.placement import ML
from fleetplan.instances.resources import Estimate

# Bytes per counted element (variable or row) of the peak resident memory while building,
# measured on generated instances of 500-2,000 tables and jobs and 5-20 regions: CP-SAT 384-458,
# Pyomo 977-1,730 (the larger figure at the larger sizes); the largest of each is taken.
BYTES_PER_ELEMENT = {"cpsat": 460.0, "mip-highs": 1_750.0}
# Seconds per element to build (the same measurements, load about 3), for the message only.
SECONDS_PER_ELEMENT = {"cpsat": 4e-5, "mip-highs": 1.4e-4}


def model_elements(data) -> int:
    """Variables plus rows of the placement model of ``data`` (module docstring)."""
    arrays = data.arrays
    regions = arrays.num_regions
    elements = 2 * sum(len(allowed) for allowed in data.allowed.values()) + len(data.tables)
    for j, where in data.job_regions.items():
        k, n = len(where), len(data.job_tables(j))
        if arrays.job_kind[j] == ML:
            elements += (n + 2) * k if n > 1 else 0
        else:
            elements += k + n * k + 1 + k * (regions - 1) + 2 * n * k
    elements += 2 * regions * sum(len(group.total) for group in data.groups)
    return int(elements)


def model_estimate(datas, backend: str) -> Estimate:
    """Memory and build time of the models of ``datas`` (the parts solved one after another:
    the largest part's model is what must fit) for ``backend`` ("cpsat" or "mip-highs"; any
    other name gets the larger figures)."""
    largest = max((model_elements(data) for data in datas), default=0)
    tables = max((len(data.tables) for data in datas), default=0)
    # Another back-end (a test's, a caller's own part solver): the larger figures.
    per_element = BYTES_PER_ELEMENT.get(backend, max(BYTES_PER_ELEMENT.values()))
    per_second = SECONDS_PER_ELEMENT.get(backend, max(SECONDS_PER_ELEMENT.values()))
    return Estimate(memory_bytes=per_element * largest, seconds=per_second * largest,
                    what=f"the {backend} model of {tables:,} tables x {datas[0].arrays.num_regions} regions "
                         f"({largest:,} variables and rows)" if datas else "no model")


__all__ = ["BYTES_PER_ELEMENT", "model_elements", "model_estimate"]
