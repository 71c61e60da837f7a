"""Blocking calls noted on the job's wait board, so that long waits can sleep (PE side).

OpenSHMEM libraries poll while a PE waits for others: Open MPI's OSHMEM over UCX and Sandia
OpenSHMEM over libfabric keep a core busy for as long as a barrier or a ``wait_until`` lasts.
:func:`install` wraps the calls that wait for other PEs (:data:`NOTED`: synchronisations, waits,
locks, and collectives on at most :data:`SMALL` bytes, which wait far longer than they copy) so that
each writes ``time.monotonic_ns()`` into this PE's slot of the wait board (a small file on this host,
:func:`shmem_notebook.protocol.board_path`) on entry and 0 on return; the client's governor
(:mod:`shmem_notebook.job.governor`) lets PEs that have waited long run only a little. A call costs
one clock read and two stores more: for ``barrier_all`` and ``sync_all`` done in C where it is built
(:mod:`shmem_notebook.native_board`: about 0.03 us), else a Python wrapper (0.15 us); 0.2 us for the
others. Nothing happens when the board cannot be made or ``SHMEM_NOTEBOOK_POLITE_MS=0`` is in the
PEs' environment.
"""

from __future__ import annotations

import functools
import mmap
import os
import time
import types
from typing import TYPE_CHECKING, Any

from ... import native_board
from ...operations import CALLS
from ...protocol import BOARD_STRIDE, board_path
from .patches import Patches

__all__ = ["NOTED", "SMALL", "install"]

if TYPE_CHECKING:
    from collections.abc import Callable

#: shmem4py functions that wait for other PEs (collectives only when their target is small)
NOTED: tuple[str, ...] = tuple(
    name
    for name, op in CALLS.items()
    if name in ("barrier_all", "sync_all", "sync", "set_lock")
    or op.kind == "coll"
    or (op.kind == "wait" and name.startswith(("wait", "signal_wait")))
)
#: a collective's target of more bytes than this moves data long enough to keep it running at full speed
SMALL = 1 << 20


def _open(path: str, npes: int) -> mmap.mmap:
    """This host's board, mapped: ``npes`` entries (created by the first PE to come)."""
    size = 8 * BOARD_STRIDE * npes
    fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o600)
    try:
        if os.fstat(fd).st_size < size:
            os.ftruncate(fd, size)
        return mmap.mmap(fd, size)
    finally:
        os.close(fd)


def install(shmem: Any) -> Callable[[], None]:
    """Note every call of :data:`NOTED` (and ``Team.sync``) on the board; return the undo."""
    profile, cluster = os.environ.get("IPP_PROFILE_DIR"), os.environ.get("IPP_CLUSTER_ID")
    if not profile or not cluster or os.environ.get("SHMEM_NOTEBOOK_POLITE_MS", "").strip() == "0":
        return lambda: None  # not under a notebook's job (an exported program), or switched off
    try:
        pages = _open(board_path(profile, cluster), shmem.n_pes())
    except OSError:
        return lambda: None
    board, me, clock = memoryview(pages).cast("q"), shmem.my_pe() * BOARD_STRIDE, time.monotonic_ns
    board[me] = 0

    def noted(original: Callable[..., Any], small_only: bool = False) -> Callable[..., Any]:
        @functools.wraps(original)
        def waiting(*args: Any, **kwargs: Any) -> Any:
            # not inside a noted call already, nor a large collective
            noting = not board[me] and not (
                small_only and getattr(args[0] if args else kwargs.get("target"), "nbytes", 0) > SMALL
            )
            if noting:
                board[me] = clock()
            try:
                return original(*args, **kwargs)
            except BaseException:
                # a traceback keeps this frame: not the call's symmetric objects, whose release
                # (a signal's shmem_free) is collective and must happen on every PE alike
                del args, kwargs
                raise
            finally:
                if noting:
                    board[me] = 0

        return waiting

    def noted_bare(original: Callable[[], Any]) -> Callable[[], Any]:
        """barrier_all and sync_all take nothing: the leanest wrapper. It calls shmem4py's function,
        whose frame in a stack dump tells the client which call a PE waits in (cells/stranded)."""

        @functools.wraps(original)
        def waiting() -> Any:  # never inside another noted call: no check (0.03 us)
            board[me] = clock()
            try:
                return original()
            finally:
                board[me] = 0

        return waiting

    native = _native(shmem, pages, me)
    patches = Patches()
    for name in NOTED:
        original = getattr(shmem, name, None)
        if original is not None and name in ("barrier_all", "sync_all"):
            patches.set(shmem, name, native.get(name) or noted_bare(original))
        elif original is not None:
            patches.set(shmem, name, noted(original, small_only=CALLS[name].kind == "coll"))
    patches.set(shmem.Team, "sync", noted(shmem.Team.sync))

    def undo() -> None:
        patches.undo()
        if native:
            native["release"]()
        board.release()
        pages.close()

    return undo


def _native(shmem: Any, pages: mmap.mmap, me: int) -> dict[str, Callable[..., Any]]:
    """``{name: function}`` for barrier_all and sync_all noted in C, and ``release`` (the board is no
    longer written, even by a function a cell kept); empty where the C module is not built."""
    module = native_board.load()
    functions: dict[str, Any] = {name: getattr(shmem, name, None) for name in ("barrier_all", "sync_all")}
    # shmem4py's own functions, each one call of lib.shmem_<name>(): run the same code with our lib
    if module is None or not all(
        isinstance(f, types.FunctionType) and f.__code__.co_names == ("lib", f"shmem_{name}")
        for name, f in functions.items()
    ):
        return {}
    theirs, ours = functions["barrier_all"].__globals__["lib"], module.lib

    def pointer(name: str) -> Any:
        address = int(shmem.ffi.cast("uintptr_t", shmem.ffi.addressof(theirs, name)))
        return module.ffi.cast("void (*)(void)", address)

    slots = module.ffi.from_buffer(pages)
    ours.noted_init(module.ffi.cast("int64_t *", slots) + me, pointer("shmem_barrier_all"), pointer("shmem_sync_all"))
    lib = types.SimpleNamespace(shmem_barrier_all=ours.noted_barrier_all, shmem_sync_all=ours.noted_sync_all)
    noted: dict[str, Callable[..., Any]] = {}
    for name, original in functions.items():
        noted[name] = functools.update_wrapper(
            types.FunctionType(original.__code__, {"lib": lib, "__builtins__": __builtins__}, name), original
        )

    def release() -> None:
        ours.noted_init(module.ffi.NULL, pointer("shmem_barrier_all"), pointer("shmem_sync_all"))
        module.ffi.release(slots)

    noted["release"] = release
    return noted
