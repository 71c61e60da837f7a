"""What the client and the PEs agree on; shared by both sides, imports nothing else but the stages' registry.

The client talks to PEs in one direction per call: it sends a request, an operation
named in :class:`Op` with plain arguments (:func:`encode`, checked on the client), and each
PE answers it with plain data (dicts, tuples, NumPy arrays; :func:`answer`). No client
object travels to a PE and back. Requests asked on their own and those riding with a cell
have the same form.

Cells take a route of their own (:mod:`shmem_notebook.cells.channel` on the client,
:mod:`shmem_notebook.engine.cell_receiver` on the PEs): JSON messages signed with a key only
the client and its PEs know (:func:`seal`, :func:`unseal`); the requests a cell's stages
make before and after it ride with it, and the PEs' answers come back pickled in the
final message's signed attachment.
"""

from __future__ import annotations

import enum
import os
from typing import TYPE_CHECKING, Any

from . import stage_registry

if TYPE_CHECKING:
    from collections.abc import Callable, Sequence
    from typing import TypeAlias

    Request: TypeAlias = tuple[str, tuple[Any, ...]]

__all__ = [
    "ENGINE_MODULE",
    "FORKSERVER_MODULE",
    "GLOBAL_EXIT_MARK",
    "RACE_MODULE",
    "RACE_ENV",
    "SPARE_ENV",
    "SPARE_GO",
    "RACE_LINES",
    "PE_LINE",
    "PE_DONE",
    "Op",
    "REQUESTS",
    "COLLECTIVE",
    "blocked_call_paths",
    "encode",
    "answer",
    "serve",
    "stack_path",
    "trace_spool_path",
    "board_path",
    "BOARD_STRIDE",
    "exit_path",
    "seal",
    "unseal",
]

#: the module ``oshrun`` runs on every PE (``python -m shmem_notebook.engine``)
ENGINE_MODULE = "shmem_notebook.engine"
#: the job's fork server (job.forks); a PE forked from it shows this command line too
FORKSERVER_MODULE = "shmem_notebook.engine.forkserver"

#: written to fd 2 by a PE right before ``shmem.global_exit(status)``
GLOBAL_EXIT_MARK = "shmem_notebook: PE {pe} called shmem.global_exit({status})"

#: what ``python -m shmem_notebook.race`` runs on every PE in place of ``python FILE``
RACE_MODULE = "shmem_notebook.engine.record.script"
#: the runner tells its PEs through these environment variables: the directory each PE writes its
#: recording to, ``SEED:MAX_DELAY`` of a stress rerun (delays only, nothing recorded), the event cap,
#: (``label``) that each PE marks the lines it prints with :data:`PE_LINE` for the runner to fold, and
#: (``memory``, JSON) the symmetric memory a stress rerun reports at its end: the raced arrays'
RACE_ENV = {
    "dir": "SHMEM_NOTEBOOK_RACE_DIR",
    "stress": "SHMEM_NOTEBOOK_RACE_STRESS",
    "cap": "SHMEM_NOTEBOOK_RACE_CAP",
    "label": "SHMEM_NOTEBOOK_RACE_LABEL",
    "trace": "SHMEM_NOTEBOOK_RACE_TRACE",
    "memory": "SHMEM_NOTEBOOK_RACE_MEMORY",
}
#: a spare PE's lock file (job/spare.py): the PE waits for its shared lock, then starts if the file
#: says :data:`SPARE_GO` (the client took the spare set) and exits otherwise (the client is gone)
SPARE_ENV = "SHMEM_NOTEBOOK_SPARE"
SPARE_GO = b"go"
#: a line PE ``pe`` of ``npes`` printed, as it reaches the runner; then PE_DONE: that PE prints no more
PE_LINE = "[shmem-race PE {pe}/{npes}] {text}"
PE_DONE = "[shmem-race PE {pe}/{npes} done]"
#: a program's recorded line: the file's number (from 1, per PE) * RACE_LINES + the line in that file
RACE_LINES = 1_000_000


class Op(enum.StrEnum):
    """The requests every PE answers (:mod:`shmem_notebook.engine.requests` maps each to its function);
    the stages add theirs (:mod:`shmem_notebook.stage_registry`)."""

    ALLOC = "alloc"
    FREE = "free"
    GATHER = "gather"
    GATHER_INTO = "gather_into"
    PULL = "pull"
    HEAP_USAGE = "heap_usage"
    INFO = "info"
    CELLS_CONNECT = "cells_connect"
    SNAPSHOT = "snapshot"
    JOIN = "join"
    POKE = "poke"
    RELEASED = "released"


#: every request a PE answers: :class:`Op`'s, then the stages'
REQUESTS: tuple[str, ...] = (*Op, *stage_registry.requests())
#: the requests that are collective on the PEs: every PE must be asked; the rest are local to a PE
COLLECTIVE: frozenset[str] = frozenset({Op.ALLOC, Op.FREE, Op.JOIN, Op.RELEASED}) | stage_registry.collective()


