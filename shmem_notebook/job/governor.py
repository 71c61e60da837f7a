"""Polite waiting: PEs that wait long in a blocking call are let sleep (client side).

While a PE waits for others in ``barrier_all``, ``wait_until``, a team sync or a small collective,
Open MPI's OSHMEM (UCX), Sandia OpenSHMEM (libfabric) and OSHMPI (MPI) poll: each waiting PE keeps
a core busy, and no library here can block instead (Open MPI's ``mpi_yield_when_idle`` still
spins, measured). Every PE notes on the job's wait board when it entered such a call
(:mod:`shmem_notebook.engine.shims.board`); the governor, a thread of the job's watchdog started at
a job's first cell, stops (SIGSTOP) the PEs of this host that have waited longer than
``rc.polite_ms`` and lets them all run together for :data:`RUN` seconds of every :data:`PERIOD`
(SIGCONT): a waiting PE then uses about 8% of a core, and a wait that ends while it sleeps
returns up to 4.6 ms late. When the machine gives the governor the CPU late, the PEs ran longer
and sleep the longer for it, so that no governed PE gets more than :data:`SHARE` of a core.
When every PE of the job is in such a call, they are let run until the last of them came a
second ago: they may be in a slow collective rather than waiting for one of them (all of them
waiting for good, a deadlock, is governed from then on). PEs on other hosts are not governed.

The board holds, per PE, when it entered a noted call (the PEs write it) and whether the cell
path paused it for good (:meth:`Job.pause`, written by the client: the governor never wakes those),
then the governor's counts and whether it runs. The governor is a thread of the job's watchdog
(:mod:`.watchdog`, a process of its own that outlives the kernel), not of the notebook's kernel: a thread there
would have to take the kernel's GIL on time. The client asks the watchdog for it through the watchdog's
stdin (:meth:`Governor.close` ends it); it ends too when the PEs are gone or the client is. Run there, this
module imports nothing but the standard library (a process of its own per job cost 3 MiB, a process, and
its start).
"""

from __future__ import annotations

import contextlib
import itertools
import json
import mmap
import os
import select
import signal
import threading
import time
from typing import TYPE_CHECKING, Any, cast

if TYPE_CHECKING:
    import subprocess
    from collections.abc import Iterable, Mapping
    from typing import IO

    from .members import JobMembers

__all__ = ["PERIOD", "RUN", "SHARE", "Governor", "governor_for", "Governed"]

#: a governed PE runs RUN seconds of every PERIOD: SHARE of a core at most
PERIOD, RUN = 0.005, 0.0004
SHARE = RUN / PERIOD
_IDLE_LOOK = 0.005  # seconds between looks at the board while nobody waits long
#: ... and while no PE has been in a noted call for _QUIET seconds (between cells, or a long
#: computation): a first wait after that is governed up to _QUIET_LOOK late; an idle job's helper
#: then uses a tenth of the CPU
_QUIET, _QUIET_LOOK = 1.0, 0.05
#: when every PE of the job is in a noted call, they are let run until the last came 1 s ago: a
#: collective may take that long (Sandia OpenSHMEM's sum_reduce at 4 PEs on 2 cores: ~150 ms)
_ALL_WAIT_NS = 1_000_000_000
_STATS = 5  # cycles, ns the PEs were let run between stops, ns they were stopped; the client's nudges; running
#: the id of the governor that runs, from its request until its thread ended (the thread clears it
#: only while it holds its own id: an ending governor does not mark the next one on the board ended)
_RUNNING = 4
#: after a nudge (the client signals PEs: an interrupt, a stack dump) no PE is stopped for this long
_NUDGED = 0.5


def board_size(n: int, stride: int) -> int:
    """Bytes of a board for ``n`` PEs: an entry every ``stride`` int64 (written by the PEs), held[n]
    (by the client), then the governor's counts and whether it runs."""
    return 8 * (n * stride + n + _STATS)


