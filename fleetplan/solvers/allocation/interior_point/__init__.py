"""A structured interior-point method for Gavel's allocation LPs (Gavel §3.1, §4.1): it prices
the capacity rows for the price decomposition (:mod:`fleetplan.solvers.allocation.price_decomposition`).

* :mod:`~fleetplan.solvers.allocation.interior_point.ipm` — the method: its iterations, the
  restricted pricing of large LPs on a sample, and the compiled iterations
  (``fleetplan.solvers.allocation.ipm_kernels``, built from ``ipm_kernels.pyx`` one folder up);
* :mod:`~fleetplan.solvers.allocation.interior_point.ipm_systems` — the max-min and linear LPs'
  normal equations, solved by block elimination.

>>> import fleetplan
>>> instance = fleetplan.generate("allocation", {"jobs": 8}, seed=0)
>>> fleetplan.solve(instance, "max-min-fairness", decomposition="prices").stats["ipm_iterations"] > 0
True
"""
