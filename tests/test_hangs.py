"""Every kind of hang named fast (issue 29): a PE that finished the cell while the others wait for it
in a world synchronisation or a polling loop; a polling loop whose writer raised; PEs that cannot be
interrupted after a timeout are paused, not spinning. Real 2- and 4-PE jobs, CPU read from the PEs'
own processes."""

import time

import psutil
import pytest

from conftest import job_fixture, quiet
from shmem_notebook import CellStoppedError, PEError, rc
from shmem_notebook.cells import stranded

job = job_fixture(2, 4, heap="16M", timeout=120, sos=(2,), oshmpi=(2,))

RELEASED = "the rest of the cell was abandoned on every PE; the job is ready and every PE kept its variables"


def ready(job):
    if job.state != "running":
        job.restart()
    quiet(job, "kept = 7 + me\nF = shmem.zeros(1, dtype='int64')\nshmem.barrier_all()")


def assert_usable(job):
    assert job.state == "running"
    out = quiet(job, "shmem.barrier_all()\nprint('next', me, kept)").stdout
    assert out == {pe: f"next {pe} {7 + pe}\n" for pe in range(job.n)}


def others(job):
    return "1" if job.n == 2 else f"1-{job.n - 1}"


def stopped(job, code, error=CellStoppedError, timeout=60):
    """The error ``code`` ends in, and the seconds from the cell's start to the verdict: the moment the
    cell path calls :func:`stranded.release` (the release itself, interrupting and joining the PEs, then
    waiting for their tracebacks, takes seconds more under load and is not what "named fast" means), or
    to the error when it never does."""
    verdicts, original = [], stranded.release

    def release(*args, **kwargs):
        verdicts.append(time.monotonic())
        return original(*args, **kwargs)

    started = time.monotonic()
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(stranded, "release", release)  # the cell path's (cells.path calls stranded.release)
        with pytest.raises(error) as info:
            quiet(job, code, timeout=timeout)
    return str(info.value), (verdicts[0] if verdicts else time.monotonic()) - started


def cpu_percent(job, pes, seconds=1.0):
    """Each PE's CPU use over ``seconds``, from its own process (user + system time)."""
    procs = [psutil.Process(job.pes[pe]["pid"]) for pe in pes]
    before = [sum(p.cpu_times()[:2]) for p in procs]
    time.sleep(seconds)
    return [100 * (sum(p.cpu_times()[:2]) - b) / seconds for p, b in zip(procs, before)]


def test_a_pe_that_finished_early_is_joined_and_the_job_stays_ready(job):
    """PE 0 leaves its loop after 3 barriers, the others wait in the 4th: named within 2 s, released."""
    ready(job)
    message, took = stopped(job, "for i in range(3 if me == 0 else 100):\n    shmem.barrier_all()")
    verb = "waits" if job.n == 2 else "wait"
    assert (
        message
        == f"PE 0 finished the cell; PE {others(job)} {verb} in shmem.barrier_all() at line 2 for it; {RELEASED}"
    )
    assert took < 3, took
    assert_usable(job)


def test_a_polling_loop_whose_writer_raised_ends_at_once(job):
    ready(job)
    code = (
        "if me == 1:\n    raise ValueError('no flag for you')\n"
        "if me == 0:\n    while int(F[0]) == 0:\n        pass\nshmem.barrier_all()"
    )
    message, took = stopped(job, code, PEError)
    assert message.startswith("PE 1 raised ValueError at line 2: no flag for you; "), message
    assert "PE 0 waits in a polling loop at line 4 for a value that no PE will write now; " in message, message
    assert took < 3, took
    assert_usable(job)


def test_a_polling_loop_whose_writer_finished_without_writing(job):
    ready(job)
    code = "if me == 0:\n    while F[0] != 1:\n        pass\nelse:\n    pass  # forgot to set PE 0's flag"
    message, took = stopped(job, code)
    assert message.startswith(f"PE {others(job)} finished the cell; PE 0 waits in a polling loop at line 2"), message
    assert took < 3, took
    assert_usable(job)


def test_loops_that_end_by_themselves_are_left_alone(job):
    """Twins of the above that are not hangs: a poll with a time limit, a long computation on one PE."""
    ready(job)
    code = (
        "import time\nt0 = time.time()\nif me == 0:\n    while F[0] == 0 and time.time() - t0 < 1.5:\n        pass\n"
        "    print('gave up waiting')"
    )
    out = quiet(job, code, timeout=30).stdout
    assert out[0] == "gave up waiting\n"
    out = quiet(job, "import time\nif me == 0:\n    time.sleep(1.5)\nprint('done', me)", timeout=30).stdout
    assert out == {pe: f"done {pe}\n" for pe in range(job.n)}
    # a poll whose loop writes what it polls ends by itself too
    out = quiet(
        job, "if me == 0:\n    while F[0] < 3_000_000:\n        F[0] += 1\nprint('counted', me)", timeout=30
    ).stdout
    assert out == {pe: f"counted {pe}\n" for pe in range(job.n)}


def test_a_wait_for_a_finished_pe_pauses_the_waiters(job):
    """A wait_until nobody will satisfy after PE 1 finished: the waiter is paused (no CPU), restart says so."""
    ready(job)
    message, took = stopped(job, "if me == 0:\n    shmem.wait_until(F, shmem.CMP.EQ, 5)")
    assert message.startswith(f"PE {others(job)} finished the cell; PE 0 waits in shmem.wait_until() at line 2 for "), (
        message
    )
    assert "paused (no CPU)" in message and "run `%shmem restart`" in message
    assert took < 3, took
    assert job.state == "hung"
    assert max(cpu_percent(job, [0])) < 10
    job.restart()
    ready(job)


def test_after_a_timeout_the_pes_that_cannot_be_interrupted_are_paused(job, monkeypatch):
    """Every PE waits in wait_until for a value nobody writes: the timeout stops the cell, the PEs are
    paused, so none uses a core until the restart."""
    monkeypatch.setattr(rc, "deadlock_ms", 0)  # the timeout's path (a deadlock is named before it)
    ready(job)
    message, took = stopped(job, "shmem.wait_until(F, shmem.CMP.EQ, 5)", timeout=2)
    assert "could not be interrupted (blocked in OpenSHMEM) and are paused (no CPU)" in message, message
    assert job.state == "hung"
    assert max(cpu_percent(job, range(job.n))) < 10
    job.restart()
    ready(job)
    assert_usable(job)
