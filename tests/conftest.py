import signal
from pathlib import Path

import pytest

from fleetplan.instances import instance_from_data

# Tests that press Ctrl-C on a child process need SIGINT to reach it. A shell that starts the
# suite in the background (`make test &`) hands it SIGINT ignored, and every child inherits
# that (Python keeps an inherited SIG_IGN): the children then never see the signal. With a
# handler here instead, each child starts with the default disposition.
if signal.getsignal(signal.SIGINT) is signal.SIG_IGN:
    signal.signal(signal.SIGINT, signal.default_int_handler)

ROOT = Path(__file__).resolve().parent.parent
EXAMPLES = ROOT / "examples"


def gavel_example_data() -> dict:
    """Gavel §4.1: one V100, one K80; jobs with throughputs [4, 1], [3, 1], [2, 1]."""
    return {
        "kind": "allocation",
        "worker_types": [{"name": "v100", "count": 1}, {"name": "k80", "count": 1}],
        "jobs": [{"id": f"job{i}", "throughput": {"v100": v, "k80": 1.0}} for i, v in enumerate([4.0, 3.0, 2.0])],
    }


@pytest.fixture
def gavel_example():
    return instance_from_data(gavel_example_data())


def write_frames(frames: dict, folder: Path, fmt: str) -> dict[str, Path]:
    """A kind's tables (``to_frames``) written to ``folder`` as ``fmt`` files, settings as YAML:
    name -> path, as ``from_frames`` takes them."""
    import yaml

    from fleetplan.instances.frames import write_table

    paths = {}
    for name, frame in frames.items():
        if name == "settings":
            paths[name] = folder / "settings.yaml"
            paths[name].write_text(yaml.safe_dump(frame))
        else:
            paths[name] = write_table(frame, folder / f"{name}.{fmt}")
    return paths


def edit_line(path: Path, line: int, old: str, new: str) -> None:
    """Replace ``old`` by ``new`` on line ``line`` (1-based) of a text table, which must hold it."""
    lines = path.read_text().splitlines()
    assert old in lines[line - 1], (old, lines[line - 1])
    lines[line - 1] = lines[line - 1].replace(old, new, 1)
    path.write_text("\n".join(lines) + "\n")


_ENUMERATED_OPTIMA: dict[str, float] = {}


def enumerated_optimum(instance) -> float:
    """The brute-force optimum of a placement instance (``enumerate_placements``), enumerated
    once per run: several tests (often each solver's parameter of one test) compare against the
    same tiny instance, and enumerating it is most of their time. Keyed by the instance's JSON,
    so a changed instance is enumerated afresh."""
    from fleetplan.solvers.placement.exact.enumeration import enumerate_placements

    key = instance.model_dump_json()
    if key not in _ENUMERATED_OPTIMA:
        _ENUMERATED_OPTIMA[key] = enumerate_placements(instance).objective
    return _ENUMERATED_OPTIMA[key]


_ENUMERATED_ASSIGNMENTS: dict[str, object] = {}


def enumerated_assignments(instance):
    """``enumerate_assignments`` of a reservation instance, enumerated once per run: the tiny
    random regions (``random_tiny``) are checked against their optimum by the exact solvers,
    the heuristics, relax-and-fix and the Lagrangian bounds alike. Keyed by the instance's JSON.
    Read it, do not change it: later tests get the same object."""
    from fleetplan.solvers.reservation.enumerate import enumerate_assignments

    key = instance.model_dump_json()
    if key not in _ENUMERATED_ASSIGNMENTS:
        _ENUMERATED_ASSIGNMENTS[key] = enumerate_assignments(instance)
    return _ENUMERATED_ASSIGNMENTS[key]
