"""The ``trace`` stage: ``job.run(code, trace=True)`` / ``%%pxshmem --trace`` (client side).

Right before the cell every PE starts its trace (``engine/record/trace_log.py``, request
``trace_start``); right after it, the PEs send their events and heap snapshots
(``trace_stop``, both riding with the cell) and ``result.trace`` becomes an
:class:`~shmem_notebook.analysis.trace.Trace`. A cell that raised, was interrupted or
timed out keeps what its PEs recorded, and the trace says where each PE's part ends
(``trace.ends``): a PE blocked for good in OpenSHMEM gives what it spooled, its lane ending in
the call it is in (:mod:`shmem_notebook.analysis.trace_spool`); a dead PE has an empty lane. ``trace="profile"``
(``%%pxshmem --trace=profile``) also shows where each PE waited, as sentences and a bar chart.
"""

from __future__ import annotations

import argparse
from typing import TYPE_CHECKING, Any, cast

from ..analysis.report import stops_of
from ..analysis.trace import Trace
from ..analysis.trace_ends import ends, said
from ..operations import CAP
from ..protocol import Op
from ..words import plural
from .stages import Stage, register
from .stranded import raised_line

if TYPE_CHECKING:
    from collections.abc import Callable

    from .path import Cell
    from .result import CellResult
    from .surface import SentCell

__all__ = ["TraceStage", "trace_mode", "collect"]


def trace_mode(text: str) -> bool | str:
    """``--trace`` (True) or ``--trace=profile`` (argparse ``type``)."""
    if text in ("on", "profile"):
        return True if text == "on" else text
    raise argparse.ArgumentTypeError(f"--trace takes no value or =profile, got {text!r}")


def collect(cell: Cell, request: SentCell, result: CellResult, what: str | None = None) -> Trace | None:
    """The :class:`Trace` the PEs sent with ``request`` (their ``trace_stop`` answers) for ``cell``'s code
    run as ``result``, or None when no PE sent one; ``what``: added to the cell's label in the metadata
    (e.g. the stress rerun it is)."""
    if result.outcome == "died":
        return None
    answers = request.answers(Op.TRACE_STOP)
    sent = {
        pe: data
        for pe, data in answers.items()
        if data is not None and data.get("pe") is not None and pe not in result.pending
    }
    job = cell.job
    blocked = [pe for pe in result.pending if pe not in sent]
    if blocked and hasattr(job, "spooled_traces"):  # their lanes up to the call they are in
        sent.update(job.spooled_traces(blocked))
        sent = dict(sorted(sent.items()))
    if not sent:
        return None
    from .race_stage import cell_label

    label = cell_label(job) + (f", {what}" if what else "")
    meta = {
        "job": f"{plural(job.n, 'PE')} on {job.library.name}",
        "library": job.library.name,
        "cell": label,
        "outcome": result.outcome,
    }
    stops = stops_of(result, cell.timeout, raised_line)
    cut = ends(sent, job.n, stops, cap=CAP)
    return Trace(list(sent.values()), cell.code, npes=job.n, meta=meta, ends=cut)


@register
class TraceStage(Stage):
    """Record every RMA, AMO, sync and collective call of the cell on every PE."""

    name = "trace"
    flag = {
        "nargs": "?",
        "type": trace_mode,
        "const": True,
        "default": False,
        "metavar": "profile",
        "help": "record the cell's calls for %%shmem replay and %%shmem trace; =profile: also show where "
        "each PE waited",
    }
    bare = "on"  # a bare --trace: the words after it are the cell's arrays

    def requests(self, cell: Cell) -> tuple[list[tuple[str, tuple[Any, ...]]], list[tuple[str, tuple[Any, ...]]]]:
        return [(Op.TRACE_START, ())], [(Op.TRACE_STOP, ())]

    def after(self, cell: Cell, result: CellResult) -> None:
        trace = collect(cell, cast("SentCell", cell.request), result)
        if trace is not None:
            trace.races = result.races  # the race stage's, if its after came first (the Perfetto export's arrows)
            result.trace = trace

    def report(self, cell: Cell, result: CellResult, write: Callable[[str], object]) -> None:
        trace = result.trace
        if trace is None:
            write("trace: none (no PE sent or spooled one)\n")
            return
        dropped = f" ({trace.dropped} more not kept)" if trace.dropped else ""
        write(
            f"trace: {plural(len(trace.events), 'event')}{dropped} on {plural(trace.npes, 'PE')}, "
            f"{plural(trace.epochs, 'heap state')}, {plural(len(trace.frames()), 'step')}; "
            "replay with `%shmem replay` or shmem_notebook.replay(result.trace)\n"
        )
        if trace.cut:
            write(f"trace: cut short, it ends where {said(trace.ends)}\n")
        if self.option == "profile":
            for sentence in trace.waits().sentences():
                write(f"trace: {sentence}\n")
            trace.profile(show=True)
