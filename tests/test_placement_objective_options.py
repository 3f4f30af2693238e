"""The two readings of Figure 4 that are settings of a placement instance: ``split_ml_demand`` (a split ML
job's GPU demand ignored, or counted in the region holding most of its bytes) and
``overload_form`` (Expression 8 per priority level, or on the high levels' summed demand).

Each is checked on an instance solved by hand, the hill climb's tracked objective against the
judge, the exact solvers against enumeration, and the defaults against the formula as it was
before the settings existed (bit for bit)."""

from __future__ import annotations

import math

import numpy as np
import pytest

import fleetplan
from fleetplan.instances.placement import PRIORITY_LEVELS, PlacementInstance, PlacementPlan
from fleetplan.instances.placement.evaluate import gpu_demand, job_regions, objective_terms, sigmoid
from fleetplan.solvers.placement.climb.state import TetrisState
from fleetplan.solvers.placement.exact.enumeration import enumerate_placements

EXACT = ("mip-highs", "cpsat")
SPLIT = ("ignored", "largest_region")
OVERLOAD = ("per_priority", "combined_high_priority")
OPTIONS = [(s, o) for s in SPLIT for o in OVERLOAD]


def logistic(x: float) -> float:
    return 1.0 / (1.0 + math.exp(-x))


def with_options(instance: PlacementInstance | dict, split: str | None = None,
                 overload: str | None = None) -> PlacementInstance:
    data = instance.model_dump() if isinstance(instance, PlacementInstance) else dict(instance)
    if split is not None:
        data["split_ml_demand"] = split
    if overload is not None:
        data["overload_form"] = overload
    return PlacementInstance.model_validate(data)


def judged(instance: PlacementInstance, home) -> fleetplan.Evaluation:
    return fleetplan.evaluate(instance, PlacementPlan.from_arrays(instance, np.asarray(home)))


def hand_instance(supply: dict[str, dict[str, float]], tables: dict[str, float], jobs: list[tuple],
                  *, tau: float, priority_weights: list[float], traffic: float, high=(0, 1, 2)) -> dict:
    """Two or more regions with one GPU type ``h100``; jobs are (id, tables, GPU-hours, priority);
    every table starts in the first region; storage, CPU and the other weights out of the way."""
    regions = list(supply)
    return {
        "kind": "placement", "gpu_types": ["h100"], "applications": ["ads"],
        "regions": [{"id": r, "gpu_supply": supply[r], "storage_capacity_bytes": 1000.0,
                     "cpu_capacity": {"ads": 1000.0}} for r in regions],
        "tables": {"id": list(tables), "size_bytes": list(tables.values()), "home": [regions[0]] * len(tables)},
        "jobs": {"id": [j[0] for j in jobs], "kind": ["ml"] * len(jobs),
                 "tables": [[list(tables).index(t) for t in j[1]] for j in jobs],
                 "gpu_type": ["h100"] * len(jobs), "gpu_hours": [float(j[2]) for j in jobs],
                 "cpu_hours": [0.0] * len(jobs), "priority": [j[3] for j in jobs],
                 "application": ["ads"] * len(jobs), "recurring": [True] * len(jobs)},
        "weights": {"traffic": traffic, "gpu_balance": 1.0, "storage_balance": 0.0, "priority": priority_weights},
        "sigmoid_scale_gpu_hours": tau, "high_priority_levels": list(high),
    }


# --- split ML jobs' demand: solved by hand ---------------------------------------------------------
# east has all 100 GPU-hours of h100, west none. Job "train" (100 GPU-h, priority 0) reads a (3 B)
# and b (1 B); job "tune" (100 GPU-h, priority 0) reads c (1 B). w1 = 0.01 per byte, w_0 = 1, tau 100.
#   all in east: D_east = 200 = T, balance (1 - 1)^2 + (0 - 0)^2 = 0, overload 1 * sigmoid(100/100).
#   "train" split: it reads its 4 bytes across regions (0.04). Ignored, it adds no demand: T = 100,
#     all in east, 0 + 1 * sigmoid(0) = 0.5, total 0.54 -- splitting hides demand and wins.
#     Counted in its largest region: a's region (3 B > 1 B). With a in east the GPU terms are those
#     of "all in east", total sigmoid(1) + 0.04; with a in west they are those of "train in west".
#   "train" in west: shares 1/2, 1/2 against supply shares 1, 0: balance 0.25 + 0.25,
#     overload 0.5 sigmoid(0) + 0.5 sigmoid(1) (west has no supply), 0 traffic.
SPLIT_HAND = hand_instance({"east": {"h100": 100.0}, "west": {}}, {"a": 3.0, "b": 1.0, "c": 1.0},
                           [("train", ["a", "b"], 100, 0), ("tune", ["c"], 100, 0)],
                           tau=100.0, priority_weights=[1.0, 1.0, 1.0, 0.0, 0.0, 0.0, 0.0], traffic=0.01)
