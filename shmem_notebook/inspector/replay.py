"""The replay widget: step through a traced cell (ipywidgets + matplotlib PNGs, no JS build step).

``replay(result.trace)`` / ``%shmem replay`` show a :class:`Replay`: a play
button and a slider over the trace's frames (:meth:`Trace.frames`); each frame
draws the PEs as boxes holding their small arrays' values at that point, an
arrow per transfer of the step (from PE, to PE, which elements) and the
collective's name and step. Widget-less front ends get the same figure as a
PNG and the list of steps.
"""

from __future__ import annotations

import base64
import html
from typing import TYPE_CHECKING, Any

import ipywidgets as widgets
import numpy as np
from matplotlib.backends.backend_agg import FigureCanvasAgg
from matplotlib.figure import Figure
from matplotlib.patches import FancyArrowPatch, FancyBboxPatch

from ..analysis.figures import figure_png
from ..errors import InputError
from ..words import plural

if TYPE_CHECKING:
    from collections.abc import Iterable, Sequence

    import numpy.typing as npt
    from matplotlib.backend_bases import RendererBase
    from matplotlib.text import Text
    from matplotlib.transforms import Bbox

    from ..trace.cell_trace import Trace

__all__ = ["Replay", "replay", "draw_frame", "transfers"]

_SHOWN = 12  # most elements of an array written in a PE's box
_ARROWS = 24  # most transfers drawn in one step


def _box_xy(pe: int, npes: int) -> tuple[float, float]:
    columns = npes if npes <= 4 else (npes + 1) // 2
    row, col = divmod(pe, columns)
    return col * 3.2, -row * 2.6


def _values_text(name: str, array: npt.ArrayLike, limit: int = _SHOWN) -> str:
    flat = np.asarray(array).reshape(-1)
    shown = [f"{v:g}" if isinstance(v, (float, np.floating)) else str(v) for v in flat[:limit].tolist()]
    return f"{name} [{' '.join(shown)}{' ...' if flat.size > limit else ''}]"


def _fit(text: Text, name: str, array: npt.ArrayLike, width: float, renderer: RendererBase) -> None:
    """Shorten the values of ``text`` (a Text artist) until it is at most ``width`` pixels wide."""
    for limit in range(_SHOWN - 1, -1, -1):
        if text.get_window_extent(renderer).width <= width:
            return
        text.set_text(_values_text(name, array, limit))


def transfers(trace: Trace, frame: dict[str, Any]) -> list[tuple[int, int, str]]:
    """``[(from PE, to PE, text)]`` of a frame's transfers between PEs, in PE order."""
    return sorted(trace.arrow(e) for e in frame["transfers"] if e["pe"] != e["target"])


def _place(label: Text, placed: list[Bbox], renderer: RendererBase, step: float) -> None:
    """Move ``label`` up until its box overlaps no label in ``placed``; add it there."""
    for _ in range(60):
        box = label.get_window_extent(renderer)
        if not any(box.overlaps(other) for other in placed):
            break
        x, y = label.get_position()
        label.set_position((x, y + step))
    placed.append(label.get_window_extent(renderer))


def draw_frame(trace: Trace, index: int, fig: Figure | None = None, arrays: Sequence[str] | None = None) -> Figure:
    """Draw frame ``index`` of ``trace`` on ``fig`` (a new Figure if None); return the figure.

    Each transfer is an arrow with a number; the numbers are listed under the PEs
    (from PE, to PE, what), in PE order."""
    frames = trace.frames()
    arrows = transfers(trace, frames[index])[:_ARROWS] if frames else []
    rows = 1 if trace.npes <= 4 else 2
    legend = (len(arrows) + 1) // 2  # two columns
    fig = fig or Figure(figsize=(9, 2.6 * rows + 1.0 + 0.17 * legend), dpi=90)
    renderer = FigureCanvasAgg(fig).get_renderer()  # type: ignore[no-untyped-call]  # matplotlib: untyped
    share = (0.17 * legend + 0.1) / fig.get_figheight()
    ax = fig.add_axes([0.01, share + 0.01, 0.98, 0.84 - share])  # type: ignore[call-overload]  # a list works too
    ax.set_axis_off()
    if not frames:
        fig.suptitle("no transfers were recorded", fontsize=11)
        return fig
    frame = frames[index]
    names = [n for n in (arrays or sorted(frame["heap"])) if n in frame["heap"]][:3]
    columns = trace.npes if trace.npes <= 4 else (trace.npes + 1) // 2
    ax.set_xlim(-0.3, columns * 3.2)
    ax.set_ylim(-2.8 if rows > 1 else -0.3, 2.5 + 0.15 * (columns - 1) * 3.2 + 0.5)
    for pe in range(trace.npes):
        x, y = _box_xy(pe, trace.npes)
        box = FancyBboxPatch((x, y), 2.6, 1.8, boxstyle="round,pad=0.05", fc="#eef3fb", ec="#3465a4", lw=1.2)
        ax.add_patch(box)
        ax.text(x + 0.1, y + 1.6, f"PE {pe}", fontsize=10, fontweight="bold", va="top")
        width = ax.transData.transform((2.4, 0))[0] - ax.transData.transform((0, 0))[0]
        for i, name in enumerate(names):
            values = frame["heap"][name][pe]
            text = ax.text(
                x + 0.1, y + 1.2 - 0.38 * i, _values_text(name, values), fontsize=7, family="monospace", va="top"
            )
            _fit(text, name, values, width, renderer)
    placed: list[Bbox] = []
    for number, (src, dst, _) in enumerate(arrows, 1):
        (x0, y0), (x1, y1) = _box_xy(src, trace.npes), _box_xy(dst, trace.npes)
        start, end = (x0 + 1.3, y0 + 1.85), (x1 + 1.3, y1 + 1.85)  # from the top of one box to another's
        rad = -0.3 if x1 >= x0 else 0.3  # arcs bow upwards, above the boxes
        ax.add_patch(
            FancyArrowPatch(
                start,
                end,
                arrowstyle="-|>",
                mutation_scale=14,
                color="#c4302b",
                lw=1.4,
                connectionstyle=f"arc3,rad={rad}",
                shrinkA=2,
                shrinkB=2,
            )
        )
        distance = ((x1 - x0) ** 2 + (y1 - y0) ** 2) ** 0.5
        label = ax.text(
            (x0 + x1) / 2 + 1.3,
            max(y0, y1) + 1.9 + 0.15 * distance,
            str(number),
            fontsize=7,
            color="white",
            ha="center",
            va="bottom",
            fontweight="bold",
            bbox={"boxstyle": "circle,pad=0.2", "fc": "#c4302b", "ec": "none"},
        )
        _place(label, placed, renderer, 0.25)
    lines = [f"{number:>2}  PE {src} \u2192 PE {dst}: {text}" for number, (src, dst, text) in enumerate(arrows, 1)]
    for column, chunk in enumerate((lines[:legend], lines[legend:])):
        if chunk:
            fig.text(
                0.02 + 0.5 * column, share, "\n".join(chunk), fontsize=7, family="monospace", va="top", color="#7a1f1b"
            )
    more = len(transfers(trace, frame)) - len(arrows)
    extra = f" ({more} more transfers not drawn)" if more > 0 else ""
    fig.suptitle(f"step {index + 1} of {len(frames)}: {frame['title']}{extra}", fontsize=10)
    return fig


