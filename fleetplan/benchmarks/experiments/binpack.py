"""What the greedy RMS gives up against the exact models, and what one-at-a-time placement gives
up against the batch model (MAST §4.3, Table 1), from the command line: the measurements are
:mod:`fleetplan.solvers.binpack.compare`'s, the figure :func:`fleetplan.plotting.binpack.plot_comparison_report`.

    .venv/bin/python -m fleetplan.benchmarks.experiments.binpack --regions 200 --batch-regions 50 --plot gaps.png
"""

from __future__ import annotations

import argparse
import json

from fleetplan.plotting.binpack import plot_comparison_report
from fleetplan.solvers.binpack.compare import batch_loss, greedy_gap


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m fleetplan.benchmarks.experiments.binpack",
                                     description=__doc__.split("\n\n")[0])
    parser.add_argument("--regions", type=int, default=200)
    parser.add_argument("--batch-regions", type=int, default=50)
    parser.add_argument("--time-limit", type=float, default=30.0)
    parser.add_argument("--plot", metavar="FILE.png", default=None,
                        help="also draw the greedy's gap and the batch model's gain to this PNG")
    args = parser.parse_args(argv)
    if args.plot is not None and not args.plot.lower().endswith(".png"):
        parser.error(f"--plot {args.plot}: the file must end in .png")
    report = {"greedy_gap": greedy_gap(args.regions, time_limit=args.time_limit)}
    if args.batch_regions:
        report["batch_loss"] = batch_loss(args.batch_regions, time_limit=args.time_limit)
    print(json.dumps(report, indent=1))
    if args.plot is not None:
        plot_comparison_report(report, args.plot)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
