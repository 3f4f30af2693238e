"""Per-round re-solves of allocation problems: column-built instances and
:class:`fleetplan.embed.AllocationSession`.

The central property: after any sequence of changes (jobs arriving, leaving, re-measured;
GPUs failing and returning), the session's answer equals a cold ``fleetplan.solve`` of the
same final instance, read back from its JSON dict — for every registered allocation solver, to
the LP tolerance. Solvers the price decomposition takes are also run with
``decomposition="prices"``, so that the warm-started path is the one tested at these sizes
(below 1,000 jobs ``auto`` solves the full LP).
"""

from __future__ import annotations

import math

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import fleetplan
from fleetplan.embed import AllocationSession
from fleetplan.instances import InstanceError, instance_from_data
from fleetplan.instances.allocation import AllocationParams, generated_instance_data
from fleetplan.instances.allocation.columns import (
    ColumnAllocationInstance,
    from_columns,
    job_arrays,
    to_columns,
)
from fleetplan.instances.base import parse_json_text, to_json_text
from fleetplan.solvers import warm

TYPES = ["v100", "p100", "k80"]


def _pool(seed: int, jobs: int = 40, entities: int = 2) -> dict:
    """Generated Gavel-like jobs (distinct throughputs, steps, SLOs, costs) to draw from."""
    return generated_instance_data(AllocationParams(jobs=jobs, throughput_noise=0.1, entities=entities,
                                                    workers_per_type=4, slo_fraction=0.3), seed)


def _columns(jobs: list[dict]) -> dict[str, np.ndarray]:
    table: dict[str, object] = {"id": np.array([job["id"] for job in jobs], dtype=object),
                                "throughput": np.array([[job["throughput"].get(t, 0.0) for t in TYPES] for job in jobs])}
    for name, default in (("scale_factor", 1), ("weight", 1.0), ("steps_left", None), ("time_elapsed", 0.0),
                          ("slo_hours", None), ("arrival_time", 0.0)):
        table[name] = np.array([np.nan if job.get(name, default) is None else job.get(name, default) for job in jobs],
                               dtype=float)
    table["scale_factor"] = table["scale_factor"].astype(np.int64)
    table["entity"] = np.array([job.get("entity") for job in jobs], dtype=object)
    return table


def _cold(session: AllocationSession, solver: str, options: dict) -> fleetplan.SolveResult:
    """A cold solve of the session's instance, from its JSON text (as a file would hold it)."""
    data = parse_json_text(to_json_text(session.instance()))
    return fleetplan.solve(data, solver, **options)


def _same(warm_result: fleetplan.SolveResult, cold: fleetplan.SolveResult, solver: str) -> None:
    assert warm_result.status == cold.status, (solver, warm_result.message, cold.message)
    if cold.plan is None:
        return
    assert warm_result.evaluation.feasible, warm_result.evaluation.violations
    tolerance = 1e-6 * max(1.0, abs(cold.objective))
    assert math.isclose(warm_result.objective, cold.objective, rel_tol=1e-6, abs_tol=tolerance), \
        (solver, warm_result.objective, cold.objective)
    assert warm_result.plan.job_ids == cold.plan.job_ids


