"""The PE's declared symmetric arrays and its heap use (PE side, imports shmem4py).

Declared arrays are the ones named on a ``%%pxshmem`` line or by
``job.alloc``; the runtime binds them into the cell namespace before every cell.
"""

import os

import numpy as np
from shmem4py import shmem

__all__ = ["arrays", "alloc", "free", "gather", "heap_usage"]

#: declared symmetric arrays, name -> ndarray on the symmetric heap
arrays = {}

_DEFAULT_HEAP = 256 << 20  # OSHMEM's default symmetric heap
_namespace = {}  # the engine's user namespace, set by the runtime


def heap_usage():
    """Bytes of this PE's symmetric heap in use and its size."""
    used = sum(shmem.ffi.sizeof(cdata) for cdata in shmem._heap.values())
    size = int(os.environ.get("SMA_SYMMETRIC_SIZE", _DEFAULT_HEAP))
    return used, size


def alloc(decls):
    """Allocate ``[(name, dtype, shape), ...]`` zeroed, replacing same names.

    Collective: every PE must call it with the same declarations.
    """
    for name, dtype, shape in decls:
        old = arrays.pop(name, None)
        if old is not None:
            _namespace.pop(name, None)
            shmem.free(old)
        arrays[name] = shmem.zeros(shape, dtype)
    _namespace.update(arrays)
    return heap_usage()


def free(name):
    """Free the declared array ``name``. Collective."""
    a = arrays.pop(name)
    if _namespace.get(name) is a:
        del _namespace[name]
    shmem.free(a)
    return heap_usage()


def gather(name):
    """A private copy of this PE's declared array ``name``."""
    return np.array(arrays[name])
