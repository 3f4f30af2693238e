"""Re-run the rows of a results table's headline: ``fleetplan bench headline``.

A spec (YAML, ``benchmarks/headline.yaml`` in the repository) lists the rows of a Markdown table
(``benchmarks/RESULTS.md``'s headline) that a command can re-measure::

    results: RESULTS.md          # the Markdown file, relative to the spec
    workdir: ..                  # where the commands run, relative to the spec (default: its folder)
    rows:
      - id: fleetplan-help
        row: "`fleetplan --help`"          # the table row whose first cell starts with this
        command: "{python} benchmarks/scripts/startup.py --runs 5"
        regex: '`fleetplan --help` \\| [0-9.]+ \\| ([0-9.]+) \\|'   # one number per group
        runs: 3                            # the figure is the median of the runs
        noise_pct: 15                      # a change beyond this is flagged
        minutes: 0.5                       # the row's expected wall time, all its runs
      - id: fgd-picture
        row: "A figure read off a plot"
        manual: "read off the paper's Figure 9 by eye"   # listed, never run

A figure is one or more numbers. ``regex`` reads them from the command's output (stdout, then
stderr), one per capture group of the first match; ``json`` is a list of keys (``a.b`` for
nested ones) read from the last line of stdout that is a JSON object. The old figure is read
from the row's second cell: the numbers of its first ``**bold**`` span (or of the cell), or the
groups of ``old_regex`` when given. In ``command``, ``{python}`` is this Python, ``{tmp}`` a
fresh temporary folder for the run, and ``$NAME`` an environment variable. ``file`` (with
``{tmp}`` in it) reads the figure from a file the command writes instead of its output: the
whole file for ``regex``, its last JSON object line (or the whole file as one object) for ``json``.

``minutes`` is a row's expected wall time for all its runs on the repository's 2-core machine
(required for a row with a command): ``fleetplan bench headline`` prints the planned total
before it starts and ``--max-minutes M`` skips the rows expected to take longer than M. A row
no command can re-measure (a figure read off a picture, say) has ``manual: "why"`` instead of a
command; it is listed and never run, so that :func:`uncovered_rows` (every headline row with an
entry) can hold the spec to the whole table.

:func:`run_rows` runs the commands (the 1-minute load average recorded before each row, every
:data:`LOAD_SAMPLE_S` seconds while a command runs, and after it: a long row's range says what
ran beside it, not only how its ends looked), :func:`rewrite` puts the new figures, the date, the commit and the load into the
Markdown table, each number written with as many decimals as the one it replaces.

>>> spec = HeadlineSpec.from_data({"results": "R.md", "rows": [{"id": "a", "row": "speed",
...     "command": "{python} -c \\"print('took 1.5 s')\\"", "regex": "took ([0-9.]+) s", "minutes": 0.1}]}, ".")
>>> row = spec.rows[0]
>>> read_figure(row, "took 1.25 s\\n", "")
[1.25]
>>> change_pct(2.0, 2.5)
25.0
>>> replace_numbers("**2.0 s** CPU", row, [1.234])
'**1.2 s** CPU'
"""

from __future__ import annotations

import json
import os
import re
import shlex
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from fleetplan.errors import InstanceError

NUMBER = re.compile(r"[-+]?\d[\d,]*(?:\.\d+)?")
BOLD = re.compile(r"\*\*(.+?)\*\*")
ROW_FIELDS = {"id", "row", "command", "regex", "json", "file", "old_regex", "runs", "noise_pct", "timeout_s",
              "minutes", "manual"}
MANUAL_FIELDS = {"id", "row", "manual"}
SPEC_FIELDS = {"results", "workdir", "rows"}


@dataclass(frozen=True)
class HeadlineRow:
    """One row of the spec: what to run, how to read the figure, how much noise to allow."""

    id: str
    row: str
    command: str = ""
    regex: str | None = None
    json: tuple[str, ...] = ()
    old_regex: str | None = None
    runs: int = 3
    noise_pct: float = 10.0
    timeout_s: float = 3600.0
    minutes: float = 0.0
    file: str | None = None
    manual: str | None = None

    @property
    def numbers(self) -> int:
        """How many numbers the figure has."""
        return re.compile(self.regex).groups if self.regex else len(self.json)

    def planned_minutes(self, runs: int | None = None) -> float:
        """The expected wall minutes for ``runs`` runs (default: the row's), scaled from ``minutes``."""
        return 0.0 if self.manual else self.minutes * (runs or self.runs) / self.runs