ALL_EAST = [0, 0, 0]
SPLIT_A_EAST = [0, 1, 0]
SPLIT_A_WEST = [1, 0, 0]
TRAIN_WEST = [1, 1, 0]


def test_split_demand_by_hand():
    ignored, counted = with_options(SPLIT_HAND, split="ignored"), with_options(SPLIT_HAND, split="largest_region")
    s1 = logistic(1.0)
    train_west = 0.5 + 0.5 * 0.5 + 0.5 * s1
    expected = {
        "ignored": {tuple(ALL_EAST): s1, tuple(SPLIT_A_EAST): 0.54, tuple(SPLIT_A_WEST): 0.54,
                    tuple(TRAIN_WEST): train_west},
        "largest_region": {tuple(ALL_EAST): s1, tuple(SPLIT_A_EAST): s1 + 0.04,
                           tuple(SPLIT_A_WEST): train_west + 0.04, tuple(TRAIN_WEST): train_west},
    }
    for name, instance in (("ignored", ignored), ("largest_region", counted)):
        for home, value in expected[name].items():
            assert judged(instance, home).objective == pytest.approx(value, rel=1e-12), (name, home)
        best = enumerate_placements(instance)
        assert best.objective == pytest.approx(min(expected[name].values()), rel=1e-12)
    # Splitting hides demand only under "ignored"; the metrics read the same under both.
    assert enumerate_placements(ignored).home.tolist() in (SPLIT_A_EAST, SPLIT_A_WEST)
    assert enumerate_placements(counted).home.tolist() == ALL_EAST
    for instance in (ignored, counted):
        metrics = judged(instance, SPLIT_A_EAST).metrics
        assert metrics["hp_gpu_hours_split_share"] == 0.5
        assert metrics["hp_demand_supply_max_split_counted"] == 2.0
        assert metrics["ml_jobs_split"] == 1.0


def test_split_demand_ties_go_to_the_lowest_region_index():
    # a and b of equal size: a split "train" counts in region 0 (east) whichever holds which.
    data = hand_instance({"east": {"h100": 100.0}, "west": {}}, {"a": 2.0, "b": 2.0, "c": 1.0},
                         [("train", ["a", "b"], 100, 0), ("tune", ["c"], 100, 0)],
                         tau=100.0, priority_weights=[1.0, 1.0, 1.0, 0.0, 0.0, 0.0, 0.0], traffic=0.01)
    counted = with_options(data, split="largest_region")
    for home in (SPLIT_A_EAST, SPLIT_A_WEST):
        assert judged(counted, home).objective == pytest.approx(logistic(1.0) + 0.04, rel=1e-12)


def pinned_apart() -> dict:
    # a in west, b and c in east, a quota smaller than any table: nothing moves, "train" stays
    # split and counts in west (a's 3 bytes), a constant in the models.
    data = {**SPLIT_HAND, "tables": {**SPLIT_HAND["tables"], "home": ["west", "east", "east"]},
            "daily_move_quota_bytes": 0.5, "split_ml_demand": "largest_region"}
    return data


def zero_bytes() -> dict:
    # "train" reads two empty tables: split, it counts in region 0 (the judge's argmax of zeros).
    return {**SPLIT_HAND, "tables": {**SPLIT_HAND["tables"], "size_bytes": [0.0, 0.0, 1.0]},
            "split_ml_demand": "largest_region"}


