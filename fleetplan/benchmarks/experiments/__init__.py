"""The papers' experiments from the command line, at configurable scale: each runs a simulator
(:mod:`fleetplan.sim`) over its schedulers, seeds and loads, writes the metrics (JSON, CSV,
Markdown) and draws them (:mod:`fleetplan.plotting`). Simulators themselves draw nothing.

* ``python -m fleetplan.benchmarks.experiments.cluster`` — Gavel §7.3 (JCT against load) and
  Astraea §6 (Venus/Philly-like traces, per-tenant fairness);
* ``python -m fleetplan.benchmarks.experiments.mast`` — MAST §5.6 (MAST against a federated
  scheduler) and the simulator's speed;
* ``python -m fleetplan.benchmarks.experiments.parsync`` — ParSync Figures 3 and 5, Table 1.
"""
