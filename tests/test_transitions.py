"""Every public Job method and magic right after each transition: start, restart, a crash,
a crash + restart, a hang, a hang + restart, stop, stop + start.

Users go there first when something went wrong, so each state is checked through both
front ends: the Job API and the magics in a real IPython shell.
"""

import numpy as np
import pytest
from IPython.core.error import UsageError

import shmem_notebook
from conftest import ipython_shell, needs_oshmpi, needs_sos
from shmem_notebook import CellStoppedError, JobStateError, NoJobError, PEDiedError
from shmem_notebook.inspector import gather_snapshot, inspect
from shmem_notebook.job.processes import wait
from shmem_notebook.words import plural

HEAP = "32M"
CRASH = "import os\nif me == npes - 1:\n    os.kill(os.getpid(), 9)\nshmem.barrier_all()"
HANG = "if me == 0:\n    shmem.wait_until(W, shmem.CMP.EQ, 99)"


@pytest.fixture(
    scope="module",
    params=[pytest.param((n, "oshmem", False), id=f"{n}pe") for n in (1, 2, 4)]
    + [pytest.param((2, "oshmem", True), id="2pe-spare")]
    + [pytest.param((2, "sos", False), id="2pe-sos", marks=needs_sos)]
    + [pytest.param((2, "oshmpi", False), id="2pe-oshmpi", marks=needs_oshmpi)],
)
def session(request):
    """(job, shell): a job of 1, 2 and 4 PEs (and 2 with spare PEs, 2 on Sandia OpenSHMEM and on
    OSHMPI), current for the magics, with A and W declared."""
    shmem_notebook.job._current = None
    shell = ipython_shell()
    n, library, spare = request.param
    job = shmem_notebook.start(n, heap=HEAP, library=library, spare=spare)
    job.alloc("A=int64[4]", "W=int64[1]")
    try:
        yield job, shell
    finally:
        job.stop()
        shmem_notebook.job._current = None


@pytest.fixture
def magic(session, capsys):
    """Run source in the shell: (error or None, everything printed)."""
    _, shell = session

    def run(source):
        capsys.readouterr()
        result = shell.run_cell(source)
        captured = capsys.readouterr()
        return result.error_before_exec or result.error_in_exec, captured.out + captured.err

    return run


def pe_lines(printed):
    return [line for line in printed.splitlines() if line.startswith("[PE")]


def assert_usable(job, magic, pids_before=()):
    """Every method and magic works and describes the job as it is now."""
    n = job.n
    # asking the PEs, whole and partial: every PE answers, as itself
    assert {pe: info["pe"] for pe, info in job.ask("info").items()} == {pe: pe for pe in range(n)}
    some = job.ask("info", pes=[n - 1], timeout=10, partial=True)
    assert list(some) == [n - 1] and not some.failed and not some.unanswered
    # status, by both routes: every PE idle, new processes after a restart
    rows = job.status()
    assert [r["state"] for r in rows] == ["idle"] * n, rows
    assert not {r["pid"] for r in rows} & set(pids_before), "status shows the old PEs"
    assert all(isinstance(r["heap_used"], int) and r["heap_size"] == 32 << 20 for r in rows)
    err, printed = magic("%shmem status")
    assert err is None, printed
    assert printed.count(" idle ") == n, printed
    # the inspector: every PE reachable and idle, no cell of the old PEs reported
    snap = gather_snapshot(job)
    assert snap.job_state == "running" and not snap.errors, snap.errors
    assert [p["state"] for p in snap.pes] == ["idle"] * n, [(p["state"], p["note"]) for p in snap.pes]
    err, printed = magic("_insp = %shmem inspect")
    assert err is None, printed
    assert "unreachable" not in magic("print(_insp.static_text())")[1]
    # declared arrays, alloc and free by both routes
    assert [a["name"] for a in job.arrays()] == ["A", "W"]
    assert "A" in magic("%shmem arrays")[1]
    job.alloc("B=int32[3]")
    assert magic("%shmem alloc C=float64[2]")[0] is None
    job.free("B")
    assert magic("%shmem free C")[0] is None
    assert [a["name"] for a in job.arrays()] == ["A", "W"]
    # cells by both routes, then gather and pull see what they wrote
    result = job.run("A[:] = 10 * me + np.arange(4)\nshmem.barrier_all()", stdout=open("/dev/null", "w"))
    assert result.outcome == "ok" and not result.errors
    expected = np.array([10 * pe + np.arange(4) for pe in range(n)])
    assert np.array_equal(job.gather("A"), expected)
    assert np.array_equal(job.pull("A")[n - 1], expected[n - 1])
    err, printed = magic("%%pxshmem\nprint('pe', me, 'of', npes, A.sum())")
    assert err is None, printed
    assert sorted(pe_lines(printed)) == sorted(
        f"[PE {pe}] pe {pe} of {n} {int(expected[pe].sum())}" for pe in range(n)
    ), printed
    gathered = magic("%shmem gather A")
    assert gathered[0] is None
    # the race check and the trace
    assert magic("%shmem race on")[0] is None
    err, printed = magic("%%pxshmem\nshmem.barrier_all()")
    assert err is None and "no races" in printed.lower(), printed
    assert magic("%shmem race off")[0] is None
    err, printed = magic("%%pxshmem --trace\nA[:] = me\nshmem.barrier_all()")
    assert err is None, printed
    err, printed = magic("_replay = %shmem replay")
    assert err is None, printed
    if job.spares.wanted:  # a spare set is launched after every start and restart, and comes to wait
        assert wait(lambda: job.spares.waiting() == n, 60), job.spares.waiting()
        assert f"spare: {plural(n, 'PE')} of {n} waiting for the next restart" in magic("%shmem status")[1]


