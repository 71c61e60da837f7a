"""shmem4py 1.0.0 under NumPy 2: ``shmem.array`` passes ``copy=False``, which NumPy 2 refuses (PE side)."""

from __future__ import annotations

import inspect
from typing import TYPE_CHECKING, Any

import numpy as np

from .patches import Patches

__all__ = ["applies", "install"]

if TYPE_CHECKING:
    from collections.abc import Callable

    import numpy.typing as npt


def applies(shmem: Any) -> bool:
    """Whether this shmem4py's ``shmem.array`` needs the repair (NumPy 2 and the 1.0.0 code)."""
    return int(np.__version__.split(".")[0]) >= 2 and "copy=False" in inspect.getsource(shmem.array)


def install(shmem: Any) -> Callable[[], None]:
    """Replace ``shmem.array`` with one that copies as NumPy 2 wants; return the undo."""

    def array(
        obj: Any,
        dtype: npt.DTypeLike | None = None,
        *,
        order: str = "K",
        align: int | None = None,
        hints: int | None = None,
    ) -> Any:
        tmp = np.asarray(obj, dtype)
        if order in ("K", "A"):
            order = "F" if tmp.flags.f_contiguous and not tmp.flags.c_contiguous else "C"
        a = shmem.new_array(tmp.shape, tmp.dtype, order, align=align, hints=hints, clear=False)
        np.copyto(a, tmp, casting="no")
        shmem.sync_all()
        return a

    array.__doc__ = shmem.array.__doc__
    patches = Patches()
    patches.set(shmem, "array", array)
    return patches.undo
