"""Checks of the plain arguments users pass; each failure is one sentence (shared).

The start options' checks are declared with them (:mod:`shmem_notebook.job.options`).
"""

from typing import Any

from .errors import InputError

__all__ = ["check_timeout"]


def check_timeout(value: Any) -> float | None:
    """``value`` if it is ``None`` or a positive number of seconds, else :class:`InputError`."""
    if value is not None and (isinstance(value, bool) or not isinstance(value, (int, float)) or value <= 0):
        raise InputError(f"a timeout is a positive number of seconds or None, got {value!r}; e.g. timeout=30")
    return value
