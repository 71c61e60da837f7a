"""Polite waiting: PEs that wait long in a blocking call are let sleep (client side).

While a PE waits for others in ``barrier_all``, ``wait_until``, a team sync or a small collective,
Open MPI's OSHMEM (UCX) and Sandia OpenSHMEM (libfabric) poll: each waiting PE keeps a core
busy, and neither library can block instead (Open MPI's ``mpi_yield_when_idle`` still spins,
measured). Every PE notes on the job's wait board when it entered such a call
(:mod:`shmem_notebook.engine.shims.board`); the :class:`Governor`, a thread of the client,
stops (SIGSTOP) the PEs of this host that have waited longer than ``rc.polite_ms`` and lets them
all run together for :data:`RUN` seconds of every :data:`PERIOD` (SIGCONT): a waiting PE then
uses about 8% of a core, and a wait that ends while it sleeps returns up to 4.6 ms late. Waits
shorter than ``rc.polite_ms`` never meet it. PEs on other hosts are not governed.

PEs the cell path paused for good (:meth:`Job.pause`) stay stopped: pausing and the governor's
waking hold one lock.
"""

import contextlib
import mmap
import os
import signal
import threading
import time

from ..protocol import board_path

__all__ = ["PERIOD", "RUN", "SHARE", "Governor", "governor_for"]

#: a governed PE runs RUN seconds of every PERIOD: SHARE of a core at most
PERIOD, RUN = 0.005, 0.0004
SHARE = RUN / PERIOD
_IDLE_LOOK = 0.005  # seconds between looks at the board while nobody waits long


class Governor(threading.Thread):
    """Duty-cycles the PEs ``pids`` (``{pe: pid}``, this host's) of engine set ``set_id`` of ``job``
    that wait longer than ``after`` seconds in a noted call; ends by itself once the job stopped,
    restarted or died, waking the PEs it stopped."""

    def __init__(self, job, set_id, pids, board, after):
        super().__init__(name=f"shmem_notebook governor {set_id}", daemon=True)
        self.job, self.set_id, self.pids, self.after_ns = job, set_id, dict(pids), int(after * 1e9)
        self.lock = threading.Lock()  # held while PEs are stopped or woken, and by Job.pause
        self.stopped = set()  # PEs this governor stopped and will wake
        self.cycles = 0  # how many times it let PEs sleep (for tests and benchmarks)
        self.slept = self.ran = 0.0  # seconds governed PEs were stopped, and let run between stops
        self._pages, self._board = board, memoryview(board).cast("q")
        self._closing = threading.Event()

    def serves(self, set_id):
        """Whether this governor still runs for engine set ``set_id``."""
        return self.set_id == set_id and self.is_alive() and not self._closing.is_set()

    def close(self):
        """Wake the PEs it stopped and end the thread (not waiting for it)."""
        self._closing.set()

    def run(self):
        with contextlib.suppress(OSError, AttributeError):  # on time where the user may (root, RLIMIT_RTPRIO)
            os.sched_setscheduler(0, os.SCHED_FIFO, os.sched_param(1))  # this thread only: it sleeps
        try:
            woken = None  # when the PEs were last let run
            while not self._closing.is_set() and self._current():
                slow = self._waiting_long()
                if not slow:
                    woken = None
                    self._closing.wait(_IDLE_LOOK)
                    continue
                with self.lock:
                    self._send(slow, signal.SIGSTOP)
                    self.stopped = set(slow)
                stopped = time.monotonic()
                ran = stopped - woken if woken is not None else RUN
                self.ran += ran if woken is not None else 0.0
                # a busy machine may give this thread the CPU late: the PEs then ran longer, and
                # sleep the longer for it, so that no governed PE gets more than SHARE of a core
                self._closing.wait(max(PERIOD - RUN, ran * (1 - SHARE) / SHARE))
                woken = time.monotonic()
                self._wake()
                self.slept += woken - stopped
                self.cycles += 1
                self._closing.wait(RUN)
        finally:
            self._wake()
            self._board.release()
            self._pages.close()

    def _current(self):
        return self.job.state in ("running", "hung") and self.job._engine_set_id == self.set_id

    def _waiting_long(self):
        since = time.monotonic_ns() - self.after_ns
        paused = self.job.paused
        return [pe for pe in self.pids if 0 < self._board[pe] < since and pe not in paused]

    def _wake(self):
        with self.lock:
            self._send(self.stopped - self.job.paused, signal.SIGCONT)
            self.stopped = set()

    def _send(self, pes, signum):
        for pe in pes:
            with contextlib.suppress(ProcessLookupError):
                os.kill(self.pids[pe], signum)


def governor_for(job, after):
    """A started :class:`Governor` for ``job``'s current PEs on this host, or None when none of
    them noted a board here (PEs elsewhere, a board that could not be made)."""
    import socket

    here = socket.gethostname()
    pids = {pe: info["pid"] for pe, info in job.pes.items() if info.get("host") == here}
    path = board_path(job._cluster.profile_dir, job._cluster.cluster_id)
    try:
        fd = os.open(path, os.O_RDONLY)
    except OSError:
        return None
    try:
        if not pids or os.fstat(fd).st_size < 8 * (max(pids) + 1):
            return None
        board = mmap.mmap(fd, 8 * (max(pids) + 1), prot=mmap.PROT_READ)
    finally:
        os.close(fd)
    governor = Governor(job, job._engine_set_id, pids, board, after)
    governor.start()
    return governor
