"""The compiled reader of an allocation instance's job fields (job_kernels.pyx) against its
Python reference (job_fields.read_job_fields_python): the same bits, and the Python path
wherever the kernel cannot read the jobs as attributes would be read."""

from __future__ import annotations

import numpy as np
import pytest

import fleetplan.kernels as kernels
from fleetplan.instances.allocation import AllocationInstance, Job, job_fields
from fleetplan.instances.allocation.job_fields import (
    plain_class,
    read_job_fields,
    read_job_fields_python,
)
from fleetplan.solvers import kernels as solver_kernels

TYPES = ["v100", "p100", "k80"]


@pytest.fixture(autouse=True)
def _kernels_on(monkeypatch):
    monkeypatch.setenv(kernels.ENVIRONMENT_SWITCH, "1")


@pytest.fixture
def job_kernels(_kernels_on):
    module = kernels.load(job_fields.COMPILED)
    assert module is not None, "the job kernels were not built (pip install -e . builds them)"
    return module


def _bits(fields: job_fields.JobFields) -> list:
    """Every column as its raw bytes (NaN compared by its bits), the ids as given."""
    return [fields.ids, *(np.ascontiguousarray(column).view(np.uint64).tolist() for column in fields[1:])]


def _same(jobs: list, types: list[str] = TYPES) -> job_fields.JobFields:
    """The kernel's fields of ``jobs``, checked bit for bit against the reference's."""
    reference = read_job_fields_python(jobs, types)
    compiled = read_job_fields(jobs, types)
    assert _bits(compiled) == _bits(reference)
    assert [column.dtype for column in compiled[1:]] == [column.dtype for column in reference[1:]]
    assert compiled.throughput.shape == (len(jobs), len(types))
    return compiled


def _random_jobs(seed: int, n: int, optional: bool, construct: bool) -> list[Job]:
    rng = np.random.default_rng(seed)
    make = Job.model_construct if construct else Job
    jobs = []
    for m in range(n):
        kept = [name for name in TYPES if rng.random() < 0.7] or [TYPES[0]]
        # Ints as model_construct keeps them (Job(...) turns them to floats), and 0 entries.
        throughput = {name: (int(rng.integers(0, 9)) if rng.random() < 0.3 else float(rng.uniform(0, 5)))
                      for name in kept}
        fields = {"id": f"job-{seed}-{m}", "throughput": throughput,
                  "scale_factor": int(rng.choice([1, 2, 4])),
                  "weight": int(rng.integers(1, 4)) if rng.random() < 0.3 else float(rng.uniform(0.1, 3)),
                  "arrival_time": float(rng.uniform(0, 1e4)), "time_elapsed": int(rng.integers(0, 100))}
        if optional:
            for name in job_fields.OPTIONAL:
                if rng.random() < 0.6:
                    fields[name] = float(rng.uniform(0.5, 50)) if rng.random() < 0.7 else int(rng.integers(1, 50))
        jobs.append(make(**fields))
    return jobs


@pytest.mark.parametrize("seed", range(3))
@pytest.mark.parametrize("optional", [False, True])
@pytest.mark.parametrize("construct", [False, True])
def test_kernel_equals_python_on_generated_jobs(job_kernels, seed, optional, construct):
    jobs = _random_jobs(seed, 60 + 40 * seed, optional, construct)
    fields = _same(jobs)
    assert job_kernels.job_columns(jobs, TYPES, plain_class) is not None  # the kernel did read them
    if not optional:
        assert np.isnan(fields.slo_hours).all() and np.isnan(fields.steps_left).all()


