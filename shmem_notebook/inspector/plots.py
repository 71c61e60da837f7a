"""Matplotlib views of a :class:`~.snapshot.Snapshot` (client side).

Each ``plot_*`` helper draws into ``ax`` (a new figure when ``ax=None``) and
returns the artists it made. :func:`static_figure` puts them all on one
figure, the inspector's fallback where widgets cannot render. Figures are
made with ``matplotlib.figure.Figure`` (no pyplot), so they never pop up or
leak into the user's pyplot state.

Longer than 400 lines: one matplotlib helper per view of the inspector and the replay;
they share the colour and layout conventions defined at the top.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, cast

import numpy as np
from matplotlib.artist import Artist
from matplotlib.axes import Axes
from matplotlib.colors import ListedColormap
from matplotlib.figure import Figure
from matplotlib.patches import Rectangle
from matplotlib.ticker import FuncFormatter, MaxNLocator

from ..specs import format_size
from ..words import plural

if TYPE_CHECKING:
    from collections.abc import Iterable, Sequence

    import numpy.typing as npt
    from matplotlib.colorbar import Colorbar
    from matplotlib.figure import FigureBase
    from matplotlib.image import AxesImage

    from .snapshot import Snapshot

__all__ = [
    "plot_heap",
    "plot_values",
    "plot_diff",
    "diff_labels",
    "heap_figure",
    "values_figure",
    "diff_figure",
    "static_figure",
    "name_colours",
]

FONT = 11
ANNOTATE_MAX = 24  # annotate numbers when a PE row has at most this many elements
DIFF_CMAP = ListedColormap(["#e8e8e8", "#d62728"])
_PALETTE = [
    "#1f77b4",
    "#ff7f0e",
    "#2ca02c",
    "#9467bd",
    "#8c564b",
    "#e377c2",
    "#17becf",
    "#bcbd22",
    "#aec7e8",
    "#ffbb78",
    "#98df8a",
    "#c5b0d5",
    "#c49c94",
    "#f7b6d2",
    "#9edae5",
    "#dbdb8d",
]


def _new_axes(ax: Axes | None, n: int = 1, width: float = 10.0, height: float | None = None) -> Axes:
    if ax is not None:
        return ax
    fig = Figure(figsize=(width, height or 1.2 + 0.55 * n), dpi=100, layout="constrained")
    return fig.add_subplot()


class _BinaryLocator(MaxNLocator):
    """Byte ticks at round binary steps (1 KiB, 16 MiB, ...)."""

    def tick_values(  # type: ignore[override]  # an array, as matplotlib's own locators return
        self, vmin: float, vmax: float
    ) -> npt.NDArray[np.float64]:
        span = max(vmax - vmin, 1)
        step = 2 ** int(np.ceil(np.log2(span / 8)))
        for mult in (1, 2, 4):
            if span / (step * mult) <= 8:
                step *= mult
                break
        return np.arange(np.floor(vmin / step) * step, vmax + step / 2, step)


def _size_ticks(ax: Axes) -> None:
    ax.xaxis.set_major_locator(_BinaryLocator())
    ax.xaxis.set_major_formatter(FuncFormatter(lambda x, _: format_size(x).replace(".0 ", " ")))


def name_colours(snapshot: Snapshot) -> dict[str, str]:
    """A fixed colour per array name (same on every PE and every view)."""
    return {name: _PALETTE[i % len(_PALETTE)] for i, name in enumerate(snapshot.names())}


def _missing_label(p: dict[str, Any]) -> str:
    return "dead" if p["state"] == "dead" else "no answer (busy or hung)"


def plot_heap(snapshot: Snapshot, ax: Axes | None = None, layout: bool = False) -> list[Artist]:
    """Heap map: one bar per PE, each allocation drawn at its offset.

    ``layout=False``: the whole heap to scale (used vs free; tiny arrays are
    widened to stay visible). ``layout=True``: the allocations in heap order,
    equal widths (not to scale), each labelled with name, size and offset.
    """
    ax = _new_axes(ax, snapshot.npes)
    colours = name_colours(snapshot)
    sizes = [p["heap"]["size"] or 0 for p in snapshot.pes]
    blocks = max((len(p["blocks"]) for p in snapshot.pes), default=0)
    if layout:
        xmax = max(blocks, 5)
    else:
        extent = [b["offset"] + b["bytes"] for p in snapshot.pes for b in p["blocks"] if b["offset"] is not None]
        xmax = max(sizes + extent + [1])
    artists: list[Artist] = []
    for p in snapshot.pes:
        y = p["pe"]
        if not layout:
            artists.append(
                ax.add_patch(Rectangle((0, y - 0.35), p["heap"]["size"] or xmax, 0.7, color="#e8e8e8", zorder=1))
            )
        if not p["reachable"]:
            artists.append(
                ax.text(
                    xmax / 2,
                    y,
                    f"PE {y}: {_missing_label(p)}",
                    ha="center",
                    va="center",
                    fontsize=FONT,
                    color="#b00000",
                    weight="bold",
                    zorder=4,
                )
            )
            continue
        for i, b in enumerate(p["blocks"]):
            if b["offset"] is None and not layout:
                continue
            colour = colours.get(b["name"], "white")
            x, width = (i + 0.03, 0.94) if layout else (b["offset"], max(b["bytes"], xmax * 0.004))
            artists.append(
                ax.add_patch(
                    Rectangle(
                        (x, y - 0.35),
                        width,
                        0.7,
                        facecolor=colour,
                        linewidth=0.6,
                        edgecolor="black" if b["name"] else "#999999",
                        zorder=2,
                        hatch=None if b["name"] else "//",
                    )
                )
            )
            if layout:
                label = f"{b['name'] or 'unnamed'}\n{format_size(b['bytes'])} @ {b['offset'] or 0:#x}"
                if blocks > 8:
                    label = (b["name"] or "") if blocks <= 24 else ""
                artists.append(
                    ax.text(
                        x + 0.47,
                        y,
                        label,
                        ha="center",
                        va="center",
                        fontsize=FONT - 1,
                        color="black" if b["name"] is None else "white",
                        weight="bold",
                        zorder=3,
                        clip_on=True,
                    )
                )
        if not layout:
            used, size = p["heap"]["used"] or 0, p["heap"]["size"] or 0
            pct = "?" if not size else (f"{100 * used / size:.2g}%" if used >= size / 1000 or not used else "<0.1%")
            artists.append(ax.text(xmax * 1.01, y, f"{format_size(used)} used ({pct})", va="center", fontsize=FONT - 1))
    ax.set_xlim(0, xmax)
    ax.set_ylim(snapshot.npes - 0.5, -0.5)
    ax.set_yticks(range(snapshot.npes), [f"PE {i}" for i in range(snapshot.npes)], fontsize=FONT)
    ax.spines[["top", "right"]].set_visible(False)
    if layout:
        ax.set_xticks([])
        ax.set_title(
            "allocations in heap order (equal widths, not to scale): name, size @ offset", fontsize=FONT, loc="left"
        )
    else:
        _size_ticks(ax)
        ax.tick_params(axis="x", labelsize=FONT - 1)
        ax.set_title(
            f"symmetric heap to scale: {format_size(max(sizes or [0]))} per PE, grey = free", fontsize=FONT, loc="left"
        )
    return artists


def _array_label(snapshot: Snapshot, name: str) -> str:
    info = snapshot.info(name)
    shape = ",".join(map(str, info["shape"]))
    return f"{name} {info['dtype']}[{shape}] {format_size(info['bytes'])} @ {info['offset']:#x}"


def _display_values(values: npt.NDArray[Any]) -> npt.NDArray[np.float64]:
    """Real, float values for colouring (abs of complex)."""
    if values.dtype.kind == "c":
        values = np.abs(values)
    return values.astype(np.float64)


def _rows(values: npt.NDArray[Any]) -> npt.NDArray[Any]:
    """``(npes,)`` (0-d arrays) as ``(npes, 1)``."""
    return values[:, None] if values.ndim == 1 else values


def _pe_panels(values: npt.NDArray[Any]) -> npt.NDArray[Any] | None:
    """Per PE a 2-D panel, or ``None`` when the array is 1-D (one PE x element image)."""
    if values.ndim <= 2:
        return None
    return values.reshape(values.shape[0], -1, values.shape[-1])


def _axes_for(ax: Any, npes: int, panels: bool) -> list[Axes]:
    """A list of axes: one for a 1-D array, one per PE for 2-D panels."""
    if ax is not None:
        return list(np.atleast_1d(ax).ravel()) if panels else [ax]
    if not panels:
        return [_new_axes(None, npes, height=1.4 + 0.5 * npes)]
    cols = min(npes, 4)
    rows = -(-npes // cols)
    fig = Figure(figsize=(10, 0.6 + 2.9 * rows), dpi=100, layout="constrained")
    return list(np.atleast_1d(fig.subplots(rows, cols, squeeze=False)).ravel())


def _block(snapshot: Snapshot, name: str) -> tuple[int, int]:
    """Elements per cell along (rows, columns): (1, 1) for exact arrays."""
    if snapshot.is_exact(name):
        return 1, 1
    holder = next(p for p in snapshot.pes if name in p["arrays"])
    return cast("tuple[int, int]", holder["arrays"][name]["summary"]["block"])


def _x_label(snapshot: Snapshot, name: str) -> str:
    _, bc = _block(snapshot, name)
    return "element" if bc == 1 else f"element (cells are blocks of {bc}: block means)"


def _index_ticks(ax: Axes, block: tuple[int, int], rows: bool = True) -> None:
    """Integer ticks in element indices (cells of a summary span ``block`` elements)."""
    br, bc = block
    ax.xaxis.set_major_locator(MaxNLocator(nbins=5 if rows else "auto", integer=True))
    ax.xaxis.set_major_formatter(FuncFormatter(lambda v, _: f"{int(round(v * bc))}"))
    if rows:
        ax.yaxis.set_major_locator(MaxNLocator(nbins=6, integer=True))
        ax.yaxis.set_major_formatter(FuncFormatter(lambda v, _: f"{int(round(v * br))}"))


def _outline(ax: Axes, mask: npt.NDArray[np.bool_], artists: list[Artist], colour: str = "#d62728") -> None:
    """Outline the True cells of a 2-D mask (a translucent overlay when there are many)."""
    ys, xs = np.nonzero(mask)
    if len(ys) <= 400:
        for y, x in zip(ys, xs):
            artists.append(
                ax.add_patch(Rectangle((x - 0.5, y - 0.5), 1, 1, fill=False, edgecolor=colour, linewidth=2.2))
            )
    elif len(ys):
        overlay = np.ma.masked_where(~mask, mask.astype(float))
        artists.append(
            ax.imshow(overlay, cmap=ListedColormap([colour]), alpha=0.55, aspect="auto", interpolation="nearest")
        )


def plot_values(
    snapshot: Snapshot,
    name: str,
    ax: Axes | Sequence[Axes] | npt.NDArray[Any] | None = None,
    reference: int | None = None,
    outline: bool = True,
) -> list[Artist | Colorbar]:
    """Heatmap of array ``name``: PE x element for 1-D arrays, one panel per PE otherwise.

    Small rows get their numbers written in; cells where a PE differs
    (from the consensus, or PE ``reference``) are outlined in red. For 2-D
    arrays ``ax`` is a sequence of at least ``npes`` axes.
    """
    values = _rows(snapshot.values(name))
    mask = _rows(snapshot.diff(name, reference)) if outline else np.zeros(values.shape, bool)
    shown = _display_values(values)
    vmin, vmax, clipped = colour_range(shown)
    panels = _pe_panels(shown)
    axes = _axes_for(ax, snapshot.npes, panels is not None)
    artists: list[Artist] = []
    im: AxesImage | None
    if panels is None:
        a = axes[0]
        im = a.imshow(shown, aspect="auto", cmap="viridis", vmin=vmin, vmax=vmax, interpolation="nearest")
        artists.append(im)
        a.set_yticks(range(snapshot.npes), [f"PE {i}" for i in range(snapshot.npes)], fontsize=FONT)
        a.set_xlabel(_x_label(snapshot, name), fontsize=FONT)
        _index_ticks(a, _block(snapshot, name), rows=False)
        a.tick_params(axis="x", labelsize=FONT - 1)
        if shown.shape[1] <= ANNOTATE_MAX and snapshot.is_exact(name):
            artists += _annotate(a, values, shown, vmin, vmax)
        if outline:
            _outline(a, mask, artists)
        for p in snapshot.pes:
            if name not in p["arrays"]:
                artists.append(
                    a.text(
                        shown.shape[1] / 2 - 0.5,
                        p["pe"],
                        _missing_label(p),
                        ha="center",
                        va="center",
                        fontsize=FONT,
                        color="#b00000",
                        weight="bold",
                    )
                )
        cb = a.figure.colorbar(im, ax=a, pad=0.01)
        cb.ax.tick_params(labelsize=FONT - 1)
        a.set_title(_title(snapshot, name) + clipped, fontsize=FONT + 1, loc="left")
        return artists + [cb]
    masks = mask.reshape(panels.shape)
    im = None
    for pe in range(snapshot.npes):
        a = axes[pe]
        im = a.imshow(panels[pe], cmap="viridis", vmin=vmin, vmax=vmax, interpolation="nearest")
        artists.append(im)
        p = snapshot.pes[pe]
        title = f"PE {pe}" + ("" if name in p["arrays"] else f": {_missing_label(p)}")
        a.set_title(
            title, fontsize=FONT + 1, color="#b00000" if masks[pe].any() or name not in p["arrays"] else "black"
        )
        a.tick_params(labelsize=FONT - 2)
        _index_ticks(a, _block(snapshot, name))
        if panels.shape[1] * panels.shape[2] <= 64 and snapshot.is_exact(name):
            artists += _annotate(a, values.reshape(panels.shape)[pe], panels[pe], vmin, vmax)
        if outline:
            _outline(a, masks[pe], artists)
    for a in axes[snapshot.npes :]:
        a.set_visible(False)
    fig = axes[0].figure
    cb = fig.colorbar(cast("AxesImage", im), ax=axes[: snapshot.npes], shrink=0.85, pad=0.01)
    cb.ax.tick_params(labelsize=FONT - 1)
    fig.suptitle(_title(snapshot, name) + clipped, fontsize=FONT + 1, x=0.01, ha="left")
    return artists + [cb]


def colour_range(values: npt.ArrayLike) -> tuple[float, float, str]:
    """``(vmin, vmax, note)`` of a heatmap's colour scale, robust to outliers.

    Values beyond ``3 x IQR`` from the quartiles are outliers; when they stretch
    the full range to more than 10x the range of the rest, the scale spans the
    rest (outliers saturate) and ``note`` states the true min and max, so one
    outlier never paints everything else one colour.
    """
    finite = np.asarray(values, dtype=float)
    finite = finite[np.isfinite(finite)]
    if not finite.size:
        return 0.0, 1.0, ""
    lo, hi, note = float(finite.min()), float(finite.max()), ""
    q1, q3 = np.percentile(finite, [25, 75])
    if q3 > q1:
        inner = finite[(finite >= q1 - 3 * (q3 - q1)) & (finite <= q3 + 3 * (q3 - q1))]
        rlo, rhi = float(inner.min()), float(inner.max())
        if rhi > rlo and hi - lo > 10 * (rhi - rlo):
            note = f"\ncolours span {rlo:.4g}..{rhi:.4g} (outliers saturate); true min {lo:.4g}, max {hi:.4g}"
            lo, hi = rlo, rhi
    if lo == hi:
        lo, hi = lo - 0.5, hi + 0.5
    return lo, hi, note


def _title(snapshot: Snapshot, name: str) -> str:
    br, bc = _block(snapshot, name)
    how = "exact values" if (br, bc) == (1, 1) else f"downsampled to block means of {br}x{bc} elements"
    return f"{_array_label(snapshot, name)} ({how}; red outline: differs)"


def _annotate(ax: Axes, raw: npt.NDArray[Any], shown: npt.NDArray[Any], vmin: float, vmax: float) -> list[Artist]:
    """Write each value into its cell, dark or light for contrast."""
    raw = np.atleast_2d(raw)
    shown = np.atleast_2d(shown)
    artists: list[Artist] = []
    mid = (vmin + vmax) / 2
    for (y, x), v in np.ndenumerate(raw):
        if not np.isfinite(shown[y, x]):
            continue
        text = f"{v:.3g}" if raw.dtype.kind in "fc" else str(v)
        artists.append(
            ax.text(
                x, y, text, ha="center", va="center", fontsize=FONT - 2, color="white" if shown[y, x] < mid else "black"
            )
        )
    return artists


def _pooled(mask: npt.NDArray[np.bool_], max_rows: int, max_cols: int) -> npt.NDArray[np.bool_]:
    """OR-pool a 2-D mask to at most ``max_rows x max_cols`` cells, so single marks stay visible."""
    rows, cols = mask.shape
    fr, fc = -(-rows // max_rows), -(-cols // max_cols)
    if fr == 1 and fc == 1:
        return mask
    padded = np.zeros((-(-rows // fr) * fr, -(-cols // fc) * fc), bool)
    padded[:rows, :cols] = mask
    return cast(
        "npt.NDArray[np.bool_]", padded.reshape(padded.shape[0] // fr, fr, padded.shape[1] // fc, fc).any(axis=(1, 3))
    )


def _mask_image(ax: Axes, mask: npt.NDArray[np.bool_], max_rows: int, max_cols: int, **kw: Any) -> AxesImage:
    rows, cols = mask.shape
    return ax.imshow(
        _pooled(mask, max_rows, max_cols),
        cmap=DIFF_CMAP,
        vmin=0,
        vmax=1,
        interpolation="nearest",
        extent=(-0.5, cols - 0.5, rows - 0.5, -0.5),
        **kw,
    )


#: the diff's label colours: a PE that differs, one that agrees, one with no data
DIFFERS, AGREES, NO_DATA = "#d62728", "black", "#7f7f7f"


def diff_labels(snapshot: Snapshot, name: str, reference: int | None = None) -> list[tuple[str, str]]:
    """``(label, colour)`` per PE of the diff of ``name`` (one PE x element image): ``PE 3 (1)`` in red
    when it differs at 1 element, ``PE 1 (0)`` in black when it agrees, ``PE 2 (ref)``, and ``PE 0 (no
    data)`` in grey for a PE that sent none (hung, dead, busy, or without the array)."""
    counts = snapshot.diff(name, reference).reshape(snapshot.npes, -1).sum(axis=1)
    without = snapshot.without(name)
    labels: list[tuple[str, str]] = []
    for pe in range(snapshot.npes):
        if pe in without:
            labels.append((f"PE {pe} (no data)", NO_DATA))
        else:
            said = "ref" if pe == reference else str(counts[pe])
            labels.append((f"PE {pe} ({said})", DIFFERS if counts[pe] else AGREES))
    return labels


def _no_data_rows(ax: Axes, pes: Iterable[int], cols: int) -> None:
    """Hatch the rows of PEs without data, so that none reads as agreeing."""
    for pe in pes:
        ax.add_patch(
            Rectangle((-0.5, pe - 0.5), cols, 1, facecolor="white", edgecolor=NO_DATA, hatch="///", linewidth=0)
        )


def plot_diff(
    snapshot: Snapshot,
    name: str,
    reference: int | None = None,
    ax: Axes | Sequence[Axes] | npt.NDArray[Any] | None = None,
) -> list[Artist]:
    """Where PEs disagree on ``name``: red cells differ from the consensus (or PE ``reference``); PEs
    without data are hatched and labelled ``no data``."""
    mask = _rows(snapshot.diff(name, reference))
    panels = _pe_panels(mask)
    axes = _axes_for(ax, snapshot.npes, panels is not None)
    counts = mask.reshape(snapshot.npes, -1).sum(axis=1)
    without = snapshot.without(name)
    against = "the consensus" if reference is None else f"PE {reference}"
    unit = "elements" if snapshot.is_exact(name) else "blocks"
    artists: list[Artist] = []
    if panels is None:
        a = axes[0]
        artists.append(_mask_image(a, mask, snapshot.npes, 500, aspect="auto"))
        _no_data_rows(a, without, mask.shape[1])
        labels = diff_labels(snapshot, name, reference)
        a.set_yticks(range(snapshot.npes), [text for text, _ in labels], fontsize=FONT)
        for tick, (_, colour) in zip(a.get_yticklabels(), labels):
            tick.set_color(colour)
        a.set_xlabel(_x_label(snapshot, name).replace(": block means", ""), fontsize=FONT)
        _index_ticks(a, _block(snapshot, name), rows=False)
        a.tick_params(axis="x", labelsize=FONT - 1)
        a.set_title(
            f"diff of {name} against {against}: red = differs ({unit} per PE in brackets)",
            fontsize=FONT + 1,
            loc="left",
        )
        return artists
    panels_mask = mask.reshape(panels.shape)
    for pe in range(snapshot.npes):
        a = axes[pe]
        if pe in without:
            a.set_title(f"PE {pe}: no data ({without[pe]})", fontsize=FONT + 1, color=NO_DATA)
            a.set_xticks([])
            a.set_yticks([])
            a.text(0.5, 0.5, "no data", ha="center", va="center", color=NO_DATA, transform=a.transAxes)
            continue
        artists.append(_mask_image(a, panels_mask[pe], 120, 120))
        label = (
            "reference"
            if pe == reference
            else f"{plural(counts[pe], unit[:-1])} {plural(counts[pe], 'differs', 'differ', number=False)}"
        )
        a.set_title(f"PE {pe}: {label}", fontsize=FONT + 1, color=DIFFERS if counts[pe] else AGREES)
        a.tick_params(labelsize=FONT - 2)
        _index_ticks(a, _block(snapshot, name))
    for a in axes[snapshot.npes :]:
        a.set_visible(False)
    axes[0].figure.suptitle(f"diff of {name} against {against}: red = differs", fontsize=FONT + 1, x=0.01, ha="left")
    return artists


def _heights(snapshot: Snapshot, name: str | None) -> tuple[float, float]:
    """Inches for a heap panel and for a values/diff panel of ``name``."""
    heap = 0.9 + 0.45 * snapshot.npes
    if name is None:
        return heap, 0
    if _pe_panels(_rows(snapshot.values(name))) is not None:
        return heap, 0.7 + 2.7 * -(-snapshot.npes // 4)
    return heap, 1.3 + 0.42 * snapshot.npes


def _panel_axes(sub: FigureBase, snapshot: Snapshot, name: str) -> Axes | npt.NDArray[Any]:
    if _pe_panels(_rows(snapshot.values(name))) is None:
        return sub.add_subplot()
    cols = min(snapshot.npes, 4)
    return sub.subplots(-(-snapshot.npes // cols), cols, squeeze=False).ravel()


def heap_figure(snapshot: Snapshot) -> Figure:
    """The heap map: the whole heap to scale (top), the allocations labelled (bottom)."""
    heap, _ = _heights(snapshot, None)
    fig = Figure(figsize=(11, 2 * heap), dpi=100, layout="constrained")
    top, bottom = fig.subplots(2, 1)
    plot_heap(snapshot, top)
    plot_heap(snapshot, bottom, layout=True)
    return fig


def values_figure(snapshot: Snapshot, name: str, reference: int | None = None) -> Figure:
    """A figure with :func:`plot_values` of ``name``."""
    _, height = _heights(snapshot, name)
    fig = Figure(figsize=(11, height), dpi=100, layout="constrained")
    plot_values(snapshot, name, _panel_axes(fig, snapshot, name), reference=reference)
    return fig


def diff_figure(snapshot: Snapshot, name: str, reference: int | None = None) -> Figure:
    """A figure with :func:`plot_diff` of ``name``."""
    _, height = _heights(snapshot, name)
    fig = Figure(figsize=(11, height), dpi=100, layout="constrained")
    plot_diff(snapshot, name, reference=reference, ax=_panel_axes(fig, snapshot, name))
    return fig


def static_figure(
    snapshot: Snapshot, name: str | None = None, reference: int | None = None, fig: Figure | None = None
) -> Figure:
    """Heap map, then values and diff of ``name`` (default: the first array), on one figure.

    Draws on ``fig`` when given (e.g. a pyplot figure, to show it), else on a new ``Figure``.
    """
    names = snapshot.names()
    name = name if name is not None else (names[0] if names else None)
    heap, data = _heights(snapshot, name)
    heights = [heap, heap] + ([data, data] if name is not None else [])
    if fig is None:
        fig = Figure(dpi=100, layout="constrained")
    fig.set_size_inches(11, sum(heights))
    subs = fig.subfigures(len(heights), 1, height_ratios=heights, squeeze=False)[:, 0]
    plot_heap(snapshot, subs[0].add_subplot())
    plot_heap(snapshot, subs[1].add_subplot(), layout=True)
    if name is not None:
        plot_values(snapshot, name, _panel_axes(subs[2], snapshot, name), reference=reference)
        plot_diff(snapshot, name, reference=reference, ax=_panel_axes(subs[3], snapshot, name))
    return fig
