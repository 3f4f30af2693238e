"""The online gpushare policies: each task placed on arrival, by one score, through the shared
filter-score-bind loop (:mod:`fleetplan.solvers.gpushare.engine`).

FGD (Weng, Yang et al., ATC 2023, §4) and the five baselines its paper compares, each ported
from the paper's simulator (hkust-adsl/kubernetes-scheduler-simulator, ``pkg/simulator/plugin``):
:mod:`~fleetplan.solvers.gpushare.online.fgd`, :mod:`~fleetplan.solvers.gpushare.online.random_fit`,
:mod:`~fleetplan.solvers.gpushare.online.dot_product`,
:mod:`~fleetplan.solvers.gpushare.online.gpu_clustering`,
:mod:`~fleetplan.solvers.gpushare.online.gpu_packing` and
:mod:`~fleetplan.solvers.gpushare.online.best_fit`; and fleetplan's own variant of FGD with
CPU-aware ties, :mod:`~fleetplan.solvers.gpushare.online.fgd_cpu_aware`.

>>> import fleetplan
>>> instance = fleetplan.generate("gpushare", {"nodes": 8, "tasks": 60}, seed=0)
>>> names = ["fgd", "fgd-cpu-aware", "random", "dot-product", "gpu-clustering", "gpu-packing", "best-fit"]
>>> all(fleetplan.solve(instance, name).evaluation.feasible for name in names)
True
"""