def _change(session: AllocationSession, pool: list[dict], draw, used: set[str]) -> None:
    """One random change, drawn with hypothesis's ``draw``."""
    what = draw(st.sampled_from(["add", "remove", "update", "workers", "bad"]))
    ids = session.job_ids
    if what == "add" or len(ids) <= 2:
        fresh = [job for job in pool if job["id"] not in used]
        count = draw(st.integers(1, min(4, len(fresh))))
        batch = fresh[:count]
        used.update(job["id"] for job in batch)
        before = session.job_ids
        try:
            session.add_jobs(_columns(batch))
        except InstanceError as error:  # the workers left no type a job fits: nothing added
            assert "can run on no worker type" in str(error)
            assert session.job_ids == before
    elif what == "remove":
        count = draw(st.integers(1, min(3, len(ids) - 1)))
        session.remove_jobs(draw(st.permutations(ids))[:count])
    elif what == "update":
        chosen = draw(st.permutations(ids))[: draw(st.integers(1, min(4, len(ids))))]
        rows = [ids.index(job) for job in chosen]
        factor = draw(st.floats(0.5, 2.0))
        old = session.columns
        changes = {"id": chosen, "throughput": old.throughput[rows] * factor,
                   "time_elapsed": old.time_elapsed[rows] + draw(st.floats(0.0, 3600.0))}
        if not np.isnan(old.steps_left[rows]).any():
            changes["steps_left"] = old.steps_left[rows] * draw(st.floats(0.3, 1.0))
        session.update_jobs(changes)
    elif what == "workers":
        counts = {name: draw(st.integers(0, 10)) for name in TYPES}
        before = session.instance().arrays().num_workers.copy()
        try:
            session.set_workers(counts)
        except InstanceError:  # a job would fit nowhere: the session must be unchanged
            assert np.array_equal(session.instance().arrays().num_workers, before)
    else:  # a bad change is refused and changes nothing
        before = session.job_ids
        with pytest.raises(InstanceError):
            session.add_jobs({"id": [ids[0]], "throughput": np.ones((1, len(TYPES)))})  # id taken
        with pytest.raises(InstanceError, match=r"update_jobs\[0\]\.weight"):
            session.update_jobs({"id": [ids[0]], "weight": [-1.0]})
        assert session.job_ids == before


# Every registered allocation solver; those the decomposition takes also with it forced.
DECOMPOSED = ["max-min-fairness", "max-min-fairness-agnostic", "max-throughput", "fifo", "min-makespan",
              "finish-time-fairness"]
CASES = [(name, {}) for name in sorted(spec.name for spec in fleetplan.list_solvers("allocation"))] + \
        [(name, {"decomposition": "prices"}) for name in DECOMPOSED]