@pytest.mark.parametrize("solver", EXACT)
@pytest.mark.parametrize("make", [pinned_apart, zero_bytes], ids=["pinned-apart", "zero-bytes"])
def test_exact_models_of_split_jobs_without_a_choice(solver, make):
    """The models' other modes of a split job's demand: pinned apart (a constant region) and no
    bytes (region 0 when split), against enumeration."""
    instance = PlacementInstance.model_validate(make())
    best = enumerate_placements(instance)
    result = fleetplan.solve(instance, solver, warm_start="none")
    assert result.status == "optimal", result.message
    assert result.objective == pytest.approx(best.objective, rel=1e-9)
    assert result.bound == pytest.approx(best.objective, rel=1e-5)
    if make is pinned_apart:  # train's 100 GPU-hours in west, where there is no supply
        s1 = logistic(1.0)
        assert best.objective == pytest.approx(0.5 + 0.5 * 0.5 + 0.5 * s1 + 0.04, rel=1e-12)


# --- combined high-priority overload: solved by hand ----------------------------------------------
# One type, east 120 and west 80 GPU-hours (supply shares 0.6, 0.4), tau 20, w_0 = w_1 = 1 and
# w_2 = 0 (the three high levels weigh 2 together). Job "p0" (priority 0) reads a, job "p1" (priority 1) reads b, 100 GPU-hours each; no traffic.
#   A level's Expression 7 with its job in east: (1 - 0.6)^2 + (0 - 0.4)^2 = 0.32; in west 0.72.
#   Per priority, Expression 8: in east sigmoid(0) = 0.5, in west sigmoid(20/20).
#     both east 2 * (0.32 + 0.5) = 1.64 (the optimum); one each 0.82 + 0.72 + sigmoid(1).
#   Combined (weight w_0 + w_1 = 2 on the summed demand): both east 0.64 + 2 sigmoid(80/20);
#     one each 1.04 + 2 (0.5 sigmoid(0) + 0.5 sigmoid(20/20)) (the optimum); both west
#     1.44 + 2 sigmoid(120/20).
COMBINED_HAND = hand_instance({"east": {"h100": 120.0}, "west": {"h100": 80.0}}, {"a": 1.0, "b": 1.0},
                              [("p0", ["a"], 100, 0), ("p1", ["b"], 100, 1)],
                              tau=20.0, priority_weights=[1.0, 1.0, 0.0, 0.0, 0.0, 0.0, 0.0], traffic=0.0)


def test_combined_overload_by_hand():
    per, combined = (with_options(COMBINED_HAND, overload=o) for o in OVERLOAD)
    s1 = logistic(1.0)
    expected = {
        "per_priority": {(0, 0): 1.64, (0, 1): 0.82 + 0.72 + s1, (1, 0): 0.82 + 0.72 + s1, (1, 1): 2 * (0.72 + s1)},
        "combined_high_priority": {(0, 0): 0.64 + 2 * logistic(4.0), (0, 1): 1.04 + 2 * (0.25 + 0.5 * s1),
                                   (1, 0): 1.04 + 2 * (0.25 + 0.5 * s1), (1, 1): 1.44 + 2 * logistic(6.0)},
    }
    for name, instance in (("per_priority", per), ("combined_high_priority", combined)):
        for home, value in expected[name].items():
            assert judged(instance, home).objective == pytest.approx(value, rel=1e-12), (name, home)
    assert enumerate_placements(per).home.tolist() == [0, 0]
    assert enumerate_placements(combined).home.tolist() in ([0, 1], [1, 0])
    # The metric is the same sum without the weight: 0.5 sigmoid(0) + 0.5 sigmoid(1) one each.
    assert judged(per, [0, 1]).metrics["overload_combined_high_priority"] == pytest.approx(0.25 + 0.5 * s1)
    # The constant floor: w_p / 2 per level with demand, or W_H / 2 once for the combined slice.
    assert judged(per, [0, 1]).metrics["objective_constant_floor"] == pytest.approx(1.0)
    assert judged(combined, [0, 1]).metrics["objective_constant_floor"] == pytest.approx(1.0)


@pytest.mark.parametrize("solver", ["hill-climb", *EXACT])
@pytest.mark.parametrize(("data", "option", "value", "optimum"), [
    (SPLIT_HAND, "split_ml_demand", "ignored", 0.54),
    (SPLIT_HAND, "split_ml_demand", "largest_region", logistic(1.0)),
    (COMBINED_HAND, "overload_form", "per_priority", 1.64),
    (COMBINED_HAND, "overload_form", "combined_high_priority", 1.04 + 2 * (0.25 + 0.5 * logistic(1.0))),
], ids=["split-ignored", "split-largest", "per-priority", "combined"])
def test_every_solver_reaches_the_hand_optimum(solver, data, option, value, optimum):
    instance = PlacementInstance.model_validate({**data, option: value})
    options = {"replicas": False} if solver == "hill-climb" else {"warm_start": "none"}
    result = fleetplan.solve(instance, solver, **options)
    assert result.evaluation.feasible
    assert result.objective == pytest.approx(optimum, rel=1e-9)
    if solver != "hill-climb":
        assert result.status == "optimal", result.message
        assert result.bound == pytest.approx(optimum, rel=1e-5)


