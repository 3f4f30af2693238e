"""The run layer: questions asked as many independent solves ("cells"), run here or elsewhere.

A benchmark suite, a what-if sweep and a planning horizon's sweep all turn their question into
cells; this layer runs them and keeps the answers, and knows nothing of suites or plans:

- :mod:`~fleetplan.runs.cells` — a cell, :func:`~fleetplan.runs.cells.run_cell` (one cell in
  this process), :class:`~fleetplan.runs.cells.CellProcess` (one cell in a child process that
  is killed past its limit);
- :mod:`~fleetplan.runs.executors` — many cells at once: local worker processes or a Dask
  cluster (with its TLS settings);
- :mod:`~fleetplan.runs.results` — the results table: written row by row (a stopped run
  resumes where it stopped), read back, ranked;
- :mod:`~fleetplan.runs.points` — the points of a sweep over one instance run into a results
  folder (``whatif``, the horizon's what-if);
- :mod:`~fleetplan.runs.progress` — cells done, running, failed and the time left;
- :mod:`~fleetplan.runs.shared` — work dealt to forked processes that inherit this one's memory
  (the re-solves of marginal values);
- :mod:`~fleetplan.runs.memory` — a cell's peak memory.
"""
