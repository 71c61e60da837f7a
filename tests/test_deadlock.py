"""Every deadlock named (issue 47 item 1): a cell in which every PE waits for another ends within 2 s of
the moment the last PE began to wait, saying in one clause per group of PEs where each waits and for
what; the job is ready again (PEs polling in Python interrupted, PEs in a world barrier joined) or
paused and hung until a restart. Each deadlocked cell has a corrected twin that runs normally, and a
peer that computes for 5 s before it writes is not a deadlock. Real 2- and 4-PE jobs, Open MPI's
OSHMEM and Sandia OpenSHMEM; the rules and the sentences alone at the end (no PEs)."""

import io
import time

import psutil
import pytest

from conftest import job_fixture, quiet
from shmem_notebook import CellStoppedError
from shmem_notebook.cells import deadlock as deadlock_module, stranded
from shmem_notebook.cells.deadlock import condition, deadlocked, message
from shmem_notebook.inspector.snapshot import gather_snapshot

job = job_fixture(2, 4, heap="8M", timeout=60, sos=(2, 4))

HEAD = "the cell is deadlocked (every PE waits for another): "
RELEASED = (
    "; the rest of the cell was abandoned on every PE; the job is ready and every PE kept its variables. "
    "Where every PE was:"
)
HUNG = (
    "; the waiting PEs cannot be released from these calls (only a polling loop, a world barrier or sync, or a "
    "team call the tool emulates, can be), so they are paused (no CPU) and the job is marked hung: run "
    "`%shmem restart` (or job.restart()) to get a fresh job. Where every PE was:"
)
#: the first line of every cell here: each PE says when it came to the wait that follows
STAMP = "print(time.monotonic())\n"


def ready(job):
    """A running job with ``flag`` and ``W`` zeroed and ``kept`` set on every PE."""
    if job.state != "running":
        job.restart()
    quiet(job, "import time\nkept = 7 + me\nflag[0] = W[0] = 0\nshmem.barrier_all()", arrays="flag=int64[1] W=int64[1]")


def others(job):
    return "1" if job.n == 2 else f"1-{job.n - 1}"


def wait(job):
    return "waits" if job.n == 2 else "wait"


def deadlock(job, code, monkeypatch):
    """Run ``STAMP + code``, which must deadlock: its message, the seconds from the moment the last PE
    came to its wait (what it printed) to the verdict (the release of the PEs begins), and to the report
    (after the release: released PEs first show their KeyboardInterrupt, which takes a fresh PE about
    1 s of CPU to format, see docs/troubleshooting.md)."""
    ready(job)
    verdicts, original = [], stranded.release

    def release(*args):
        verdicts.append(time.monotonic())
        return original(*args)

    monkeypatch.setattr(stranded, "release", release)  # the cell path's (cells.path calls stranded.release)
    with pytest.raises(CellStoppedError) as info:
        quiet(job, STAMP + code)
    reported = time.monotonic()
    monkeypatch.undo()
    came = max(float(info.value.result.stdout[pe]) for pe in range(job.n))
    assert len(verdicts) == 1
    return str(info.value), verdicts[0] - came, reported - came


def twin(job, code, expected):
    """Run the corrected twin ``code``: it ends normally and every PE prints ``expected`` (a format of me)."""
    ready(job)
    out = quiet(job, code).stdout
    assert out == {pe: expected.format(me=pe) + "\n" for pe in range(job.n)}, out


def assert_usable(job):
    """The job is ready without a restart and every PE kept its variables."""
    assert job.state == "running"
    out = quiet(job, "shmem.barrier_all()\nprint('next', me, kept)").stdout
    assert out == {pe: f"next {pe} {7 + pe}\n" for pe in range(job.n)}


def assert_paused_then_restart(job):
    """Every PE is paused (stopped, no CPU) and the job hung; a restart makes it usable."""
    assert job.state == "hung"
    procs = [psutil.Process(job.pes[pe]["pid"]) for pe in range(job.n)]
    deadline = time.monotonic() + 5  # until SIGSTOP has taken effect on each (asynchronous)
    while any(p.status() != psutil.STATUS_STOPPED for p in procs) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert [p.status() for p in procs] == [psutil.STATUS_STOPPED] * job.n
    job.restart()
    assert quiet(job, "print('fresh', me)").stdout == {pe: f"fresh {pe}\n" for pe in range(job.n)}


