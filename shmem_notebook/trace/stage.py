"""The ``trace`` stage: ``job.run(code, trace=True)`` / ``%%pxshmem --trace`` (client side).

Right before the cell every PE starts its trace (``engine/record/trace_log.py``, request
``trace_start``); right after it, the PEs send their events and heap snapshots
(``trace_stop``, both riding with the cell) and ``result.trace`` becomes an
:class:`~shmem_notebook.trace.cell_trace.Trace`. A cell that raised, was interrupted or
timed out keeps what its PEs recorded, and the trace says where each PE's part ends
(``trace.ends``): a PE blocked for good in OpenSHMEM gives what it spooled, its lane ending in
the call it is in (:mod:`shmem_notebook.trace.spool`); a dead PE has an empty lane. ``trace="profile"``
(``%%pxshmem --trace=profile``) also shows where each PE waited, as sentences and a bar chart.
``%shmem trace save PATH`` writes the last traced cell for Perfetto or OTF2 tools; ``%shmem trace profile``
shows where each PE waited in it (:data:`COMMAND`).
"""

from __future__ import annotations

import argparse
from typing import TYPE_CHECKING, Any, cast

from ..analysis.report import stops_of
from ..cells.stages import Command, Stage, register
from ..cells.stranded import raised_line
from ..errors import InputError
from ..operations import CAP
from ..stage_registry import DECLARED
from ..words import plural
from .cell_trace import Trace
from .ends import ends, said

if TYPE_CHECKING:
    from collections.abc import Callable

    from ..cells.path import Cell
    from ..cells.result import CellResult
    from ..cells.surface import SentCell

__all__ = ["TraceStage", "COMMAND", "trace_mode", "collect"]

#: its requests (:mod:`shmem_notebook.stage_registry`)
TRACE_START, TRACE_STOP = DECLARED["trace"].requests


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
    answers = request.answers(TRACE_STOP)
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
    from ..cells.race_stage import cell_label

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


def _arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "action",
        choices=("save", "profile"),
        metavar="save|profile",
        help="save PATH: write the last traced cell as PATH.json (Perfetto) or PATH.otf2; profile: where "
        "each PE waited",
    )
    p.add_argument("path", nargs="?", default=None, metavar="PATH", help="the file save writes (*.json or *.otf2)")
    p.add_argument(
        "--stress",
        action="store_true",
        help="the trace of the last cell's first stress rerun (`%%%%pxshmem --race --stress --trace`)",
    )


def _run(job: Any, args: argparse.Namespace) -> None:
    """``%shmem trace save PATH`` / ``%shmem trace profile`` on the last cell of ``job``."""
    result = job.last_result
    trace = (
        None if result is None else getattr(result.stages.get("stress"), "trace", None) if args.stress else result.trace
    )
    if trace is None and args.stress:
        raise InputError(
            "%shmem trace --stress: the last cell's first stress rerun was not traced; run it with "
            "`%%pxshmem --race --stress --trace` first"
        )
    if trace is None:
        raise InputError("%shmem trace: the last cell was not traced; run it with `%%pxshmem --trace` first")
    if args.action == "profile":
        print(trace.waits())
        trace.profile(show=True)
        return
    if args.path is None:
        raise InputError("%shmem trace save: say where, e.g. `%shmem trace save run.json` (Perfetto) or run.otf2")
    try:
        path = trace.save(args.path)
    except InputError as exc:
        raise InputError(f"%shmem trace save: {exc}") from None
    opened = "open it in ui.perfetto.dev" if path.lower().endswith(".json") else "open it in Vampir"
    print(f"trace saved: {path} ({plural(len(trace.events), 'call')} on {plural(trace.npes, 'PE')}; {opened})")


#: ``%shmem trace``
COMMAND = Command(
    "Save the last --trace cell for Perfetto or OTF2 tools, or show where each PE waited in it.", _arguments, _run
)


@register
class TraceStage(Stage):
    """Record every RMA, AMO, sync and collective call of the cell on every PE."""

    name = "trace"
    export_note = "--trace: the recording for %shmem replay is the notebook's; left out"
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
    command = COMMAND

    def requests(self, cell: Cell) -> tuple[list[tuple[str, tuple[Any, ...]]], list[tuple[str, tuple[Any, ...]]]]:
        return [(TRACE_START, ())], [(TRACE_STOP, ())]

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
