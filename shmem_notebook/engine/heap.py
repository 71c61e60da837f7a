"""The PE's declared symmetric arrays, its heap use, and values sent back (PE side).

Declared arrays are the ones named on a ``%%pxshmem`` line or by
``job.alloc``; the runtime binds them into the cell namespace before every cell.
When a declared array is re-allocated or freed, other names still pointing into
its memory are retired (:func:`retire`): they become read-only private copies of
the old values, so a write through them fails loudly instead of landing in
whatever reuses that memory.
"""

from __future__ import annotations

import os
import pickle
from typing import TYPE_CHECKING, Any, cast

import numpy as np

from .context import this_pe

__all__ = [
    "reserve",
    "alloc",
    "free",
    "gather",
    "place",
    "pull",
    "heap_usage",
    "allocations",
    "is_symmetric",
    "retire",
    "FreedArray",
    "FreedArrayError",
]

if TYPE_CHECKING:
    from collections.abc import Iterable
    from typing import TypedDict

    import numpy.typing as npt
    from typing_extensions import Buffer

    class HeapChange(TypedDict):
        usage: tuple[int, int]
        retired: dict[str, list[str]]


_DEFAULT_HEAP = 256 << 20  # OSHMEM's default symmetric heap
_MISSING = object()


def reserve(array: npt.NDArray[Any], what: str) -> npt.NDArray[Any]:
    """Note ``array`` as the tool's own allocation (the inspector does not list it as the user's)."""
    this_pe.reserved[array.__array_interface__["data"][0]] = what
    return array


def heap_usage() -> tuple[int, int]:
    """Bytes of this PE's symmetric heap in use and its size: the one count of heap use (the
    tool's own reservations, ``this_pe.reserved``, are not counted)."""
    used = sum(n for address, n in allocations() if address not in this_pe.reserved)
    size = int(os.environ.get("SMA_SYMMETRIC_SIZE", _DEFAULT_HEAP))
    return used, size


def allocations() -> list[tuple[int, int]]:
    """Every live shmem4py allocation on this PE: sorted ``[(address, bytes), ...]``."""
    shmem = _shmem()
    return sorted((int(shmem.ffi.cast("uintptr_t", c)), shmem.ffi.sizeof(c)) for c in list(shmem._heap.values()))


def _shmem() -> Any:
    """shmem4py's ``shmem``, imported on first use: importing it calls ``shmem_init``, which only
    a running PE may do (this module's pure helpers are imported by tests and by other modules)."""
    from shmem4py import shmem

    return shmem


def _address(a: npt.NDArray[Any]) -> int:
    return cast("int", a.__array_interface__["data"][0])


def is_symmetric(obj: object) -> bool:
    """Whether ``obj`` is an ndarray whose memory lies in a live symmetric allocation."""
    if not isinstance(obj, np.ndarray) or obj.nbytes == 0:
        return False
    start = _address(obj)
    return any(lo <= start and start + obj.nbytes <= lo + n for lo, n in allocations())


class FreedArrayError(ValueError):
    """A write to a name that referred to a freed symmetric array."""


class FreedArray(np.ndarray):
    """A read-only private copy of a symmetric array that was freed or re-allocated."""

    note = "this array's symmetric memory was freed"

    def __array_finalize__(self, obj: object) -> None:
        self.note = getattr(obj, "note", FreedArray.note)

    def __setitem__(self, key: Any, value: Any) -> None:
        if not self.flags.writeable:
            raise FreedArrayError(self.note)
        super().__setitem__(key, value)

    def __array_wrap__(self, arr: Any, context: Any = None, return_scalar: bool = False) -> Any:
        arr = np.asarray(arr).view(np.ndarray)  # results computed from it are ordinary arrays
        return arr[()] if return_scalar else arr


def _freeze(a: npt.NDArray[Any], note: str) -> FreedArray:
    copy = np.array(a).view(FreedArray)
    copy.note = note
    copy.flags.writeable = False
    return copy


def retire(old: npt.NDArray[Any], what: str) -> list[str]:
    """Before ``old`` is freed: every other name in the namespace pointing into its memory
    becomes a read-only copy (writes raise :class:`FreedArrayError`), and ``old`` itself is
    made read-only. ``what`` says what happened (``"A was re-allocated as int64[5]"``).
    Returns the visible names retired (names starting with ``_`` are retired silently)."""
    lo = _address(old)
    hi = lo + old.nbytes

    def points_in(value: object) -> bool | int:
        return isinstance(value, np.ndarray) and value.nbytes and lo <= _address(value) < hi

    retired: list[str] = []
    for key, value in list(this_pe.namespace.items()):
        if points_in(value):
            note = (
                f"{key!r} referred to symmetric memory that was freed ({what}); it is a read-only copy "
                f"of the old values now: write to the new array, or copy with np.array(...) first"
            )
            value.flags.writeable = False
            this_pe.namespace[key] = _freeze(value, note)
            if not key.startswith("_"):
                retired.append(key)
    out = this_pe.namespace.get("Out")
    if isinstance(out, dict):  # results of earlier cells
        for key, value in list(out.items()):
            if points_in(value):
                value.flags.writeable = False
                out[key] = _freeze(value, f"Out[{key}] referred to freed symmetric memory ({what})")
    old.flags.writeable = False
    return sorted(retired)