def encode(op: str, *args: Any) -> Request:
    """The request ``op(*args)`` as both routes carry it: ``(name, args)``. A name that is not in
    :data:`REQUESTS` raises :class:`ValueError` (one sentence) before anything is sent."""
    if op not in REQUESTS:
        raise ValueError(f"no PE answers a request named {op!r}; the requests are: {', '.join(REQUESTS)}")
    return (str(op), tuple(args))


#: the PE's request handler, registered by :func:`serve` when the PE starts (None in the client)
_handler: Callable[[Request], Any] | None = None


def serve(handler: Callable[[Request], Any]) -> None:
    """Runs on a PE at start: answer every request with ``handler`` (:func:`shmem_notebook.engine.requests.handle`)."""
    global _handler
    _handler = handler


def answer(request: Request) -> Any:
    """Runs on a PE: answer the ``request`` from :func:`encode` with the handler :func:`serve` registered."""
    if _handler is None:
        raise RuntimeError("this process answers no requests: only a PE that shmem_notebook started does")
    return _handler(request)


def stack_path(profile_dir: str, cluster_id: str, pe: int) -> str:
    """Where PE ``pe`` writes its stacks on SIGUSR1 (on its own host)."""
    return os.path.join(profile_dir, "log", f"shmem-{cluster_id}-pe{pe}.stacks")


def crash_path(profile_dir: str, cluster_id: str, pe: int) -> str:
    """Where PE ``pe`` writes its stacks when a signal kills it (SIGSEGV, SIGBUS, SIGFPE, SIGABRT, SIGILL; on its
    own host)."""
    return os.path.join(profile_dir, "log", f"shmem-{cluster_id}-pe{pe}.crash")


def blocked_call_paths(profile_dir: str, cluster_id: str, pe: int) -> tuple[str, str]:
    """The FIFO the client writes to, to ask PE ``pe`` which call it is blocked in, and the file the
    PE answers in (on its own host; :mod:`shmem_notebook.engine.shims.blocked_call`)."""
    base = os.path.join(profile_dir, "log", f"shmem-{cluster_id}-pe{pe}")
    return base + ".ask", base + ".call"


def trace_spool_path(profile_dir: str, cluster_id: str, pe: int) -> str:
    """Where PE ``pe`` spools its ``--trace`` recording while a cell runs (on its own host), for
    the client to read should the PE never finish the cell."""
    return os.path.join(profile_dir, "log", f"shmem-{cluster_id}-pe{pe}.trace")


#: int64s from one PE's entry on the wait board to the next: one cache line each (PEs that write
#: neighbouring words at once, as in a barrier, would pass one line back and forth: +0.25 us a call)
BOARD_STRIDE = 8


def board_path(profile_dir: str, cluster_id: str) -> str:
    """The job's wait board on each host: per PE (every :data:`BOARD_STRIDE` int64), the
    ``time.monotonic_ns()`` at which the PE entered a blocking call, 0 outside one (see
    :mod:`shmem_notebook.job.governor`)."""
    return os.path.join(profile_dir, "log", f"shmem-{cluster_id}-board")


def exit_path(profile_dir: str, cluster_id: str, pe: int) -> str:
    """Where PE ``pe`` notes the status it passes to ``shmem.global_exit`` (on its own host):
    oshrun's output can lose the PE's last stderr line when the job ends."""
    return os.path.join(profile_dir, "log", f"shmem-{cluster_id}-pe{pe}.exit")


def seal(key: bytes, message: dict[str, Any], attachment: object = None) -> list[bytes]:
    """``message`` (plain JSON data) as the frames of the cell channel: signature, body and, when
    ``attachment`` is given, that object pickled (answers with tuples and NumPy data), signed too."""
    import json
    import pickle

    frames = [json.dumps(message, default=_plain).encode()]
    if attachment is not None:
        frames.append(pickle.dumps(attachment, protocol=pickle.HIGHEST_PROTOCOL))
    return [_signature(key, frames), *frames]


def unseal(key: bytes, frames: Sequence[bytes]) -> dict[str, Any] | None:
    """The message in the frames from :func:`seal` (its attachment under ``"attachment"``), or
    None when the signature is wrong: nothing unsigned is unpickled."""
    import hmac
    import json
    import pickle

    if len(frames) not in (2, 3):
        return None
    if not hmac.compare_digest(_signature(key, frames[1:]), frames[0]):
        return None
    message: dict[str, Any] = json.loads(frames[1])
    if len(frames) == 3:
        message["attachment"] = pickle.loads(frames[2])
    return message


def _signature(key: bytes, frames: Sequence[bytes]) -> bytes:
    """HMAC-SHA256 of the frames, each prefixed by its length (frames cannot be cut elsewhere)."""
    import hashlib
    import hmac

    signer = hmac.new(key, digestmod=hashlib.sha256)
    for frame in frames:
        signer.update(len(frame).to_bytes(8, "little"))
        signer.update(frame)
    return signer.digest()


def _plain(obj: object) -> str:
    """What JSON cannot hold as is (dates in display metadata, NumPy scalars): as text."""
    return str(obj)
