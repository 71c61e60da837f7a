"""The requests a PE answers, by name: those of :class:`shmem_notebook.protocol.Op` and the stages' (PE side).

:func:`shmem_notebook.protocol.answer` runs :func:`handle` on each PE, for a request asked
on its own and for one riding with a cell alike; the answer is plain data. Those in
:data:`shmem_notebook.protocol.COLLECTIVE` must reach every PE. Each stage's requests are answered by
its PE module's ``HANDLERS`` (:mod:`shmem_notebook.stage_registry`), loaded here at the PE's start.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

from ..protocol import Op, serve
from ..stage_registry import DECLARED
from . import cell_receiver, heap, heap_summary, runtime

__all__ = ["HANDLERS", "handle", "start"]

if TYPE_CHECKING:
    from collections.abc import Callable

#: Op -> function; the stages' requests are added below
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
    Op.JOIN: runtime.join,
    Op.POKE: runtime.poke,
    Op.RELEASED: runtime.released,
}


def _stage_handlers() -> dict[str, Callable[..., Any]]:
    """Each stage's requests -> their functions, from its PE module's ``HANDLERS``."""
    found: dict[str, Callable[..., Any]] = {}
    for stage in DECLARED.values():
        handlers = importlib.import_module(stage.pe).HANDLERS
        found.update({name: handlers[name] for name in stage.requests})
    return found


HANDLERS.update(_stage_handlers())


def handle(request: tuple[str, tuple[Any, ...]]) -> Any:
    """Answer the ``request`` ``(name, args)`` of :func:`shmem_notebook.protocol.encode` with plain data."""
    op, args = request
    return HANDLERS[op](*args)


def start(shell: Any) -> None:
    """The engine's start-up command on a PE: bind the runtime to ``shell``, then answer requests."""
    runtime.bind(shell)
    serve(handle)
