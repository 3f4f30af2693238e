"""The jobs' fields as columns, what :meth:`AllocationInstance.arrays` builds its arrays from.

:func:`read_job_fields` reads them with the compiled kernel
(``job_kernels.pyx``, :mod:`fleetplan.kernels`) where it is built, switched on and able to read
the jobs given, and otherwise with :func:`read_job_fields_python`, the reference: both give the
same bits (``tests/test_job_kernels.py``).

Example
-------
>>> from fleetplan.instances.allocation import Job
>>> fields = read_job_fields([Job(id="a", throughput={"v100": 4, "k80": 1.5}, slo_hours=None)],
...                          ["v100", "k80", "p100"])
>>> fields.throughput.tolist(), fields.scale_factor.tolist(), fields.slo_hours.tolist()
([[4.0, 1.5, 0.0]], [1.0], [nan])
"""

from __future__ import annotations

from functools import cache
from operator import attrgetter
from typing import Any, NamedTuple

import numpy as np

import fleetplan.kernels as kernels

COMPILED = "fleetplan.instances.allocation.job_kernels"
# The numbers every job has, then the optional ones (None: NaN); job_kernels.pyx reads these.
NUMBERS = ("scale_factor", "weight", "arrival_time", "time_elapsed")
OPTIONAL = ("steps_left", "isolated_time_elapsed", "slo_hours")


class JobFields(NamedTuple):
    """The jobs' fields, one column each (NaN where an optional number is None)."""

    ids: list
    throughput: np.ndarray  # (jobs, types), 0 where a job's throughput dict lacks the type
    scale_factor: np.ndarray
    weight: np.ndarray
    arrival_time: np.ndarray
    time_elapsed: np.ndarray
    steps_left: np.ndarray
    isolated_time_elapsed: np.ndarray
    slo_hours: np.ndarray


def read_job_fields(jobs: Any, types: list[str]) -> JobFields:
    """The fields of ``jobs`` (a sequence of :class:`Job`), throughputs in ``types``' order."""
    compiled = kernels.load(COMPILED)
    if compiled is not None and type(jobs) is list and type(types) is list:
        columns = compiled.job_columns(jobs, types, plain_class)
        if columns is not None:
            return JobFields(*columns)
    return read_job_fields_python(jobs, types)


def read_job_fields_python(jobs: Any, types: list[str]) -> JobFields:
    """:func:`read_job_fields` in Python, by attribute: the reference, and the path for the
    jobs the kernel does not read (see :func:`plain_class`) or where it is not built."""
    n = len(jobs)
    # A column at a time, each straight into its array (np.fromiter over an attrgetter):
    # 2,048 freshly loaded jobs 2.0-2.6 ms against 2.5-3.0, 100,000 jobs 0.18 s against
    # 0.41-0.51 s, for one pass reading every field into a tuple per job and zipping them (four
    # and two alternations). The schema forbids NaN, so NaN here is a missing value (None).
    ids = list(map(_JOB_ID, jobs))
    throughputs = list(map(_JOB_THROUGHPUT, jobs))
    # One column per type: a comprehension per job (a frame each) took 3.3 s at 10^6 jobs.
    throughput = np.empty((n, len(types)))
    for column, name in enumerate(types):
        throughput[:, column] = [values.get(name, 0.0) for values in throughputs]
    numbers = (np.fromiter(map(getter, jobs), float, n) for getter in _JOB_NUMBERS)
    optional = (_optional_column(tuple(map(getter, jobs))) for getter in _JOB_OPTIONAL)
    return JobFields(ids, throughput, *numbers, *optional)


@cache
def plain_class(cls: type) -> bool:
    """Whether reading an attribute of a ``cls`` instance named as a field is reading its
    instance dict, as the kernel does: the class's attribute lookup is the generic one, its
    instances have a dict, and no class of its MRO defines a field's name (a property or a
    slot there would take precedence over the dict). pydantic keeps a model's fields in the
    instance dict, for ``Job(...)`` and ``Job.model_construct(...)`` alike, and leaves no
    class attribute of a field's name.

    >>> from fleetplan.instances.allocation import Job
    >>> plain_class(Job), plain_class(dict)
    (True, False)
    """
    if cls.__getattribute__ is not object.__getattribute__ or not cls.__dictoffset__:
        return False
    names = {"id", "throughput", *NUMBERS, *OPTIONAL}
    return not any(names & vars(klass).keys() for klass in cls.__mro__)


_JOB_ID, _JOB_THROUGHPUT = attrgetter("id"), attrgetter("throughput")
_JOB_NUMBERS = tuple(map(attrgetter, NUMBERS))
_JOB_OPTIONAL = tuple(map(attrgetter, OPTIONAL))


def _optional_column(values: tuple) -> np.ndarray:
    """An optional field's column, NaN where a job leaves it out (None). A column of None only
    (most instances give no SLO) is not converted value by value: 0.11 ms of the 2.5 ms the
    arrays of 2,048 jobs took."""
    if values.count(None) == len(values):
        return np.full(len(values), np.nan)
    return np.array(values, dtype=float)
