"""Checks of the plain arguments users pass; each failure is one sentence (shared)."""

import numbers

from .errors import InputError

__all__ = ["positive_int", "check_timeout"]


def positive_int(n):
    """``n`` as an int, or :class:`InputError` if it is not a positive integer."""
    if isinstance(n, bool) or not isinstance(n, numbers.Integral) or n < 1:
        raise InputError(f"the number of PEs must be a positive integer, got {n!r}; e.g. start(n=4)")
    return int(n)


def check_timeout(value):
    """``value`` if it is ``None`` or a positive number of seconds, else :class:`InputError`."""
    if value is not None and (isinstance(value, bool) or not isinstance(value, (int, float)) or value <= 0):
        raise InputError(f"a timeout is a positive number of seconds or None, got {value!r}; e.g. timeout=30")
    return value
