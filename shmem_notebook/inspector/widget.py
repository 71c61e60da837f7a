"""The inspector widget (ipywidgets + matplotlib PNGs; no JavaScript build step).

``inspect(job)`` (``shmem_notebook.inspect``) displays an :class:`Inspector`; ``%shmem inspect``
calls it. The widget's data is ``inspector.snapshot`` (see
:mod:`.snapshot`). Every refresh asks the PEs for their heap summary (not
collective; dead or stuck PEs are marked, the others shown). The displayed
output also carries a static HTML rendering (figure and tables), which is
what nbconvert and other widget-less front ends show; a terminal IPython
gets text tables.
"""

from __future__ import annotations

import base64
import html
from typing import TYPE_CHECKING, Any, cast

import ipywidgets as widgets
from traitlets import Bool, Instance, Int, Unicode, observe, validate

from .. import job as _job
from ..analysis.figures import figure_png
from ..errors import InputError, NoJobError
from . import plots, tables
from .snapshot import DEFAULT_BUDGET, DEFAULT_TIMEOUT, Snapshot, gather_snapshot

if TYPE_CHECKING:
    from matplotlib.figure import Figure

    from ..analysis.happens_before import Race
    from ..cells.result import CellResult
    from ..job import Job

__all__ = ["Inspector", "inspect"]

CONSENSUS = "consensus"


def _image(css: str) -> Any:
    img = widgets.Image(format="png", layout=widgets.Layout(max_width="100%", height="auto"))
    img.add_class(css)
    return img


def _html(css: str | None = None) -> Any:
    w = widgets.HTML()
    if css:
        w.add_class(css)
    return w


