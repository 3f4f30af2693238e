"""What the experiment scripts share: a CSV table of rows kept on disk as runs finish, so an
interrupted experiment loses at most the run in progress (`read_rows`, `write_rows`).

Imported by the scripts beside it (`python benchmarks/scripts/NAME.py` puts this folder on the
path); not part of fleetplan.
"""

from __future__ import annotations

import csv
import io
from collections.abc import Iterable, Sequence
from pathlib import Path

from fleetplan.instances.outputs import atomic_write_text


def read_rows(path: Path) -> list[dict[str, str]]:
    """The rows written so far (none when the file is not there yet)."""
    if not path.exists():
        return []
    with path.open(newline="") as handle:
        return list(csv.DictReader(handle))


def write_rows(path: Path, rows: Iterable[dict], fields: Sequence[str]) -> None:
    """Write every row (columns ``fields``) atomically: a crash leaves the previous table."""
    buffer = io.StringIO()
    writer = csv.DictWriter(buffer, fieldnames=list(fields))
    writer.writeheader()
    writer.writerows(rows)
    atomic_write_text(path, buffer.getvalue())
