"""Time one Tetris hill climb (MAST §3.4) on a placement file: wall and CPU seconds, peak memory,
the load average, the objective and the climb's counters, as one JSON line.

    .venv/bin/fleetplan generate placement --regions 20 --tables 1000000 --jobs 1000000 --seed 0 -o p1m.json
    .venv/bin/python benchmarks/scripts/placement_scale.py p1m.json [--profile out.prof] [--source DIR]
    .venv/bin/python benchmarks/scripts/placement_scale.py --generate 10000 --seed 2 --no-replicas --moves a.json
    .venv/bin/python benchmarks/scripts/placement_scale.py --compare a.json b.json

The clock covers ``fleetplan.solve`` (the solver and the judge), not loading the file. ``--source
DIR`` runs another checkout of fleetplan with this virtual environment (``git worktree add DIR
COMMIT``: the "before" of a comparison), as ``startup.py`` does. ``--profile`` writes a cProfile
of the solve timed in CPU seconds (``time.process_time``; it slows the solve down, so time it
without). ``--generate T`` solves ``generate("placement", {"regions": 20, "tables": T, "jobs":
T}, seed)`` instead of a file; ``--no-replicas`` passes ``replicas=False``. ``--moves FILE``
writes the applied moves (table, source, target, gain, as ``repr`` of the floats), the
objective and the replicas (their number and a SHA-256 of their columns), and ``--compare A B`` says whether two such files are identical move by move (exit
status 1 if not): how a faster climb is checked to give the same plan to the last digit.
``--breakdown`` prints the CPU seconds of the climb's parts (see ``_breakdown``) after the line.
``FLEETPLAN_KERNELS=0`` in the environment runs the numpy code instead of the compiled kernels
(the line says which ran: ``kernels``); the first solve of a process loads them (about 1-2 CPU s
with numba's on-disk cache, more on a fresh install, which compiles them).
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import resource
import sys
import time
from pathlib import Path


def compare(first: str, second: str) -> int:
    a, b = (json.loads(Path(name).read_text()) for name in (first, second))
    same = a == b
    diverge = next((k for k, (x, y) in enumerate(zip(a["moves"], b["moves"], strict=False)) if x != y), None)
    print(json.dumps({"identical": same, "moves": [len(a["moves"]), len(b["moves"])],
                      "objective": [a["objective"], b["objective"]], "first_difference": diverge}))
    return 0 if same else 1


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("instance", nargs="?")
    parser.add_argument("--solver", default="hill-climb")
    parser.add_argument("--profile", default=None, help="write a cProfile of the solve here")
    parser.add_argument("--source", default=None, help="another checkout to measure")
    parser.add_argument("--generate", type=int, default=None, help="tables (= jobs) of a generated instance")
    parser.add_argument("--seed", type=int, default=0, help="seed of the generated instance")
    parser.add_argument("--no-replicas", action="store_true", help="solve with replicas=False")
    parser.add_argument("--moves", default=None, help="write the applied moves and the objective here")
    parser.add_argument("--compare", nargs=2, default=None, help="compare two --moves files")
    parser.add_argument("--breakdown", action="store_true", help="CPU seconds of the climb's parts")
    args = parser.parse_args()
    if args.compare:
        sys.exit(compare(*args.compare))
    if args.source:
        # The editable install's import hook would win over sys.path: drop it first.
        sys.meta_path = [f for f in sys.meta_path if "__editable__" not in (getattr(f, "__module__", "") or "")]
        sys.path.insert(0, str(Path(args.source).resolve()))
    import fleetplan
    from fleetplan.instances import load_instance

    if args.generate is not None:
        instance = fleetplan.generate("placement", {"regions": 20, "tables": args.generate, "jobs": args.generate},
                                      seed=args.seed)
    else:
        instance = load_instance(args.instance)
    options = {"replicas": False} if args.no_replicas else {}
    breakdown = _breakdown() if args.breakdown else None
    profile = None
    if args.profile:
        import cProfile

        profile = cProfile.Profile(time.process_time)  # CPU seconds: the machine is shared
        profile.enable()
    wall, cpu = time.perf_counter(), time.process_time()
    result = fleetplan.solve(instance, args.solver, **options)
    wall, cpu = time.perf_counter() - wall, time.process_time() - cpu
    if profile is not None:
        profile.disable()
        profile.dump_stats(args.profile)
    if args.moves:
        moves = [[m.table, m.source, m.target, repr(m.gain)] for m in result.plan.moves]
        replicas = result.plan.replicas
        digest = hashlib.sha256(json.dumps([replicas.table, replicas.region, [repr(b) for b in replicas.bytes],
                                            replicas.reason]).encode()).hexdigest()
        Path(args.moves).write_text(json.dumps({"objective": repr(result.objective), "moves": moves,
                                                "replicas": [len(replicas.table), digest]}))
    print(json.dumps({
        "fleetplan": str(Path(fleetplan.__file__).parent), "kernels": os.environ.get("FLEETPLAN_KERNELS", "1") != "0",
        "solver_wall_s": round(result.wall_s, 2),
        "solve_wall_s": round(wall, 2), "solve_cpu_s": round(cpu, 2),
        "peak_rss_mb": round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024),
        "load_average": [round(x, 2) for x in os.getloadavg()], "objective": result.objective,
        "status": result.status, "stats": result.stats, "log": result.log[:1]}))
    if breakdown is not None:
        seconds, calls = breakdown
        for name, value in sorted(seconds.items(), key=lambda kv: -kv[1]):
            print(f"{name:18s} {value:8.2f} CPU s {calls[name]:8d} calls {1e3 * value / max(calls[name], 1):8.3f} ms/call")


def _breakdown() -> tuple[dict[str, float], dict[str, int]]:
    """CPU seconds and calls of the climb's parts, by wrapping them (the engine's estimates,
    exact evaluations, applied moves, queue walks and parking; the first pass's gains; the
    replicas; ``finish``: the replicas and the plan; ``climb``: the whole climb, first pass
    included): much less overhead than cProfile,
    which inflates the Python-level parts."""
    import fleetplan.solvers.hill_climb as engine
    import fleetplan.solvers.placement as placement
    import fleetplan.solvers.placement.climb.first_pass as first_pass
    from fleetplan.solvers.placement.climb.state import TetrisState

    seconds: dict[str, float] = {}
    calls: dict[str, int] = {}

    def wrap(owner: object, name: str, label: str) -> None:
        inner = getattr(owner, name)

        def timed(*args, **kwargs):
            start = time.process_time()
            try:
                return inner(*args, **kwargs)
            finally:
                seconds[label] = seconds.get(label, 0.0) + time.process_time() - start
                calls[label] = calls.get(label, 0) + 1
        setattr(owner, name, timed)

    for owner, name, label in [(TetrisState, "estimate_moves", "estimates"), (TetrisState, "best_move", "best_move"),
                               (TetrisState, "apply", "apply"), (TetrisState, "neighbours", "neighbours"),
                               (engine._Climb, "head", "head"), (engine._Climb, "park", "park"),
                               (engine._Climb, "unpark", "unpark"), (engine._Climb, "push_batch", "push_batch"),
                               (first_pass, "table_gains", "first_pass"), (placement, "add_replicas", "replicas"),
                               (placement, "_finish", "finish"),
                               (placement, "hill_climb", "climb")]:
        wrap(owner, name, label)
    return seconds, calls


if __name__ == "__main__":
    main()
