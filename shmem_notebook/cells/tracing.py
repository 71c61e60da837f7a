"""The ``trace`` stage: ``job.run(code, trace=True)`` / ``%%pxshmem --trace`` (client side).

Right before the cell every PE starts its trace (``engine/record/trace.py``, request
``trace_start``); right after it, the PEs send their events and heap snapshots
(``trace_stop``, both riding with the cell) and ``result.trace`` becomes an
:class:`~shmem_notebook.analysis.trace.Trace`. A cell that died or hung has no
trace (the PEs cannot answer).
"""

from ..analysis.trace import Trace
from ..words import plural
from .stages import Stage, register

__all__ = ["TraceStage"]


@register
class TraceStage(Stage):
    """Record every RMA, AMO, sync and collective call of the cell on every PE."""

    name = "trace"

    def before(self, cell):
        cell.before_requests.append(("trace_start", ()))
        cell.after_requests.append("trace_stop")

    def after(self, cell, result):
        if result.outcome in ("ok", "error"):
            answers = cell.request.answers("trace_stop")
            if len(answers) == cell.job.n:
                result.trace = Trace(list(answers.values()), cell.code)

    def report(self, cell, result, write):
        trace = result.trace
        if trace is None:
            write("trace: none (the PEs did not finish the cell)\n")
            return
        dropped = f" ({trace.dropped} more not kept)" if trace.dropped else ""
        write(f"trace: {plural(len(trace.events), 'event')}{dropped} on {plural(trace.npes, 'PE')}, "
              f"{plural(trace.epochs, 'heap state')}, {plural(len(trace.frames()), 'step')}; replay with `%shmem replay` or result.trace.replay()\n")