@dataclass(frozen=True)
class HeadlineSpec:
    """A headline spec: the Markdown file, the folder the commands run in, the rows."""

    results: Path
    workdir: Path
    rows: tuple[HeadlineRow, ...]
    source: str = ""

    @classmethod
    def load(cls, path: str | Path) -> HeadlineSpec:
        """Read and check a spec file (errors: :class:`InstanceError`, one line naming the field)."""
        import yaml

        path = Path(path)
        try:
            data = yaml.safe_load(path.read_text())
        except OSError as error:
            raise InstanceError("--spec", f"cannot read {path}: {error.strerror or error}") from None
        except yaml.YAMLError as error:
            raise InstanceError("", f"not YAML: {str(error).splitlines()[0]}", source=str(path)) from None
        return cls.from_data(data, path.parent, source=str(path))

    @classmethod
    def from_data(cls, data: Any, folder: str | Path, source: str = "") -> HeadlineSpec:
        """A spec from its parsed YAML (``folder``: what ``results`` and ``workdir`` are relative to)."""

        def bad(where: str, reason: str) -> InstanceError:
            return InstanceError(where, reason, source=source or None)

        if not isinstance(data, dict):
            raise bad("", "expected a mapping with `results` and `rows`")
        unknown = sorted(set(data) - SPEC_FIELDS)
        if unknown:
            raise bad(unknown[0], f"unknown field (expected {', '.join(sorted(SPEC_FIELDS))})")
        if not isinstance(data.get("results"), str):
            raise bad("results", "required: the Markdown file of the table, relative to the spec")
        if not isinstance(data.get("workdir", "."), str):
            raise bad("workdir", "expected a folder, relative to the spec")
        rows = data.get("rows")
        if not isinstance(rows, list) or not rows:
            raise bad("rows", "required: a non-empty list of rows")
        parsed: list[HeadlineRow] = []
        for i, item in enumerate(rows):
            parsed.append(_row(item, f"rows[{i}]", bad))
        ids = [row.id for row in parsed]
        for i, name in enumerate(ids):
            if name in ids[:i]:
                raise bad(f"rows[{i}].id", f"'{name}' is used twice")
        folder = Path(folder)
        return cls(results=folder / data["results"], workdir=folder / data.get("workdir", "."),
                   rows=tuple(parsed), source=source)

    def select(self, ids: Sequence[str] | None) -> list[HeadlineRow]:
        """The rows named (all when ``ids`` is empty), in the spec's order."""
        if not ids:
            return list(self.rows)
        known = {row.id for row in self.rows}
        for name in ids:
            if name not in known:
                raise InstanceError("--rows", f"no row '{name}' in the spec (rows: {', '.join(sorted(known))})")
        return [row for row in self.rows if row.id in ids]


