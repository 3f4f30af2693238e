# cython: language_level=3, boundscheck=False, wraparound=False, initializedcheck=False
"""The jobs' columns of :meth:`AllocationInstance.arrays` read in one compiled pass
(:func:`fleetplan.instances.allocation.job_fields.read_job_fields` calls it; its Python code,
``read_job_fields_python``, is the reference).

The Python code reads each field of each job by attribute, a Python call each (the figures
are in ``AllocationInstance.arrays``); here a job's fields are read from its instance dict,
where pydantic keeps them, with C calls. That is the same as reading the attribute only for a
class whose attribute lookup is the generic one and that defines none of the fields' names
(the caller's ``plain_class`` tells), so a job of any other class, or a field or value this
pass does not convert exactly as numpy does, returns None: the caller then runs the Python
code, which gives the same numbers or raises the same error. ``tests/test_job_kernels.py``
checks the two give the same bits.
"""

import numpy as np

from fleetplan.instances.allocation.job_fields import NUMBERS, OPTIONAL

from cpython.dict cimport PyDict_GetItem
from cpython.float cimport PyFloat_AS_DOUBLE
from cpython.long cimport PyLong_AsDouble
from cpython.object cimport PyObject, PyObject_GenericGetDict
from libc.math cimport NAN

# NUMBERS, then OPTIONAL (None: NaN), in the order the result lists them; the C array of
# columns needs their count at compile time.
cdef enum:
    N_FIELDS = 7
assert len(NUMBERS) + len(OPTIONAL) == N_FIELDS

cdef object _ID = "id"
cdef object _THROUGHPUT = "throughput"


cdef inline bint _as_double(PyObject* value, double* out):
    """``value`` as numpy would store it in a float64 array, for the two types it can hold
    here (a float, an int: pydantic leaves an int as given by ``model_construct``); False for
    any other type, or an int too large for a double."""
    cdef object number = <object>value
    if type(number) is float:
        out[0] = PyFloat_AS_DOUBLE(number)
        return True
    if type(number) is int:
        try:
            out[0] = PyLong_AsDouble(number)  # rounds to nearest, as numpy's conversion does
        except OverflowError:
            return False
        return True
    return False


def job_columns(list jobs, list types, plain_class):
    """``(ids, throughput, scale_factor, weight, arrival_time, time_elapsed, steps_left,
    isolated_time_elapsed, slo_hours)`` of ``jobs``, with ``throughput`` (jobs, ``types``), 0
    where a job's dict lacks a type, and NaN where an optional number is None; or None where a
    job is not read this way (see the module's docstring). ``plain_class(cls)`` tells whether
    a class's attributes are its instances' dict entries; it is asked once per run of jobs of
    one class."""
    cdef Py_ssize_t n = len(jobs), n_types = len(types), m, k, f
    cdef Py_ssize_t n_numbers = len(NUMBERS), n_fields = N_FIELDS
    cdef tuple names = NUMBERS + OPTIONAL
    throughput_array = np.zeros((n, n_types))
    cdef list columns = [np.empty(n) for _ in range(n_fields)]
    cdef double[:, ::1] throughput = throughput_array
    cdef double[::1] column
    cdef double* out[N_FIELDS]  # each column's data (the list above keeps the arrays alive)
    cdef list ids = [None] * n
    cdef object job, attributes, rates, plain_type = None
    cdef PyObject* value
    cdef double number
    if n == 0:
        return (ids, throughput_array, *columns)
    for k in range(n_types):
        if type(types[k]) is not str:
            return None
    for f in range(n_fields):
        column = columns[f]
        out[f] = &column[0]
    for m in range(n):
        job = jobs[m]
        if type(job) is not plain_type:
            if not plain_class(type(job)):
                return None
            plain_type = type(job)
        attributes = PyObject_GenericGetDict(job, NULL)
        value = PyDict_GetItem(attributes, _ID)
        if value == NULL:
            return None  # no such attribute: the Python code raises pydantic's error
        ids[m] = <object>value
        for f in range(n_fields):
            value = PyDict_GetItem(attributes, names[f])
            if value == NULL:
                return None
            if f >= n_numbers and <object>value is None:
                out[f][m] = NAN
            elif _as_double(value, &number):
                out[f][m] = number
            else:
                return None
        value = PyDict_GetItem(attributes, _THROUGHPUT)
        if value == NULL or type(<object>value) is not dict:
            return None  # a mapping of another type may answer .get differently
        rates = <object>value
        for k in range(n_types):
            value = PyDict_GetItem(rates, types[k])
            if value != NULL:
                if not _as_double(value, &number):
                    return None
                throughput[m, k] = number
    return (ids, throughput_array, *columns)