def test_missing_types_int_numbers_and_none(job_kernels):
    jobs = [Job.model_construct(id="a", throughput={"v100": 3}, scale_factor=2, weight=2, time_elapsed=7),
            Job.model_construct(id="b", throughput={}, steps_left=5, slo_hours=None),
            Job(id="c", throughput={"k80": 1.5, "p100": 0.0}, steps_left=9.5, slo_hours=2,
                isolated_time_elapsed=0.0)]
    fields = _same(jobs)
    assert fields.throughput.tolist() == [[3.0, 0.0, 0.0], [0.0, 0.0, 0.0], [0.0, 0.0, 1.5]]
    assert fields.scale_factor.tolist() == [2.0, 1.0, 1.0] and fields.weight.tolist() == [2.0, 1.0, 1.0]
    assert np.isnan(fields.steps_left[0]) and fields.steps_left[1:].tolist() == [5.0, 9.5]
    assert np.isnan(fields.slo_hours[:2]).all() and fields.slo_hours[2] == 2.0
    assert fields.isolated_time_elapsed[2] == 0.0
    # An int too large for a float64 array's exact value rounds alike; one past a double's
    # range is the Python path's OverflowError, not a number the kernel made up.
    _same([Job.model_construct(id="big", throughput={"v100": 2**63 + 1}, arrival_time=2**70 + 3)])
    huge = [Job.model_construct(id="huge", throughput={"v100": 10**400})]
    assert job_kernels.job_columns(huge, TYPES, plain_class) is None
    with pytest.raises(OverflowError):
        read_job_fields(huge, TYPES)


def test_values_numpy_converts_otherwise_go_the_python_way(job_kernels):
    # A bool, a numpy scalar, a string or a dict subclass: not read by the kernel; the result
    # (or the error) is the Python path's.
    class Rates(dict):
        def get(self, key, default=None):
            return 1.0

    for jobs in ([Job.model_construct(id="a", throughput={"v100": True})],
                 [Job.model_construct(id="a", throughput={"v100": np.float32(0.1)})],
                 [Job.model_construct(id="a", throughput={"v100": 1.0}, weight=np.int64(3))],
                 [Job.model_construct(id="a", throughput={"v100": 1.0}, slo_hours="2.5")],
                 [Job.model_construct(id="a", throughput=Rates(v100=4.0))]):
        assert job_kernels.job_columns(jobs, TYPES, plain_class) is None
        _same(jobs)
    no_weight = [Job.model_construct(id="a", throughput={"v100": 1.0}, weight=None)]
    assert job_kernels.job_columns(no_weight, TYPES, plain_class) is None
    assert np.isnan(_same(no_weight).weight).all()  # numpy's reading of None, as before


def test_fields_live_in_the_instance_dict():
    names = {"id", "throughput", *job_fields.NUMBERS, *job_fields.OPTIONAL}
    for job in (Job(id="a", throughput={"v100": 1.0}), Job.model_construct(id="a", throughput={"v100": 1.0})):
        assert names <= job.__dict__.keys()
        assert all(job.__dict__[name] is getattr(job, name) for name in names)
    assert plain_class(Job)

    class Tagged(Job):  # a subclass adding a field keeps the others in the dict
        tag: str = "x"

    class Declared(Job):  # pydantic drops a property of a field's name from the class body
        @property
        def weight(self) -> float:  # type: ignore[override]
            return 5.0

    tagged = Tagged(id="t", throughput={"k80": 2.0}, weight=3.0)
    declared = Declared.model_construct(id="d", throughput={"k80": 2.0}, weight=2.0)
    assert plain_class(Tagged) and tagged.__dict__["weight"] == 3.0
    assert plain_class(Declared) and declared.weight == declared.__dict__["weight"] == 2.0
    _same([tagged, Job(id="u", throughput={"v100": 1.0}), declared, tagged])