def _check_arrays(trace: Trace, arrays: str | Iterable[str] | None) -> list[str] | None:
    """``arrays`` (names to show) if the traced cell has them all; else one sentence naming those it has."""
    if arrays is None:
        return None
    arrays = [arrays] if isinstance(arrays, str) else list(arrays)
    traced = sorted({name for frame in trace.frames() for name in frame["heap"]})
    unknown = [name for name in arrays if name not in traced]
    if unknown:
        raise InputError(
            f"the traced cell has no array named {unknown[0]!r}; its arrays: {', '.join(traced) or 'none'} "
            f"(e.g. `%shmem replay --array {traced[0] if traced else 'NAME'}`)"
        )
    return arrays


class Replay(widgets.VBox):  # type: ignore[misc]  # ipywidgets: untyped
    """Play button + slider over a :class:`~shmem_notebook.trace.cell_trace.Trace`'s frames."""

    def __init__(self, trace: Trace, interval: int = 1500, arrays: str | Iterable[str] | None = None) -> None:
        self.trace, self.arrays = trace, _check_arrays(trace, arrays)
        count = max(1, len(trace.frames()))
        # steps count from 1 on the slider, as in the title ("step 1 of 3")
        self.play = widgets.Play(min=1, max=count, interval=interval, description="play")
        self.slider = widgets.IntSlider(min=1, max=count, description="step", continuous_update=True)
        widgets.jslink((self.play, "value"), (self.slider, "value"))
        self.image = widgets.Image(format="png", layout=widgets.Layout(max_width="100%", height="auto"))
        self.image.add_class("shmem-replay-figure")
        self.title = widgets.HTML()
        super().__init__([widgets.HBox([self.play, self.slider]), self.title, self.image])
        self.add_class("shmem-replay")
        self.slider.observe(lambda change: self.show(change["new"] - 1), names="value")
        self.show(0)

    def show(self, index: int) -> None:
        """Draw frame ``index`` (0-based; the slider shows ``index + 1``)."""
        self.index = index
        frames = self.trace.frames()
        title = (
            f"step {index + 1} of {len(frames)}: {frames[index]['title']}" if frames else "no transfers were recorded"
        )
        self.title.value = f"<b>{html.escape(title)}</b>"
        self.image.value = figure_png(draw_frame(self.trace, index, arrays=self.arrays))

    def static_text(self) -> str:
        """The steps as text: title, then one line per transfer."""
        lines = [
            f"replay: {plural(len(self.trace.frames()), 'step')}, {plural(len(self.trace.events), 'event')}, "
            f"{plural(self.trace.npes, 'PE')}"
        ]
        for i, frame in enumerate(self.trace.frames()):
            lines.append(f"step {i + 1}: {frame['title']}")
            arrows = transfers(self.trace, frame)
            lines += [f"  PE {a} -> PE {b}: {t}" for a, b, t in arrows[:16]]
        return "\n".join(lines)

    def static_html(self) -> str:
        png = base64.b64encode(self.image.value).decode()
        steps = "".join(f"<li>{html.escape(f['title'])}</li>" for f in self.trace.frames())
        return f'<div class="shmem-replay-static"><img src="data:image/png;base64,{png}"/><ol>{steps}</ol></div>'

    def _repr_mimebundle_(self, **kwargs: Any) -> dict[str, Any]:
        data = super()._repr_mimebundle_(**kwargs) or {}
        data["text/plain"] = self.static_text()
        data["text/html"] = self.static_html()
        return data


def replay(trace: Trace, **options: Any) -> Replay:
    """The replay widget of ``trace`` (a traced cell's :class:`~shmem_notebook.trace.cell_trace.Trace`):
    a slider and play button over its frames; ``options``: ``arrays`` (names to draw), ``interval`` (ms)."""
    return Replay(trace, **options)
