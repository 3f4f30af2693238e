"""``fleetplan serve``: the solvers, the judge and the planning questions as an HTTP/JSON service
for schedulers written in any language.

* :mod:`~fleetplan.service.app` — the FastAPI application, its endpoints and the middleware
  (token, JSON only, body size, draining);
* :mod:`~fleetplan.service.compute` — the computing requests' plain ASGI route (solve, evaluate,
  size, whatif, horizon, session rounds): checks, the job, the wait, the answer;
* :mod:`~fleetplan.service.schemas` — the strict request models and the checks a request passes
  before it is queued;
* :mod:`~fleetplan.service.jobs` — the fair, bounded queue and the pool of warm worker processes;
* :mod:`~fleetplan.service.tasks` — what a worker process runs, JSON in and out;
* :mod:`~fleetplan.service.sessions` — sessions over HTTP, kept in one worker each;
* :mod:`~fleetplan.service.store` — the jobs in SQLite with ``--state`` (durable, idempotent);
* :mod:`~fleetplan.service.metrics` — ``/metrics``;
* :mod:`~fleetplan.service.extender` — a Kubernetes scheduler extender (``filter``,
  ``prioritize``) scoring nodes with the gpushare policies and RMS, reading the objects with
  :mod:`~fleetplan.service.kube_objects`; :mod:`~fleetplan.service.extender_app` serves it
  (``fleetplan serve --extender``).

The service sits above the solvers and planning (it calls them) and beside the command line,
which starts it (:mod:`fleetplan.cli.commands.serve`). docs/embedding.md shows it with curl and Python.
"""

from __future__ import annotations

from fleetplan.service.app import ServiceSettings, create_app  # noqa: F401

__all__ = ["ServiceSettings", "create_app"]