def test_a_wait_on_a_flag_against_barrier_all(job, monkeypatch, tmp_path):
    """PE 0 waits for a flag nobody sets, the others wait in barrier_all for PE 0; its twin sets the flag.
    The inspector and an export call the cell deadlocked."""
    message, verdict, report = deadlock(
        job, "if me == 0:\n    shmem.wait_until(flag, shmem.CMP.EQ, 1)\nshmem.barrier_all()", monkeypatch
    )
    assert message == (
        f"{HEAD}PE 0 waits at line 3 for flag[0] == 1, which no PE will write; PE {others(job)} {wait(job)} in "
        f"shmem.barrier_all() at line 4, which PE 0 never reaches{HUNG}\n"
        f"PE 0: line 3, shmem.wait_until(flag, shmem.CMP.EQ, 1)\nPE {others(job)}: line 4, shmem.barrier_all()"
    )
    assert verdict < 2 and report < 2, (verdict, report)
    assert {pe["last_cell"]["outcome"] for pe in gather_snapshot(job, timeout=2).pes} == {"deadlocked"}
    job.export(tmp_path / "program.py")
    assert "because it deadlocked in the notebook" in (tmp_path / "program.py").read_text()
    assert_paused_then_restart(job)
    twin(
        job,
        "if me == 1:\n    shmem.atomic_set(flag, 1, 0)\nif me == 0:\n    shmem.wait_until(flag, shmem.CMP.EQ, 1)\n"
        "shmem.barrier_all()\nprint('passed', me)",
        "passed {me}",
    )


def test_every_pe_waits_on_a_flag(job, monkeypatch):
    """Each PE waits for its flag, then sets its right neighbour's: nobody sets first. The twin sets first."""
    code = "shmem.wait_until(flag, shmem.CMP.EQ, 1)\nshmem.atomic_set(flag, 1, (me + 1) % npes)"
    message, verdict, report = deadlock(job, code, monkeypatch)
    assert message.startswith(
        f"{HEAD}PE 0-{job.n - 1} wait at line 2 for flag[0] == 1, which no PE will write{HUNG}\n"
    ), message
    assert verdict < 2 and report < 2, (verdict, report)
    assert_paused_then_restart(job)
    twin(
        job,
        "shmem.atomic_set(flag, 1, (me + 1) % npes)\nshmem.wait_until(flag, shmem.CMP.EQ, 1)\nprint('got', flag[0])",
        "got 1",
    )


@pytest.mark.parametrize("call", ["shmem.TEAM_WORLD.sync()", "shmem.sum_reduce(W, W)"])
def test_a_team_sync_or_collective_against_a_wait(job, call, monkeypatch):
    """PE 0 waits for a flag, the others in a team sync or a reduction that needs PE 0."""
    message, verdict, report = deadlock(
        job, f"if me == 0:\n    shmem.wait_until(flag, shmem.CMP.EQ, 1)\n{call}", monkeypatch
    )
    shown = call if "sync" in call else "shmem.sum_reduce()"
    assert message.startswith(
        f"{HEAD}PE 0 waits at line 3 for flag[0] == 1, which no PE will write; PE {others(job)} {wait(job)} in "
        f"{shown} at line 4 for team members that never reach it{HUNG}\n"
    ), message
    assert verdict < 2 and report < 2, (verdict, report)
    assert_paused_then_restart(job)
    twin(
        job,
        f"if me == 1:\n    shmem.atomic_set(flag, 1, 0)\nif me == 0:\n    shmem.wait_until(flag, shmem.CMP.EQ, 1)\n"
        f"W[0] = 1\n{call}\nprint('done', me)",
        "done {me}",
    )