def _row(item: Any, where: str, bad: Callable[[str, str], InstanceError]) -> HeadlineRow:
    if not isinstance(item, dict):
        raise bad(where, "expected a mapping (id, row, command, regex or json, runs, noise_pct, minutes)")
    unknown = sorted(set(item) - ROW_FIELDS)
    if unknown:
        raise bad(f"{where}.{unknown[0]}", f"unknown field (expected {', '.join(sorted(ROW_FIELDS))})")
    if "manual" in item:
        extra = sorted(set(item) - MANUAL_FIELDS)
        if extra:
            raise bad(f"{where}.{extra[0]}", "a `manual` row is never run: give only id, row and manual")
        for name in ("id", "row", "manual"):
            if not isinstance(item.get(name), str) or not item[name].strip():
                raise bad(f"{where}.{name}", "required: a non-empty string" + (
                    " (why no command can re-measure the row)" if name == "manual" else ""))
        return HeadlineRow(id=item["id"], row=item["row"], manual=item["manual"])
    for name in ("id", "row", "command"):
        if not isinstance(item.get(name), str) or not item[name].strip():
            raise bad(f"{where}.{name}", "required: a non-empty string")
    if "file" in item and (not isinstance(item["file"], str) or not item["file"].strip()):
        raise bad(f"{where}.file", "expected the path of a file the command writes ({tmp}/NAME)")
    minutes = item.get("minutes")
    if minutes is None:
        raise bad(f"{where}.minutes", "required: the row's expected wall minutes, all its runs")
    if isinstance(minutes, bool) or not isinstance(minutes, (int, float)) or not 0 < minutes < float("inf"):
        raise bad(f"{where}.minutes", "expected a finite number of minutes > 0")
    if ("regex" in item) == ("json" in item):
        raise bad(where, "give exactly one of `regex` (one number per group) and `json` (a list of keys)")
    for name in ("regex", "old_regex"):
        if name in item:
            if not isinstance(item[name], str):
                raise bad(f"{where}.{name}", "expected a regular expression")
            try:
                groups = re.compile(item[name]).groups
            except re.error as error:
                raise bad(f"{where}.{name}", f"not a regular expression: {error}") from None
            if groups == 0:
                raise bad(f"{where}.{name}", "needs a capture group for each number of the figure")
    keys = item.get("json", [])
    if isinstance(keys, str):
        keys = [keys]
    if not isinstance(keys, list) or not all(isinstance(key, str) and key for key in keys) or \
            ("json" in item and not keys):
        raise bad(f"{where}.json", "expected a key or a list of keys (a.b for nested ones)")
    runs = item.get("runs", 3)
    if isinstance(runs, bool) or not isinstance(runs, int) or runs < 1:
        raise bad(f"{where}.runs", "expected a whole number >= 1")
    numbers = {name: item.get(name, default) for name, default in (("noise_pct", 10.0), ("timeout_s", 3600.0))}
    for name, value in numbers.items():
        if isinstance(value, bool) or not isinstance(value, (int, float)) or not value >= 0 or value == float("inf"):
            raise bad(f"{where}.{name}", "expected a finite number >= 0")
    row = HeadlineRow(id=item["id"], row=item["row"], command=item["command"], regex=item.get("regex"),
                      json=tuple(keys), old_regex=item.get("old_regex"), runs=runs,
                      noise_pct=float(numbers["noise_pct"]), timeout_s=float(numbers["timeout_s"]),
                      minutes=float(minutes), file=item.get("file"))
    if row.old_regex and re.compile(row.old_regex).groups != row.numbers:
        raise bad(f"{where}.old_regex", f"has {re.compile(row.old_regex).groups} groups, the figure "
                                        f"{row.numbers} numbers")
    return row


# --- the Markdown table -------------------------------------------------------------------------

def cells(line: str) -> list[str]:
    """The cells of a Markdown table line (``| a | b |`` -> ``['a', 'b']``)."""
    return [cell.strip() for cell in line.strip().strip("|").split("|")]


def find_line(lines: Sequence[str], row: HeadlineRow) -> int:
    """The index of the table line whose first cell starts with ``row.row``."""
    found = [i for i, line in enumerate(lines)
             if line.lstrip().startswith("|") and cells(line)[0].startswith(row.row)]
    if len(found) != 1:
        what = "no table row" if not found else f"{len(found)} table rows"
        raise InstanceError(f"{row.id}.row", f"{what} of the results file starts with {row.row!r}")
    return found[0]


def headline_lines(lines: Sequence[str], heading: str = "Headline") -> list[int]:
    """The indices of the table rows under the ``## Headline`` heading (header and rule left out)."""
    found: list[int] = []
    inside = False
    for i, line in enumerate(lines):
        if line.startswith("## "):
            inside = line[3:].strip() == heading
        elif inside and line.lstrip().startswith("|"):
            found.append(i)
    return found[2:]  # the header line and the |---| rule


def uncovered_rows(lines: Sequence[str], spec: HeadlineSpec) -> list[str]:
    """The first cells of the headline rows that no spec entry (command or ``manual``) names."""
    return [cells(lines[i])[0] for i in headline_lines(lines)
            if not any(cells(lines[i])[0].startswith(row.row) for row in spec.rows)]


def figure_span(cell: str, row: HeadlineRow) -> list[tuple[int, int]]:
    """Where the old figure's numbers are in the figure cell: (start, end) of each."""
    if row.old_regex:
        match = re.search(row.old_regex, cell)
        if not match:
            raise InstanceError(f"{row.id}.old_regex", f"does not match the figure cell {cell!r}")
        return [match.span(group) for group in range(1, match.re.groups + 1)]
    bold = BOLD.search(cell)
    start, text = (bold.start(1), bold.group(1)) if bold else (0, cell)
    spans = [(start + m.start(), start + m.end()) for m in NUMBER.finditer(text)]
    if len(spans) != row.numbers:
        raise InstanceError(f"{row.id}", f"the results file's figure {text!r} has {len(spans)} numbers, the "
                                         f"spec reads {row.numbers} (give `old_regex`)")
    return spans


