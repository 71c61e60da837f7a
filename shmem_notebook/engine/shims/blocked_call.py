"""Which OpenSHMEM call this PE is blocked in, and with what, told from a thread (PE side).

A PE blocked in a wait or a collective runs no Python on its main thread, so it can answer no
request. shmem4py's C calls release the GIL, so a thread of the PE can look at the main thread's
frames meanwhile: :func:`install` starts one that sleeps on a FIFO
(:func:`shmem_notebook.protocol.blocked_call_paths`) and, each time the client writes to it,
writes what the main thread waits in: the call's name and its arguments as the cell passed them
to the wait board's wrapper (:mod:`.board`, the outermost one), symmetric arrays given by
allocation and offset (so another PE finds its own copy) with their bytes now. The client uses it
to release PEs blocked after an interrupt (:mod:`shmem_notebook.cells.unblock`): the PEs that
ended the cell make the same collective, or put the value a wait waits for. Costs nothing while
nobody asks: the thread sleeps in ``open()``.
"""

from __future__ import annotations

import contextlib
import json
import os
import stat
import sys
import threading
from typing import TYPE_CHECKING, Any, cast

import numpy as np

from ...protocol import blocked_call_paths
from .. import heap
from . import board

__all__ = ["install", "describe", "decode", "symmetric_view"]

if TYPE_CHECKING:
    from collections.abc import Callable, Sequence
    from types import FrameType

    import numpy.typing as npt

#: enums of shmem4py an argument may be (sent by name and value)
ENUMS = ("CMP", "OP", "SIGNAL")
#: bytes of a symmetric argument whose contents are sent along (a wait's flag, to restore it)
SMALL = 4096


def install(shmem: Any, profile_dir: str, cluster_id: str) -> Callable[[], None]:
    """Start the thread that tells the client what this PE is blocked in; return the undo."""
    ask, reply = blocked_call_paths(profile_dir, cluster_id, shmem.my_pe())
    with contextlib.suppress(FileNotFoundError):
        os.remove(ask)
    try:
        os.mkfifo(ask, 0o600)
    except OSError:
        return lambda: None
    main = cast("int", threading.main_thread().ident)
    stopping = threading.Event()

    def serve() -> None:
        while not stopping.is_set():
            try:
                with open(ask, "rb") as f:  # sleeps until the client opens it
                    f.read()
            except OSError:
                return
            if stopping.is_set():
                return
            frame = sys._current_frames().get(main)
            text = json.dumps(describe(shmem, frame))
            with contextlib.suppress(OSError):
                with open(reply + ".tmp", "w") as f:
                    f.write(text)
                os.replace(reply + ".tmp", reply)

    thread = threading.Thread(target=serve, name="shmem_notebook-blocked-call", daemon=True)
    thread.start()

    def undo() -> None:
        stopping.set()
        with contextlib.suppress(OSError):  # wake the thread: it sees stopping and ends
            fd = os.open(ask, os.O_WRONLY | os.O_NONBLOCK)
            os.close(fd)
        thread.join(1.0)
        for path in (ask, reply):
            with contextlib.suppress(OSError):
                if path != ask or stat.S_ISFIFO(os.stat(path).st_mode):
                    os.remove(path)

    return undo


def describe(shmem: Any, frame: FrameType | None) -> dict[str, Any]:
    """``{"call": name, "args": [...], "kwargs": {...}}`` for the board-noted call ``frame`` (the main
    thread's innermost frame) is inside, its arguments encoded (:func:`_encode`); ``{"call": None}`` when
    it is in none, ``"args": None`` when an argument cannot be told to another PE."""
    while frame is not None:
        code = frame.f_code
        if code.co_name == "waiting" and code.co_filename == board.__file__:
            f_locals = frame.f_locals
            original = f_locals.get("original")
            args, kwargs = f_locals.get("args", ()), f_locals.get("kwargs", {})
            name = _attribute(shmem, original)
            try:
                return {
                    "call": name,
                    "args": [_encode(shmem, a) for a in args],
                    "kwargs": {k: _encode(shmem, v) for k, v in kwargs.items()},
                }
            except ValueError:
                return {"call": name, "args": None, "kwargs": None}
        frame = frame.f_back
    return {"call": None}


def _attribute(shmem: Any, original: object) -> str | None:
    """The name of shmem4py's attribute whose board wrapper calls ``original`` (a shim's function may
    have a name of its own), found along the ``__wrapped__`` chains of :data:`.board.NOTED`."""
    for name in (*board.NOTED, "barrier_all", "sync_all"):
        function = getattr(shmem, name, None)
        for _ in range(8):
            if function is None:
                break
            if getattr(function, "__wrapped__", None) is original:
                return name
            function = getattr(function, "__wrapped__", None)
    return getattr(original, "__name__", None)


def _encode(shmem: Any, value: Any) -> object:
    """An argument as plain data another PE can :func:`decode`; ValueError for one it cannot."""
    if value is None or isinstance(value, (bool, int, float, str)) and not hasattr(value, "_name_"):
        return value
    for name in ENUMS:
        if isinstance(value, getattr(shmem, name, ())):
            return {"enum": name, "name": value.name}  # type: ignore[union-attr]  # one of shmem4py's enums
    if isinstance(value, shmem.Team):
        if value.ob_team == shmem.TEAM_WORLD.ob_team:
            return {"team": "world"}
        raise ValueError("a team other than the world")
    if isinstance(value, (list, tuple)):
        return {"list": [_encode(shmem, v) for v in value]}
    if isinstance(value, np.generic):
        return {"scalar": value.dtype.str, "value": value.item()}
    if isinstance(value, np.ndarray):
        start = value.__array_interface__["data"][0]
        for k, (lo, n) in enumerate(heap.allocations()):
            if lo <= start and start + value.nbytes <= lo + n:
                entry = {"sym": [k, start - lo, value.dtype.str, list(value.shape), list(value.strides)], "at": start}
                if value.nbytes <= SMALL:
                    entry["now"] = np.ascontiguousarray(value).tobytes().hex()
                return entry
        if value.nbytes <= SMALL:  # a private source (a value to compare with, say)
            return {"private": value.dtype.str, "shape": list(value.shape), "bytes": value.tobytes().hex()}
    raise ValueError(f"an argument of type {type(value).__name__}")


def decode(shmem: Any, value: Any) -> Any:
    """The argument :func:`_encode` wrote, on this PE: symmetric arrays are this PE's own copies."""
    if not isinstance(value, dict):
        return value
    if "enum" in value:
        return getattr(shmem, value["enum"])[value["name"]]
    if "list" in value:
        return [decode(shmem, v) for v in value["list"]]
    if "team" in value:
        return shmem.TEAM_WORLD
    if "scalar" in value:
        return np.dtype(value["scalar"]).type(value["value"])
    if "private" in value:
        return np.frombuffer(bytes.fromhex(value["bytes"]), value["private"]).reshape(value["shape"]).copy()
    return symmetric_view(shmem, value["sym"])


def symmetric_view(shmem: Any, sym: Sequence[Any]) -> npt.NDArray[Any]:
    """This PE's array at ``sym`` (``[allocation, offset, dtype, shape, strides]``, from :func:`_encode`)."""
    k, offset, dtype, shape, strides = sym
    lo, n = heap.allocations()[k]
    buffer = shmem.ffi.buffer(shmem.ffi.cast("char *", lo), n)
    return np.ndarray(shape, dtype, buffer=buffer, offset=offset, strides=strides)
