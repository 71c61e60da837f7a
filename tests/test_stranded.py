"""One PE's error never strands the others (issue 19): the cell ends soon after the error, names
the PEs that raised and where the others wait, and the job stays usable where it can."""

import io
import time

import psutil
import pytest

from conftest import job_fixture, quiet
from shmem_notebook import PEError

job = job_fixture(2, 4, heap="16M", timeout=120, sos=(2,), oshmpi=(2,))

RELEASED = "the rest of the cell was abandoned on every PE; the job is ready and every PE kept its variables"
PAUSED = "cannot be released from that call"


def stranded(job, code):
    """Run ``code`` after setting ``kept = 7 + me``; the PEError's message."""
    if job.state != "running":
        job.restart()
    quiet(
        job,
        "kept = 7 + me\nW = shmem.zeros(1, dtype='int64')\nshmem.barrier_all()\n"
        "if 'half' not in globals():\n    half = shmem.TEAM_WORLD.split_strided(0, 1, npes)",
    )
    with pytest.raises(PEError) as info:
        quiet(job, code)
    return str(info.value)


def native(job):
    """Teams are the library's own (OpenSHMEM 1.5, Sandia OpenSHMEM), not the tool's emulation."""
    return job.library.name == "sos"


def others(job, first=1):
    return "1" if job.n == 2 else f"{first}-{job.n - 1}" if first == 1 else None


def assert_usable(job):
    """The next cell runs without a restart and every PE kept its variables."""
    assert job.state == "running"
    out = quiet(job, "shmem.barrier_all()\nprint('next', me, kept)").stdout
    assert out == {pe: f"next {pe} {7 + pe}\n" for pe in range(job.n)}


def assert_paused_then_restart(job, message):
    """The waiting PEs are paused (no CPU), the job is hung and says so; a restart makes it usable."""
    assert PAUSED in message and "run `%shmem restart`" in message, message
    assert job.state == "hung"
    waiting = [psutil.Process(job.pes[pe]["pid"]) for pe in range(1, job.n)]
    deadline = time.monotonic() + 5  # SIGSTOP takes effect asynchronously
    while any(p.status() != psutil.STATUS_STOPPED for p in waiting) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert [p.status() for p in waiting] == [psutil.STATUS_STOPPED] * len(waiting)
    job.restart()
    assert quiet(job, "print('fresh', me)").stdout == {pe: f"fresh {pe}\n" for pe in range(job.n)}


@pytest.mark.parametrize(
    "call, shown",
    [
        ("shmem.barrier_all()", "shmem.barrier_all()"),
        ("shmem.sync_all()", "shmem.sync_all()"),
        ("shmem.TEAM_WORLD.sync()", "shmem.TEAM_WORLD.sync()"),
    ],
)
def test_a_raise_before_a_world_synchronisation_is_named_and_the_job_stays_ready(job, call, shown):
    message = stranded(job, f"x = 1\nif me == 0:\n    raise ValueError('boom')\n{call}\nprint('not reached')")
    if native(job) and "TEAM" in call:  # the library's own team sync: which team it is cannot be seen from here
        assert message.startswith(f"PE 0 raised ValueError at line 3: boom; PE 1 waits in {shown} at line 4 for it; ")
        return assert_paused_then_restart(job, message)
    waits = "waits" if job.n == 2 else "wait"
    assert message == (
        f"PE 0 raised ValueError at line 3: boom; PE {others(job)} {waits} in {shown} at line 4 for it; {RELEASED}"
    )
    assert_usable(job)


@pytest.mark.parametrize(
    "call",
    ["half.sync()", "shmem.broadcast(W, W, 0, team=half)", "shmem.sum_reduce(W, W, team=half)", "shmem.sync(half)"],
)
def test_a_raise_before_a_team_call_the_tool_emulates_releases_the_others(job, call):
    message = stranded(job, f"if me == 0:\n    raise ValueError('boom')\n{call}\nprint('not reached')")
    verb = "waits" if job.n == 2 else "wait"
    if native(job):  # the library's own team call: no PE can be released from it
        assert message.startswith(f"PE 0 raised ValueError at line 2: boom; PE {others(job)} {verb} in ")
        return assert_paused_then_restart(job, message)
    assert (
        message
        == f"PE 0 raised ValueError at line 2: boom; PE {others(job)} {verb} in {call} at line 3 for it; {RELEASED}"
    )
    assert_usable(job)
    # the team's half-done counts were reset: its calls agree again; the waiting PEs' frames held W, and
    # rebinding it frees the old one on every PE together (shmem4py frees collectively when the last reference goes)
    out = quiet(
        job,
        "W = shmem.zeros(1, dtype='int64')\nhalf.sync()\nW[0] = me + 1\nshmem.barrier_all()\n"
        "shmem.sum_reduce(W, W, team=half)\n"
        "print('team', W[0])",
    ).stdout
    assert out == {pe: f"team {job.n * (job.n + 1) // 2}\n" for pe in range(job.n)}