@pytest.mark.parametrize(("solver", "options"), CASES, ids=[f"{s}{'-prices' if o else ''}" for s, o in CASES])
@settings(max_examples=10, deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
@given(data=st.data(), seed=st.integers(0, 10_000))
def test_session_equals_cold_solve_after_changes(solver, options, data, seed):
    pool = _pool(seed)
    first, rest = pool["jobs"][:10], pool["jobs"][10:]
    session = AllocationSession(pool["worker_types"], _columns(first), entities=pool["entities"],
                                solver=solver, **options)
    _same(session.solve(), _cold(session, solver, options), solver)
    used = {job["id"] for job in first}
    for _ in range(data.draw(st.integers(1, 5))):
        _change(session, rest, data.draw, used)
        result = session.solve()
        _same(result, _cold(session, solver, options), solver)
        if options and result.status == "optimal":  # the decomposition ran: it had the last prices
            assert result.stats["warm_hints_used"] >= 1


def test_warm_start_is_used_and_matches_at_scale():
    """At 2,000 distinct jobs (the decomposition's size) the session's rounds take the last
    round's prices (warm_hints_used) and still equal cold solves."""
    pool = generated_instance_data(AllocationParams(jobs=2_200, throughput_noise=0.1), 3)
    cluster = generated_instance_data(AllocationParams(jobs=2_000, throughput_noise=0.1), 3)["worker_types"]
    jobs = pool["jobs"]
    table = {name: column for name, column in _columns(jobs).items() if name != "entity"}
    for solver in ("max-min-fairness", "max-throughput"):
        session = AllocationSession(cluster, {k: v[:2_000] for k, v in table.items()}, solver=solver)
        assert session.solve().stats["warm_hints_used"] == 0
        rng = np.random.default_rng(0)
        following = 2_000
        for _ in range(3):
            ids = session.job_ids
            session.remove_jobs([ids[k] for k in rng.choice(len(ids), 10, replace=False)])
            session.add_jobs({k: v[following:following + 10] for k, v in table.items()})
            following += 10
            result = session.solve()
            assert result.stats["warm_hints_used"] == 1
            assert any("warm-started" in line for line in result.log), result.log
            assert not any("ran cold" in line for line in result.log)
            cold = fleetplan.solve(parse_json_text(to_json_text(session.instance())), solver)
            _same(result, cold, solver)


def test_warm_hints_stay_in_their_context():
    """A hint left in one WarmStart is not seen by solves outside it (another thread, another
    session): the context variable is per thread and per block."""
    instance = fleetplan.generate("allocation", {"jobs": 1_200, "throughput_noise": 0.1}, seed=1)
    state = warm.WarmStart()
    with warm.hints(state):
        fleetplan.solve(instance, "max-min-fairness")
    assert state.left == 1 and state.current
    outside = fleetplan.solve(instance, "max-min-fairness")
    assert not any("warm-started" in line or "last answer's structure" in line for line in outside.log)
    with warm.hints(state):
        inside = fleetplan.solve(instance, "max-min-fairness")
    # the same problem again: the last answer's vertices and free jobs certify at once
    assert any("last answer's structure in 1 round" in line for line in inside.log), inside.log
    assert math.isclose(inside.objective, outside.objective, rel_tol=1e-9)


# --- column-built instances ------------------------------------------------------------------

def _generated(jobs: int = 30, seed: int = 0):
    data = generated_instance_data(AllocationParams(jobs=jobs, throughput_noise=0.1, entities=2,
                                                    space_sharing=True), seed)
    return data, instance_from_data(data, "instance")


def test_column_instance_has_the_validated_instance_arrays():
    data, instance = _generated()
    columns = to_columns(instance)
    table = {name: getattr(columns, name) for name in ("id", "throughput", "scale_factor", "weight", "steps_left",
                                                        "arrival_time", "time_elapsed", "slo_hours", "job_type",
                                                        "entity")}
    built = from_columns(data["worker_types"], table, entities=data["entities"], colocations=data["colocations"],
                         name=data["name"])
    assert "jobs" not in built.__dict__  # no job objects until asked for
    mine, theirs = built.arrays(), instance.arrays()
    for name in ("throughput", "scale_factor", "weight", "num_workers", "cost_per_hour", "steps_left", "time_elapsed",
                 "isolated_time_elapsed", "slo_seconds", "arrival_rank", "colocation_class", "colocation_throughput"):
        assert np.array_equal(getattr(mine, name), getattr(theirs, name), equal_nan=True), name
    assert mine.job_ids == theirs.job_ids
    for solver in ("max-min-fairness", "hierarchical-water-filling"):
        assert fleetplan.solve(built, solver).objective == pytest.approx(fleetplan.solve(instance, solver).objective,
                                                                         rel=1e-9)
    # Saved and read back, it is the same instance file.
    again = instance_from_data(parse_json_text(to_json_text(built)), "again")
    assert again.model_dump() == instance.model_dump()


def test_columns_from_the_arrays_pass_equal_the_fields_read_from_the_jobs():
    # to_columns takes the optional numbers the arrays' pass kept as given; an instance whose
    # arrays came from elsewhere has none kept and reads the job objects: the same columns.
    data, _ = _generated(40, seed=3)
    for k, job in enumerate(data["jobs"]):
        job["isolated_time_elapsed"] = None if k % 3 else 5.0 * k
        if k % 4 == 0:
            job["steps_left"], job["slo_hours"] = 1000.0 + k, 2.0 + k
    read = instance_from_data(data, "instance")
    read.arrays()
    kept = to_columns(read)
    again = instance_from_data(data, "instance")
    again.arrays()
    again._given = None
    from_jobs = to_columns(again)
    for name in ("steps_left", "arrival_time", "time_elapsed", "isolated_time_elapsed", "slo_hours", "weight"):
        assert np.array_equal(getattr(kept, name), getattr(from_jobs, name), equal_nan=True), name
    assert np.isnan(kept.slo_hours).sum() == sum(job.get("slo_hours") is None for job in data["jobs"])
    assert np.isnan(kept.isolated_time_elapsed).sum() == 26
    assert list(kept.job_type) == list(from_jobs.job_type) and list(kept.entity) == list(from_jobs.entity)


def test_column_instance_from_a_dataframe_with_per_type_columns():
    pd = pytest.importorskip("pandas")
    frame = pd.DataFrame({"id": ["a", "b", "c"], "throughput_v100": [4.0, 2.0, None],
                          "throughput_k80": [1.0, 1.5, 0.5], "steps_left": [100.0, None, 50.0]})
    built = from_columns({"v100": 1, "k80": 2}, frame)
    assert built.arrays().throughput.tolist() == [[4.0, 1.0], [2.0, 1.5], [0.0, 0.5]]
    assert [job.steps_left for job in built.jobs] == [100.0, None, 50.0]
    assert isinstance(built, ColumnAllocationInstance)
    assert fleetplan.solve(built).status == "optimal"


@pytest.mark.parametrize(("jobs", "path", "reason"), [
    ({"id": ["a", "a"], "throughput": [[1.0], [1.0]]}, "jobs[1].id", "duplicate id 'a'"),
    ({"id": ["a", ""], "throughput": [[1.0], [1.0]]}, "jobs[1].id", "non-empty string"),
    ({"id": ["a", "b"], "throughput": [[1.0], [-1.0]]}, "jobs[1].throughput.v100", ">= 0"),
    ({"id": ["a", "b"], "throughput": [[1.0], [np.inf]]}, "jobs[1].throughput.v100", "finite"),
    ({"id": ["a", "b"], "throughput": [[1.0], [0.0]]}, "jobs[1]", "can run on no worker type"),
    ({"id": ["a"], "throughput": [[1.0]], "scale_factor": [4]}, "jobs[0]", "at least 4 workers"),
    ({"id": ["a"], "throughput": [[1.0]], "scale_factor": [1.5]}, "jobs[0].scale_factor", "integer"),
    ({"id": ["a"], "throughput": [[1.0]], "weight": [0.0]}, "jobs[0].weight", "> 0"),
    ({"id": ["a"], "throughput": [[1.0]], "slo_hours": [2.0]}, "jobs[0].steps_left", "required when slo_hours"),
    ({"id": ["a"], "throughput": [[1.0]], "entity": ["team-x"]}, "jobs[0].entity", "unknown entity"),
    ({"id": ["a"], "throughput": [[1.0]], "colour": ["red"]}, "jobs.colour", "unknown column"),
    ({"id": ["a"], "throughput_h100": [1.0]}, "jobs.throughput_h100", "GPU types: v100"),
    ({"id": ["a"], "throughput": [[1.0, 2.0]]}, "jobs.throughput", "shape (1, 1)"),
    ({"id": [1], "throughput": [[1.0]]}, "jobs.id", "strings"),
    ({"id": ["a"], "throughput": [[1.0]], "steps_left": ["many"]}, "jobs.steps_left", "numbers"),
    ({"id": ["a", "b"], "throughput": [[1.0], [1.0]], "weight": [True, False]}, "jobs.weight", "numbers"),
])
def test_column_instance_bad_values_name_the_path(jobs, path, reason):
    with pytest.raises(InstanceError) as caught:
        from_columns({"v100": 2}, jobs)
    assert caught.value.path == path
    assert reason in caught.value.reason


def test_cluster_errors_name_the_field():
    with pytest.raises(InstanceError, match="no worker"):
        from_columns({"v100": 0}, {"id": ["a"], "throughput": [[1.0]]})
    with pytest.raises(InstanceError, match=r"worker_types\[1\]\.name"):
        from_columns([{"name": "v100", "count": 1}, {"name": "v100", "count": 1}], {"id": ["a"], "throughput": [[1.0, 1.0]]})


def test_a_hundred_thousand_jobs_make_no_job_objects():
    rng = np.random.default_rng(0)
    n = 100_000
    jobs = {"id": np.char.add("j", np.arange(n).astype(str)), "throughput": rng.uniform(0.5, 5.0, (n, 3)),
            "scale_factor": rng.choice([1, 2, 4], n), "steps_left": rng.uniform(1e3, 1e5, n)}
    built = from_columns({"v100": 30_000, "p100": 30_000, "k80": 30_000}, jobs)
    arrays = built.arrays()
    assert arrays.throughput.shape == (n, 3) and "jobs" not in built.__dict__
    assert fleetplan.evaluate(built, fleetplan.instances.allocation.AllocationPlan.from_matrix(
        built, arrays.isolated_allocation())).feasible
    assert "jobs" not in built.__dict__  # solving and judging need no job objects


# --- the session's own behaviour ---------------------------------------------------------------

def test_session_changes_and_refusals():
    session = AllocationSession({"v100": 1, "k80": 1}, {"id": ["a", "b"], "throughput": [[4.0, 1.0], [2.0, 1.5]]})
    assert session.solve().status == "optimal"
    session.add_jobs({"id": ["c"], "throughput_v100": [3.0], "throughput_k80": [1.0]})
    session.remove_jobs(["a"])
    assert session.job_ids == ["b", "c"]
    with pytest.raises(InstanceError, match=r"remove_jobs\[0\].*unknown job 'zz'"):
        session.remove_jobs(["zz"])
    with pytest.raises(InstanceError, match="could run on no worker type"):
        session.add_jobs({"id": ["d"], "throughput_v100": [1.0], "throughput_k80": [0.0]})
        session.set_workers({"v100": 0})
    assert session.workers == {"v100": 1, "k80": 1}
    with pytest.raises(InstanceError, match="unknown worker type"):
        session.set_workers({"h100": 3})
    session.remove_jobs(session.job_ids)
    empty = session.solve()  # the empty plan, not an error: a scheduler's idle round
    assert empty.status == "optimal" and empty.success and empty.objective is None
    assert empty.plan.job_ids == [] and empty.plan.allocation == [] and empty.plan.worker_types == ["v100", "k80"]
    assert empty.plan.policy == "max_min_fairness"
    with pytest.raises(InstanceError, match="at least one job"):
        session.instance()  # an instance file needs a job
    session.add_jobs({"id": ["e"], "throughput_v100": [2.0], "throughput_k80": [1.0]})
    again = session.solve()
    assert again.plan.job_ids == ["e"] and fleetplan.evaluate(session.instance(), again.plan).objective == again.objective


def test_a_round_that_runs_cold_says_so():
    session = AllocationSession({"v100": 1, "k80": 1}, {"id": ["a", "b"], "throughput": [[4.0, 1.0], [2.0, 1.5]]})
    assert not any("ran cold" in line for line in session.solve().log)  # the first round has nothing to reuse
    session.add_jobs({"id": ["c"], "throughput": [[1.0, 1.0]]})
    assert any("session: round 2 ran cold" in line for line in session.solve().log)


def test_an_empty_session_solves_to_the_empty_plan():
    for solver in ("max-min-fairness", "water-filling", "fifo"):
        result = AllocationSession({"v100": 2}, solver=solver).solve()
        assert result.status == "optimal" and result.plan.job_ids == [] and result.plan.solver == solver


def test_the_session_owns_what_it_is_given():
    weight = np.array([1.0, 2.0])
    steps = np.array([100.0, 200.0])
    throughput = np.array([[4.0, 1.0], [2.0, 1.5]])
    ids = np.array(["a", "b"], dtype=object)
    session = AllocationSession({"v100": 1, "k80": 1}, {"id": ids, "throughput": throughput, "weight": weight,
                                                         "steps_left": steps})
    before = session.solve().objective
    # The scheduler edits its own table in place: the session does not see it.
    weight[0], steps[1], throughput[0, 0], ids[0] = -5.0, -1.0, float("nan"), "zz"
    assert session.solve().objective == pytest.approx(before, rel=1e-12)
    assert session.job_ids == ["a", "b"] and session.columns.weight.tolist() == [1.0, 2.0]
    added = {"id": ["c"], "throughput": np.array([[3.0, 1.0]]), "weight": np.array([1.0])}
    session.add_jobs(added)
    added["weight"][0] = -5.0
    assert session.columns.weight.tolist() == [1.0, 2.0, 1.0]
    # What the session shows cannot be written through either.
    with pytest.raises(ValueError, match="read-only"):
        session.columns.weight[0] = -5.0


@pytest.mark.parametrize("change,where", [
    ({"id": ["a"], "throughput_v100": [float("nan")]}, r"update_jobs\[0\]\.throughput\.v100"),
    ({"id": ["b"], "throughput": np.array([[1.0, float("nan")]])}, r"update_jobs\[0\]\.throughput\.k80"),
    ({"id": ["a"], "throughput_k80": [float("inf")]}, r"throughput\.k80.*finite"),
    ({"id": ["a"], "weight": [float("nan")]}, r"weight"),
    ({"id": ["a"], "weight": [-5.0]}, r"update_jobs\[0\]\.weight.*> 0"),
    ({"id": ["a"], "steps_left": [-1.0]}, r"update_jobs\[0\]\.steps_left.*> 0"),
    ({"id": ["a"], "time_elapsed": [float("-inf")]}, r"time_elapsed"),
])
def test_updates_pass_the_file_checks(change, where):
    session = AllocationSession({"v100": 1, "k80": 1}, {"id": ["a", "b"], "throughput": [[4.0, 1.0], [2.0, 1.5]]})
    before = session.solve().objective
    with pytest.raises(InstanceError, match=where):
        session.update_jobs(change)
    assert session.solve().objective == pytest.approx(before, rel=1e-12)  # left as it was


def test_a_session_shared_by_threads_loses_no_change():
    import threading

    session = AllocationSession({"v100": 4, "k80": 4})
    per_thread = 500

    def add(prefix: str) -> None:
        for k in range(per_thread):
            session.add_jobs({"id": [f"{prefix}{k}"], "throughput": np.array([[2.0, 1.0]])})
            if k % 100 == 0:
                session.solve()

    threads = [threading.Thread(target=add, args=(prefix,)) for prefix in ("x", "y")]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=120)
    assert len(session) == 2 * per_thread and len(set(session.job_ids)) == 2 * per_thread
    result = session.solve()
    assert len(result.plan.job_ids) == 2 * per_thread


