"""Zeroed allocations that are zero on every PE before any PE returns (PE side).

Open MPI's ``shmem_calloc`` zeroes the block after the barrier that ends the allocation
(:data:`shmem_notebook.deviations.LATE_ZEROING`): a PE that left ``shmem.zeros()`` first may put
into a peer that is still zeroing, and the put is lost. The specification puts the barrier on exit.
:func:`install` replaces ``shmem.alloc`` (behind ``zeros``, ``new_array`` and declared arrays) so
that a cleared allocation is followed by ``shmem_sync_all``: every PE has zeroed before any PE
returns. Collective, as the allocation is. A plain program under ``shmem-race`` is repaired too (it
runs to its end with right values), and its report names the race it meets under a plain ``oshrun``
(the recording's ``library_writes``, :mod:`..record.accesses`).
"""

import functools

from ...deviations import LATE_ZEROING, affects
from .patches import Patches

__all__ = ["applies", "install"]


def applies(shmem):
    """Whether this PE's library zeroes after its barrier."""
    return affects(LATE_ZEROING, shmem.info_get_name())


def install(shmem):
    """Replace ``shmem.alloc``; return the undo."""
    patches, alloc, sync_all = Patches(), shmem.alloc, shmem.lib.shmem_sync_all

    @functools.wraps(alloc)
    def zeroed_alloc(count, size=1, align=None, hints=None, clear=True):
        mem = alloc(count, size, align, hints, clear)
        if clear and count * size:  # the library returned without a barrier after its memset
            sync_all()
        return mem

    patches.set(shmem, "alloc", zeroed_alloc)
    return patches.undo
