"""Pictures of the ``reservation`` kind (RAS, MAST §2): what a reservation can count on.

:func:`plot_reservation` (``fleetplan plot``): per reservation, the capacity it keeps with its
worst fault domain (or datacenter) removed — its guarantee — against its request, today and
under the plan, the shortfall marked; and the buffer (RRU held above the requests) today and
under the plan, with the servers the plan moves.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np

from fleetplan.plotting.style import LEGEND_SIZE, PANEL_TITLE_SIZE, colour, grid, new_figure, save
from fleetplan.plotting.style import title as suptitle

# Beyond this many reservations the rows get no labels.
MAX_LABELS = 60


def plot_reservation(instance: Any, plan: Any, path: str | Path | None = None) -> Any:
    """Guarantee against request per reservation, today and under the plan; the buffer."""
    from fleetplan.instances import evaluate, evaluate_current

    after = evaluate(instance, plan)
    before = evaluate_current(instance)
    now, then = after.breakdown["reservations"], before.breakdown["reservations"] if before else None
    names = now["id"]
    count = len(names)
    rows = np.arange(count)
    request = np.array(now["requested_rru"], dtype=float)
    figure, (guarantee, buffer) = new_figure(14, float(np.clip(2.2 + 0.32 * count, 4.5, 14.0)), 1, 2,
                                             gridspec_kw={"width_ratios": [3, 2]})
    height = 0.38
    if then is not None:
        guarantee.barh(rows - height / 2, then["guaranteed_rru"], height, color=colour(0), alpha=0.45,
                       label="guaranteed today (worst domain down)")
    guarantee.barh(rows + height / 2 if then is not None else rows, now["guaranteed_rru"], height,
                   color=colour(0), label="guaranteed under the plan")
    guarantee.scatter(request, rows, marker="|", s=260, color="black", zorder=3, label="request")
    short = np.array(now["shortfall_rru"], dtype=float) > 1e-9
    for row in np.flatnonzero(short):
        guarantee.text(request[row], row, f"  short {now['shortfall_rru'][row]:.4g}", va="center",
                       fontsize=LEGEND_SIZE, color=colour(1))
    labelled = count <= MAX_LABELS
    guarantee.set_yticks(rows, names if labelled else [""] * count, fontsize=LEGEND_SIZE if count > 25 else None)
    guarantee.invert_yaxis()
    guarantee.set_xlabel("RRU")
    guarantee.set_title("capacity with the worst fault domain removed, against the request",
                        fontsize=PANEL_TITLE_SIZE)
    guarantee.legend(fontsize=LEGEND_SIZE, loc="upper center", bbox_to_anchor=(0.5, -0.13), ncol=3, frameon=False)
    grid(guarantee, "x")

    kept = np.array(now["buffer_rru"], dtype=float)
    if then is not None:
        buffer.barh(rows - height / 2, then["buffer_rru"], height, color=colour(3), alpha=0.45, label="buffer today")
    buffer.barh(rows + height / 2 if then is not None else rows, kept, height, color=colour(3),
                label="buffer under the plan")
    buffer.set_yticks(rows, [""] * count)
    buffer.invert_yaxis()
    buffer.set_xlabel("RRU above the request")
    total_now = after.metrics["buffer_rru"]
    total_then = before.metrics["buffer_rru"] if before else None
    change = f"{total_then:.4g} -> {total_now:.4g} RRU" if total_then is not None else f"{total_now:.4g} RRU"
    buffer.set_title(f"buffer ({change}; {after.metrics['buffer_share']:.1%} of the requests)",
                     fontsize=PANEL_TITLE_SIZE)
    buffer.legend(fontsize=LEGEND_SIZE, loc="upper center", bbox_to_anchor=(0.5, -0.13), ncol=2, frameon=False)
    grid(buffer, "x")
    suptitle(figure, f"{instance.name or 'reservation'}: {plan.solver or 'plan'} — "
                     f"{after.metrics['reservations_short']:.0f} of {count} reservations short, "
                     f"{after.metrics['servers_moved']:.0f} servers moved")
    save(figure, path)
    return figure


__all__ = ["plot_reservation"]
