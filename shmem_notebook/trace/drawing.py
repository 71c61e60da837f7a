"""Draw a traced cell with matplotlib (client side; imported on first use, like :mod:`.race_drawing`):
where each PE waited, as a bar per PE (:func:`draw_waits`: ``trace.profile()``,
``%%pxshmem --trace=profile``, ``%shmem trace profile``), and its calls against time
(:func:`draw_timeline`, ``trace.timeline()``: one lane per PE, a box per call, arrows for transfers).
No pyplot: nothing global changes.

Each bar is the cell on one PE, split into the time outside OpenSHMEM (grey; light grey: the part
that was at least off the CPU, sleeping or blocked), the longest waits by call and line (one colour
each, the same on every PE), other waits and other calls.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from matplotlib.figure import Figure

from ..analysis.model import READS  # gets: data flows to the caller
from ..operations import TRANSFERS
from .timeline import kind_of, lanes, origin

__all__ = ["draw_waits", "draw_timeline"]

if TYPE_CHECKING:
    from matplotlib.axes import Axes
    from matplotlib.figure import SubFigure

    from .cell_trace import Trace
    from .waits import Waits

_SHOWN = 5  # waits (call, line) given their own colour
_COLOURS = ["#c4302b", "#e69f00", "#0072b2", "#009e73", "#cc79a7"]
_KIND = {"wait": "#c4302b", "rma": "#0072b2", "amo": "#009e73", "coll": "#e69f00"}


def draw_waits(waits: Waits, fig: Figure | None = None) -> Figure:
    """A horizontal bar per PE of ``waits`` (:class:`~shmem_notebook.trace.waits.Waits`); returns the figure."""
    entries = list(waits)
    fig = fig or Figure(figsize=(8, 1.2 + 0.4 * len(entries)), dpi=90)
    ax = fig.add_subplot(111)
    totals: dict[tuple[str, int | None], float] = {}
    for entry in entries:
        for key, seconds in entry.waiting.items():
            totals[key] = totals.get(key, 0.0) + seconds
    shown = [key for key, _ in sorted(totals.items(), key=lambda item: -item[1])[:_SHOWN]]
    where = waits.trace.where
    for row, entry in enumerate(entries):
        left = 0.0
        off_cpu = entry.off_cpu or 0.0
        parts = [("outside OpenSHMEM", entry.outside - off_cpu, "#999999")]
        parts.append(("outside OpenSHMEM, off the CPU (sleeping)", off_cpu, "#dddddd"))
        parts += [
            (f"{call} at {where(line)}" if line else call, entry.waiting.get((call, line), 0.0), colour)
            for (call, line), colour in zip(shown, _COLOURS)
        ]
        parts.append(("other waits", entry.waited - sum(entry.waiting.get(k, 0.0) for k in shown), "#8c564b"))
        parts.append(("other calls", entry.calls, "#56b4e9"))
        for label, seconds, colour in parts:
            share = entry.share(seconds) * 100
            if share > 0:
                ax.barh(row, share, left=left, color=colour, label=label)
                left += share
    ax.set_yticks(range(len(entries)), [f"PE {e.pe}" for e in entries])
    ax.invert_yaxis()
    ax.set_xlim(0, 100)
    ax.set_xlabel(f"% of {waits.what} on that PE")
    handles, labels = ax.get_legend_handles_labels()
    unique = dict(zip(labels, handles))
    ax.legend(unique.values(), unique.keys(), fontsize=7, loc="upper left", bbox_to_anchor=(1.01, 1.0))
    ax.set_title("where each PE spent the cell", fontsize=10)
    fig.tight_layout()
    return fig


def draw_timeline(trace: Trace, fig: Figure | None = None, ax: Axes | None = None) -> Figure | SubFigure:
    """One lane per PE, a box per call (red: waiting, blue: RMA, green: atomics), an arrow per transfer
    between PEs; time in ms from the trace's start. Returns the figure."""
    if ax is None:
        fig = fig or Figure(figsize=(9, 0.9 + 0.45 * trace.npes), dpi=90)
        ax = fig.add_subplot(111)
    zero, by_pe = origin(trace), lanes(trace)
    for pe, lane in by_pe.items():
        for s in lane:
            colour = _KIND.get(kind_of(s.op), "#888888")
            ax.broken_barh(
                [((s.start - zero) / 1e6, max((s.end - s.start) / 1e6, 1e-3))], (pe - 0.35, 0.7), facecolors=colour
            )
            target = s.event.get("target")
            if s.op in TRANSFERS and target is not None and target != pe:
                a, b = (target, pe) if s.op in READS else (pe, target)
                x = (s.start + s.end - 2 * zero) / 2e6
                arrow = {"arrowstyle": "->", "color": "#333333", "lw": 0.6}
                ax.annotate("", xy=(x, b), xytext=(x, a), arrowprops=arrow)
    ax.set_yticks(range(trace.npes), [f"PE {pe}" for pe in range(trace.npes)])
    ax.invert_yaxis()
    ax.set_xlabel("ms since the trace started (one clock per node)")
    ax.set_title("the cell's calls: red waits (barriers, waits, collectives), blue RMA, green atomics", fontsize=9)
    return ax.figure
