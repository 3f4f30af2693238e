"""Gavel's max-min and linear allocation LPs solved exactly by price decomposition (Gavel §3.1,
§4.1), without building the full LP.

The jobs are coupled only through one capacity row per worker type, so at given prices of those
rows each job's own LP is solved in closed form; a reduced LP over the few jobs near a tie and
an optimality certificate make the answer an optimum of the full LP
(:mod:`fleetplan.solvers.allocation.lp`, which stays the reference and the fallback).

* :mod:`~fleetplan.solvers.allocation.price_decomposition.separable` — the method's shared parts
  and the max-min form;
* :mod:`~fleetplan.solvers.allocation.price_decomposition.separable_linear` — the linear form
  (max throughput, FIFO);
* :mod:`~fleetplan.solvers.allocation.price_decomposition.separable_certificate` — the KKT
  certificate both forms decide with;
* :mod:`~fleetplan.solvers.allocation.price_decomposition.separable_refine` — the max-min
  refinement LP (keep the level, maximize the sum of scores);
* :mod:`~fleetplan.solvers.allocation.price_decomposition.separable_structure` — a neighbouring
  problem re-solved from the last answer's structure;
* :mod:`~fleetplan.solvers.allocation.price_decomposition.reduced_basis` — the reduced LP's
  simplex basis carried to the next solve;
* :mod:`~fleetplan.solvers.allocation.price_decomposition.vertices` — each job's own LP in
  closed form at given prices (compiled: ``fleetplan.solvers.allocation.vertex_kernels``).

The prices themselves come from the interior-point method of
:mod:`fleetplan.solvers.allocation.interior_point`.

>>> import fleetplan
>>> instance = fleetplan.generate("allocation", {"jobs": 8}, seed=0)
>>> by_prices = fleetplan.solve(instance, "max-min-fairness", decomposition="prices")
>>> full_lp = fleetplan.solve(instance, "max-min-fairness", decomposition="none")
>>> by_prices.status, abs(by_prices.objective - full_lp.objective) <= 1e-6 * full_lp.objective
('optimal', True)
"""