class Governor:
    """The client's handle on the governor of engine set ``set_id`` (this host's PEs ``pids``,
    ``{pe: pid}``, of a job of ``n`` PEs), a thread of the job's ``watchdog`` (a ``Popen``)."""

    _ids = itertools.count(1)

    def __init__(
        self,
        set_id: str | None,
        n: int,
        pids: Mapping[int, int],
        path: str,
        after: float,
        watchdog: subprocess.Popen[bytes],
    ) -> None:
        from ..protocol import BOARD_STRIDE

        self.set_id, self.n, self.pids, self.after_ms = set_id, n, dict(pids), after * 1000
        self.watchdog, self.id = watchdog, next(self._ids)
        size, self._held = board_size(n, BOARD_STRIDE), n * BOARD_STRIDE
        fd = os.open(path, os.O_RDWR)
        try:
            if os.fstat(fd).st_size < size:
                os.ftruncate(fd, size)
            self._pages = mmap.mmap(fd, size)
        finally:
            os.close(fd)
        self._board = memoryview(self._pages).cast("q")
        self._board[self._held :] = memoryview(bytes(8 * (n + _STATS))).cast("q")  # nobody held, no counts
        self._board[self._held + n + _RUNNING] = self.id
        pid_list = {str(pe): pid for pe, pid in sorted(self.pids.items())}
        request = {"govern": self.id, "path": path, "n": n, "pids": pid_list, "after": after, "stride": BOARD_STRIDE}
        if not _tell(watchdog, request):
            self._board[self._held + n + _RUNNING] = 0
            raise OSError("the job's watchdog is gone")

    @property
    def cycles(self) -> int:
        """How many times it stopped PEs."""
        return self._board[self._held + self.n]

    @property
    def ran(self) -> float:
        """Seconds the governed PEs were let run between stops."""
        return self._board[self._held + self.n + 1] / 1e9

    @property
    def slept(self) -> float:
        """Seconds the governed PEs were stopped."""
        return self._board[self._held + self.n + 2] / 1e9

    def serves(self, set_id: str | None) -> bool:
        """Whether this governor still runs for engine set ``set_id``."""
        return self.set_id == set_id and self.alive()

    def nudge(self) -> None:
        """Wake the PEs it stopped now and stop none for half a second: the client is about to signal
        them (an interrupt, a stack dump), which a stopped PE would take only when woken."""
        self._board[self._held + self.n + 3] += 1

    def hold(self, pes: Iterable[int]) -> None:
        """Stop ``pes`` for good: the governor will not wake them (:meth:`Job.pause`)."""
        for pe in pes:
            self._board[self._held + pe] = 1
        _send([self.pids[pe] for pe in pes if pe in self.pids], signal.SIGSTOP)

    def close(self, wait: float = 0.0) -> None:
        """End the governor: it wakes the PEs it stopped (not those held) and ends; wait up to ``wait`` s
        for it to have ended."""
        if self.alive():
            _tell(self.watchdog, {"ungovern": self.id})
        deadline = time.monotonic() + wait
        while self.alive() and time.monotonic() < deadline:
            time.sleep(0.002)

    def alive(self) -> bool:
        """Whether its thread runs (the watchdog's too)."""
        return self._board[self._held + self.n + _RUNNING] == self.id and self.watchdog.poll() is None


def _tell(watchdog: subprocess.Popen[bytes], request: dict[str, Any]) -> bool:
    """Write ``request`` to the watchdog's stdin; False when it is gone."""
    try:
        cast("IO[bytes]", watchdog.stdin).write(json.dumps(request).encode() + b"\n")
        cast("IO[bytes]", watchdog.stdin).flush()
    except (OSError, ValueError, AttributeError):
        return False
    return True


def governor_for(job: JobMembers, after: float) -> Governor | None:
    """A started :class:`Governor` for ``job``'s current PEs on this host, or None when they
    noted no board here (PEs elsewhere, a board that could not be made)."""
    import socket

    from ..protocol import board_path

    here = socket.gethostname()
    pids = {pe: info["pid"] for pe, info in job.pes.items() if info.get("host") == here}
    path = board_path(job._cluster.profile_dir, job._cluster.cluster_id)
    if not pids or not os.path.exists(path) or job._watchdog is None:
        return None
    try:
        return Governor(job._engine_set_id, job.n, pids, path, after, job._watchdog)
    except OSError:
        return None


def _send(pids: Iterable[int], signum: int) -> None:
    for pid in pids:
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signum)


# -- the governor, a thread of the watchdog --------------------------------------------------
class Governed:
    """The governors a watchdog runs, one thread each (the watchdog's side of :class:`Governor`)."""

    threads: dict[int, tuple[threading.Thread, int]]

    def __init__(self) -> None:
        self.threads = {}  # id -> (thread, the write end of the pipe whose closing ends it)

    def request(self, line: dict[str, Any]) -> bool:
        """Start (``govern``) or end (``ungovern``) a governor; False for a line that is neither."""
        for key, (thread, _) in list(self.threads.items()):
            if not thread.is_alive():  # its PEs are gone
                self.end(key)
        if "govern" in line:
            stop, ender = os.pipe()
            pids = {int(pe): int(pid) for pe, pid in line["pids"].items()}
            numbers = int(line["n"]), pids, float(line["after"]), int(line["stride"])
            args = (line["path"], *numbers, stop, int(line["govern"]))
            thread = threading.Thread(target=_govern, args=args, name=f"governor-{line['govern']}", daemon=True)
            self.threads[line["govern"]] = (thread, ender)
            thread.start()
            return True
        if "ungovern" in line:
            self.end(line["ungovern"])
            return True
        return False

    def end(self, key: int, wait: float = 1.0) -> None:
        thread, ender = self.threads.pop(key, (None, None))
        if thread is not None:
            os.close(cast(int, ender))
            thread.join(wait)

    def end_all(self) -> None:
        for key in list(self.threads):
            self.end(key)


def _govern(path: str, n: int, pids: dict[int, int], after: float, stride: int, stop: int, key: int) -> None:
    """Duty-cycle the PEs ``pids`` that wait long, until ``stop`` (a file descriptor, closed after)
    reads its end or the PEs are gone; ``key`` is the governor's id on the board."""
    try:
        _duty_cycle(path, n, pids, after, stride, stop, key)
    finally:
        os.close(stop)


