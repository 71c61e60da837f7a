"""Small helpers over processes and waiting, and :class:`LocalPEs`, the PEs of this host (client side)."""

from __future__ import annotations

import contextlib
import os
import select
import socket
import stat
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

    A thread waits on each PE's lifeline (:func:`shmem_notebook.engine.runtime.lifeline`, opened
    through ``/proc``), which hangs up when the PE's files close, early in its exit, and on its pidfd,
    readable once it is a zombie. The launcher ends the other PEs only after it saw one end (the
    same closing of its files, or its reaping), so the lifelines order the deaths even when the first PE
    is slow to finish its exit (a pidfd alone once showed the PE the launcher killed after, under load).
    When it wakes, the thread notes the PEs found ended and how each ended, read from its zombie's
    ``/proc/PID/stat`` before the launcher reaps it (None once reaped).
    The launcher's own report may name a PE it killed afterwards (MPICH's hydra, under load).
    """

    def __init__(self, pids: dict[int, int], lifelines: dict[int, int | None] | None = None) -> None:
        super().__init__({pe: process(pid) for pe, pid in pids.items()})
        self.first: dict[int, int | None] = {}  # PE -> its wait status (as waitpid gives it), or None
        self.heaps = HeapReader()
        self._told = threading.Event()  # the thread noted the first deaths (or there is no thread)
        pidfds: dict[int, tuple[int, int]] = {}  # pidfd -> (PE, pid)
        lines: dict[int, int] = {}  # the read end of a lifeline -> PE
        for pe, pid in pids.items():
            with contextlib.suppress(OSError, AttributeError):  # gone already; no pidfd before Linux 5.3
                pidfds[os.pidfd_open(pid)] = (pe, pid)
            if (lifeline := (lifelines or {}).get(pe)) is not None and (fd := _open_lifeline(pid, lifeline)):
                lines[fd] = pe
        if pidfds:
            args = (pidfds, lines)
            threading.Thread(target=self._watch, args=args, name="shmem-notebook-deaths", daemon=True).start()
        else:
            self._told.set()
            for fd in lines:
                os.close(fd)

    @classmethod
    def on_this_host(cls, infos: dict[int, dict[str, Any]]) -> LocalPEs:
        """The PEs of ``infos`` (PE -> its answer to ``info``: host, pid, lifeline) that run on this host."""
        host = socket.gethostname()
        here = {pe: i for pe, i in infos.items() if i["host"] == host}
        return cls({pe: i["pid"] for pe, i in here.items()}, {pe: i.get("lifeline") for pe, i in here.items()})

    def first_deaths(self, timeout: float = 2.0) -> dict[int, int | None]:
        """``first``, once the thread noted it: a client that saw a PE end may look before the thread,
        woken by the same end, took the GIL (CI met it: hydra's report, naming a PE it killed after, was
        kept). Waits up to ``timeout`` s once one of them ended (not at all while they all run)."""
        if not all(map(alive, self.values())):
            self._told.wait(timeout)
        return self.first

    def _watch(self, pidfds: dict[int, tuple[int, int]], lines: dict[int, int]) -> None:
        try:  # poll, not select: a long-lived kernel's descriptors pass select's limit (1024)
            poller = select.poll()
            for fd in [*pidfds, *lines]:
                poller.register(fd, select.POLLIN)
            ready = [fd for fd, _ in poller.poll()]
            ended = {lines[fd] for fd in ready if fd in lines} | {pidfds[fd][0] for fd in ready if fd in pidfds}
            # a PE whose files closed finishes its exit soon after: its zombie tells how it ended
            waiting = {fd for fd, (pe, _) in pidfds.items() if pe in ended and fd not in ready}
            deadline = time.monotonic() + 1.0
            while waiting and (left := deadline - time.monotonic()) > 0:
                zombies = select.poll()
                for fd in waiting:
                    zombies.register(fd, select.POLLIN)
                waiting -= {fd for fd, _ in zombies.poll(left * 1000)}
            self.first = {pe: _wait_status(pid) for fd, (pe, pid) in pidfds.items() if pe in ended}
        finally:
            self._told.set()
            for fd in [*pidfds, *lines]:
                os.close(fd)


def _open_lifeline(pid: int, fd: int) -> int | None:
    """A read end of PE ``pid``'s lifeline (its pipe's write end is its descriptor ``fd``), or None
    where ``/proc`` does not give it (another user's process, a hardened ``/proc``, not a pipe)."""
    try:
        line = os.open(f"/proc/{pid}/fd/{fd}", os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC)
    except OSError:
        return None
    if not stat.S_ISFIFO(os.fstat(line).st_mode):
        os.close(line)
        return None
    return line


def _wait_status(pid: int) -> int | None:
    """The wait status of zombie ``pid`` (``/proc/PID/stat`` field 52), or None once it was reaped."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            fields = f.read().rpartition(")")[2].split()
    except OSError:
        return None
    return int(fields[49]) if fields[0] == "Z" and len(fields) > 49 else None
