"""Shared fixtures: real OpenSHMEM jobs, and a check that no process outlives a test module.

Every process started by this test session inherits SHMEM_NOTEBOOK_TEST_SESSION,
so leftovers are found by that marker even when other jobs run on the machine.
"""

import os
import time
import uuid

import psutil
import pytest

MARKER = "SHMEM_NOTEBOOK_TEST_SESSION"
os.environ.setdefault(MARKER, uuid.uuid4().hex)


def session_processes():
    """Live processes (not us) started by this test session: oshrun, engines, controller, nannies."""
    me = os.getpid()
    found = []
    for proc in psutil.process_iter(["pid", "cmdline", "status"]):
        if proc.info["pid"] == me or proc.info["status"] == psutil.STATUS_ZOMBIE:
            continue
        try:
            if proc.environ().get(MARKER) == os.environ[MARKER]:
                found.append(proc)
        except (psutil.AccessDenied, psutil.NoSuchProcess, psutil.ZombieProcess):
            pass
    return found


def wait_for_no_processes(timeout=15.0):
    """The session's leftover processes after up to ``timeout`` seconds (empty when clean)."""
    deadline = time.monotonic() + timeout
    while True:
        left = [p for p in session_processes() if "pytest" not in " ".join(p.info["cmdline"] or [])]
        if not left or time.monotonic() > deadline:
            return [" ".join(p.info["cmdline"] or [])[:120] for p in left]
        time.sleep(0.2)


@pytest.fixture(scope="module", autouse=True)
def no_leftover_processes():
    """After each test module, nothing it started may still run."""
    yield
    assert wait_for_no_processes() == [], "processes left behind by this test module"


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