def test_inside_a_function_in_the_third_iteration_of_a_loop(job):
    code = (
        "def step(i):\n    if i == 2 and me == 0:\n        raise KeyError('third')\n    shmem.barrier_all()\n"
        "for i in range(5):\n    step(i)"
    )
    message = stranded(job, code)
    assert message.startswith("PE 0 raised KeyError at line 3: 'third'; PE ")
    assert (
        "wait in shmem.barrier_all() at line 6 for it" in message or "waits in shmem.barrier_all() at line 6" in message
    )
    assert message.endswith(RELEASED)
    assert_usable(job)


def test_an_unsupported_routine_on_one_pe(job):
    if native(job):
        pytest.skip("an OpenSHMEM 1.5 library has put_signal")
    message = stranded(job, "if me == 0:\n    shmem.put_signal(None)\nshmem.barrier_all()")
    assert message.startswith("PE 0 raised UnsupportedError at line 2: shmem.put_signal is an OpenSHMEM 1.5 routine")
    assert "at line 3 for it" in message and message.endswith(RELEASED)
    assert_usable(job)


def test_two_pes_raising_different_errors(job):
    code = "if me == 0:\n    raise ValueError('a')\nif me == 1:\n    raise KeyError('b')\nshmem.barrier_all()"
    if job.n == 2:  # nobody waits: the usual error
        message = stranded(job, code)
        assert message == "the cell raised on 2 of 2 PEs: PE 0: ValueError: a; PE 1: KeyError: 'b'"
    else:
        message = stranded(job, code)
        assert message == (
            f"PE 0 raised ValueError at line 2: a; PE 1 raised KeyError at line 4: 'b'; "
            f"PE 2-3 wait in shmem.barrier_all() at line 5 for them; {RELEASED}"
        )
    assert_usable(job)


@pytest.mark.parametrize(
    "wait, shown",
    [
        ("shmem.wait_until(W, shmem.CMP.EQ, 1)", "shmem.wait_until()"),
        ("shmem.sum_reduce(W, W)", "shmem.sum_reduce()"),  # the library's own reduction
    ],
)
def test_a_wait_nobody_can_join_pauses_the_pes_and_says_restart(job, wait, shown):
    message = stranded(job, f"if me == 0:\n    raise ValueError('boom')\n{wait}")
    assert message.startswith("PE 0 raised ValueError at line 2: boom; PE ")
    awaited = "a value that no PE will write now" if "wait_until" in wait else "it"  # a value, or the PE that left
    assert f"in {shown} at line 3 for {awaited}; " in message, message
    assert_paused_then_restart(job, message)


def test_a_timeout_names_what_the_finished_pes_raised(job):
    if job.state != "running":
        job.restart()
    from shmem_notebook import CellStoppedError

    quiet(job, "W = shmem.zeros(1, dtype='int64')\nshmem.barrier_all()")
    code = "if me == 0:\n    raise ValueError('boom')\nimport time\nwhile True:\n    time.sleep(0.05)"
    with pytest.raises(CellStoppedError) as info:
        job.run(code, timeout=2, stdout=io.StringIO(), stderr=io.StringIO())
    text = str(info.value)
    assert "PE 0: raised ValueError at line 2: boom" in text, text
    assert "finished" not in text
    assert job.state == "running"  # the sleeping PEs stopped at the interrupt


@pytest.mark.pe
def test_restart_on_hang_restarts_by_itself_and_says_what_was_lost():
    import shmem_notebook

    with shmem_notebook.Job(2, heap="16M", restart_on_hang=True).start() as job:
        job.alloc("A=int64[4]")
        quiet(job, "A[:] = 5\nkept = 1\nW = shmem.zeros(1, dtype='int64')\nshmem.barrier_all()")
        with pytest.raises(PEError) as info:
            quiet(job, "if me == 0:\n    raise ValueError('boom')\nshmem.wait_until(W, shmem.CMP.EQ, 1)")
        message = str(info.value)
        assert message.startswith("PE 0 raised ValueError at line 2: boom; PE 1 waits in shmem.wait_until() at line 3")
        assert message.endswith(
            "the job was restarted by itself (restart_on_hang): 2 fresh PEs, arrays A re-allocated "
            "(zeroed); every PE's variables and undeclared symmetric arrays were lost"
        ), message
        assert job.state == "running"
        out = quiet(job, "print(A.sum(), 'kept' in globals())").stdout
        assert out == {0: "0 False\n", 1: "0 False\n"}
