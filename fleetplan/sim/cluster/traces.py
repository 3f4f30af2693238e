"""Job traces for the cluster simulator: Gavel's generator, Astraea-like multi-tenant traces,
and a CSV format for replaying a real cluster's log.

A :class:`Trace` is column-wise (numpy arrays, one entry per job). A job runs ``steps`` training
steps and then ends in its ``state``: completed, or canceled / failed after running that many
steps (a replayed log records how long a canceled or failed job actually ran; the scheduler
does not know it will end early, see ``steps_requested``). ``throughput[m, j]`` is job m's
steps per second on worker type j with its GPUs on as few servers as possible,
``throughput_unconsolidated`` when they are spread over more servers (Gavel §3.1).

Generators
----------
* :func:`gavel_trace` - Gavel §7.1: the 26 job configurations of its Table 2 with their
  measured throughputs (``fleetplan/data/gavel_throughputs.json``), durations 10^U(1.5, 3)
  minutes for 80% of jobs and 10^U(3, 4) for the rest (Gavel's generator; the paper calls it
  an exponential distribution between 10^1.5 and 10^4 minutes), steps = duration x the
  job's V100 throughput, Poisson arrivals at ``rate_per_hour`` (``None``: a static trace, every
  job at time 0, for makespan), scale factors 1 (70%), 2 or 4 (25%), 8 (5%).
* :func:`astraea_trace` - Astraea §3 / §6.1.2: running times following its Table 1 (Venus or
  Philly), GPU demands following Figure 1 (52.5% one GPU, 22.6% eight, 10.3% more than
  eight), final states 52.2% completed / 27.9% canceled / 19.9% failed, 16 tenants (15 VCs for
  Philly) with unbalanced, bursty demand and static GPU quotas; one homogeneous GPU type.

CSV format (:func:`read_csv_trace`)
----------------------------------
One header row, then one row per job, sorted by ``submit_time``; columns (order free)::

    id,tenant,submit_time,gpus,duration,steps,model,state

``id`` unique; ``tenant`` any name (empty: ``default``); ``submit_time`` seconds >= 0;
``gpus`` integer >= 1; exactly one of ``duration`` (seconds the job ran on the fastest type) or
``steps``; ``model`` a job type of Gavel's Table 2 (``ResNet-50 (batch size 64)``) or empty /
``generic`` (1 step per second on every type: durations are then wall-clock seconds); ``state``
``completed`` (default), ``canceled`` or ``failed``. A bad value raises
:class:`~fleetplan.instances.InstanceError` naming file, row and column.
"""

from __future__ import annotations

import csv
import math
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from fleetplan.errors import excerpt
from fleetplan.instances.allocation.generator import gavel_throughputs
from fleetplan.instances.base import InstanceError

STATES = ("completed", "canceled", "failed")
GENERIC = "generic"
CSV_COLUMNS = ("id", "tenant", "submit_time", "gpus", "duration", "steps", "model", "state")

# Astraea Table 1: share of jobs finishing within 10 min, 1 h, 6 h, 1 day, 6 days.
TABLE1_BOUNDS_S = (600.0, 3600.0, 21600.0, 86400.0, 518400.0)
TABLE1_CDF = {
    "venus": (0.673, 0.833, 0.906, 0.962, 0.996),
    "philly": (0.408, 0.716, 0.885, 0.941, 0.985),
}
SHORTEST_S, LONGEST_S = 10.0, 14 * 86400.0
# Astraea Figure 1: 52.5% one GPU, 22.6% eight, 10.3% more than eight; the rest 2 or 4 GPUs.
GPU_DEMAND = ((1, 0.525), (2, 0.073), (4, 0.073), (8, 0.226), (16, 0.062), (32, 0.031), (64, 0.010))
STATE_SHARE = (0.522, 0.279, 0.199)  # Astraea §3.1: completed, canceled, failed
# Rank correlation (Gaussian copula) between a job's GPU demand and its running time. Astraea §3.1:
# "DLT jobs with larger GPU demands tend to have longer running time"; for Venus, 87.4% of
# single-GPU jobs last under an hour and 2.2% over a day, single-GPU jobs take 4.7% of the GPU
# service time and jobs of 8 GPUs or more 85.7%. Independent draws (0) give 82.5% / 4.1% / 10.5% /
# 81.8% (mean of seeds 1-3); 0.15 gives 85.9% / 3.0% / 5.3% / 88.8%, the least total error over
# the four (no single value matches all four). It raises the offered GPU-time of the two-week
# trace from 0.95 to 1.40 times 800 GPUs. Philly's split by demand is not given: 0.
DURATION_GPU_CORRELATION = {"venus": 0.15, "philly": 0.0}
ASTRAEA_DEFAULTS = {  # §6.1.2-6.1.3: jobs in a two-week snapshot, tenants, 8-GPU nodes
    "venus": {"jobs": 11304, "tenants": 16, "gpus": 800},
    "philly": {"jobs": 44329, "tenants": 15, "gpus": 1680},
}
TWO_WEEKS_S = 14 * 86400.0
# What a trace may ask of the simulator (a job of 1e30 s, or submitted at
# 1e12 s, made it run for hours): ten years of simulated time per job and per submission, far
# beyond any cluster log, and jobs no larger than any cluster.
MAX_TRACE_SECONDS = 10 * 365.25 * 86400.0
MAX_JOB_GPUS = 1 << 20