def old_figure(lines: Sequence[str], row: HeadlineRow) -> tuple[str, list[float]]:
    """The row's figure cell as written, and its numbers (none for a ``manual`` row)."""
    cell = cells(lines[find_line(lines, row)])[1]
    if row.manual:
        return cell, []
    return cell, [float(cell[a:b].replace(",", "")) for a, b in figure_span(cell, row)]


def format_like(old: str, value: float) -> str:
    """``value`` written as ``old`` is: the same decimals, thousands separators if it had them
    (or if the value has five digits or more before the point, as the results files write them),
    an explicit ``+`` if it had one (a difference: ``+2.8`` stays signed)."""
    decimals = len(old.split(".")[1]) if "." in old else 0
    sign = "+" if old.startswith("+") else ""
    grouped = "," in old or abs(round(value, decimals)) >= 10_000
    return f"{value:{sign},.{decimals}f}" if grouped else f"{value:{sign}.{decimals}f}"


def replace_numbers(cell: str, row: HeadlineRow, values: Sequence[float]) -> str:
    """The figure cell with its figure's numbers replaced by ``values``."""
    for (a, b), value in sorted(zip(figure_span(cell, row), values, strict=True), reverse=True):
        cell = cell[:a] + format_like(cell[a:b], value) + cell[b:]
    return cell


def rewrite(text: str, outcomes: Sequence[RowOutcome], date: str, commit: str) -> str:
    """The Markdown with each measured row's figure, date and commit (and the load) replaced."""
    lines = text.split("\n")
    for outcome in outcomes:
        if outcome.new is None:
            continue
        i = find_line(lines, outcome.row)
        parts = cells(lines[i])
        parts[1] = replace_numbers(parts[1], outcome.row, outcome.new)
        low, high = min(outcome.load), max(outcome.load)
        parts[-1] = f"{date} ({commit}), load {low:.1f}-{high:.1f}"
        lines[i] = "| " + " | ".join(parts) + " |"
    return "\n".join(lines)


# --- running ------------------------------------------------------------------------------------

@dataclass
class RowOutcome:
    """What one row's runs gave: every run's numbers, their medians, the change from the old figure."""

    row: HeadlineRow
    old_cell: str
    old: list[float]
    runs: list[list[float]] = field(default_factory=list)
    load: list[float] = field(default_factory=list)
    error: str | None = None

    @property
    def new(self) -> list[float] | None:
        """The median of the runs, number by number (None when a run failed)."""
        if self.error or not self.runs:
            return None
        return [statistics.median(run[k] for run in self.runs) for k in range(len(self.runs[0]))]

    @property
    def changes(self) -> list[float]:
        return [change_pct(a, b) for a, b in zip(self.old, self.new or [], strict=False)]

    @property
    def flagged(self) -> bool:
        """Some number moved beyond the row's noise band."""
        return any(abs(change) > self.row.noise_pct for change in self.changes)


def change_pct(old: float, new: float) -> float:
    """The change from ``old`` to ``new`` in percent (infinite from 0 to anything else)."""
    if old == 0:
        return 0.0 if new == 0 else float("inf")
    return (new - old) / abs(old) * 100.0


def expand(command: str, tmp: str) -> list[str]:
    """The command's words with ``{python}``, ``{tmp}`` and ``$NAME`` filled in."""
    words = []
    for word in shlex.split(command):
        word = word.replace("{python}", sys.executable).replace("{tmp}", tmp)
        expanded = os.path.expandvars(word)
        missing = re.search(r"\$\{?([A-Za-z_][A-Za-z0-9_]*)", expanded)
        if missing:
            raise InstanceError("command", f"the environment variable {missing.group(1)} is not set")
        words.append(expanded)
    return words


