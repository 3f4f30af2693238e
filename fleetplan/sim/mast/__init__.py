"""MAST's global fast path: GMS queue, cross-region auction, and the federated scheduler it beats.

Reference: Choudhury et al., "MAST: Global Scheduling of ML Training across Geo-Distributed
Datacenters at Hyperscale", OSDI 2024 (``seeds/mast-osdi24.txt``): §4.2's GMS scan
(:mod:`.gms`), §4.3's RMS (the ``binpack`` greedy, :mod:`.rms`) and auction
(:mod:`.schedulers`), §5.1's workload statistics (:mod:`.trace`), §5.5-5.6's latency, SLO and
comparison with a federated scheduler (:mod:`.metrics`; the pictures are
:mod:`fleetplan.plotting.mast`'s, the experiments :mod:`fleetplan.benchmarks.experiments.mast`).

>>> from fleetplan import sim
>>> r = sim.run("mast", {"hours": 1, "regions": 2, "machines_per_region": 32}, "mast", seed=1)
>>> bool(abs(r.metrics["conservation_error_gpu_hours"]) < 1e-6)
True
"""

from __future__ import annotations

from collections.abc import Callable

from fleetplan.sim.engine import SimResult, SimulatorSpec
from fleetplan.sim.mast.engine import MastSim
from fleetplan.sim.mast.metrics import collect
from fleetplan.sim.mast.scenario import MastScenario, load_scenario
from fleetplan.sim.mast.scenario import estimate as scenario_estimate
from fleetplan.sim.mast.schedulers import SCHEDULERS


def run_mast(scenario: MastScenario | dict, scheduler: str, seed: int = 0,
             progress: Callable[[float, float], None] | None = None) -> tuple[SimResult, MastSim]:
    """Simulate and keep the simulation state (for tests and experiments)."""
    from fleetplan.instances.base import InstanceError

    if isinstance(scenario, dict):
        scenario = SIMULATOR.scenario(scenario)
    if scheduler not in SCHEDULERS:
        raise InstanceError("scheduler", f"unknown scheduler '{scheduler}' (known: {', '.join(SCHEDULERS)})")
    source = scenario.file
    scenario = load_scenario(scenario)
    state = MastSim(scenario, seed, source=source)
    state.run(SCHEDULERS[scheduler](), progress)
    return collect(state, scheduler, seed), state


def simulate(scenario: MastScenario, scheduler: str, seed: int,
             progress: Callable[[float, float], None] | None = None) -> SimResult:
    """The :class:`SimulatorSpec` entry point; ``progress(now_h, end_h)`` after every GMS pass, on the
    simulation clock (warm-up included)."""
    return run_mast(scenario, scheduler, seed, progress)[0]


SIMULATOR = SimulatorSpec(
    name="mast", simulate=simulate, scenario_type=MastScenario, schedulers=("mast", "federated"),
    estimate=scenario_estimate,
    description="ML training across regions: GMS <priority, credit> scan, RMS auction over the regions "
                "holding the data (late binding) vs a federated early-binding scheduler; SLO violations "
                "by priority, allocation, preemptions, data moves",
    reference="MAST, OSDI'24, §4.2-4.3, §5.5-5.6",
    time_unit="h",  # progress(now, end) in simulated hours
    report_metrics=("slo_violation_rate", "slo_violation_rate_high", "max_slo_violation_rate_high_over_time",
                    "latency_p95_minutes", "gpu_allocation_rate", "preemptions", "data_moves", "workloads"),
)

__all__ = ["SIMULATOR", "MastScenario", "MastSim", "run_mast", "simulate"]
