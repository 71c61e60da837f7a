"""Shared fixtures: real OpenSHMEM jobs, and a check that no process outlives a test module.

Every process started by this test session inherits SHMEM_NOTEBOOK_TEST_SESSION,
so leftovers are found by that marker even when other jobs run on the machine.
"""

import os
import sys
import time
import uuid

import psutil
import pytest

from shmem_notebook.job.watchdog import owned_processes

#: the test process is a client: importing shmem4py here would call shmem_init, start a
#: singleton orted that outlives every module and segfault pytest at exit (ompi#11604)
sys.modules.setdefault("shmem4py", None)

MARKER = "SHMEM_NOTEBOOK_TEST_SESSION"
os.environ.setdefault(MARKER, uuid.uuid4().hex)


def session_processes():
    """Live processes (not us) started by this test session: oshrun, engines, controller, watchdogs."""
    return owned_processes(os.environ[MARKER], MARKER)


def wait_for_no_processes(timeout=15.0):
    """The session's leftover processes after up to ``timeout`` seconds (empty when clean)."""
    deadline = time.monotonic() + timeout
    while True:
        left = []
        for proc in session_processes():
            try:
                cmdline = " ".join(proc.cmdline())
            except psutil.Error:
                continue
            if "pytest" not in cmdline:
                left.append(cmdline[:120])
        if not left or time.monotonic() > deadline:
            return left
        time.sleep(0.2)


@pytest.fixture(scope="module", autouse=True)
def no_leftover_processes():
    """After each test module, nothing it started may still run."""
    yield
    assert wait_for_no_processes() == [], "processes left behind by this test module"


def ipython_shell():
    """The session's one real IPython shell, with the extension loaded (``globalipapp`` builds
    it on the first call only: ``start_ipython()`` returns None after that)."""
    from IPython.testing import globalipapp

    globalipapp.start_ipython()
    shell = globalipapp.get_ipython()
    if "pxshmem" not in shell.magics_manager.magics["cell"]:
        shell.run_line_magic("load_ext", "shmem_notebook")
    return shell


def running_job(n, **options):
    """Yield a started job of ``n`` PEs; stop it afterwards (for fixtures)."""
    import shmem_notebook

    job = shmem_notebook.Job(n, **options).start()
    try:
        yield job
    finally:
        job.stop()


@pytest.fixture(scope="module", params=[1, 2, 4], ids=lambda n: f"{n}pe")
def job(request):
    """A real OpenSHMEM job of 1, 2 and 4 PEs (one per parameter)."""
    yield from running_job(request.param)


class ShmTracker:
    """The shared memory (``/dev/shm`` files, SysV segments) of the processes carrying a job's
    token, sampled every 50 ms in a thread: identifies *this* job's segments while other
    jobs run on the machine. ``left()`` -> those of them that still exist."""

    def __init__(self, token):
        import threading

        from shmem_notebook.job.shm import Segments

        self.token, self.segments = token, Segments(token)
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._sample, daemon=True)
        self._thread.start()

    def _sample(self):
        while not self._stop.is_set():
            self.sample()
            self._stop.wait(0.05)

    def sample(self):
        self.segments.note(p.pid for p in owned_processes(self.token))

    def stop(self):
        self._stop.set()
        self._thread.join()
        return self

    def left(self):
        files, shmids = self.segments.left()
        return sorted(files), sorted(shmids)
