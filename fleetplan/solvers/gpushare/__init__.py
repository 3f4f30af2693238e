"""Solvers of the ``gpushare`` kind: the FGD paper's six scoring policies, one module each,
placing tasks one at a time in arrival order through one filter-score-bind loop
(:mod:`~fleetplan.solvers.gpushare.engine`).

The policies that see one arrival at a time (FGD and the baselines FGD's paper compares) are in
:mod:`~fleetplan.solvers.gpushare.online`; those that know every arrival (a plan with a bound,
and the optimum of small clusters) in :mod:`~fleetplan.solvers.gpushare.offline`. The loop
(:mod:`~fleetplan.solvers.gpushare.engine`) and one solver run (:mod:`~fleetplan.solvers.gpushare.run`)
stay here: both families use them.

=================  =====================================================================
solver             module
=================  =====================================================================
``fgd``            :mod:`~fleetplan.solvers.gpushare.online.fgd` (the default)
``fgd-cpu-aware``  :mod:`~fleetplan.solvers.gpushare.online.fgd_cpu_aware` (fleetplan's variant: CPU-aware ties)
``random``         :mod:`~fleetplan.solvers.gpushare.online.random_fit`
``dot-product``    :mod:`~fleetplan.solvers.gpushare.online.dot_product`
``gpu-clustering`` :mod:`~fleetplan.solvers.gpushare.online.gpu_clustering`
``gpu-packing``    :mod:`~fleetplan.solvers.gpushare.online.gpu_packing`
``best-fit``       :mod:`~fleetplan.solvers.gpushare.online.best_fit`
``offline-greedy`` :mod:`~fleetplan.solvers.gpushare.offline.greedy` (every arrival known; with a bound)
``offline-patterns`` :mod:`~fleetplan.solvers.gpushare.offline.patterns` (every arrival known; per-node bound)
``mip-highs``      :mod:`~fleetplan.solvers.gpushare.offline.exact` (the optimum, small clusters)
=================  =====================================================================
"""

# Importing the policy modules registers their solvers.
from fleetplan.solvers.gpushare.offline import exact, greedy, patterns  # noqa: F401
from fleetplan.solvers.gpushare.online import (  # noqa: F401
    best_fit,
    dot_product,
    fgd,
    fgd_cpu_aware,
    gpu_clustering,
    gpu_packing,
    random_fit,
)

# The policies by the names the paper and its simulator's experiment scripts use.
PAPER_NAMES = {"Random": "random", "DotProd": "dot-product", "GpuClustering": "gpu-clustering",
               "GpuPacking": "gpu-packing", "BestFit": "best-fit", "FGD": "fgd"}
