"""Small helpers over processes and waiting, and :class:`LocalPEs`, the PEs of this host (client side)."""

from __future__ import annotations

import contextlib
import os
import select
import threading
import time
from typing import TYPE_CHECKING, Any

import psutil

from .remote import HeapReader

if TYPE_CHECKING:
    from collections.abc import Callable
    from typing import TypeVar

    T = TypeVar("T")

__all__ = ["LocalPEs", "alive", "process", "wait"]


def alive(proc: Any) -> bool:
    """Whether a psutil process still runs (the launcher's own state lags behind)."""
    try:
        return proc is not None and proc.status() != psutil.STATUS_ZOMBIE
    except psutil.NoSuchProcess:
        return False


def process(pid: int) -> psutil.Process | None:
    """A psutil handle on ``pid``, or None if it is gone."""
    try:
        return psutil.Process(pid)
    except psutil.NoSuchProcess:
        return None


def wait(condition: Callable[[], T], timeout: float, step: float = 0.02) -> T:
    """Poll ``condition`` until true or ``timeout`` seconds; return its last value."""
    deadline = time.monotonic() + timeout
    while not (ok := condition()) and time.monotonic() < deadline:
        time.sleep(step)
    return ok


class LocalPEs(dict[int, Any]):
    """PE -> psutil process, for the PEs on this host; ``first`` tells which of them died first,
    ``heaps`` reads their arrays from their memory (close it before they end).

    A thread waits on the PEs' pidfds and, when it wakes, notes the PEs found ended and how each
    ended, read from its zombie's ``/proc/PID/stat`` before the launcher reaps it (None once reaped).
    The launcher's own report may name a PE it killed afterwards (MPICH's hydra, under load).
    """

    def __init__(self, pids: dict[int, int]) -> None:
        super().__init__({pe: process(pid) for pe, pid in pids.items()})
        self.first: dict[int, int | None] = {}  # PE -> its wait status (as waitpid gives it), or None
        self.heaps = HeapReader()
        self._told = threading.Event()  # the thread noted the first deaths (or there is no thread)
        fds: dict[int, tuple[int, int]] = {}
        for pe, pid in pids.items():
            with contextlib.suppress(OSError, AttributeError):  # gone already; no pidfd before Linux 5.3
                fds[os.pidfd_open(pid)] = (pe, pid)
        if fds:
            threading.Thread(target=self._watch, args=(fds,), name="shmem-notebook-deaths", daemon=True).start()
        else:
            self._told.set()

    def first_deaths(self, timeout: float = 2.0) -> dict[int, int | None]:
        """``first``, once the thread noted it: a client that saw a PE end may look before the thread,
        woken by the same end, took the GIL (CI met it: hydra's report, naming a PE it killed after, was
        kept). Waits up to ``timeout`` s once one of them ended (not at all while they all run)."""
        if not all(map(alive, self.values())):
            self._told.wait(timeout)
        return self.first

    def _watch(self, fds: dict[int, tuple[int, int]]) -> None:
        try:
            ended, _, _ = select.select(list(fds), [], [])
            self.first = {fds[fd][0]: _wait_status(fds[fd][1]) for fd in ended}
        finally:
            self._told.set()
            for fd in fds:
                os.close(fd)


def _wait_status(pid: int) -> int | None:
    """The wait status of zombie ``pid`` (``/proc/PID/stat`` field 52), or None once it was reaped."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            fields = f.read().rpartition(")")[2].split()
    except OSError:
        return None
    return int(fields[49]) if fields[0] == "Z" and len(fields) > 49 else None
