"""The requests a PE answers, by the names of :class:`shmem_notebook.protocol.Op` (PE side).

:func:`shmem_notebook.protocol.answer` runs :func:`handle` on each PE, for a request asked
on its own and for one riding with a cell alike; the answer is plain data. Those in
:data:`shmem_notebook.protocol.COLLECTIVE` must reach every PE.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from ..protocol import Op, serve
from . import cell_receiver, heap, heap_summary, record, runtime

__all__ = ["HANDLERS", "handle", "start"]

if TYPE_CHECKING:
    from collections.abc import Callable

#: Op -> function (race_*, trace_*, stress_* bracket a cell run with --race, --trace, --stress: engine/record)
HANDLERS: dict[str, Callable[..., Any]] = {
    Op.ALLOC: heap.alloc,
    Op.FREE: heap.free,
    Op.GATHER: heap.gather,
    Op.GATHER_INTO: heap.gather_into,
    Op.PULL: heap.pull,
    Op.HEAP_USAGE: heap.heap_usage,
    Op.INFO: runtime.info,
    Op.CELLS_CONNECT: cell_receiver.connect,
    Op.SNAPSHOT: heap_summary.snapshot,
    Op.RACE_START: record.race_start,
    Op.RACE_STOP: record.race_stop,
    Op.TRACE_START: record.trace_start,
    Op.TRACE_STOP: record.trace_stop,
    Op.STRESS_START: record.stress_start,
    Op.STRESS_STOP: record.stress_stop,
    Op.STRESS_SAVE: record.save_arrays,
    Op.STRESS_RESTORE: record.restore_arrays,
    Op.DECLARED_VALUES: record.declared_values,
    Op.JOIN: runtime.join,
    Op.POKE: runtime.poke,
    Op.RELEASED: runtime.released,
}


def handle(request: tuple[str, tuple[Any, ...]]) -> Any:
    """Answer the ``request`` ``(name, args)`` of :func:`shmem_notebook.protocol.encode` with plain data."""
    op, args = request
    return HANDLERS[op](*args)


def start(shell: Any) -> None:
    """The engine's start-up command on a PE: bind the runtime to ``shell``, then answer requests."""
    runtime.bind(shell)
    serve(handle)
