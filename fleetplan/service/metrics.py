"""``/metrics`` of the solve service: request counts and latencies by route and code, the queue,
the workers and the finished jobs, in Prometheus' text format."""

from __future__ import annotations

from bisect import bisect_left
from collections import Counter
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from fleetplan.service.jobs import JobManager

LATENCY_BUCKETS = (0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0, 300.0)


class Metrics:
    """Counters for ``/metrics`` (Prometheus text format)."""

    def __init__(self) -> None:
        self.requests: Counter[tuple[str, str, int]] = Counter()
        self.latency_sum: Counter[str] = Counter()
        self.latency_count: Counter[str] = Counter()
        # Requests by route and the first bucket they fall in (bisect: one update per request,
        # not one per bucket); render() adds them up into Prometheus' cumulative buckets.
        self.latency_first_bucket: Counter[tuple[str, int]] = Counter()

    def observe(self, method: str, route: str, code: int, seconds: float) -> None:
        self.requests[(method, route, code)] += 1
        self.latency_sum[route] += seconds
        self.latency_count[route] += 1
        self.latency_first_bucket[(route, bisect_left(LATENCY_BUCKETS, seconds))] += 1

    def render(self, jobs: JobManager | None) -> str:
        """The text; without ``jobs`` (the scheduler extender has none) the requests only."""
        lines = ["# HELP fleetplan_requests_total HTTP requests by method, route and status code.",
                 "# TYPE fleetplan_requests_total counter"]
        for (method, route, code), count in sorted(self.requests.items()):
            lines.append(f'fleetplan_requests_total{{method="{method}",route="{route}",code="{code}"}} {count}')
        lines += ["# HELP fleetplan_request_seconds Request latency.", "# TYPE fleetplan_request_seconds histogram"]
        for route in sorted(self.latency_count):
            below = 0
            for index, bound in enumerate(LATENCY_BUCKETS):
                below += self.latency_first_bucket[(route, index)]
                lines.append(f'fleetplan_request_seconds_bucket{{route="{route}",le="{bound}"}} {below}')
            lines.append(f'fleetplan_request_seconds_bucket{{route="{route}",le="+Inf"}} {self.latency_count[route]}')
            lines.append(f'fleetplan_request_seconds_sum{{route="{route}"}} {self.latency_sum[route]:.6f}')
            lines.append(f'fleetplan_request_seconds_count{{route="{route}"}} {self.latency_count[route]}')
        if jobs is None:
            return "\n".join(lines) + "\n"
        lines += ["# HELP fleetplan_queue_depth Jobs waiting for a worker.", "# TYPE fleetplan_queue_depth gauge",
                  f"fleetplan_queue_depth {jobs.queued}",
                  "# HELP fleetplan_jobs_running Jobs in a worker process.", "# TYPE fleetplan_jobs_running gauge",
                  f"fleetplan_jobs_running {len(jobs.running)}",
                  "# HELP fleetplan_worker_restarts_total Worker processes started after the first.",
                  "# TYPE fleetplan_worker_restarts_total counter", f"fleetplan_worker_restarts_total {jobs.restarts}",
                  "# HELP fleetplan_jobs_total Finished jobs by task, state and HTTP code.",
                  "# TYPE fleetplan_jobs_total counter"]
        for key, count in sorted(jobs.counts.items()):
            task, state, code = key.split(":")
            lines.append(f'fleetplan_jobs_total{{task="{task}",state="{state}",code="{code}"}} {count}')
        return "\n".join(lines) + "\n"