# --- random tiny instances where the settings matter ----------------------------------------------

def random_tiny(seed: int, regions: int = 2, tables: int = 4) -> dict:
    """ML jobs reading 1-3 of a few tables with integer sizes (no near-ties between regions'
    bytes), two GPU types, priorities 0-3, strong GPU terms: splitting and stacking the high
    levels both matter."""
    rng = np.random.default_rng(seed)
    region_ids = [f"r{r}" for r in range(regions)]
    supply = rng.integers(0, 160, size=(regions, 2)).astype(float)
    supply[rng.integers(regions), :] += 40.0
    num_jobs = int(rng.integers(3, 6))
    reads = [sorted(rng.choice(tables, size=int(rng.integers(1, min(3, tables) + 1)), replace=False).tolist())
             for _ in range(num_jobs)]
    reads[0] = [0, 1]  # at least one job that can split
    return {
        "kind": "placement", "gpu_types": ["h100", "a100"], "applications": ["ads"],
        "regions": [{"id": region_ids[r], "gpu_supply": {"h100": supply[r, 0], "a100": supply[r, 1]},
                     "storage_capacity_bytes": 1000.0, "cpu_capacity": {"ads": 1000.0}} for r in range(regions)],
        "tables": {"id": [f"t{t}" for t in range(tables)], "size_bytes": rng.integers(1, 10, size=tables).astype(float).tolist(),
                   "home": [region_ids[r] for r in rng.integers(regions, size=tables).tolist()]},
        "jobs": {"id": [f"j{j}" for j in range(num_jobs)], "kind": ["ml"] * num_jobs, "tables": reads,
                 "gpu_type": [["h100", "a100"][g] for g in rng.integers(2, size=num_jobs).tolist()],
                 "gpu_hours": rng.integers(20, 120, size=num_jobs).astype(float).tolist(),
                 "cpu_hours": [0.0] * num_jobs, "priority": rng.integers(0, 4, size=num_jobs).tolist(),
                 "application": ["ads"] * num_jobs, "recurring": [True] * num_jobs},
        "weights": {"traffic": 0.02, "gpu_balance": 1.0, "storage_balance": 0.5, "priority": [4.0, 2.0, 1.0, 1.0, 0.5, 0.25, 0.125]},
        "sigmoid_scale_gpu_hours": 30.0, "high_priority_levels": [0, 1, 2],
    }


def test_the_settings_change_the_objective_of_random_tiny_instances():
    # Not a vacuous check: on these instances each setting changes the judged optimum somewhere.
    changed = {"split_ml_demand": 0, "overload_form": 0}
    for seed in range(6):
        data = random_tiny(seed)
        base = enumerate_placements(PlacementInstance.model_validate(data)).objective
        for option, value in (("split_ml_demand", "largest_region"), ("overload_form", "combined_high_priority")):
            changed[option] += enumerate_placements(PlacementInstance.model_validate({**data, option: value})).objective != base
    assert changed["split_ml_demand"] > 0 and changed["overload_form"] > 0


@pytest.mark.parametrize(("split", "overload"), OPTIONS)
@pytest.mark.parametrize("seed", [0, 1, 2, *(pytest.param(s, marks=pytest.mark.slow) for s in range(3, 12))])
def test_exact_solvers_reach_the_enumerated_optimum_under_each_setting(split, overload, seed):
    instance = with_options(random_tiny(seed, regions=2 + seed % 2, tables=4), split, overload)
    best = enumerate_placements(instance)
    for solver in EXACT:
        result = fleetplan.solve(instance, solver, warm_start="none", time_limit=60)
        assert result.status == "optimal", (solver, result.message)
        evaluation = fleetplan.evaluate(instance, result.plan)
        assert evaluation.feasible and result.objective == pytest.approx(evaluation.objective, rel=1e-12)
        assert result.objective == pytest.approx(best.objective, rel=1e-6, abs=1e-12), solver
        # The bound is proven and, the model being exact here, tight (CP-SAT's within its integer
        # rounding: levels widened by the rounding of the GPU-hours, costs rounded down).
        slack = 1e-6 if solver == "mip-highs" else 1e-4
        assert best.objective * (1 - slack) - 1e-9 <= result.bound <= best.objective * (1 + 1e-6) + 1e-12, solver
    climb = fleetplan.solve(instance, "hill-climb", replicas=False)
    assert climb.objective >= best.objective - 1e-9 * max(1.0, abs(best.objective))
    assert climb.model_objective == pytest.approx(climb.objective, rel=1e-9, abs=1e-12)


