"""Stress runs (PE side): seeded random delays around every shmem call, the declared arrays
saved before the cell (each rerun starts from them) and after it (put back after the reruns),
and the values the client compares between runs."""

from __future__ import annotations

import random
import time
from typing import TYPE_CHECKING, Any

import numpy as np
from shmem4py import shmem

from ..context import this_pe

if TYPE_CHECKING:
    from collections.abc import Iterable

    import numpy.typing as npt

    from ...operations import Operation

__all__ = ["StressDelays", "save_arrays", "restore_arrays", "declared_values"]


class StressDelays:
    """A consumer of the :mod:`.layer`: before and after every call, half the time, sleep up to
    ``max_delay`` seconds; the generator is seeded by ``seed`` and the PE, so a seed repeats."""

    def __init__(self, seed: int, max_delay: float) -> None:
        self.rng = random.Random(f"{seed}:{shmem.my_pe()}")
        self.max_delay = max_delay

    def pause(self) -> None:
        if self.rng.random() < 0.5:
            time.sleep(self.rng.random() * self.max_delay)

    def before(self, op: Operation, args: dict[str, Any], line: int) -> None:
        self.pause()

    def after(self, op: Operation, args: dict[str, Any], result: Any, line: int) -> None:
        self.pause()


def save_arrays(when: str = "before") -> None:
    """Keep a private copy of every declared array, as it is ``when`` (``"before"`` or ``"after"`` the cell)."""
    this_pe.record.saved[when] = {name: np.array(a) for name, a in this_pe.arrays.items()}


def restore_arrays(when: str = "before") -> list[str]:
    """Put the copies :func:`save_arrays` kept ``when`` back; return the names restored."""
    saved = this_pe.record.saved.get(when, {})
    for name, copy in saved.items():
        if name in this_pe.arrays and this_pe.arrays[name].shape == copy.shape:
            np.copyto(this_pe.arrays[name], copy)
    return sorted(saved)


#: arrays up to this many bytes are compared between stress reruns
COMPARED = 1 << 20


def declared_values(names: Iterable[str] = ()) -> dict[str, npt.NDArray[Any]]:
    """``{name: copy}`` of the declared arrays up to :data:`COMPARED` bytes, and of the arrays of the
    namespace called ``names`` (the memory of the races the client found), for the stress report."""
    namespace = this_pe.namespace
    found: dict[str, Any] = {name: namespace.get(name) for name in names if name not in this_pe.arrays}
    found = {name: a for name, a in found.items() if isinstance(a, np.ndarray)}
    return {name: np.array(a) for name, a in {**found, **this_pe.arrays}.items() if a.nbytes <= COMPARED}
