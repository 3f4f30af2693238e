"""ParSync (Fuxi 2.0): shared-state multi-scheduler simulator with partitioned synchronisation.

Reference: Feng, Liu, Chen et al., "Scaling Large Production Clusters with Partitioned
Synchronization", USENIX ATC 2021 (``seeds/parsync-atc21.txt``): §4.1's conflict model
(:mod:`.analytic`), §4.3/§5.2's simulator and §6's experiments (:mod:`.core`,
:mod:`.experiments`); figures in the manner of Figures 3-8 are :mod:`fleetplan.plotting.parsync`'s.

>>> from fleetplan import sim
>>> r = sim.run("parsync", {"slots": 2000, "schedulers": 2, "partitions": 2, "rate": 400,
...                         "duration_s": 2, "drain_s": 2}, "parsync-latency-first", seed=1)
>>> r.metrics["finished"]
1.0
"""

from __future__ import annotations

from fleetplan.sim.engine import SimulatorSpec
from fleetplan.sim.parsync.analytic import (
    conflict_variance,
    conflicts_eq4,
    conflicts_with_more_schedulers,
    expected_conflicts,
    expected_conflicts_per_slot,
)
from fleetplan.sim.parsync.core import simulate
from fleetplan.sim.parsync.scenario import (
    FIVE_PHASES,
    FLAGS_HELP,
    Scenario,
    command_line_flags,
    figure4_scenario,
    paper_scenario,
    scheduler_names,
)

SIMULATOR = SimulatorSpec(
    name="parsync",
    simulate=simulate,
    scenario_type=Scenario,
    estimate=Scenario.estimate,
    schedulers=scheduler_names(),
    flags=command_line_flags,
    flags_help=FLAGS_HELP,
    description="N schedulers over a shared slot state: StateSync vs ParSync (DiffSyn/SameSyn), "
                "Latency-first / Quality-first / Adaptive / random; conflicts, delay, quality",
    reference="ParSync (Fuxi 2.0), USENIX ATC'21, §4-6",
)

__all__ = ["FIVE_PHASES", "SIMULATOR", "Scenario", "conflict_variance", "conflicts_eq4",
           "conflicts_with_more_schedulers", "expected_conflicts", "expected_conflicts_per_slot",
           "figure4_scenario", "paper_scenario", "scheduler_names", "simulate"]