class Inspector(widgets.VBox):  # type: ignore[misc]  # ipywidgets: untyped
    """Heap map, values / diff of one array, and PE state of a job, refreshable.

    Traits: ``array`` (the array shown; '' when there is none), ``reference``
    (PE the diff compares with, ``None`` for the consensus), ``auto``
    (refresh after every ``%%pxshmem`` cell), ``flat`` (the values table in one row per PE instead
    of the array's shape), ``snapshot`` (the last
    :class:`Snapshot`). Refresh with :meth:`refresh` or the button.
    """

    array = Unicode("", help="name of the array shown in the values and diff views")
    reference = Int(None, allow_none=True, help="PE the diff compares with; None: the consensus")
    auto = Bool(False, help="refresh after every %%pxshmem cell")
    flat = Bool(False, help="values table: every element of a PE in one row (N-D arrays keep their shape otherwise)")
    snapshot = Instance(Snapshot, allow_none=True)

    def __init__(
        self,
        job: Job | None,
        array: str | None = None,
        reference: int | None = None,
        auto: bool = False,
        budget: int = DEFAULT_BUDGET,
        timeout: float = DEFAULT_TIMEOUT,
    ) -> None:
        if job is None or job.state == "stopped":
            raise NoJobError("the inspector")
        self.job = job
        self.budget = budget
        self.timeout = timeout
        self.error = ""  # the last refresh's problem, if any
        self.refreshes = 0  # how many snapshots this inspector has shown
        self._shown_in_cell = False
        self._heap_drawn: tuple[Any, ...] | None = None
        self.title = _html("shmem-title")
        self.refresh_button = widgets.Button(
            description="Refresh", icon="refresh", tooltip="gather from every PE again"
        )
        self.auto_box = widgets.Checkbox(description="refresh after every %%pxshmem cell", indent=False)
        self.flat_box = widgets.Checkbox(
            description="flat (one row per PE)", indent=False, layout=widgets.Layout(width="200px")
        )
        self.heap_image = _image("shmem-heapmap")
        self.arrays_html = _html("shmem-arrays-html")
        self.array_select = widgets.Dropdown(description="array", layout=widgets.Layout(width="220px"))
        self.reference_select = widgets.Dropdown(
            description="diff against", layout=widgets.Layout(width="300px"), style={"description_width": "initial"}
        )
        self.values_image = _image("shmem-heatmap")
        self.values_html = _html("shmem-values-html")
        self.diff_image = _image("shmem-diff")
        self.diff_html = _html("shmem-diff-summary")
        self.state_html = _html("shmem-pe-state-html")

        def heading(text: str) -> Any:
            return widgets.HTML(f"<h4 style='margin:8px 0 2px 0'>{html.escape(text)}</h4>")

        super().__init__(
            [
                self.title,
                widgets.HBox([self.refresh_button, self.auto_box], layout=widgets.Layout(align_items="center")),
                heading("Symmetric heap, per PE"),
                self.heap_image,
                self.arrays_html,
                heading("Values"),
                widgets.HBox(
                    [self.array_select, self.reference_select, self.flat_box],
                    layout=widgets.Layout(align_items="center"),
                ),
                self.diff_html,
                self.values_image,
                self.values_html,
                self.diff_image,
                heading("PE state"),
                self.state_html,
            ]
        )
        self.add_class("shmem-inspector")
        self.refresh_button.on_click(lambda _: self._safe_refresh())
        widgets.link((self.auto_box, "value"), (self, "auto"))
        widgets.link((self.flat_box, "value"), (self, "flat"))
        self.array_select.observe(lambda ch: self._pick_array(ch["new"]), "value")
        self.reference_select.observe(lambda ch: self._pick_reference(ch["new"]), "value")
        self._rendering = False
        try:
            self._update(gather_snapshot(job, budget=budget, timeout=timeout), array, reference)
        except BaseException:
            self.close()
            raise
        self.auto = auto

    # -- data --------------------------------------------------------------
    def refresh(self) -> Snapshot:
        """Gather a new snapshot from the PEs (not collective) and redraw everything; returns it."""
        if self.job.state == "stopped":
            raise NoJobError("the inspector")
        self._update(gather_snapshot(self.job, budget=self.budget, timeout=self.timeout))
        return cast("Snapshot", self.snapshot)

    def _update(self, snap: Snapshot, array: str | None = None, reference: int | None = None) -> None:
        """Take ``snap``, then the array and reference shown (checked against it), then redraw."""
        names = snap.names()
        self._rendering = True
        try:
            self.snapshot = snap
            self.refreshes += 1
            self.array_select.options = names
            if array is not None:
                self.array = array
            elif self.array not in names:
                self.array = names[0] if names else ""
            self.array_select.value = self.array or None
            self.reference_select.options = [("consensus (most PEs)", CONSENSUS)] + [
                (f"PE {pe}", str(pe)) for pe in range(snap.npes)
            ]
            if reference is not None:
                self.reference = reference
            if self.reference is not None and not snap.pes[self.reference]["reachable"]:
                self.reference = None
            self.reference_select.value = CONSENSUS if self.reference is None else str(self.reference)
        finally:
            self._rendering = False
        self.error = ""
        self._render()

    def _safe_refresh(self) -> None:
        """Refresh for the button and --auto: show a problem instead of raising."""
        try:
            self.refresh()
        except Exception as exc:
            self.error = f"{type(exc).__name__}: {exc}"
            self.title.value = self._title_html()

    def _on_cell(self, job: Job, result: CellResult) -> None:
        if job.state != "stopped":
            self._safe_refresh()

    @observe("auto")
    def _auto_changed(self, change: dict[str, Any]) -> None:
        callbacks = self.job.cell_callbacks
        if change["new"] and self._on_cell not in callbacks:
            callbacks.append(self._on_cell)
        elif not change["new"] and self._on_cell in callbacks:
            callbacks.remove(self._on_cell)

    @validate("array")
    def _check_array(self, proposal: dict[str, Any]) -> str:
        name: str = proposal["value"]
        names = self.snapshot.names() if self.snapshot is not None else []
        if name and name not in names:
            raise InputError(
                f"no symmetric array named {name!r} on the PEs; arrays: {', '.join(names) or 'none'} "
                f"(allocate it, then refresh)"
            )
        return name

    @validate("reference")
    def _check_reference(self, proposal: dict[str, Any]) -> int | None:
        pe: int | None = proposal["value"]
        n = self.job.n
        if pe is not None and not 0 <= pe < n:
            raise InputError(f"reference must be a PE number 0..{n - 1} or None (the consensus), got {pe}")
        return pe

    @observe("array", "reference", "flat")
    def _view_changed(self, change: dict[str, Any]) -> None:
        if self._rendering or self.snapshot is None:
            return
        self._rendering = True
        try:
            self.array_select.value = self.array or None
            self.reference_select.value = CONSENSUS if self.reference is None else str(self.reference)
        finally:
            self._rendering = False
        self._render_values()

    def _pick_array(self, name: str | None) -> None:
        if not self._rendering and name is not None:
            self.array = name

    def _pick_reference(self, value: str | None) -> None:
        if not self._rendering and value is not None:
            self.reference = None if value == CONSENSUS else int(value)

    # -- drawing -------------------------------------------------------------
    def _title_html(self) -> str:
        snap = self.snapshot
        line = f"refresh {self.refreshes}: {tables.summary_line(snap)}" if snap is not None else "no data yet"
        err = f"<br><span style='color:#d62728'>refresh failed: {html.escape(self.error)}</span>" if self.error else ""
        return f"<b style='font-size:15px'>OpenSHMEM inspector</b>&nbsp; {html.escape(line)}{err}"

    def _render(self) -> None:
        snap = cast("Snapshot", self.snapshot)
        self.title.value = self._title_html()
        key = _heap_key(snap)
        if key != self._heap_drawn:  # the heap map is redrawn only when the layout changed
            self.heap_image.value = figure_png(plots.heap_figure(snap))
            self._heap_drawn = key
        self.arrays_html.value = tables.arrays_table(snap)
        self.state_html.value = tables.state_table(snap)
        self._render_values()

    def _render_values(self) -> None:
        snap, name = cast("Snapshot", self.snapshot), self.array
        if not name:
            self.values_image.value = self.diff_image.value = b""
            self.values_html.value = ""
            self.diff_html.value = "<p>no named symmetric arrays yet</p>"
            return
        try:
            summary = snap.describe_diff(name, self.reference)
        except InputError as exc:  # e.g. the name is bound to different arrays on different PEs
            self.values_image.value = self.diff_image.value = b""
            self.values_html.value = ""
            self.diff_html.value = f"<p style='color:#d62728'><b>{html.escape(str(exc))}</b></p>"
            return
        self.diff_html.value = f"<p style='font-size:14px'><b>{html.escape(summary)}</b></p>"
        self.values_image.value = figure_png(plots.values_figure(snap, name, self.reference))
        self.values_html.value = tables.values_table(snap, name, self.reference, races=self._races(), flat=self.flat)
        self.diff_image.value = figure_png(plots.diff_figure(snap, name, self.reference))

    def close(self) -> None:
        """Stop refreshing after cells and close the widget and its parts."""
        self.auto = False
        for child in self._parts():
            child.close()
        super().close()

    def _parts(self) -> list[Any]:
        stack, parts = list(self.children), []
        while stack:
            w = stack.pop()
            parts.append(w)
            stack.extend(getattr(w, "children", ()))
        return parts

    # -- display -------------------------------------------------------------
    def _races(self) -> list[Race]:
        """The races of the job's last cell (run with race=True), marked in the values table."""
        return getattr(getattr(self.job, "last_result", None), "races", None) or []

    def static_html(self) -> str:
        """The inspector as static HTML: one figure (PNG) and the tables."""
        snap = cast("Snapshot", self.snapshot)
        png = figure_png(self.figure())
        diff = f"<p><b>{html.escape(snap.describe_diff(self.array, self.reference))}</b></p>" if self.array else ""
        values = (
            tables.values_table(snap, self.array, self.reference, races=self._races(), flat=self.flat)
            if self.array
            else ""
        )
        return (
            f'<div class="shmem-inspector-static"><p>{self._title_html()}</p>'
            f'<img class="shmem-static-figure" src="data:image/png;base64,{base64.b64encode(png).decode()}"/>'
            f"{diff}{values}"
            f"{tables.arrays_table(snap)}<h4>PE state</h4>{tables.state_table(snap)}</div>"
        )

    def static_text(self) -> str:
        """The inspector as text tables (for a terminal)."""
        snap = cast("Snapshot", self.snapshot)
        parts = [f"OpenSHMEM inspector: {tables.summary_line(snap)}", tables.arrays_table(snap, html_out=False)]
        if self.array:
            parts.append(snap.describe_diff(self.array, self.reference))
            numbers = tables.values_table(
                snap, self.array, self.reference, html_out=False, races=self._races(), flat=self.flat
            )
            if numbers:
                parts.append(numbers)
        parts.append(tables.state_table(snap, html_out=False))
        return "\n\n".join(parts)

    def _repr_mimebundle_(self, **kwargs: Any) -> dict[str, Any]:
        data = super()._repr_mimebundle_(**kwargs) or {}
        data["text/plain"] = self.static_text()
        data["text/html"] = self.static_html()
        return data

    def _ipython_display_(self) -> None:
        """Display once per cell (``inspect()`` displays, and its value must not show again)."""
        if self._shown_in_cell:
            return
        from IPython import get_ipython
        from IPython.display import display

        shell = get_ipython()
        if shell is not None and "Terminal" in type(shell).__name__:
            print(self.static_text())
            self._show_figure()
            return
        display(self._repr_mimebundle_(), raw=True)  # type: ignore[no-untyped-call]  # IPython: untyped

    def figure(self, fig: Figure | None = None) -> Figure:
        """The static matplotlib figure: heap map, values and diff of the current array."""
        return plots.static_figure(cast("Snapshot", self.snapshot), self.array or None, self.reference, fig=fig)

    def _show_figure(self) -> None:
        """In a terminal with an interactive matplotlib backend, show the static figure."""
        import matplotlib

        if matplotlib.get_backend().lower() in ("agg", "pdf", "ps", "svg", "cairo", "template"):
            print("(figure: inspector.figure() returns it as a matplotlib Figure)")
            return
        import matplotlib.pyplot as plt

        self.figure(plt.figure())
        plt.show(block=False)

    def _mark_shown(self) -> None:
        """Suppress the display of ``inspect()``'s return value in this cell."""
        from IPython import get_ipython

        shell = get_ipython()
        if shell is None:
            return
        self._shown_in_cell = True

        def clear() -> None:
            self._shown_in_cell = False
            shell.events.unregister("post_execute", clear)

        shell.events.register("post_execute", clear)


