"""Draw a race's :class:`~.race_picture.Picture` with matplotlib (client side; imported on first use).

:func:`draw` makes a ``matplotlib.figure.Figure`` (no pyplot: nothing global changes): a horizontal
lane per PE, the program's order from left to right, the two accesses as red marks with their lines,
barriers as vertical bars across the lanes they join, signal and flag writes as arrows from the writer
to the waiter, and a dashed line where the fix goes. :func:`png` renders it, :func:`show`
displays it in IPython (as a PNG) and returns it elsewhere.
"""

from __future__ import annotations

from typing import Any

from .figures import figure_png, show_png
from .race_picture import Picture

__all__ = ["draw", "png", "show"]

_RACE, _SYNC, _ARROW, _FIX = "#c0392b", "#34495e", "#2471a3", "#27ae60"


def draw(pic: Picture, fig: Any = None) -> Any:
    """A Figure of ``pic`` (drawn into ``fig`` when given)."""
    from matplotlib.figure import Figure

    if fig is None:
        width, height = max(5.0, 1.0 + 0.55 * pic.width), 1.2 + 0.8 * len(pic.lanes)
        fig = Figure(figsize=(width, height))
        # fixed margins (inches) rather than a layout engine, which draws the figure twice
        fig.subplots_adjust(left=0.6 / width, right=1 - 0.1 / width, bottom=0.3 / height, top=1 - 0.3 / height)
    ax = fig.add_subplot()
    y = {pe: -i for i, pe in enumerate(pic.lanes)}
    right = max(pic.width - 1, 1)
    for pe in pic.lanes:
        ax.plot([-0.8, right + 0.8], [y[pe]] * 2, color="#bbbbbb", lw=1.5, zorder=0)
    for s in pic.syncs:
        ys = [y[pe] for pe in s.pes]
        ax.plot([s.x, s.x], [min(ys) - 0.18, max(ys) + 0.18], color=_SYNC, lw=4, solid_capstyle="butt", zorder=2)
        label = s.op if s.op == "cell boundary" else f"{s.op}\nline {s.line}"
        ax.annotate(label, (s.x, max(ys) + 0.2), ha="center", va="bottom", fontsize=7, color=_SYNC)
    for a in pic.arrows:
        ax.annotate(
            "",
            xy=(a.dst_x, y[a.dst]),
            xytext=(a.src_x, y[a.src]),
            arrowprops={"arrowstyle": "->", "color": _ARROW, "lw": 1.5},
            zorder=3,
        )
        ax.plot([a.src_x, a.dst_x], [y[a.src], y[a.dst]], "o", color=_ARROW, ms=5, zorder=3)
        ax.annotate(
            f"{a.op} line {a.line}",
            (a.src_x, y[a.src]),
            (0, 8),
            textcoords="offset points",
            ha="center",
            fontsize=7,
            color=_ARROW,
        )
        ax.annotate(
            f"{a.wait} line {a.wait_line}",
            (a.dst_x, y[a.dst]),
            (0, -14),
            textcoords="offset points",
            ha="center",
            fontsize=7,
            color=_ARROW,
        )
    top, bottom = max(y.values()) + 0.45, min(y.values()) - 0.45
    ax.plot([pic.fix_x, pic.fix_x], [bottom, top], ls="--", color=_FIX, lw=1.5, zorder=1)
    ax.annotate(
        f"fix: {pic.fix}",
        (pic.fix_x, bottom),
        (-4, -2),
        textcoords="offset points",
        ha="left",
        va="top",
        fontsize=7,
        color=_FIX,
    )
    for m in pic.marks:
        ax.plot([m.x], [y[m.pe]], "X", color=_RACE, ms=11, zorder=4)
        ax.annotate(m.text, (m.x, y[m.pe]), (0, 9), textcoords="offset points", ha="center", fontsize=8, color=_RACE)
    ax.set_yticks([y[pe] for pe in pic.lanes], [f"PE {pe}" for pe in pic.lanes])
    ax.set_xticks([])
    ax.set_xlim(-1, right + 1)
    ax.set_ylim(bottom - 0.35, top + 0.25)
    ax.set_xlabel("program order (not time)", fontsize=8)
    for side in ("top", "right", "bottom"):
        ax.spines[side].set_visible(False)
    ax.set_title(f"RACE {pic.title}", fontsize=9, loc="left")
    return fig


def png(pic: Picture, dpi: int = 90) -> bytes:
    """The drawing of ``pic`` as PNG bytes."""
    return figure_png(draw(pic), dpi)


def show(pic: Picture) -> Any:
    """Display the drawing of ``pic`` in IPython (a PNG, whatever matplotlib backend is set) and return
    None; outside IPython return its Figure."""
    fig = draw(pic)
    text = f"<race picture: RACE {pic.title}, {' / '.join(f'PE {m.pe} {m.text}' for m in pic.marks)}>"
    return None if show_png(fig, text, dpi=90) else fig
