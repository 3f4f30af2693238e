"""Tetris searches past the climb's single moves: steps that move several tables at once, kept
only when the exact objective falls.

* :mod:`~fleetplan.solvers.placement.neighbourhood.lns` — the large-neighbourhood search
  (solver ``lns``): free a neighbourhood of tables, re-optimise it with the placement MIP, keep
  and polish improvements;
* :mod:`~fleetplan.solvers.placement.neighbourhood.picks` — how it draws its neighbourhoods;
* :mod:`~fleetplan.solvers.placement.neighbourhood.gaps` — where a plan stands against the lower
  bound, per GPU group (which group to work on);
* :mod:`~fleetplan.solvers.placement.neighbourhood.groups` — whole-group splits (also the climb's
  ``group_split_tables`` last move type);
* :mod:`~fleetplan.solvers.placement.neighbourhood.group_moves` — compound moves of one group's
  largest jobs, by a beam search;
* :mod:`~fleetplan.solvers.placement.neighbourhood.steps` — what every compound step shares (the
  quota left, the hard constraints, the polishing climb).

They work on the climb's :class:`~fleetplan.solvers.placement.climb.state.TetrisState`.

>>> import fleetplan
>>> instance = fleetplan.generate("placement", {"regions": 3, "tables": 30, "jobs": 30}, seed=0)
>>> searched, climbed = fleetplan.solve(instance, "lns"), fleetplan.solve(instance, "hill-climb")
>>> searched.evaluation.feasible, searched.objective <= climbed.objective
(True, True)
"""