def test_other_classes_go_the_python_way(job_kernels):
    class Shadowed(Job):
        pass

    # A property of a field's name set on the class wins over the dict (one in the class body
    # is dropped by pydantic: test_fields_live_in_the_instance_dict).
    Shadowed.weight = property(lambda self: 5.0)

    class Slotted:  # no instance dict
        __slots__ = ("id", "throughput", *job_fields.NUMBERS, *job_fields.OPTIONAL)

        def __init__(self, **values):
            for name in self.__slots__:
                setattr(self, name, values.get(name))

    class Looked(Job):  # its own attribute lookup
        def __getattribute__(self, name):
            return 7.0 if name == "time_elapsed" else super().__getattribute__(name)

    assert not plain_class(Shadowed) and not plain_class(Slotted) and not plain_class(Looked)
    shadowed = Shadowed.model_construct(id="s", throughput={"v100": 1.0}, weight=2.0)
    slotted = Slotted(id="x", throughput={"p100": 2.0}, scale_factor=1, weight=1.0, arrival_time=0.0,
                      time_elapsed=0.0)
    looked = Looked.model_construct(id="l", throughput={"v100": 1.0})
    for job in (shadowed, slotted, looked):
        jobs = [Job(id="first", throughput={"k80": 1.0}), job]
        assert job_kernels.job_columns(jobs, TYPES, plain_class) is None
        _same(jobs)
    assert read_job_fields([shadowed], TYPES).weight.tolist() == [5.0]
    assert read_job_fields([looked], TYPES).time_elapsed.tolist() == [7.0]
    # A job missing a field: pydantic's AttributeError, as before.
    gone = Job.model_construct(id="g", throughput={"v100": 1.0})
    del gone.__dict__["arrival_time"]
    assert job_kernels.job_columns([gone], TYPES, plain_class) is None
    with pytest.raises(AttributeError):
        read_job_fields([gone], TYPES)


def test_arrays_identical_with_kernels_off(monkeypatch):
    data = {"kind": "allocation", "worker_types": [{"name": name, "count": 4} for name in TYPES],
            "jobs": [job.model_dump(exclude_none=True) for job in _random_jobs(7, 50, True, False)]}
    for job in data["jobs"]:
        if "slo_hours" in job:
            job.setdefault("steps_left", 10.0)
        job["throughput"]["v100"] = 1.0  # every job runs somewhere
        job["job_type"] = "resnet" if job["id"].endswith(("1", "2")) else "lm"
    data["colocations"] = [{"job_types": ["resnet", "lm"], "throughput": {"v100": [0.5, 0.4]}}]
    arrays = {}
    for switch in ("0", "1"):
        monkeypatch.setenv(kernels.ENVIRONMENT_SWITCH, switch)
        instance = AllocationInstance.model_validate(data)
        arrays[switch] = (instance.arrays(), instance._given)
    (off, given_off), (on, given_on) = arrays["0"], arrays["1"]
    for name in ("throughput", "scale_factor", "weight", "steps_left", "time_elapsed", "isolated_time_elapsed",
                 "slo_seconds", "arrival_rank", "colocation_class", "colocation_throughput"):
        assert getattr(on, name).tobytes() == getattr(off, name).tobytes(), name
    assert on.job_ids == off.job_ids
    assert {name: column.tobytes() for name, column in given_on.items()} == \
        {name: column.tobytes() for name, column in given_off.items()}
    assert (on.colocation_class >= 0).any()


def test_switch_turns_the_kernel_off(monkeypatch, job_kernels):
    monkeypatch.setenv(kernels.ENVIRONMENT_SWITCH, "0")
    assert kernels.load(job_fields.COMPILED) is None and not solver_kernels.enabled()
    called = []
    monkeypatch.setattr(job_kernels, "job_columns", lambda *args: called.append(1))
    read_job_fields([Job(id="a", throughput={"v100": 1.0})], TYPES)
    assert not called
    monkeypatch.setenv(kernels.ENVIRONMENT_SWITCH, "1")
    assert kernels.load(job_fields.COMPILED) is job_kernels
    assert solver_kernels.load is kernels.load  # one switch for every kernel


def test_a_tuple_of_jobs_or_no_jobs():
    jobs = _random_jobs(1, 5, True, True)
    _same(tuple(jobs))  # not a list: the Python path
    fields = _same([])
    assert fields.throughput.shape == (0, len(TYPES))