# --- the hill climb's tracked objective is the judge's -------------------------------------------

@pytest.mark.parametrize(("split", "overload"), OPTIONS)
@pytest.mark.parametrize("seed", range(3))
def test_hill_climb_tracks_the_judges_objective(split, overload, seed):
    base = fleetplan.generate("placement", {"regions": 3 + seed, "tables": 150, "jobs": 150,
                                            "move_quota_share": None if seed % 2 else 0.2}, seed=seed)
    instance = with_options(base, split, overload)
    for compound in (False, True):
        result = fleetplan.solve(instance, "hill-climb", replicas=False, compound_moves=compound)
        assert result.evaluation.feasible
        assert result.model_objective == pytest.approx(result.objective, rel=1e-9, abs=1e-9)
        assert result.objective <= fleetplan.solve(instance, "keep").objective + 1e-9


@pytest.mark.parametrize(("split", "overload"), OPTIONS)
def test_every_candidate_gain_is_the_judges_difference(split, overload):
    """The exact gains (``_candidates``) and the batch estimates of the first pass against the
    judge, along a random walk of moves (good or bad) on small instances."""
    from fleetplan.solvers.placement.climb.first_pass import table_gains

    rng = np.random.default_rng(7)
    for seed in range(3):
        base = fleetplan.generate("placement", {"regions": 3, "tables": 10, "jobs": 24, "ml_share": 1.0,
                                                "move_quota_share": None}, seed=seed)
        instance = with_options(base, split, overload)
        state = TetrisState(instance)
        for _ in range(15):
            table = int(rng.integers(instance.arrays().num_tables))
            gains, _, _ = state._candidates(table)
            estimates, _ = table_gains(state, np.arange(instance.arrays().num_tables))
            assert np.array_equal(np.isfinite(estimates[table]), np.isfinite(gains))
            before = judged(instance, state.home).objective
            feasible = np.flatnonzero(np.isfinite(gains))
            for region in feasible.tolist():
                home = state.home.copy()
                home[table] = region
                change = judged(instance, home).objective - before
                assert -gains[region] == pytest.approx(change, rel=1e-9, abs=1e-9)
                assert -estimates[table, region] == pytest.approx(change, rel=1e-9, abs=1e-9)
            if feasible.size:
                state.apply(state.move_to(table, int(rng.choice(feasible))))
                assert sum(state.objective_terms.values()) == pytest.approx(judged(instance, state.home).objective,
                                                                          rel=1e-9, abs=1e-9)


# --- the defaults are the objective as it was -----------------------------------------------------

def previous_gpu_terms(arrays, demand):
    """Expressions 7 and 8 as evaluate.gpu_terms computed them before the settings existed."""
    supply = arrays.gpu_supply
    total = demand.sum(axis=0)
    active = total > 0
    share = np.divide(demand, total, out=np.zeros_like(demand), where=active)
    supply_total = supply.sum(axis=0)
    supply_share = np.divide(supply, supply_total, out=np.zeros_like(supply), where=supply_total > 0)
    balance = (np.square(share - supply_share[:, :, None]).sum(axis=0) * active) @ arrays.w_priority
    over = np.maximum(0.0, demand - supply[:, :, None]) / arrays.sigmoid_scale
    overload = (share * sigmoid(over)).sum(axis=0) @ arrays.w_priority
    return float(balance.sum()), float(overload.sum())