def alloc(decls: Iterable[tuple[str, str, tuple[int, ...]]]) -> HeapChange:
    """Allocate ``[(name, dtype, shape), ...]`` zeroed, replacing same names.

    Collective: every PE must call it with the same declarations. Returns
    ``{"usage": (used, size), "retired": {name: [other names that pointed into the old array]}}``.
    """
    retired: dict[str, list[str]]
    shmem, retired = _shmem(), {}
    for name, dtype, shape in decls:
        old = this_pe.arrays.pop(name, None)
        if old is not None:
            if this_pe.namespace.get(name) is old:
                del this_pe.namespace[name]
            names = retire(old, f"{name} was re-allocated as {np.dtype(dtype).name}{list(shape)}")
            if names:
                retired[name] = names
            shmem.free(old)
        this_pe.arrays[name] = shmem.zeros(shape, dtype)
    this_pe.namespace.update(this_pe.arrays)
    return {"usage": heap_usage(), "retired": retired}


def free(name: str) -> HeapChange:
    """Free the declared array ``name``. Collective. Returns what :func:`alloc` returns."""
    a = this_pe.arrays.pop(name)
    if this_pe.namespace.get(name) is a:
        del this_pe.namespace[name]
    names = retire(a, f"{name} was freed")
    _shmem().free(a)
    return {"usage": heap_usage(), "retired": {name: names} if names else {}}


def _lookup(name: str) -> Any:
    """What ``name`` means in the cells now (a cell may have rebound a declared name)."""
    value = this_pe.namespace.get(name, _MISSING)
    return this_pe.arrays.get(name, _MISSING) if value is _MISSING else value


def _kind(value: object) -> str:
    return f"{type(value).__module__}.{type(value).__qualname__}".replace("builtins.", "")


#: arrays from this many bytes are handed over in shared memory when the client is on this host
FILE_BYTES = 1 << 20


def place(value: npt.NDArray[Any]) -> tuple[str, int, int] | None:
    """Where the C-contiguous ``value`` lies in this process: ``(pid namespace, pid, address)``
    for a client on this host to read it (:mod:`shmem_notebook.job.remote`); None if not contiguous."""
    if not value.flags.c_contiguous:
        return None
    try:
        namespace = os.readlink("/proc/self/ns/pid")
    except OSError:
        return None
    return (namespace, os.getpid(), _address(value))


def gather(name: str, by_file: bool = False) -> tuple[str, Any]:
    """This PE's symmetric array ``name`` (declared, or any name a cell bound to a symmetric array).

    Returns ``("ok", private copy)``, ``("missing", None)`` or ``("not symmetric", kind)``; with
    ``by_file`` (the client is on this host), a large array is only described, ``("large",
    (dtype, shape, place))``: the client reads it at ``place`` (:func:`place`) or has
    :func:`gather_into` write it.
    """
    value = _lookup(name)
    if value is _MISSING:
        return ("missing", None)
    if not is_symmetric(value):
        return ("not symmetric", _kind(value))
    if by_file and value.nbytes >= FILE_BYTES:
        return ("large", (value.dtype, value.shape, place(value)))
    return ("ok", np.array(value))


def gather_into(name: str, path: str) -> None:
    """Write this PE's array ``name`` (C order) into the client's file ``path`` at offset
    ``my_pe * nbytes``, straight from symmetric memory when it is contiguous."""
    value = _lookup(name)
    data = np.ascontiguousarray(value).reshape(-1).view(np.uint8)
    fd = os.open(path, os.O_WRONLY)
    try:
        view, offset = memoryview(cast("Buffer", data)), _shmem().my_pe() * value.nbytes
        while view:
            n = os.pwrite(fd, view, offset)
            view, offset = view[n:], offset + n
    finally:
        os.close(fd)


def pull(name: str) -> tuple[str, Any]:
    """The value bound to ``name`` on this PE, as plain data (ndarrays as private copies).

    Returns ``("ok", value)``, ``("missing", None)`` or ``("unsendable", reason)``.
    """
    value = _lookup(name)
    if value is _MISSING:
        return ("missing", None)
    if isinstance(value, np.ndarray):
        return ("ok", np.array(value))  # symmetric memory may change after the reply
    try:
        pickle.dumps(value, protocol=pickle.HIGHEST_PROTOCOL)
    except Exception as exc:
        return ("unsendable", f"a {_kind(value)}: {type(exc).__name__}: {exc}")
    return ("ok", value)
