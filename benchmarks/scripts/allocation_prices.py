"""Time the interior-point prices of Gavel's LPs on distinct jobs: sampled-then-restricted
(the default from ``ipm.RESTRICT_ABOVE`` jobs) against the method on every job.

The LP arrays are the ones :func:`fleetplan.solve` hands to the price decomposition (captured
from ``separable.max_min`` / ``separable_linear.linear``), so the prices are those of a real solve.

    python benchmarks/scripts/allocation_prices.py 65536 max-min-fairness
    python benchmarks/scripts/allocation_prices.py 1000000 max-throughput --no-full

Prints, per variant: status, iterations, level (max-min forms) and CPU seconds.
"""

from __future__ import annotations

import argparse
import time

import fleetplan
from fleetplan.solvers.allocation.interior_point import ipm
from fleetplan.solvers.allocation.price_decomposition import separable, separable_linear


class _Captured(Exception):
    pass


def captured_arrays(jobs: int, solver: str, seed: int) -> tuple[str, tuple, dict]:
    """(form, positional arguments, keyword arguments) of the decomposition call of a solve."""
    seen: dict = {}

    def capture(form):
        def stop(*args, **kwargs):
            seen.update(form=form, args=args, kwargs=kwargs)
            raise _Captured
        return stop

    original = separable.max_min, separable_linear.linear
    separable.max_min, separable_linear.linear = capture("max_min"), capture("linear")
    try:
        fleetplan.solve(fleetplan.generate("allocation", {"jobs": jobs, "throughput_noise": 0.1}, seed=seed), solver)
    except _Captured:
        pass
    finally:
        separable.max_min, separable_linear.linear = original
    if not seen:
        raise SystemExit(f"{solver} did not reach the price decomposition at {jobs} jobs")
    return seen["form"], seen["args"], seen["kwargs"]


def prices(form: str, args: tuple, kwargs: dict):
    if form == "max_min":
        A, offset, mult, scale, W = args
        return ipm.max_min_prices(A, offset, mult * scale, W, free_level=kwargs["free_level"])
    P, mult, scale, W = args
    return ipm.linear_prices(P, mult * scale, W)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("jobs", type=int)
    parser.add_argument("solver", help="an allocation solver, e.g. max-min-fairness, max-throughput")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--no-full", action="store_true", help="skip the method on every job")
    options = parser.parse_args()
    form, args, kwargs = captured_arrays(options.jobs, options.solver, options.seed)
    variants = [("restricted", ipm.RESTRICT_ABOVE)] + ([] if options.no_full else [("every job", 10**18)])
    default = ipm.RESTRICT_ABOVE
    for name, threshold in variants:
        ipm.RESTRICT_ABOVE = threshold
        started = time.process_time()
        result = prices(form, args, kwargs)
        print(f"{name}: {result.status}, {result.iterations} iterations, level {result.level:.10g}, "
              f"{time.process_time() - started:.3f} s CPU")
    ipm.RESTRICT_ABOVE = default


if __name__ == "__main__":
    main()
