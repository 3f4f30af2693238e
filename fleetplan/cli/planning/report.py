"""Self-contained HTML reports of the planner's answers (``size``, ``whatif`` and ``compare
--report FILE.html``): the question, the inputs, the answer, the pictures inline and the
command that reproduces it, in one file a planner can send (no script, no link to load).

>>> import os, tempfile
>>> path = os.path.join(tempfile.mkdtemp(), "report.html")
>>> write_report(path, "sizing", question="what to buy", inputs={"instance": "x.json"},
...              sections=[("answer", table_html(["item", "units"], [["v100", "3"]]))], figures=[])
>>> "<h1>sizing</h1>" in open(path).read()
True
"""

from __future__ import annotations

import base64
import datetime
import html
import io
import os
import shlex
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

STYLE = """
body { font-family: system-ui, -apple-system, Segoe UI, Helvetica, Arial, sans-serif; margin: 2em auto;
       max-width: 1100px; color: #222; line-height: 1.45; }
h1 { font-size: 1.6em; margin-bottom: 0.2em; } h2 { font-size: 1.2em; margin-top: 1.6em;
     border-bottom: 1px solid #ddd; padding-bottom: 0.2em; }
table { border-collapse: collapse; margin: 0.6em 0; font-size: 0.92em; display: block; overflow-x: auto; }
th, td { border: 1px solid #ccc; padding: 0.25em 0.6em; text-align: right; }
th { background: #f3f3f3; } td:first-child, th:first-child { text-align: left; }
code, pre { background: #f6f6f6; padding: 0.1em 0.3em; border-radius: 3px; }
pre { padding: 0.6em; overflow-x: auto; white-space: pre-wrap; }
img { max-width: 100%; border: 1px solid #eee; }
table.inputs td { text-align: left; } table.inputs th { text-align: left; font-weight: normal; }
.meta { color: #666; font-size: 0.9em; } .warn { color: #a15c00; } .bad { color: #b00020; }
"""


def table_html(header: Sequence[str], rows: Sequence[Sequence[Any]]) -> str:
    """An HTML table, every cell escaped."""
    head = "".join(f"<th>{html.escape(str(cell))}</th>" for cell in header)
    body = "".join("<tr>" + "".join(f"<td>{html.escape(str(cell))}</td>" for cell in row) + "</tr>" for row in rows)
    return f"<table><thead><tr>{head}</tr></thead><tbody>{body}</tbody></table>"


def figure_html(figure: Any, alt: str) -> str:
    """A matplotlib figure, or a PNG file already drawn (a path), as an inline PNG."""
    if isinstance(figure, (str, os.PathLike)):
        png = Path(figure).read_bytes()
    else:
        from matplotlib.backends.backend_agg import FigureCanvasAgg

        buffer = io.BytesIO()
        FigureCanvasAgg(figure)
        figure.savefig(buffer, format="png", dpi=110)
        png = buffer.getvalue()
    data = base64.b64encode(png).decode("ascii")
    return f'<p><img alt="{html.escape(alt)}" src="data:image/png;base64,{data}"></p>'


def command_line(argv: Sequence[str] | None = None) -> str:
    """The command as the user typed it (to reproduce the answer)."""
    return shlex.join(["fleetplan", *(sys.argv[1:] if argv is None else argv)])


def write_report(path: str, title: str, *, question: str, inputs: dict[str, Any],
                 sections: Sequence[tuple[str, str]], figures: Sequence[tuple[str, Any]],
                 notes: Sequence[str] = (), argv: Sequence[str] | None = None) -> None:
    """Write the report atomically: title, question, inputs, each (heading, HTML) section, the
    figures inline (matplotlib figures or PNG files), notes, and the command that reproduces it."""
    from fleetplan import __version__
    from fleetplan.instances.outputs import atomic_write_text

    parts = [f"<h1>{html.escape(title)}</h1>",
             f'<p class="meta">fleetplan {html.escape(__version__)}, '
             f'{datetime.datetime.now(datetime.timezone.utc):%Y-%m-%d %H:%M} UTC</p>',
             f"<h2>The question</h2><p>{html.escape(question)}</p>",
             "<h2>The inputs</h2><table class=\"inputs\"><tbody>" + "".join(
                 f"<tr><th>{html.escape(str(key))}</th><td>{html.escape('-' if value is None else str(value))}</td></tr>"
                 for key, value in inputs.items()) + "</tbody></table>"]
    for heading, body in sections:
        parts.append(f"<h2>{html.escape(heading)}</h2>{body}")
    if figures:
        parts.append("<h2>Pictures</h2>" + "".join(figure_html(figure, alt) for alt, figure in figures))
    if notes:
        parts.append("<h2>Notes</h2><ul>" + "".join(f'<li class="warn">{html.escape(n)}</li>' for n in notes)
                     + "</ul>")
    parts.append(f"<h2>Reproduce</h2><pre>{html.escape(command_line(argv))}</pre>")
    document = (f'<!DOCTYPE html><html lang="en"><head><meta charset="utf-8"><title>{html.escape(title)}</title>'
                f"<style>{STYLE}</style></head><body>{''.join(parts)}</body></html>\n")
    atomic_write_text(path, document)