@pytest.mark.parametrize("seed", range(3))
def test_defaults_are_bit_identical_to_before(seed):
    instance = fleetplan.generate("placement", {"regions": 5, "tables": 300, "jobs": 300}, seed=seed)
    explicit = with_options(instance, "ignored", "per_priority")
    arrays = instance.arrays()
    assert arrays.split_ml_demand == "ignored" and arrays.overload_form == "per_priority"
    plans = [PlacementPlan.current(instance),
             fleetplan.solve(instance, "hill-climb", replicas=False).plan,
             fleetplan.solve(instance, "greedy", replicas=False).plan]
    for plan in plans:
        home = plan.home_array(instance)
        default, named = fleetplan.evaluate(instance, plan), fleetplan.evaluate(explicit, plan)
        assert default.objective == named.objective and default.terms == named.terms
        assert default.metrics == named.metrics
        # The terms as the formula before the settings gave them, bit for bit.
        region = job_regions(arrays, home)
        balance, overload = previous_gpu_terms(arrays, gpu_demand(arrays, region))
        terms = objective_terms(arrays, home)
        assert terms["gpu_balance"] == arrays.w_gpu * balance and terms["gpu_overload"] == arrays.w_gpu * overload
        assert default.terms == terms
    default = fleetplan.solve(instance, "hill-climb", replicas=False)
    named = fleetplan.solve(explicit, "hill-climb", replicas=False)
    assert default.objective == named.objective and default.model_objective == named.model_objective
    assert default.plan.home_array(instance).tolist() == named.plan.home_array(instance).tolist()


def test_the_state_shares_its_arrays_under_the_defaults():
    """Under the defaults the demand regions are R(job) and Expression 8's demand is D: the same
    arrays, so the default climb runs the code it ran before."""
    instance = fleetplan.generate("placement", {"regions": 3, "tables": 40, "jobs": 40}, seed=0)
    state = TetrisState(instance)
    assert state.dregion is state.region and state.odemand is state.demand
    assert state.odemand_count is state.demand_count and not state.combined and not state.split_counted
    combined = TetrisState(with_options(instance, "largest_region", "combined_high_priority"))
    assert combined.dregion is not combined.region and combined.odemand is not combined.demand
    high = instance.arrays().high_priority
    shape = (instance.arrays().num_regions, -1, PRIORITY_LEVELS)
    first = int(np.flatnonzero(high)[0])
    assert np.allclose(combined.odemand.reshape(shape)[:, :, first],
                       combined.demand.reshape(shape)[:, :, high].sum(axis=2))


def test_settings_are_validated_and_read_from_frames():
    with pytest.raises(Exception, match="split_ml_demand"):
        PlacementInstance.model_validate({**SPLIT_HAND, "split_ml_demand": "smallest_region"})
    with pytest.raises(Exception, match="overload_form"):
        PlacementInstance.model_validate({**SPLIT_HAND, "overload_form": "combined"})
    from fleetplan.instances.placement.frames import SETTINGS

    assert "split_ml_demand" in SETTINGS and "overload_form" in SETTINGS


@pytest.mark.parametrize(("split", "overload"), OPTIONS[1:])
def test_first_pass_estimates_over_many_pairs_equal_the_exact_gains(split, overload):
    """The first pass's chunked path (each distinct job counted once, above DISTINCT_JOBS_FROM
    pairs) and the cached batch estimates against the exact gains, from a plan with split jobs."""
    from fleetplan.solvers.placement.climb.estimates import estimate
    from fleetplan.solvers.placement.climb.first_pass import DISTINCT_JOBS_FROM, table_gains

    base = fleetplan.generate("placement", {"regions": 5, "tables": 800, "jobs": 800, "move_quota_share": None},
                              seed=4)
    instance = with_options(base, split, overload)
    climbed = fleetplan.solve(instance, "hill-climb", replicas=False, max_moves=100)
    state = TetrisState(instance, climbed.plan.home_array(instance))
    assert ((state.region < 0) & (instance.arrays().job_kind == 0)).any()
    tables = np.arange(instance.arrays().num_tables)
    assert state.reader_ptr[-1] > DISTINCT_JOBS_FROM
    gains, _ = table_gains(state, tables)
    sample = np.random.default_rng(0).choice(tables, 80, replace=False).tolist()
    for table, candidate in zip(sample, estimate(state, sample), strict=True):
        exact = state._candidates(table)[0]
        finite = np.isfinite(exact)
        assert np.array_equal(finite, np.isfinite(gains[table]))
        np.testing.assert_allclose(gains[table][finite], exact[finite], rtol=1e-9, atol=1e-12)
        if candidate is not None:
            assert candidate.gain == pytest.approx(exact[candidate.target], rel=1e-9, abs=1e-12)