@dataclass
class Trace:
    """Jobs as columns; ``worker_types`` name the columns of the throughput matrices."""

    ids: list[str]
    tenant: np.ndarray  # int index into tenant_names
    tenant_names: list[str]
    submit: np.ndarray  # seconds
    gpus: np.ndarray  # int
    steps: np.ndarray  # steps run before the final state
    steps_requested: np.ndarray  # steps the user asked for (= steps when completed)
    model: list[str]
    state: np.ndarray  # index into STATES
    worker_types: list[str]
    throughput: np.ndarray  # (jobs, types) steps/s, consolidated
    throughput_unconsolidated: np.ndarray  # (jobs, types)
    tenant_quota: np.ndarray | None = None  # GPUs per tenant (YARN-CS, LTGF quotas)
    name: str = "trace"
    meta: dict = field(default_factory=dict)

    def __len__(self) -> int:
        return len(self.ids)

    def duration_fastest(self) -> np.ndarray:
        """Seconds each job needs alone on its fastest type (consolidated)."""
        return self.steps / self.throughput.max(axis=1)

    def subset(self, jobs: np.ndarray) -> Trace:
        quota = self.tenant_quota
        return Trace(
            ids=[self.ids[m] for m in jobs], tenant=self.tenant[jobs], tenant_names=self.tenant_names,
            submit=self.submit[jobs], gpus=self.gpus[jobs], steps=self.steps[jobs],
            steps_requested=self.steps_requested[jobs], model=[self.model[m] for m in jobs],
            state=self.state[jobs], worker_types=self.worker_types, throughput=self.throughput[jobs],
            throughput_unconsolidated=self.throughput_unconsolidated[jobs], tenant_quota=quota,
            name=self.name, meta=dict(self.meta))


def _table_by_key() -> dict[tuple[str, int], dict[str, float]]:
    return {(entry["job_type"], int(entry["scale_factor"])): entry["throughput"]
            for entry in gavel_throughputs()["jobs"]}


def model_throughputs(model: str, gpus: int, types: list[str]) -> tuple[np.ndarray, np.ndarray] | None:
    """(consolidated, unconsolidated) throughput of ``model`` on ``gpus`` GPUs per type; None if
    the table has no such configuration. ``generic`` runs 1 step/s everywhere."""
    if model in ("", GENERIC):
        return np.ones(len(types)), np.ones(len(types))
    entry = _table_by_key().get((model, int(gpus)))
    if entry is None:
        return None
    return (np.array([entry.get(t, 0.0) for t in types]),
            np.array([entry.get(f"{t}_unconsolidated", entry.get(t, 0.0)) for t in types]))


def known_models() -> list[str]:
    return sorted({key[0] for key in _table_by_key()})


# --- Gavel §7.1 --------------------------------------------------------------------------

