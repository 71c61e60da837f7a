"""Zeroed allocations that are zero on every PE before any PE returns (PE side).

Open MPI's ``shmem_calloc`` zeroes the block after the barrier that ends the allocation
(:data:`shmem_notebook.deviations.LATE_ZEROING`): a PE that left ``shmem.zeros()`` first may put
into a peer that is still zeroing, and the put is lost. The specification puts the barrier on exit.
:func:`install` replaces shmem4py's allocator factory, behind ``alloc`` (``zeros``, ``new_array``,
declared arrays), ``new_lock`` (``Lock``) and ``new_signal``, so that an allocation shmem4py makes
with ``shmem_calloc`` is followed by ``shmem_sync_all``: every PE has zeroed before any PE returns
(shmem4py already synchronises after its own ``memset`` when an alignment or hints are given).
Where that factory is not there (another shmem4py), ``shmem.alloc`` is wrapped instead. Collective,
as the allocation is. A plain program under ``shmem-race`` is repaired too (it runs to its end with
right values), and its report names the race it meets under a plain ``oshrun`` (the recording's
``library_writes``, :mod:`..record.accesses`).
"""

from __future__ import annotations

import functools
from typing import TYPE_CHECKING, Any

from ...deviations import LATE_ZEROING, affects
from .patches import Patches

__all__ = ["applies", "install"]

if TYPE_CHECKING:
    from collections.abc import Callable


def applies(shmem: Any) -> bool:
    """Whether this PE's library zeroes after its barrier."""
    return affects(LATE_ZEROING, shmem.info_get_name())


def _allocator_factory(shmem: Any) -> Callable[..., Any]:
    """shmem4py 1.0.0's ``_get_allocator``, with a ``shmem_sync_all`` after each ``shmem_calloc``."""
    ffi, lib = shmem.ffi, shmem.lib

    def _get_allocator(align: int | None = None, hints: int | None = None, clear: bool = True) -> Any:
        align, hints = align or 0, hints or 0
        calloc = bool(clear) and not align and not hints  # shmem_py_alloc calls shmem_calloc then

        def allocate(size: int) -> Any:
            pointer = lib.shmem_py_alloc(size, align, hints, clear)
            if calloc:  # on every PE, NULL or not: the allocation was collective
                lib.shmem_sync_all()
            return pointer

        return ffi.new_allocator(allocate, lib.shmem_py_free, should_clear_after_alloc=False)

    return _get_allocator


def _synchronised_alloc(alloc: Callable[..., Any], sync_all: Callable[[], object]) -> Callable[..., Any]:
    @functools.wraps(alloc)
    def zeroed_alloc(
        count: int, size: int = 1, align: int | None = None, hints: int | None = None, clear: bool = True
    ) -> Any:
        mem = alloc(count, size, align, hints, clear)
        if clear and count * size:  # the library returned without a barrier after its memset
            sync_all()
        return mem

    return zeroed_alloc


def install(shmem: Any) -> Callable[[], None]:
    """Replace shmem4py's allocator factory (or ``shmem.alloc``); return the undo."""
    patches = Patches()
    if hasattr(shmem, "_get_allocator") and hasattr(shmem.lib, "shmem_py_alloc"):
        patches.set(shmem, "_get_allocator", _allocator_factory(shmem))
    else:
        patches.set(shmem, "alloc", _synchronised_alloc(shmem.alloc, shmem.lib.shmem_sync_all))
    return patches.undo
