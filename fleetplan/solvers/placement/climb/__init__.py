"""The Tetris hill climb's machinery (MAST §3.4): the incremental state a move's gain is computed
on, and the vectorised and compiled gains that let the climb reach 10^6 tables.

* :mod:`~fleetplan.solvers.placement.climb.state` — :class:`TetrisState`, the incremental view
  of a placement (homes, R(job), GPU demand, bytes) and the exact evaluation of one table's moves;
* :mod:`~fleetplan.solvers.placement.climb.first_pass` — the first pass ("goes over each table
  and finds the best region for it"), many tables at once;
* :mod:`~fleetplan.solvers.placement.climb.estimates` — the batch estimates re-made after every
  applied move, from values kept across moves;
* :mod:`~fleetplan.solvers.placement.climb.slices` — the per-slice GPU-demand sums both read;
* :mod:`~fleetplan.solvers.placement.climb.gain_kernels`,
  :mod:`~fleetplan.solvers.placement.climb.exact_kernels` — the same gains and exact evaluation
  compiled by numba (``njit(cache=True)``; used from ``kernels.JIT_MIN_SIZE`` tables).

The climb's loop itself is :func:`fleetplan.solvers.hill_climb.hill_climb`; the solvers that
drive it are in :mod:`fleetplan.solvers.placement`.

>>> import fleetplan
>>> instance = fleetplan.generate("placement", {"regions": 3, "tables": 30, "jobs": 30}, seed=0)
>>> climbed, kept = fleetplan.solve(instance, "hill-climb"), fleetplan.solve(instance, "keep")
>>> climbed.evaluation.feasible, climbed.objective <= kept.objective
(True, True)
"""