def gavel_trace(jobs: int, seed: int, rate_per_hour: float | None = None, multi_gpu: bool = True,
                worker_types: tuple[str, ...] = ("v100", "p100", "k80"),
                max_gpus: int | None = None) -> Trace:
    """Gavel §7.1 trace (see module docstring); ``max_gpus`` caps scale factors (small clusters)."""
    if jobs < 1:
        raise InstanceError("jobs", "must be at least 1")
    rng = np.random.default_rng([seed, 7011])
    types = list(worker_types)
    table = _table_by_key()
    by_scale: dict[int, list[str]] = {}
    for job_type, scale in sorted(table):
        if all(table[(job_type, scale)].get(t, 0) > 0 for t in types):
            by_scale.setdefault(scale, []).append(job_type)
    if multi_gpu:
        draw = rng.random(jobs)
        small = rng.choice([2, 4], size=jobs)
        scale = np.where(draw < 0.70, 1, np.where(draw < 0.95, small, 8))
    else:
        scale = np.ones(jobs, dtype=int)
    if max_gpus is not None:
        scale = np.minimum(scale, max(1, 2 ** int(math.log2(max_gpus))))
    model = [by_scale[int(s)][int(rng.integers(len(by_scale[int(s)])))] for s in scale]
    long_job = rng.random(jobs) >= 0.8
    minutes = np.where(long_job, 10 ** rng.uniform(3, 4, jobs), 10 ** rng.uniform(1.5, 3, jobs))
    if rate_per_hour is None:
        submit = np.zeros(jobs)
    else:
        if not rate_per_hour > 0:
            raise InstanceError("rate_per_hour", "must be > 0")
        submit = np.cumsum(rng.exponential(3600.0 / rate_per_hour, jobs))
        submit -= submit[0]
    thr = np.zeros((jobs, len(types)))
    unc = np.zeros((jobs, len(types)))
    for m in range(jobs):
        thr[m], unc[m] = model_throughputs(model[m], int(scale[m]), types)
    steps = minutes * 60.0 * thr[:, 0]
    return Trace(
        ids=[f"job{m}" for m in range(jobs)], tenant=np.zeros(jobs, dtype=int), tenant_names=["default"],
        submit=submit, gpus=scale.astype(int), steps=steps, steps_requested=steps.copy(), model=model,
        state=np.zeros(jobs, dtype=int), worker_types=types, throughput=thr, throughput_unconsolidated=unc,
        name=f"gavel-{jobs}jobs-seed{seed}", meta={"rate_per_hour": rate_per_hour, "multi_gpu": multi_gpu})


# --- Astraea §3, §6.1 --------------------------------------------------------------------

def sample_durations(shape: str, n: int, rng: np.random.Generator) -> np.ndarray:
    """Running times whose CDF passes through Astraea Table 1's points, log-uniform between them
    (10 s shortest, 14 days longest)."""
    cdf = np.array((0.0, *TABLE1_CDF[shape], 1.0))
    knots = np.log(np.array((SHORTEST_S, *TABLE1_BOUNDS_S, LONGEST_S)))
    return np.exp(np.interp(rng.random(n), cdf, knots))


