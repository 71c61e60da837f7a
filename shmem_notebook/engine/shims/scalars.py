"""shmem4py 1.0.0 code of the NumPy 1 era under NumPy 2 (PE side).

Programs written for shmem4py 1.0.0 (the Parallel Research Kernels' shmem4py versions among
them) pass a 1-element array where a number is expected, e.g.
``shmem.wait_until(flag[j:j+1], shmem.CMP.EQ, true)`` with ``true = shmem.array([1], dtype='i')``.
shmem4py hands the value to C as it is; NumPy 1 converted a 1-element array to a number, NumPy 2
refuses (``TypeError: only 0-dimensional arrays can be converted to Python scalars``).
:func:`install` wraps the shmem4py functions that take such a value (``value``, ``cond``,
``signal``) so that a 1-element array becomes its element; anything else passes unchanged.
"""

from __future__ import annotations

import functools
import inspect
from typing import TYPE_CHECKING, Any

import numpy as np

from .patches import Patches

__all__ = ["SCALARS", "applies", "install", "as_scalar"]

if TYPE_CHECKING:
    from collections.abc import Callable

#: parameters of shmem4py functions that are numbers
SCALARS = ("value", "cond", "signal")


def applies(shmem: Any) -> bool:
    """NumPy 2 with shmem4py 1.0 (which passes these values to C unconverted)."""
    import shmem4py

    return int(np.__version__.split(".")[0]) >= 2 and shmem4py.__version__.split(".")[:2] == ["1", "0"]


def as_scalar(value: Any) -> Any:
    """A 1-element array's element; anything else unchanged."""
    if isinstance(value, np.ndarray) and value.ndim and value.size == 1:
        return value.reshape(()).item()
    return value


def _converting(func: Callable[..., Any], positions: dict[int, str]) -> Callable[..., Any]:
    names = set(positions.values())

    @functools.wraps(func)
    def call(*args: Any, **kwargs: Any) -> Any:
        if any(isinstance(a, np.ndarray) for a in args) or kwargs.keys() & names:
            args = tuple(as_scalar(a) if i in positions else a for i, a in enumerate(args))
            kwargs = {k: as_scalar(v) if k in names else v for k, v in kwargs.items()}
        return func(*args, **kwargs)

    return call


def install(shmem: Any) -> Callable[[], None]:
    """Wrap every public shmem4py function with a number parameter of :data:`SCALARS`; return the undo."""
    patches = Patches()
    for name, func in list(vars(shmem).items()):
        if name.startswith("_") or not inspect.isfunction(func):
            continue
        try:
            params = list(inspect.signature(func).parameters)
        except (TypeError, ValueError):
            continue
        positions = {i: p for i, p in enumerate(params) if p in SCALARS}
        if positions:
            patches.set(shmem, name, _converting(func, positions))
    return patches.undo
