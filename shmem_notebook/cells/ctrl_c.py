"""Ctrl-C that Python dropped.

SIGINT raises :class:`KeyboardInterrupt` wherever the main thread is. When that is a finalizer (a zmq
socket's ``__del__`` run by the garbage collector, a weakref callback), Python reports it as "Exception
ignored" and goes on: the press is lost, and a cell or its reruns would run on as if no one had pressed.
While a cell runs (or the race runner reruns a program), :func:`watching` notes each such drop
(through ``sys.unraisablehook``) and :func:`check` raises it again where the path looks for Ctrl-C.
"""

import contextlib
import sys
import threading
from collections.abc import Iterator
from typing import Any

__all__ = ["watching", "check"]

_dropped = threading.Event()


@contextlib.contextmanager
def watching() -> Iterator[None]:
    """Note the KeyboardInterrupts that finalizers drop while the block runs (not said again as
    "Exception ignored": :func:`check` raises them); forget what is left unchecked at its end."""
    previous = sys.unraisablehook

    def hook(unraisable: Any) -> None:
        if issubclass(unraisable.exc_type, KeyboardInterrupt):
            _dropped.set()
        else:
            previous(unraisable)

    sys.unraisablehook = hook
    try:
        yield
    finally:
        if sys.unraisablehook is hook:
            sys.unraisablehook = previous
        _dropped.clear()


def check() -> None:
    """Raise the KeyboardInterrupt a finalizer dropped since the last check, if any."""
    if _dropped.is_set():
        _dropped.clear()
        raise KeyboardInterrupt