def astraea_trace(shape: str = "venus", jobs: int | None = None, seed: int = 0, gpus: int | None = None,
                  tenants: int | None = None, span_s: float = TWO_WEEKS_S,
                  duration_gpu_correlation: float | None = None) -> Trace:
    """A Venus- or Philly-like multi-tenant trace (see module docstring).

    Tenants get Zipf-like shares of the jobs and day-by-day bursts (Astraea Figure 4's
    unbalanced demand); quotas are proportional to each tenant's requested GPU-time (what
    Astraea assumes for Philly's VCs), summing to ``gpus``. Running times keep Table 1's
    distribution and are matched to GPU demands with rank correlation
    ``duration_gpu_correlation`` (None: the shape's calibrated value, see
    ``DURATION_GPU_CORRELATION``).
    """
    if shape not in TABLE1_CDF:
        raise InstanceError("generate", f"unknown trace shape '{shape}' (known: venus, philly)")
    defaults = ASTRAEA_DEFAULTS[shape]
    n = defaults["jobs"] if jobs is None else jobs
    n_tenants = defaults["tenants"] if tenants is None else tenants
    cluster = defaults["gpus"] if gpus is None else gpus
    if n < 1 or n_tenants < 1 or cluster < 1:
        raise InstanceError("jobs", "jobs, tenants and gpus must be at least 1")
    rng = np.random.default_rng([seed, 3320])
    sizes = np.array([g for g, _ in GPU_DEMAND])
    share = np.array([p for _, p in GPU_DEMAND])
    demand = rng.choice(sizes, size=n, p=share / share.sum())
    demand = np.minimum(demand, max(1, 2 ** int(math.log2(cluster))))
    duration = sample_durations(shape, n, rng)
    state = rng.choice(3, size=n, p=np.array(STATE_SHARE) / sum(STATE_SHARE))
    rho = DURATION_GPU_CORRELATION[shape] if duration_gpu_correlation is None else float(duration_gpu_correlation)
    if rho != 0.0:
        duration = _correlate(duration, demand, rho, np.random.default_rng([seed, 3321]))
    submit = np.sort(rng.uniform(0.0, span_s, n))
    submit -= submit[0]
    days = int(math.ceil(span_s / 86400.0)) + 1
    base = 1.0 / np.arange(1, n_tenants + 1) ** 0.8
    burst = rng.lognormal(0.0, 1.0, (days, n_tenants))
    weights = base[None, :] * burst
    day = np.minimum((submit // 86400.0).astype(int), days - 1)
    cumulative = np.cumsum(weights / weights.sum(axis=1, keepdims=True), axis=1)
    tenant = np.minimum((rng.random(n)[:, None] > cumulative[day]).sum(axis=1), n_tenants - 1)
    gpu_time = np.bincount(tenant, weights=demand * duration, minlength=n_tenants) + 1.0
    quota = _quotas(gpu_time, cluster)
    requested = np.where(state == 0, duration, duration / rng.uniform(0.1, 1.0, n))
    ones = np.ones((n, 1))
    return Trace(
        ids=[f"job{m}" for m in range(n)], tenant=tenant.astype(int),
        tenant_names=[f"tenant{k}" for k in range(n_tenants)], submit=submit, gpus=demand.astype(int),
        steps=duration, steps_requested=requested, model=[GENERIC] * n, state=state.astype(int),
        worker_types=["gpu"], throughput=ones, throughput_unconsolidated=ones.copy(), tenant_quota=quota,
        name=f"{shape}-{n}jobs-seed{seed}", meta={"shape": shape, "gpus": cluster})


def _correlate(duration: np.ndarray, demand: np.ndarray, rho: float, rng: np.random.Generator) -> np.ndarray:
    """The same running times given to the jobs in the order of a latent score with correlation
    ``rho`` to the normal scores of their GPU demands (a Gaussian copula): the distribution of
    running times is unchanged; larger jobs tend to get the longer ones."""
    from scipy import stats

    n = len(duration)
    rank = stats.rankdata(demand + rng.random(n) * 1e-3)  # ties between equal demands broken at random
    latent = rho * stats.norm.ppf((rank - 0.5) / n) + math.sqrt(1.0 - rho * rho) * rng.standard_normal(n)
    out = np.empty(n)
    out[np.argsort(latent, kind="stable")] = np.sort(duration)
    return out


def _quotas(weight: np.ndarray, total: int) -> np.ndarray:
    """Integer quotas proportional to ``weight`` (at least 1 GPU each while the total allows),
    summing to ``total``: largest remainders get the GPUs left after rounding down."""
    exact = total * weight / weight.sum()
    quota = np.floor(exact).astype(int)
    if total >= len(weight):
        quota = np.maximum(quota, 1)
    while quota.sum() > total:
        quota[int(np.argmax(quota))] -= 1
    order = np.argsort(-(exact - quota), kind="stable")
    k = 0
    while quota.sum() < total:
        quota[order[k % len(order)]] += 1
        k += 1
    return quota.astype(float)


# --- CSV ---------------------------------------------------------------------------------

def read_csv_trace(path: str | Path, worker_types: list[str] | None = None) -> Trace:
    """Read a CSV trace (format in the module docstring); errors name file, row and column."""
    path = Path(path)
    types = list(worker_types or ["v100", "p100", "k80"])
    try:
        # utf-8-sig: a byte-order mark (spreadsheets write one) is not part of the first name.
        handle = path.open(newline="", encoding="utf-8-sig")
    except OSError as error:
        raise InstanceError("trace", f"cannot read {path}: {error.strerror}") from None
    try:
        with handle:
            rows = _read_rows(path, csv.DictReader(handle))
    except UnicodeDecodeError as error:
        raise InstanceError(f"{path}", f"is not UTF-8 text (byte {error.start} is "
                                       f"0x{error.object[error.start]:02x})") from None
    except csv.Error as error:
        raise InstanceError(f"{path}", f"malformed CSV: {error}") from None
    return _trace_of_rows(path, rows, types)


def _read_rows(path: Path, reader: csv.DictReader) -> list[dict[str, str]]:
    """The rows as stripped strings, the header checked; a row with more fields than the
    header is refused (DictReader files them under the key None)."""
    header = [h.strip() for h in (reader.fieldnames or [])]
    for required in ("id", "submit_time", "gpus"):
        if required not in header:
            raise InstanceError(f"{path}: row 1, column '{required}'", "missing column")
    unknown = sorted(set(header) - set(CSV_COLUMNS))
    if unknown:
        raise InstanceError(f"{path}: row 1, column '{unknown[0]}'",
                            f"unknown column (known: {', '.join(CSV_COLUMNS)})")
    if "duration" not in header and "steps" not in header:
        raise InstanceError(f"{path}: row 1", "needs a 'duration' or a 'steps' column")
    rows = []
    for row in reader:
        if None in row:
            raise InstanceError(f"{path}: row {reader.line_num}", f"{len(header) + len(row[None])} fields, "
                                                                  f"the header has {len(header)}")
        rows.append({(k or "").strip(): (v or "").strip() for k, v in row.items()})
    return rows


def _trace_of_rows(path: Path, rows: list[dict[str, str]], types: list[str]) -> Trace:
    if not rows:
        raise InstanceError(f"{path}", "has no jobs")
    ids, tenants, submit, gpus, steps, model, state = [], [], [], [], [], [], []
    thr, unc = [], []
    seen: set[str] = set()
    for index, row in enumerate(rows):
        line = index + 2  # the header is row 1

        def where(column: str, line: int = line) -> str:
            return f"{path}: row {line}, column '{column}'"

        job_id = row.get("id", "")
        if not job_id:
            raise InstanceError(where("id"), "is empty")
        if job_id in seen:
            raise InstanceError(where("id"), f"duplicate id '{job_id}'")
        seen.add(job_id)
        t = _number(row.get("submit_time", ""), where("submit_time"))
        if not 0 <= t <= MAX_TRACE_SECONDS:
            raise InstanceError(where("submit_time"), f"must be in [0, {MAX_TRACE_SECONDS:.4g}] seconds "
                                                      f"(ten years), got {t:g}")
        if submit and t < submit[-1]:
            raise InstanceError(where("submit_time"), f"rows are not sorted by submit_time ({t:g} after {submit[-1]:g})")
        g = _number(row.get("gpus", ""), where("gpus"))
        if not 1 <= g <= MAX_JOB_GPUS or g != int(g):
            raise InstanceError(where("gpus"), f"must be an integer in [1, {MAX_JOB_GPUS:,}], got "
                                               f"{excerpt(row.get('gpus'))}")
        name = row.get("model", "") or GENERIC
        rates = model_throughputs(name, int(g), types)
        if rates is None:
            raise InstanceError(where("model"), f"unknown model '{name}' on {int(g)} GPUs "
                                                f"(known: generic, {', '.join(known_models())})")
        if not (rates[0] > 0).any():
            raise InstanceError(where("model"), f"model '{name}' runs on none of the types {types}")
        duration, count = row.get("duration", ""), row.get("steps", "")
        if bool(duration) == bool(count):
            raise InstanceError(where("duration"), "give exactly one of duration and steps")
        if duration:
            value = _number(duration, where("duration"))
            if not 0 < value <= MAX_TRACE_SECONDS:
                raise InstanceError(where("duration"), f"must be > 0 and at most {MAX_TRACE_SECONDS:.4g} "
                                                       f"seconds (ten years), got {excerpt(duration)}")
            value *= rates[0].max()
        else:
            value = _number(count, where("steps"))
            if not 0 < value <= MAX_TRACE_SECONDS * rates[0].max():
                raise InstanceError(where("steps"), f"must be > 0 and run at most ten years on the fastest "
                                                    f"type, got {excerpt(count)}")
        final = (row.get("state", "") or "completed").lower()
        if final not in STATES:
            raise InstanceError(where("state"), f"unknown state '{final}' (known: {', '.join(STATES)})")
        ids.append(job_id)
        tenants.append(row.get("tenant", "") or "default")
        submit.append(t)
        gpus.append(int(g))
        steps.append(value)
        model.append(name)
        state.append(STATES.index(final))
        thr.append(rates[0])
        unc.append(rates[1])
    names = sorted(set(tenants))
    return Trace(
        ids=ids, tenant=np.array([names.index(x) for x in tenants], dtype=int), tenant_names=names,
        submit=np.array(submit, dtype=float), gpus=np.array(gpus, dtype=int),
        steps=np.array(steps, dtype=float), steps_requested=np.array(steps, dtype=float), model=model,
        state=np.array(state, dtype=int), worker_types=types, throughput=np.array(thr),
        throughput_unconsolidated=np.array(unc), name=path.stem)


def _number(text: str, where: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise InstanceError(where, f"not a number: '{text}'") from None
    if not math.isfinite(value):
        raise InstanceError(where, f"not a finite number: '{text}'")
    return value


def write_csv_trace(trace: Trace, path: str | Path) -> None:
    """Write ``trace`` in the CSV format (steps, so any model round-trips exactly)."""
    with Path(path).open("w", newline="", encoding="utf-8") as handle:
        writer = csv.writer(handle)
        writer.writerow(["id", "tenant", "submit_time", "gpus", "steps", "model", "state"])
        for m in range(len(trace)):
            writer.writerow([trace.ids[m], trace.tenant_names[trace.tenant[m]], repr(float(trace.submit[m])),
                             int(trace.gpus[m]), repr(float(trace.steps[m])), trace.model[m],
                             STATES[trace.state[m]]])
