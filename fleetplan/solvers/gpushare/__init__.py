"""Solvers of the ``gpushare`` kind: the FGD paper's six scoring policies, one module each,
placing tasks one at a time in arrival order through one filter-score-bind loop
(:mod:`~fleetplan.solvers.gpushare.engine`).

=================  =====================================================================
solver             module
=================  =====================================================================
``fgd``            :mod:`~fleetplan.solvers.gpushare.fgd` (the default)
``fgd-cpu-aware``  :mod:`~fleetplan.solvers.gpushare.fgd_cpu_aware` (fleetplan's variant: CPU-aware ties)
``random``         :mod:`~fleetplan.solvers.gpushare.random_fit`
``dot-product``    :mod:`~fleetplan.solvers.gpushare.dot_product`
``gpu-clustering`` :mod:`~fleetplan.solvers.gpushare.gpu_clustering`
``gpu-packing``    :mod:`~fleetplan.solvers.gpushare.gpu_packing`
``best-fit``       :mod:`~fleetplan.solvers.gpushare.best_fit`
``offline-greedy`` :mod:`~fleetplan.solvers.gpushare.offline_greedy` (every arrival known; with a bound)
``offline-patterns`` :mod:`~fleetplan.solvers.gpushare.patterns` (every arrival known; per-node bound)
``mip-highs``      :mod:`~fleetplan.solvers.gpushare.exact` (the optimum, small clusters)
=================  =====================================================================
"""

from fleetplan.solvers.gpushare import (  # noqa: F401
    best_fit,
    dot_product,
    exact,
    fgd,
    fgd_cpu_aware,
    gpu_clustering,
    gpu_packing,
    offline_greedy,
    patterns,
    random_fit,
)

# The policies by the names the paper and its simulator's experiment scripts use.
PAPER_NAMES = {"Random": "random", "DotProd": "dot-product", "GpuClustering": "gpu-clustering",
               "GpuPacking": "gpu-packing", "BestFit": "best-fit", "FGD": "fgd"}