def test_session_from_an_instance_and_the_factory():
    data = _pool(5)
    session = fleetplan.session(data, "max-min-fairness")
    assert isinstance(session, AllocationSession)
    assert session.solve().objective == pytest.approx(fleetplan.solve(data, "max-min-fairness").objective, rel=1e-9)
    with pytest.raises(InstanceError, match="unknown solver"):
        fleetplan.session(data, "no-such-solver")
    with pytest.raises(InstanceError, match="options.refine"):
        fleetplan.session(data, "max-min-fairness", refine="yes")


def test_sessions_in_threads_answer_as_alone():
    """Two sessions driven from two threads at once (each its own session) give the answers
    each gives alone: the warm-start hints are per thread (a context variable), and HiGHS runs
    of the same thread count share its pool safely."""
    import threading

    def rounds(seed: int) -> list[float]:
        pool = generated_instance_data(AllocationParams(jobs=1_300, throughput_noise=0.1), seed)
        table = {name: column for name, column in _columns(pool["jobs"]).items() if name != "entity"}
        session = AllocationSession(pool["worker_types"], {k: v[:1_200] for k, v in table.items()})
        answers = [session.solve().objective]
        for k in range(4):
            session.remove_jobs(session.job_ids[:20])
            session.add_jobs({name: column[1_200 + 20 * k: 1_220 + 20 * k] for name, column in table.items()})
            answers.append(session.solve().objective)
        return answers

    alone = {seed: rounds(seed) for seed in (1, 2)}
    together: dict[int, list[float]] = {}
    errors: list[BaseException] = []

    def run(seed: int) -> None:
        try:
            together[seed] = rounds(seed)
        except BaseException as error:  # noqa: BLE001  (reported below)
            errors.append(error)

    threads = [threading.Thread(target=run, args=(seed,)) for seed in (1, 2)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert not errors, errors
    assert together == alone


def test_new_worker_counts_keep_what_they_cannot_change_and_rebuild_what_they_can():
    # Jobs of scale factor 1 and 3: counts that stay on one side of 3 keep which types each job
    # fits (carried over); a count crossing it changes them (rebuilt). Either way the arrays are
    # those of the instance built afresh, and the judge's numbers those of a cold solve.
    session = AllocationSession({"v100": 4, "k80": 4}, {
        "id": ["a", "b", "c", "d"], "throughput": np.array([[4.0, 1.0], [2.0, 1.5], [3.0, 0.0], [1.0, 2.0]]),
        "scale_factor": np.array([1, 3, 1, 3])}, solver="max-min-fairness")
    session.solve()
    first = session.instance().arrays()
    for counts, carried in (({"v100": 5}, True), ({"k80": 2}, False), ({"k80": 1}, True), ({"k80": 3}, False)):
        session.set_workers(counts)
        result = session.solve()
        arrays = session.instance().arrays()
        fresh = instance_from_data(session.instance().model_dump(), "fresh")
        assert (arrays.__dict__.get("runnable") is first.runnable) == carried, counts
        assert (arrays.__dict__.get("runnable_throughput") is first.runnable_throughput) == carried, counts
        assert np.array_equal(arrays.runnable, fresh.arrays().runnable)
        assert np.array_equal(arrays.runnable_throughput, np.where(fresh.arrays().runnable, fresh.arrays().throughput,
                                                                   0.0))
        assert not arrays.runnable_throughput.flags.writeable
        assert np.array_equal(arrays.fastest_throughput, fresh.arrays().fastest_throughput)
        assert np.array_equal(arrays.isolated_throughput, fresh.arrays().isolated_throughput)
        cold = fleetplan.solve(fresh, "max-min-fairness")
        assert result.evaluation.metrics == pytest.approx(cold.evaluation.metrics, rel=1e-9, abs=1e-12)
        first = arrays


def test_a_session_from_an_instance_starts_from_its_arrays_on_its_own_columns():
    data, instance = _generated(30, seed=4)
    fleetplan.solve(instance, "max-min-fairness")  # the instance has read its arrays
    session = AllocationSession.from_instance(instance, solver="max-min-fairness")
    mine, fresh = session.instance().arrays(), job_arrays(session.columns, session._types, session._colocations)
    assert mine.throughput is session.columns.throughput and not mine.throughput.flags.writeable
    assert mine.runnable is instance.arrays().runnable  # read once, by the solve above
    for name in ("throughput", "scale_factor", "weight", "num_workers", "cost_per_hour", "steps_left", "time_elapsed",
                 "isolated_time_elapsed", "slo_seconds", "arrival_rank", "colocation_class", "colocation_throughput",
                 "runnable", "runnable_throughput", "isolated_throughput", "fastest_throughput"):
        assert np.array_equal(getattr(mine, name), getattr(fresh, name), equal_nan=True), name
    assert session.solve().evaluation.metrics == fleetplan.solve(instance, "max-min-fairness").evaluation.metrics


@pytest.mark.parametrize("counts, message", [
    ({"v100": -1}, r"worker_types\[0\]\.count"), ({"v100": True}, r"worker_types\[0\]\.count"),
    ({"v100": 1.5}, r"worker_types\[0\]\.count"), ({"v100": 0, "k80": 0}, "no workers"),
    ({"k80": 0}, "job 'b' could run on no worker type"), ({"v100": 1}, "job 'c' could run on no worker type"),
    ({"v100": np.int64(1)}, "valid integer")])
def test_new_counts_are_refused_as_the_schema_refuses_them(counts, message):
    # Plain whole counts take a short path; anything else goes through the file schema, and a
    # count that leaves a job no type (crossing its scale factor) is refused either way.
    session = AllocationSession({"v100": 2, "k80": 2}, {
        "id": ["a", "b", "c"], "throughput": [[4.0, 1.0], [0.0, 1.5], [2.0, 0.0]], "scale_factor": [1, 1, 2]})
    with pytest.raises(InstanceError, match=message):
        session.set_workers(counts)
    assert session.workers == {"v100": 2, "k80": 2}
    with pytest.raises(InstanceError, match="valid integer"):  # the schema is strict: no numpy integer
        session.set_workers({"v100": np.int64(3)})
    session.set_workers({"v100": 3, "k80": 1})
    assert session.workers == {"v100": 3, "k80": 1} and session.solve().status == "optimal"