def _duty_cycle(path: str, n: int, pids: dict[int, int], after: float, stride: int, stdin: int, key: int) -> None:
    with contextlib.suppress(OSError, AttributeError):  # on time where the user may (root, RLIMIT_RTPRIO)
        os.sched_setscheduler(0, os.SCHED_FIFO, os.sched_param(1))  # this thread only
    fd = os.open(path, os.O_RDWR)
    pages = mmap.mmap(fd, board_size(n, stride))
    os.close(fd)
    board = memoryview(pages).cast("q")
    held, stats = n * stride, n * stride + n  # where the client's held flags and the counts are
    stopped: list[int]
    woken: float | None
    after_ns, stopped, woken, budget = int(after * 1e9), [], None, _Budget()

    nudges, quiet_until, last_entered = board[stats + 3], 0.0, time.monotonic()

    def sleep(seconds: float) -> bool:
        """Sleep; False once the client ended the governor (or died)."""
        return not select.select([stdin], [], [], seconds)[0]

    def rest(seconds: float) -> bool:
        """Keep the stopped PEs stopped up to ``seconds``, looking every 5 ms whether to wake them
        sooner: the client nudged, or every PE now waits (the one they waited for came). False
        once the client ended the governor."""
        nonlocal nudges, quiet_until
        end = time.monotonic() + seconds
        while (left := end - time.monotonic()) > 0:
            if not sleep(min(left, _IDLE_LOOK)):
                return False
            if board[stats + 3] != nudges:
                nudges, quiet_until = board[stats + 3], time.monotonic() + _NUDGED
                return True
            if stopped and not waiting_long():
                return True
        return True

    def waiting_long() -> list[int]:
        if time.monotonic() < quiet_until or board[stats + 3] != nudges:
            return []
        now = time.monotonic_ns()
        entered = {pe: board[pe * stride] for pe in pids if not board[held + pe]}
        if len(pids) == n and all(entered.values()) and max(entered.values(), default=0) >= now - _ALL_WAIT_NS:
            return []  # every PE is in the call: it may be a slow collective, not a wait for someone
        return [pe for pe, since in entered.items() if 0 < since < now - after_ns]

    def wake() -> None:
        _send([pids[pe] for pe in stopped if not board[held + pe]], signal.SIGCONT)
        _send([pids[pe] for pe in pids if board[held + pe]], signal.SIGSTOP)  # held ones stay stopped

    try:
        while all(_exists(pid) for pid in pids.values()):
            slow = waiting_long()
            if not slow:
                woken = None
                budget.clear()
                _send([pids[pe] for pe in pids if board[held + pe]], signal.SIGSTOP)  # however pause raced a wake
                now = time.monotonic()
                if any(board[pe * stride] for pe in pids):
                    last_entered = now
                if not sleep(_IDLE_LOOK if now - last_entered < _QUIET else _QUIET_LOOK):
                    break
                continue
            _send([pids[pe] for pe in slow], signal.SIGSTOP)
            stopped = slow
            t_stop = time.monotonic()
            ran = t_stop - woken if woken is not None else RUN
            board[stats + 1] += int(ran * 1e9) if woken is not None else 0
            # a late wake-up let them run longer, a PE with threads of its own (a progress thread)
            # used more than the time it ran: they sleep the longer for it
            over = max(budget.over(pe, pids[pe], t_stop) for pe in slow)
            if not rest(max(PERIOD - RUN, ran * (1 - SHARE) / SHARE, over / SHARE)):
                break
            woken = time.monotonic()
            wake()
            stopped = []
            board[stats] += 1
            board[stats + 2] += int((woken - t_stop) * 1e9)
            if not sleep(RUN):
                break
    finally:
        wake()
        if board[stats + _RUNNING] == key:
            board[stats + _RUNNING] = 0
        board.release()
        pages.close()


class _Budget:
    """Per governed PE, the CPU it used beyond :data:`SHARE` of the time since it was first
    stopped, counted afresh every :data:`_BLOCK` seconds while within its share (so that no
    credit saved while stopped long allows a burst)."""

    _BLOCK = 0.25

    start: dict[int, tuple[float, float]]

    def __init__(self) -> None:
        self.start = {}  # pe -> (time, CPU seconds) the count starts from

    def clear(self) -> None:
        self.start.clear()

    def over(self, pe: int, pid: int, now: float) -> float:
        used = _cpu_seconds(pid)
        since, base = self.start.setdefault(pe, (now, used))
        over = used - base - SHARE * (now - since)
        if over <= 0 and now - since > self._BLOCK:
            self.start[pe] = (now, used)
        return max(over, 0.0)


def _cpu_seconds(pid: int) -> float:
    """CPU seconds process ``pid`` used so far, all its threads (0 once it is gone)."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as f:
            fields = f.read().rsplit(b")", 1)[1].split()
    except OSError:
        return 0.0
    return (int(fields[11]) + int(fields[12])) / _TICKS


_TICKS = os.sysconf("SC_CLK_TCK") if hasattr(os, "sysconf") else 100


def _exists(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True
