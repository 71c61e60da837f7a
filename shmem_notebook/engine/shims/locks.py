"""Locks in symmetric arrays: ``shmem.set_lock(lock)`` on a declared ``lock=int64[1]`` (PE side).

shmem4py's ``set_lock``, ``test_lock`` and ``clear_lock`` document their lock as "symmetric scalar
variable or an array of length 1", but hand it to C as it is: a NumPy array ends in cffi's
``TypeError: initializer for ctype 'long *' must be a cdata pointer, not numpy.ndarray``.
:func:`install` wraps the three so that a symmetric array of one C ``long`` (int64 here: a declared
``int64[1]``, ``shmem.zeros(1, dtype="int64")``) is passed as a pointer to its element; any other
array is refused in one sentence (:class:`~.mistakes.ShmemArgumentError`) that says what a lock is,
before the library sees it. A lock made by ``shmem.new_lock()`` passes unchanged. Like every lock,
the word must be zero before its first use (declared arrays and ``shmem.zeros`` are).
"""

from __future__ import annotations

import functools
from typing import TYPE_CHECKING, Any

import numpy as np

from .. import heap
from .mistakes import ShmemArgumentError
from .patches import Patches

__all__ = ["LOCK_CALLS", "install", "as_lock"]

if TYPE_CHECKING:
    from collections.abc import Callable

    import numpy.typing as npt

#: the shmem4py functions that take a lock
LOCK_CALLS = ("set_lock", "test_lock", "clear_lock")


def _problem(lock: npt.NDArray[Any]) -> str | None:
    """What keeps the array ``lock`` from being a lock (None: nothing)."""
    said = f"an array of {lock.size} {lock.dtype} element{'s' if lock.size != 1 else ''}"
    if lock.dtype != np.dtype(np.int64) or lock.size != 1:
        return said
    if not heap.is_symmetric(lock):
        return said + " that is not symmetric"
    return None


def as_lock(shmem: Any, name: str, lock: Any) -> Any:
    """``lock`` as the library takes it: a symmetric one-element int64 array as a ``long *`` to its
    element; anything that is not an array unchanged (shmem4py checks it)."""
    if not isinstance(lock, np.ndarray):
        return lock
    problem = _problem(lock)
    if problem is not None:
        raise ShmemArgumentError(
            f"shmem.{name} takes a lock made by shmem.new_lock() or a symmetric int64 array of one element "
            f"(e.g. declared lock=int64[1], zero before its first use), got {problem}"
        )
    return shmem.ffi.cast("long *", lock.__array_interface__["data"][0])


def _taking_arrays(shmem: Any, name: str, original: Callable[..., Any]) -> Callable[..., Any]:
    @functools.wraps(original)
    def call(lock: Any, *args: Any, **kwargs: Any) -> Any:
        return original(as_lock(shmem, name, lock), *args, **kwargs)

    return call


def install(shmem: Any) -> Callable[[], None]:
    """Wrap :data:`LOCK_CALLS`; return the undo."""
    patches = Patches()
    for name in LOCK_CALLS:
        if hasattr(shmem, name):
            patches.set(shmem, name, _taking_arrays(shmem, name, getattr(shmem, name)))
    return patches.undo
