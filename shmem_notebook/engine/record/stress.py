"""Stress runs (PE side): seeded random delays around every shmem call, and the declared
arrays saved before the cell so each rerun starts from the same state."""

import random
import time

import numpy as np
from shmem4py import shmem

from .. import heap

__all__ = ["StressDelays", "save_arrays", "restore_arrays", "declared_values"]


class StressDelays:
    """A consumer of the :mod:`.layer`: before and after every call, half the time, sleep up to
    ``max_delay`` seconds; the generator is seeded by ``seed`` and the PE, so a seed repeats."""

    def __init__(self, seed, max_delay):
        self.rng = random.Random(f"{seed}:{shmem.my_pe()}")
        self.max_delay = max_delay

    def pause(self):
        if self.rng.random() < 0.5:
            time.sleep(self.rng.random() * self.max_delay)

    def before(self, op, args, line):
        self.pause()

    def after(self, op, args, result, line):
        self.pause()


_saved = {}


def save_arrays():
    """Keep a private copy of every declared array (before a cell that stress runs repeat)."""
    _saved.clear()
    _saved.update({name: np.array(a) for name, a in heap.arrays.items()})


def restore_arrays():
    """Put the copies kept by :func:`save_arrays` back; return the names restored."""
    for name, copy in _saved.items():
        if name in heap.arrays and heap.arrays[name].shape == copy.shape:
            np.copyto(heap.arrays[name], copy)
    return sorted(_saved)


#: declared arrays up to this many bytes are compared between stress reruns
COMPARED = 1 << 20


def declared_values():
    """``{name: copy}`` of the declared arrays up to :data:`COMPARED` bytes (for the stress report)."""
    return {name: np.array(a) for name, a in heap.arrays.items() if a.nbytes <= COMPARED}