def _heap_key(snap: Snapshot) -> tuple[Any, ...]:
    """What the heap map shows: per PE its reachability, heap use and allocations."""
    return tuple(
        (
            p["state"],
            p["reachable"],
            p["heap"]["used"],
            p["heap"]["size"],
            tuple((b["name"], b["offset"], b["bytes"]) for b in p["blocks"]),
        )
        for p in snap.pes
    )


def inspect(
    job: Job | None = None,
    auto: bool = False,
    array: str | None = None,
    reference: int | None = None,
    timeout: float = DEFAULT_TIMEOUT,
    budget: int = DEFAULT_BUDGET,
) -> Inspector:
    """Display the inspector of ``job`` (default: the current job) and return it.

    ``auto=True`` refreshes it after every ``%%pxshmem`` cell; ``array``
    picks the array shown, ``reference`` the PE the diff compares with
    (``None``: the consensus). Gathering is not collective: PEs that do not
    answer within ``timeout`` seconds are shown as unreachable.
    """
    job = job if job is not None else _job.current_job()
    if job is None or job.state == "stopped":
        raise NoJobError("the inspector")
    inspector = Inspector(job, array=array, reference=reference, auto=auto, timeout=timeout, budget=budget)
    from IPython.display import display

    display(inspector)  # type: ignore[no-untyped-call]  # IPython: untyped
    inspector._mark_shown()
    return inspector
