"""The replay widget: step through a traced cell (ipywidgets + matplotlib PNGs, no JS build step).

``result.trace.replay()`` / ``%shmem replay`` show a :class:`Replay`: a play
button and a slider over the trace's frames (:meth:`Trace.frames`); each frame
draws the PEs as boxes holding their small arrays' values at that point, an
arrow per transfer of the step (from PE, to PE, which elements) and the
collective's name and step. Widget-less front ends get the same figure as a
PNG and the list of steps.
"""

import base64
import html

import ipywidgets as widgets
import numpy as np
from matplotlib.figure import Figure
from matplotlib.patches import FancyArrowPatch, FancyBboxPatch

from .plots import figure_png

__all__ = ["Replay", "draw_frame"]

_SHOWN = 12  # elements of an array written in a PE's box


def _box_xy(pe, npes):
    columns = npes if npes <= 4 else (npes + 1) // 2
    row, col = divmod(pe, columns)
    return col * 3.2, -row * 2.6


def _values_text(array, limit=_SHOWN):
    flat = np.asarray(array).reshape(-1)
    text = " ".join(f"{v:g}" if isinstance(v, (float, np.floating)) else str(v) for v in flat[:limit].tolist())
    return f"[{text}{' ...' if flat.size > limit else ''}]"


def draw_frame(trace, index, fig=None, arrays=None):
    """Draw frame ``index`` of ``trace`` on ``fig`` (a new Figure if None); return the figure."""
    frames = trace.frames()
    fig = fig or Figure(figsize=(9, 3.6 if trace.npes <= 4 else 5.6), dpi=90)
    ax = fig.add_axes([0.01, 0.01, 0.98, 0.84])
    ax.set_axis_off()
    if not frames:
        fig.suptitle("no transfers were recorded", fontsize=11)
        return fig
    frame = frames[index]
    names = [n for n in (arrays or sorted(frame["heap"])) if n in frame["heap"]][:3]
    for pe in range(trace.npes):
        x, y = _box_xy(pe, trace.npes)
        ax.add_patch(FancyBboxPatch((x, y), 2.6, 1.8, boxstyle="round,pad=0.05", fc="#eef3fb", ec="#3465a4", lw=1.2))
        ax.text(x + 0.1, y + 1.6, f"PE {pe}", fontsize=10, fontweight="bold", va="top")
        for i, name in enumerate(names):
            ax.text(x + 0.1, y + 1.2 - 0.38 * i, f"{name} {_values_text(frame['heap'][name][pe])}",
                    fontsize=7, family="monospace", va="top")
    drawn = [e for e in frame["transfers"] if e["pe"] != e["target"]]
    seen = {}
    for event in drawn[:24]:
        src, dst, text = trace.arrow(event)
        (x0, y0), (x1, y1) = _box_xy(src, trace.npes), _box_xy(dst, trace.npes)
        start, end = (x0 + 1.3, y0 + 1.85), (x1 + 1.3, y1 + 1.85)  # from the top of one box to another's
        rad = -0.3 if x1 >= x0 else 0.3  # arcs bow upwards, above the boxes
        ax.add_patch(FancyArrowPatch(start, end, arrowstyle="-|>", mutation_scale=14, color="#c4302b", lw=1.4,
                                     connectionstyle=f"arc3,rad={rad}", shrinkA=2, shrinkB=2))
        k = seen[(src, dst)] = seen.get((src, dst), -1) + 1
        distance = ((x1 - x0) ** 2 + (y1 - y0) ** 2) ** 0.5
        ax.text((x0 + x1) / 2 + 1.3, max(y0, y1) + 1.9 + 0.15 * distance + 0.22 * k, text, fontsize=7,
                color="#c4302b", ha="center", va="bottom", bbox={"fc": "white", "ec": "none", "pad": 0.5})
    columns = trace.npes if trace.npes <= 4 else (trace.npes + 1) // 2
    ax.set_xlim(-0.3, columns * 3.2)
    ax.set_ylim(-2.8 if trace.npes > 4 else -0.3, 2.5 + 0.15 * (columns - 1) * 3.2 + 0.5)
    fig.suptitle(f"step {index + 1} of {len(frames)}: {frame['title']}", fontsize=10)
    return fig


class Replay(widgets.VBox):
    """Play button + slider over a :class:`~shmem_notebook.analysis.trace.Trace`'s frames."""

    def __init__(self, trace, interval=1500, arrays=None):
        self.trace, self.arrays = trace, arrays
        count = max(1, len(trace.frames()))
        self.play = widgets.Play(min=0, max=count - 1, interval=interval, description="play")
        self.slider = widgets.IntSlider(min=0, max=count - 1, description="step", continuous_update=True)
        widgets.jslink((self.play, "value"), (self.slider, "value"))
        self.image = widgets.Image(format="png", layout=widgets.Layout(max_width="100%", height="auto"))
        self.image.add_class("shmem-replay-figure")
        self.title = widgets.HTML()
        super().__init__([widgets.HBox([self.play, self.slider]), self.title, self.image])
        self.add_class("shmem-replay")
        self.slider.observe(lambda change: self.show(change["new"]), names="value")
        self.show(0)

    def show(self, index):
        """Draw frame ``index`` (what the slider does)."""
        self.index = index
        frames = self.trace.frames()
        self.title.value = f"<b>{html.escape(frames[index]['title'])}</b>" if frames else "no transfers were recorded"
        self.image.value = figure_png(draw_frame(self.trace, index, arrays=self.arrays))

    def static_text(self):
        """The steps as text: title, then one line per transfer."""
        lines = [f"replay: {len(self.trace.frames())} steps, {len(self.trace.events)} events, {self.trace.npes} PEs"]
        for i, frame in enumerate(self.trace.frames()):
            lines.append(f"step {i + 1}: {frame['title']}")
            arrows = [self.trace.arrow(e) for e in frame["transfers"] if e["pe"] != e["target"]]
            lines += [f"  PE {a} -> PE {b}: {t}" for a, b, t in arrows[:16]]
        return "\n".join(lines)

    def static_html(self):
        png = base64.b64encode(self.image.value).decode()
        steps = "".join(f"<li>{html.escape(f['title'])}</li>" for f in self.trace.frames())
        return (f'<div class="shmem-replay-static"><img src="data:image/png;base64,{png}"/>'
                f"<ol>{steps}</ol></div>")

    def _repr_mimebundle_(self, **kwargs):
        data = super()._repr_mimebundle_(**kwargs) or {}
        data["text/plain"] = self.static_text()
        data["text/html"] = self.static_html()
        return data
