"""What a traced cell did (client side): events in happens-before order, the heap per epoch,
and the replay's frames. Built from what each PE's trace sent (``engine/record/trace_log.py``).

``Trace.events``: every recorded call of every PE, ordered by (epoch, time):
epochs are separated by world barriers, and within an epoch a put is followed
on the receiver by the wait that sees it, later on the same host's clock, so
the order is consistent with happens-before (on one host; across hosts the
clocks are only as good as their synchronisation).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import numpy as np

from ..analysis.model import READS  # gets: data flows to the caller
from ..operations import COLLECTIVES, TRANSFERS
from ..words import plural
from .ends import said

__all__ = ["Trace", "TRANSFERS", "PROFILE_CHART"]

if TYPE_CHECKING:
    import os
    from collections.abc import Callable, Iterable, Mapping

    import numpy.typing as npt
    from matplotlib.figure import Figure, SubFigure

    from ..analysis.happens_before import Race
    from .waits import Waits

#: the plain-text form of the chart :meth:`Trace.profile` shows (what a terminal prints for it)
PROFILE_CHART = "<chart: where each PE waited in the traced cell>"


class Trace:
    """A traced cell: ``events``, ``epochs`` (heap states recorded), :meth:`heap`, :meth:`frames`,
    :meth:`save` (Perfetto JSON, OTF2), :meth:`waits`, :meth:`timeline`, :meth:`profile`. The replay
    widget is the inspector's: ``shmem_notebook.replay(trace)``.

    ``npes``: the job's PEs (a PE that sent nothing gets an empty lane); ``meta``: what the exports
    name (``job``, ``library``, ``cell``); ``ends``: ``{pe: sentence}`` where a cut-short PE's trace
    ends (:attr:`cut`); ``where(line)``: how a line is named (``line 7``, ``prog.py:7``)."""

    def __init__(
        self,
        per_pe: list[dict[str, Any]],
        code: str = "",
        npes: int | None = None,
        meta: Mapping[str, Any] | None = None,
        ends: Mapping[int, str] | None = None,
        where: Callable[[Any], str] | None = None,
    ) -> None:
        self.code = code
        self.npes = max([len(per_pe), npes or 0] + [p["pe"] + 1 for p in per_pe if p.get("pe") is not None])
        self.dropped = sum(p.get("dropped", 0) for p in per_pe)
        self.events: list[dict[str, Any]] = sorted(
            (e for p in per_pe for e in p["events"]), key=lambda e: (e["epoch"], e["t"], e["pe"])
        )
        self.pe_info: dict[int, dict[str, Any]] = {
            p["pe"]: {k: p.get(k) for k in ("host", "pid", "started", "stopped", "dropped", "cpu")}
            for p in per_pe
            if p.get("pe") is not None
        }
        self._snapshots: list[list[dict[str, Any]]] = [
            p["snapshots"] for p in sorted(per_pe, key=lambda p: p.get("pe") or 0)
        ]
        #: heap states recorded on every PE: the start, after each world barrier, the end
        self.epochs = min((len(s) for s in self._snapshots), default=0)
        self.meta: dict[str, Any] = dict(meta or {})
        self.ends: dict[int, str] = dict(ends or {})
        for pe in range(self.npes):
            if pe not in self.pe_info:
                self.ends.setdefault(pe, f"PE {pe} sent no trace")
        self.where: Callable[[Any], str] = where or (lambda line: f"line {line}")
        self.races: list[Race] = []  # the races of the cell when it was race-checked too: the exports draw them
        self._frames: list[dict[str, Any]] | None = None

    def __repr__(self) -> str:
        cut = f", cut short: {said(self.ends)}" if self.cut else ""
        return (
            f"<Trace: {plural(len(self.events), 'event')} on {plural(self.npes, 'PE')}, "
            f"{plural(self.epochs, 'heap state')}, {plural(len(self.frames()), 'step')}{cut}>"
        )

    @property
    def cut(self) -> bool:
        """True if the trace is cut short (a PE stopped early, sent nothing or reached the event cap)."""
        return bool(self.ends)

    def save(self, path: str | os.PathLike[str]) -> str:
        """Write the trace to ``path`` by its extension: ``.json`` (Chrome trace events: Perfetto,
        ui.perfetto.dev) or ``.otf2`` (an OTF2 archive: Vampir, Score-P tools); returns ``path``."""
        from .save import save

        return save(self, path)

    def waits(self) -> Waits:
        """Where each PE waited: a :class:`~shmem_notebook.trace.waits.Waits` (per PE, time per
        waiting call and line, time outside OpenSHMEM between, computing or sleeping; ``str()`` gives one
        sentence per PE)."""
        from .waits import Waits

        return Waits(self)

    def timeline(self, fig: Figure | None = None) -> Figure | SubFigure:
        """The calls as a timeline (a matplotlib Figure): a lane per PE, a box per call, an arrow per transfer."""
        from .drawing import draw_timeline

        return draw_timeline(self, fig=fig)

    def profile(self, fig: Figure | None = None, show: bool = False) -> Figure:
        """A per-PE bar chart of :meth:`waits` (a matplotlib Figure); ``show``: also display it under
        the running cell (in IPython)."""
        from ..analysis.figures import show_png
        from .drawing import draw_waits

        figure = draw_waits(self.waits(), fig=fig)
        if show:
            show_png(figure, PROFILE_CHART)
        return figure

    def heap(self, epoch: int) -> dict[str, Any]:
        """``{name: ndarray of shape (npes, *shape)}`` of the heap at ``epoch`` (0 = the cell's
        start, k = after the k-th world barrier, ``epochs - 1`` = the end); arrays too large to
        send exactly come as ``{name: [summary per PE]}``."""
        if not -self.epochs <= epoch < self.epochs:
            raise IndexError(
                f"epoch {epoch} out of range: this trace has {self.epochs} heap states (0..{self.epochs - 1})"
            )
        states = [s[epoch] for s in self._snapshots]
        names = set(states[0]).intersection(*states[1:]) if states else set()
        out: dict[str, Any] = {}
        for name in sorted(names):
            values = [state[name] for state in states]
            if all(isinstance(v, np.ndarray) for v in values) and len({v.shape for v in values}) == 1:
                if len(values) < self.npes:  # PEs that sent no trace: rows of zeros (their `ends` says so)
                    values = self._fill(values, np.zeros_like(values[0]))
                out[name] = np.stack(values)
            else:
                out[name] = [v if isinstance(v, dict) else {"shape": list(np.shape(v))} for v in values]
        return out

    def _fill(self, values: Iterable[Any], blank: Any) -> list[Any]:
        """``values`` of the PEs that sent a trace, with ``blank`` for those that did not, in PE order."""
        sent = iter(values)
        return [next(sent) if pe in self.pe_info else blank for pe in range(self.npes)]

    def frames(self) -> list[dict[str, Any]]:
        """The replay's steps: ``[{"title", "epoch", "transfers", "heap"}]``. A teaching
        collective's step is one frame; other transfers make one frame per epoch; ``heap`` is the
        epoch's heap with the puts of the frames so far applied (when their values were sent)."""
        if self._frames is not None:
            return self._frames
        frames: list[dict[str, Any]]
        key_of: dict[tuple[Any, ...], int]
        own: list[dict[str, Any]]
        key: tuple[Any, ...]
        frames, key_of, own = [], {}, []
        for event in self.events:
            if event["op"] in TRANSFERS and event["target"] == event["pe"] and not event.get("label"):
                own.append(event)  # a PE writing its own result: applied with the next step, not drawn
                continue
            if event["op"] not in TRANSFERS and event["op"] not in COLLECTIVES:
                continue
            label = event.get("label")
            if label:
                key = ("step", event["epoch"], label["collective"], label["algorithm"], label["call"], label["step"])
                title = f"{label['collective']} ({label['algorithm'].replace('_', ' ')}): {label['text']}"
            elif event["op"] in TRANSFERS:
                key = ("epoch", event["epoch"])
                title = f"epoch {event['epoch']}: one-sided transfers between barriers"
            else:
                key = ("library", event["epoch"], event["op"])
                title = f"{event['op']} (the library's own collective)"
            if key not in key_of:
                key_of[key] = len(frames)
                frames.append({"title": title, "epoch": event["epoch"], "transfers": [], "label": label})
            if event["op"] in TRANSFERS:
                frames[key_of[key]]["transfers"] += own + [event]
                own = []
        if own and frames:
            frames[-1]["transfers"] += own
        self._apply(frames)
        self._frames = frames
        return frames

    def _apply(self, frames: list[dict[str, Any]]) -> None:
        state: dict[str, npt.NDArray[Any]]
        state, epoch = None, None  # type: ignore[assignment]  # set by the first frame: its epoch is never None
        for frame in frames:
            if frame["epoch"] != epoch:
                epoch = frame["epoch"]
                heap = self.heap(min(epoch, self.epochs - 1)) if self.epochs else {}
                state = {k: v.copy() for k, v in heap.items() if isinstance(v, np.ndarray)}
            for e in frame["transfers"]:
                if e["op"] in READS or e.get("values") is None or e["array"] not in state:
                    continue
                start, stop, step = e["indices"]
                flat = state[e["array"]][e["target"]].reshape(-1)
                flat[start:stop:step] = np.asarray(e["values"], dtype=flat.dtype)[: len(flat[start:stop:step])]
            frame["heap"] = {k: v.copy() for k, v in state.items()}

    @staticmethod
    def arrow(event: dict[str, Any]) -> tuple[int, int, str]:
        """(from PE, to PE, text) of a transfer event: data flows to the PE that receives it."""
        start, stop, step = event["indices"] or (0, 0, 1)
        if event["array"] == "(scratch)":  # the teaching collectives' own buffer: its offsets mean nothing to a reader
            count = max(1, -(-(stop - start) // step))
            where = f"{plural(count, 'element')} (work buffer)"
        elif stop - start <= step:
            where = f"{event['array']}[{start}]"
        else:
            where = f"{event['array']}[{start}:{stop}{':' + str(step) if step != 1 else ''}]"
        if event["op"] in READS:
            return event["target"], event["pe"], f"get {where}"
        return event["pe"], event["target"], f"{event['op']} {where}"
