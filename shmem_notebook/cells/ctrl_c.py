"""Ctrl-C that Python dropped, and Ctrl-C pressed again while a cell stops.

SIGINT raises :class:`KeyboardInterrupt` wherever the main thread is. When that is a finalizer (a zmq
socket's ``__del__`` run by the garbage collector, a weakref callback), Python reports it as "Exception
ignored" and goes on: the press is lost, and a cell or its reruns would run on as if no one had pressed.
While a cell runs (or a job starts or restarts, or the race runner reruns a program),
:func:`watching` notes each such drop (through ``sys.unraisablehook``) and :func:`check` raises it
again where the tool looks for Ctrl-C. (A PE raises its own again: ``engine.runtime``.)

Once a press (or a timeout) is being handled, the PEs are interrupted, located and released in
turn; a second press in the middle would leave some of them blocked half-way, and one in the middle
of a job's teardown would leave its processes. :func:`held` takes the presses that come meanwhile
and lets that bounded work finish.
"""

import contextlib
import signal
import sys
import threading
import time
from collections.abc import Iterator
from typing import Any

__all__ = ["watching", "check", "sleep", "held"]

_dropped = threading.Event()


@contextlib.contextmanager
def watching() -> Iterator[None]:
    """Note the KeyboardInterrupts that finalizers drop while the block runs (not said again as
    "Exception ignored": :func:`check` raises them); forget what is left unchecked at its end. Also a
    decorator (``@watching()``: a job's start and restart)."""
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


def sleep(seconds: float) -> None:
    """:func:`check`, then ``time.sleep(seconds)``: a waiting loop's step."""
    check()
    time.sleep(seconds)


@contextlib.contextmanager
def held() -> Iterator[list[int]]:
    """Presses (SIGINT) while the block runs are counted in the list it gives, not raised. In the main
    thread only (where Python takes signals); elsewhere nothing changes. Also a decorator
    (``@held()``: a job's teardown)."""
    presses: list[int] = []
    if threading.current_thread() is not threading.main_thread():
        yield presses
        return
    previous = signal.signal(signal.SIGINT, lambda signum, frame: presses.append(signum))
    try:
        yield presses
    finally:
        signal.signal(signal.SIGINT, previous)