def test_a_polling_loop_against_barrier_all_is_released(job, monkeypatch):
    """PE 0 polls its flag in Python, the others wait in barrier_all: PE 0 is interrupted, then joins them,
    and the job stays ready with its variables. The twin sets the flag."""
    message, verdict, report = deadlock(
        job, "if me == 0:\n    while flag[0] == 0:\n        pass\nshmem.barrier_all()", monkeypatch
    )
    assert message == (
        f"{HEAD}PE 0 polls flag at line 3 (while flag[0] == 0), which no PE will write; PE {others(job)} {wait(job)} "
        f"in shmem.barrier_all() at line 5, which PE 0 never reaches{RELEASED}\n"
        f"PE 0: line 3, while flag[0] == 0:\nPE {others(job)}: line 5, shmem.barrier_all()"
    )
    assert verdict < 2, verdict
    assert_usable(job)
    twin(
        job,
        "if me == 1:\n    shmem.atomic_set(flag, 1, 0)\nif me == 0:\n    while flag[0] == 0:\n        pass\n"
        "shmem.barrier_all()\nprint('polled', me)",
        "polled {me}",
    )


def test_a_polling_loop_against_a_team_sync(job, monkeypatch):
    """PE 0 polls, the others wait in a team sync: released where the tool emulates the team (OpenSHMEM
    1.4: the interrupt reaches its wait loop), paused where the library's own sync holds them."""
    message, verdict, report = deadlock(
        job, "if me == 0:\n    while flag[0] == 0:\n        pass\nshmem.TEAM_WORLD.sync()", monkeypatch
    )
    assert message.startswith(
        f"{HEAD}PE 0 polls flag at line 3 (while flag[0] == 0), which no PE will write; PE {others(job)} "
        f"{wait(job)} in shmem.TEAM_WORLD.sync() at line 5 for team members that never reach it"
    ), message
    assert verdict < 2, verdict
    if job.pes[0]["teams"] == "emulated":
        assert RELEASED in message, message
        assert_usable(job)
    else:
        assert HUNG in message, message
        assert job.state == "hung"  # PE 0 was interrupted: the others are paused
        job.restart()


@pytest.mark.parametrize("how", ["wait_until", "polling"])
def test_a_slow_peer_is_not_a_deadlock(job, how):
    """PE 1 computes for 5 s before it sets PE 0's flag, while PE 0 waits for it and the others wait in
    barrier_all: every PE but one waits, so the cell runs to its end."""
    wait_for_it = (
        "shmem.wait_until(flag, shmem.CMP.EQ, 1)" if how == "wait_until" else "while flag[0] == 0:\n        pass"
    )
    code = (
        "if me == 1:\n    t, x = time.monotonic(), 0\n    while time.monotonic() - t < 5:\n        x += 1\n"
        f"    shmem.atomic_set(flag, 1, 0)\nif me == 0:\n    {wait_for_it}\nshmem.barrier_all()\nprint('waited', me)"
    )
    ready(job)
    started = time.monotonic()
    assert quiet(job, code).stdout == {pe: f"waited {pe}\n" for pe in range(job.n)}
    assert time.monotonic() - started > 5


@pytest.mark.parametrize("teams", ["different", "same"])
def test_every_pe_in_one_call_that_does_not_end_is_said_once(job, teams, monkeypatch):
    """Every PE in one team sync, each given its own team: no deadlock by the rules (the teams are not
    known), and no PE is missing from the call. After LONG_WAIT s (here 2) the cell says so once on its
    stderr, where every PE is, and goes on to its timeout. Its twin, one team for all, runs normally."""
    monkeypatch.setattr(deadlock_module, "LONG_WAIT", 2.0)
    ready(job)
    pick = "(a if me == 0 else b)" if teams == "different" else "a"
    code = (
        "a = shmem.TEAM_WORLD.split_strided(0, 1, npes)\nb = shmem.TEAM_WORLD.split_strided(0, 1, npes)\n"
        f"{pick}.sync()\nprint('synced')"
    )
    err = io.StringIO()
    try:
        if teams == "same":
            assert quiet(job, code, stderr=err, timeout=30).stdout == {pe: "synced\n" for pe in range(job.n)}
            assert "shmem_notebook:" not in err.getvalue()
            return
        with pytest.raises(CellStoppedError, match="did not finish within 8 s"):
            quiet(job, code, stderr=err, timeout=8)
        said = err.getvalue()
        assert said.count("shmem_notebook: every PE has waited 2 s in a call they are all in") == 1, said
        assert "different teams or arguments" in said and "`%shmem restart`" in said, said
        assert f"PE 0-{job.n - 1}: line 3, (a if me == 0 else b).sync()" in said, said
    finally:
        job.restart()  # the teams (and, on SOS, the paused PEs) go


