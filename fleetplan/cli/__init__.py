"""The ``fleetplan`` command line: a thin layer over the public API, one module per command
family.

* :mod:`~fleetplan.cli.entry` — the console script: signal handlers first, then the rest;
  :mod:`~fleetplan.cli.settling` — when a command's exit code is decided;
* :mod:`~fleetplan.cli.app` — the parser, dispatch, exit codes and one-line errors, and the
  core commands (``generate``, ``validate``, ``solve``, ``evaluate``, ``solvers``, ``schema``);
* :mod:`~fleetplan.cli.commands` — the other sub-commands, a module each: ``import`` /
  ``export`` / ``plot`` (``tables``), ``simulate``, ``bench``, ``demo``, ``serve``;
* :mod:`~fleetplan.cli.planning` — the planner's commands (``size``, ``whatif``, ``compare``,
  ``horizon``), what they print and their HTML reports;
* :mod:`~fleetplan.cli.common`, :mod:`~fleetplan.cli.display`, :mod:`~fleetplan.cli.catalog` —
  what the commands share: argument helpers, what is shown on screen, the solver catalog.

This package's own import loads nothing (the console script installs its signal handlers
before anything heavy); :func:`main` and :func:`build_parser` load the application on call.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any


def main(argv: Sequence[str] | None = None) -> int:
    """Run the command line with ``argv`` (default ``sys.argv[1:]``); returns the exit code."""
    from fleetplan.cli.app import main as run

    return run(argv)


def build_parser() -> Any:
    """The ``argparse`` parser of the whole command line."""
    from fleetplan.cli.app import build_parser as build

    return build()
