"""The pattern PEs share when they hold different data by design (client side, pure NumPy).

``value[pe, i] = a[i] + b[pe]`` (each PE's data offset from the others', e.g. ``100*pe + i``)
is fitted robustly by median polish: low medians keep integer data exact, and a few
iterations let one planted outlier move neither ``a`` nor ``b``. An element that breaks the fit
is one that breaks the pattern the PEs share.
"""

from typing import Any

import numpy as np
from numpy.typing import ArrayLike, NDArray

__all__ = ["breaks_pattern", "MOST_OUTLIERS"]

#: the fit explains the data when at most this share of the values break it
MOST_OUTLIERS = 0.1


def _low_median(values: NDArray[Any], axis: int) -> NDArray[Any]:
    ordered = np.sort(values, axis=axis)
    low: NDArray[Any] = np.take(ordered, (values.shape[axis] - 1) // 2, axis=axis)
    return low


def breaks_pattern(values: ArrayLike, rounds: int = 3) -> NDArray[np.bool_] | None:
    """A bool mask ``[npes, n]`` of the values that break ``value = a[i] + b[pe]``, or None
    when no such pattern explains the data (more than :data:`MOST_OUTLIERS` break it)."""
    v = np.asarray(values)
    if v.ndim != 2 or v.shape[0] < 3 or v.dtype.kind not in "iuf" or not np.isfinite(v).all():
        return None
    work = v.astype(np.float64)
    residual = work.copy()
    for _ in range(rounds):
        residual -= _low_median(residual, 0)[None, :]
        residual -= _low_median(residual, 1)[:, None]
    scale = max(1.0, float(np.median(np.abs(work))))
    tolerance = 0.0 if v.dtype.kind in "iu" else 1e-9 * scale
    outliers = np.abs(residual) > tolerance
    return outliers if outliers.mean() <= MOST_OUTLIERS else None