# -- the rules and the sentences alone (no PEs) ---------------------------------------------------
BOARD = {0: 5, 1: 6, 2: 7, 3: 8}  # every PE noted in a blocking call


@pytest.mark.parametrize(
    "where, since, polls, verdict",
    [
        ({0: (2, "wait_until"), 1: (3, "barrier_all")}, BOARD, set(), True),
        ({0: (2, "set_lock"), 1: (3, "set_lock")}, BOARD, set(), True),
        ({0: (2, None), 1: (3, "barrier_all")}, {0: 0, 1: 6}, {2}, True),
        ({0: (2, "sum_reduce"), 1: (3, "barrier_all")}, BOARD, set(), True),  # a barrier PE 0 never reaches
        # not deadlocks: every PE in one collective (it may be slow), barriers at two lines (they pair)
        ({0: (2, "sum_reduce"), 1: (2, "sum_reduce")}, BOARD, set(), False),
        ({0: (2, "barrier_all"), 1: (4, "barrier_all")}, BOARD, set(), False),
        ({0: (2, "wait_for_members"), 1: (3, "sync")}, BOARD, set(), False),  # team calls: the teams are unknown
        # a PE computing, or outside the cell, or in a loop that is not a poll, or off the board in a call
        ({0: (2, "wait_until"), 1: "running, outside the cell's code"}, {0: 5, 1: 0}, set(), False),
        ({0: (2, "wait_until"), 1: (4, None)}, {0: 5, 1: 0}, {2}, False),
        ({0: (2, "wait_until"), 1: (3, "split_strided")}, {0: 5, 1: 0}, set(), False),
        ({0: (2, "wait_until"), 1: (3, None)}, {0: 5, 1: 6}, {3}, False),  # noted, yet not in a call: moved
    ],
)
def test_which_places_are_a_deadlock(where, since, polls, verdict):
    assert (deadlocked(where, since, polls) is not None) == verdict


@pytest.mark.parametrize(
    "line, call, said",
    [
        ("shmem.wait_until(flag, shmem.CMP.EQ, 1)", "wait_until", "flag[0] == 1"),
        ("shmem.wait_until(ivar=F[2:3], value=n + 1, cmp='ge')", "wait_until", "F[2:3] >= n + 1"),
        ("x = shmem.signal_wait_until(sig, '!=', 0)", "signal_wait_until", "sig[0] != 0"),
        ("shmem.wait_until_all(flags, shmem.CMP.GT, 0, status=s)", "wait_until_all", "all of flags > 0"),
        ("shmem.wait_until_any_vector(flags, shmem.CMP.EQ, wanted)", "wait_until_any_vector", "any of flags == wanted"),
        ("shmem.wait_until(flag, how, 1)", "wait_until", "flag[0] (how) 1"),
        ("shmem.wait_until(*args)", "wait_until", None),
    ],
)
def test_what_a_wait_waits_for(line, call, said):
    import ast

    assert condition(ast.parse(line), call, 1) == said


def test_one_clause_per_group_of_pes():
    code = "if me == 0:\n    shmem.set_lock(L)\nelif me < 3:\n    shmem.barrier_all()\nelse:\n    shmem.sync_all()"
    where = {0: (2, "set_lock"), 1: (4, "barrier_all"), 2: (4, "barrier_all"), 3: (6, "sync_all")}
    assert message(where, True, "restart", code) == (
        f"{HEAD}PE 0 waits in shmem.set_lock() at line 2 for a lock no PE will clear; PE 1-2 wait in "
        "shmem.barrier_all() at line 4, which PE 0 never reaches; PE 3 waits in shmem.sync_all() at line 6, "
        "which PE 0 never reaches; the rest of the cell was abandoned on every PE; the job is ready and every PE "
        "kept its variables"
    )