def assert_refused(job, magic, error, message):
    """The job cannot run cells: each call that needs the PEs raises ``error`` with ``message``
    in one line; what needs no PE answers; nothing raises anything else."""
    for call in (
        lambda: job.run("pass"),
        lambda: job.ask("info"),
        lambda: job.alloc("B=int32[3]"),
        lambda: job.gather("A"),
        lambda: job.pull("A"),
    ):
        with pytest.raises(error, match=message):
            call()
    for source in ("%%pxshmem\npass", "%shmem alloc B=int32[3]", "%shmem gather A", "%shmem pull A"):
        err, printed = magic(source)
        assert isinstance(err, error) and message in str(err), (source, err)
        assert len([line for line in printed.splitlines() if line.strip()]) == 1, printed
    assert [a["name"] for a in job.arrays()] == ["A", "W"]
    assert magic("%shmem arrays")[0] is None


def pids(job):
    return [info["pid"] for info in job.pes.values()]


def test_after_start(session, magic):
    job, _ = session
    assert_usable(job, magic)


def test_after_restart(session, magic):
    job, _ = session
    job.run("print(me)", stdout=open("/dev/null", "w"))
    before = pids(job)
    job.restart()
    assert_usable(job, magic, before)
    before = pids(job)
    err, printed = magic("%shmem restart")
    assert err is None and "restarted" in printed, printed
    assert_usable(job, magic, before)


def test_while_dead_after_a_crash(session, magic):
    job, _ = session
    with pytest.raises(PEDiedError, match="signal 9"):
        job.run(CRASH, stdout=open("/dev/null", "w"))
    assert job.state == "dead"
    rows = job.status()
    assert [r["state"] for r in rows] == ["dead"] * job.n
    err, printed = magic("%shmem status")
    assert err is None and printed.count(" dead ") == job.n, printed
    snap = gather_snapshot(job)
    assert {p["state"] for p in snap.pes} == {"dead"}
    outcomes = [p["last_cell"]["outcome"] for p in snap.pes]
    if job.library.name == "sos":
        # MPICH's hydra names one PID, and under load sometimes a PE its cleanup killed (SIGKILL too); when the
        # first look at the ended PEs cannot order them, both are named (postmortem.with_first_deaths)
        assert outcomes.count("died (signal 9 (SIGKILL))") >= 1, outcomes
    else:
        assert outcomes[-1] == "died (signal 9 (SIGKILL))", outcomes
    assert all(o.startswith("died (") for o in outcomes), outcomes
    assert_refused(job, magic, PEDiedError, "the job is dead")


def test_after_a_crash_and_restart(session, magic):
    job, _ = session
    if job.state == "running":
        with pytest.raises(PEDiedError):
            job.run(CRASH, stdout=open("/dev/null", "w"))
    before = pids(job)
    job.restart()
    assert_usable(job, magic, before)


def test_while_hung(session, magic, monkeypatch):
    job, _ = session
    # at 1 PE the hang is a deadlock too, named at about 1 s: this test takes the timeout's path
    monkeypatch.setattr(shmem_notebook.rc, "deadlock_ms", 0)
    with pytest.raises(CellStoppedError, match="marked hung"):
        job.run(HANG, timeout=1, stdout=open("/dev/null", "w"))
    assert job.state == "hung"
    rows = job.status()
    assert rows[0]["state"] == "hung" and rows[0]["heap_used"] is None, rows  # unknown, not 0 B
    err, printed = magic("%shmem status")
    assert err is None and " hung " in printed and "unknown" in printed, printed
    snap = gather_snapshot(job, timeout=1.0)
    assert snap.pes[0]["state"] == "hung" and "unreachable" in snap.pes[0]["note"]
    assert snap.pes[0]["last_cell"]["outcome"] == ("timed out" if job.n == 1 else "stranded")  # the others finished
    answers = job.ask("info", timeout=1, partial=True)  # the idle PEs answer, the blocked one does not
    assert list(answers) == list(range(1, job.n)) and answers.unanswered == [0], answers
    assert_refused(job, magic, JobStateError, "the job is hung")


def test_after_a_hang_and_restart(session, magic):
    job, _ = session
    if job.state == "running":
        with pytest.raises(CellStoppedError):
            job.run(HANG, timeout=1, stdout=open("/dev/null", "w"))
    before = pids(job)
    job.restart()
    assert_usable(job, magic, before)


def test_after_stop(session, magic):
    job, _ = session
    job.stop()
    for call in (
        job.status,
        lambda: job.run("pass"),
        lambda: job.ask("info"),
        lambda: job.alloc("B=int32[3]"),
        lambda: job.gather("A"),
        lambda: job.pull("A"),
        lambda: inspect(job),
        lambda: gather_snapshot(job),
    ):
        with pytest.raises(NoJobError, match="start one with `%shmem start"):
            call()
    for source in ("%shmem status", "%%pxshmem\npass", "%shmem gather A", "%shmem inspect", "%shmem replay"):
        err, printed = magic(source)
        assert isinstance(err, (NoJobError, UsageError)) and "start" in str(err), (source, err)
    err, printed = magic("%shmem stop")
    assert err is None and "no OpenSHMEM job is running" in printed, printed
    job.stop()  # twice is harmless


def test_restart_after_stop_starts_the_same_job(session, magic):
    job, _ = session
    job.stop()
    err, printed = magic("%shmem restart")
    assert err is None and f"restarted: {plural(job.n, 'PE')}, arrays A, W re-allocated" in printed, printed
    assert_usable(job, magic)


def test_after_stop_and_start(session, magic):
    job, _ = session
    job.stop()
    job.start()
    assert [a["name"] for a in job.arrays()] == ["A", "W"]  # declarations outlive a stop
    assert_usable(job, magic)
