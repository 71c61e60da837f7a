"""Reading the PEs' arrays straight from their memory (client side; PEs on this host).

For a large contiguous array a PE answers ``gather`` with where it lies (its pid namespace,
pid and address, see :func:`shmem_notebook.engine.heap.place`). Where that memory is a SysV
segment (Open MPI's OSHMEM puts its symmetric heap in one), :class:`HeapReader` attaches the
segment here once, read-only, and a gather is one NumPy copy from it into the result, as fast
as a copy within this process. Elsewhere (Sandia OpenSHMEM's private heap, OSHMPI's MPI
window) it copies with ``process_vm_readv``, which pins and walks the PE's pages as it goes.
Either way: one copy in all, none on the PEs. Both need the rights of the PEs' owner; tracing
may be denied in containers without ``CAP_SYS_PTRACE``: then the caller takes another route.
"""

from __future__ import annotations

import ctypes
import os
from typing import TYPE_CHECKING, Any, cast

import numpy as np

from ..launcher.shm import sysv_mappings

if TYPE_CHECKING:
    from collections.abc import Sequence
    from typing import TypeAlias

    import numpy.typing as npt

    Place: TypeAlias = tuple[str, int, int]

__all__ = ["HeapReader", "write_into"]


class _IOVec(ctypes.Structure):
    _fields_ = [("base", ctypes.c_void_p), ("len", ctypes.c_size_t)]


_libc = ctypes.CDLL(None, use_errno=True)
_libc.process_vm_readv.restype = ctypes.c_ssize_t
_libc.process_vm_readv.argtypes = [
    ctypes.c_int,
    ctypes.POINTER(_IOVec),
    ctypes.c_ulong,
    ctypes.POINTER(_IOVec),
    ctypes.c_ulong,
    ctypes.c_ulong,
]
_libc.process_vm_writev.restype = ctypes.c_ssize_t
_libc.process_vm_writev.argtypes = _libc.process_vm_readv.argtypes
_libc.shmat.restype = ctypes.c_void_p
_libc.shmat.argtypes = [ctypes.c_int, ctypes.c_void_p, ctypes.c_int]
_libc.shmdt.argtypes = [ctypes.c_void_p]
_libc.madvise.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int]
_SHM_RDONLY, _MADV_POPULATE_READ, _PAGE = 0o10000, 22, os.sysconf("SC_PAGE_SIZE")
_FAILED = ctypes.c_void_p(-1).value


def _namespace() -> str | None:
    try:
        return os.readlink("/proc/self/ns/pid")
    except OSError:
        return None


class HeapReader:
    """Copies of the PEs' arrays read from their memory; :meth:`close` before the PEs end.

    The SysV segments it attached stay attached until then: a segment lives on while attached.
    """

    _segments: dict[int, list[tuple[int, int, int]]]
    _populated: set[tuple[int, int]]

    def __init__(self) -> None:
        self._segments = {}  # pid -> [(lo, hi, address here of lo)]: its segments attached here
        self._populated = set()  # (address here, bytes): mapped here in one call, not a fault per page

    def read(
        self, places: Sequence[Place | None], dtype: npt.DTypeLike, shape: tuple[int, ...]
    ) -> npt.NDArray[Any] | None:
        """A new ndarray ``(len(places), *shape)`` whose row ``pe`` is copied from
        ``places[pe] = (pid namespace, pid, address)``. None when a place is unknown, in another
        pid namespace, or cannot be read (the PE is gone, reading it is not permitted)."""
        here = _namespace()
        if here is None or any(p is None or p[0] != here for p in places):
            return None
        out = np.empty((len(places), *shape), dtype)
        rows = out.reshape(len(places), -1).view(np.uint8)
        for row, (_, pid, address) in zip(rows, cast("Sequence[Place]", places)):
            mapped = self._mapped(pid, address, row.nbytes)
            if mapped is not None:
                self._populate(mapped, row.nbytes)
                np.copyto(
                    row,
                    np.frombuffer(  # type: ignore[call-overload]  # a ctypes array is a buffer, not in numpy's stubs
                        (ctypes.c_char * row.nbytes).from_address(mapped), np.uint8
                    ),
                )
            elif not _read_traced(row, pid, address):
                return None
        return out

    def close(self) -> None:
        """Detach every segment attached (harmless when none is)."""
        for segments in self._segments.values():
            for _, _, base in segments:
                _libc.shmdt(base)
        self._segments, self._populated = {}, set()

    def _populate(self, mapped: int, nbytes: int) -> None:
        """Map the pages of ``[mapped, mapped + nbytes)`` here in one call, the first time (Linux 5.14
        and later): faulted in one by one by the copy they would take twice as long as the copy."""
        if (mapped, nbytes) not in self._populated:
            start = mapped - mapped % _PAGE
            _libc.madvise(start, mapped + nbytes - start, _MADV_POPULATE_READ)
            self._populated.add((mapped, nbytes))

    def _mapped(self, pid: int, address: int, nbytes: int) -> int | None:
        """The address here of ``pid``'s ``address``, if it lies in a SysV segment (attached now
        if need be), else None."""
        for lo, hi, base in self._segments.get(pid, ()):
            if lo <= address and address + nbytes <= hi:
                return base + address - lo
        segment = _sysv_segment(pid, address, nbytes)
        if segment is None:
            return None
        lo, hi, shmid, offset = segment
        base = cast(int, _libc.shmat(shmid, None, _SHM_RDONLY))
        if base in (None, _FAILED):
            return None
        self._segments.setdefault(pid, []).append((lo, hi, base + offset))
        return base + offset + address - lo


def _sysv_segment(pid: int, address: int, nbytes: int) -> tuple[int, int, int, int] | None:
    """``(lo, hi, shmid, offset)`` of the SysV mapping of ``pid`` holding ``[address, address + nbytes)``, or None."""
    for lo, hi, shmid, offset in sysv_mappings(pid):
        if lo <= address and address + nbytes <= hi:
            return lo, hi, shmid, offset
    return None


def _read_traced(row: npt.NDArray[np.uint8], pid: int, address: int) -> bool:
    """Copy ``row.nbytes`` from ``pid``'s ``address`` into ``row`` with process_vm_readv; whether it worked."""
    done, size, base = 0, row.nbytes, row.ctypes.data
    while done < size:
        local, remote = _IOVec(base + done, size - done), _IOVec(address + done, size - done)
        n = _libc.process_vm_readv(pid, ctypes.byref(local), 1, ctypes.byref(remote), 1, 0)
        if n <= 0:
            return False
        done += n
    return True


def write_into(pid: int, address: int, data: bytes) -> bool:
    """Write the bytes ``data`` at ``pid``'s ``address`` with process_vm_writev (a word a PE polls in a
    wait: :mod:`shmem_notebook.cells.unblock`); whether all of it was written."""
    buffer = ctypes.create_string_buffer(bytes(data), len(data))
    local, remote = _IOVec(ctypes.addressof(buffer), len(data)), _IOVec(address, len(data))
    return cast(int, _libc.process_vm_writev(pid, ctypes.byref(local), 1, ctypes.byref(remote), 1, 0)) == len(data)