def read_figure(row: HeadlineRow, stdout: str, stderr: str) -> list[float]:
    """The row's numbers from one run's output (ValueError when they are not there).

    With ``row.file``, ``stdout`` is that file's text and ``stderr`` is empty."""
    where = f"the file {row.file}" if row.file else "the output"
    if row.regex:
        for text in (stdout, stderr):
            match = re.search(row.regex, text)
            if match:
                return [float(value.replace(",", "")) for value in match.groups()]
        raise ValueError(f"{where} does not match {row.regex!r}")
    candidates = reversed(stdout.strip().splitlines())
    if row.file:
        candidates = [stdout, *candidates]  # a file may hold one indented JSON object
    for text in candidates:
        try:
            data = json.loads(text)
        except ValueError:
            continue
        if isinstance(data, dict):
            return [float(_key(data, key)) for key in row.json]
    raise ValueError(f"no JSON object line in {where}" if row.file else "no JSON object line on stdout")


def _key(data: dict, key: str) -> Any:
    value: Any = data
    for part in key.split("."):
        if not isinstance(value, dict) or part not in value:
            raise ValueError(f"the JSON line has no key {key!r}")
        value = value[part]
    return value


def run_rows(spec: HeadlineSpec, rows: Sequence[HeadlineRow], runs: int | None = None,
             progress: Callable[[str], None] | None = None) -> list[RowOutcome]:
    """Run each row's command ``runs`` times (default: the row's), read its figure, take medians.

    ``manual`` rows are not run (and get no outcome)."""
    lines = spec.results.read_text().split("\n")
    outcomes = [RowOutcome(row, *old_figure(lines, row)) for row in rows if not row.manual]
    for outcome in outcomes:
        row = outcome.row
        outcome.load.append(os.getloadavg()[0])
        for number in range(runs or row.runs):
            started = time.perf_counter()
            with tempfile.TemporaryDirectory(prefix="fleetplan-headline-") as tmp:
                figure_or_error = _run_once(spec, row, tmp, number, outcome.load)
            if isinstance(figure_or_error, str):
                outcome.error = figure_or_error
                break
            outcome.runs.append(figure_or_error)
            if progress:
                progress(f"{row.id} run {number + 1}: {outcome.runs[-1]} in {time.perf_counter() - started:.1f} s")
        outcome.load.append(os.getloadavg()[0])
    return outcomes


# Seconds between two readings of the load average while a row's command runs.
LOAD_SAMPLE_S = 30.0


def _run_once(spec: HeadlineSpec, row: HeadlineRow, tmp: str, number: int,
              load: list[float]) -> list[float] | str:
    """One run of the row's command in ``tmp``: its figure, or why there is none; the load
    average is appended to ``load`` every :data:`LOAD_SAMPLE_S` seconds while it runs."""
    try:
        process = subprocess.Popen(expand(row.command, tmp), cwd=spec.workdir, stdout=subprocess.PIPE,
                                   stderr=subprocess.PIPE, text=True)
    except InstanceError as error:  # an unset variable: this row cannot run, the others can
        return error.reason
    except OSError as error:
        return f"run {number + 1}: cannot run the command: {error}"
    stop_at = time.monotonic() + row.timeout_s
    while True:
        wait = max(min(LOAD_SAMPLE_S, stop_at - time.monotonic()), 0.0)
        try:
            stdout, stderr = process.communicate(timeout=wait)  # a retry after a timeout loses no output
            break
        except subprocess.TimeoutExpired:
            load.append(os.getloadavg()[0])
            if time.monotonic() >= stop_at:
                process.kill()
                process.communicate()
                return f"run {number + 1}: no answer within {row.timeout_s:g} s"
    if process.returncode != 0:
        last = (stderr.strip() or stdout.strip() or "no output").splitlines()[-1]
        return f"run {number + 1}: exit code {process.returncode}: {last}"
    if row.file:
        path = Path(spec.workdir) / row.file.replace("{tmp}", tmp)
        try:
            stdout, stderr = path.read_text(), ""
        except OSError as error:
            return f"run {number + 1}: cannot read {row.file}: {error.strerror or error}"
    try:
        return read_figure(row, stdout, stderr)
    except ValueError as error:
        return f"run {number + 1}: {error}"


def git_commit(folder: Path) -> str:
    """The short commit of the checkout the commands ran in (``+changes`` when the tree is dirty)."""
    head = subprocess.run(["git", "-C", str(folder), "rev-parse", "--short", "HEAD"], capture_output=True, text=True)
    if head.returncode != 0:
        return "no commit"
    dirty = subprocess.run(["git", "-C", str(folder), "status", "--porcelain", "--untracked-files=no"],
                           capture_output=True, text=True).stdout.strip()
    return head.stdout.strip() + ("+changes" if dirty else "")
