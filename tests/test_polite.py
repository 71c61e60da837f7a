"""Polite waiting (job/governor.py, engine/shims/board.py): a PE that waits long in a barrier,
``wait_until``, team sync or small collective uses at most 10% of a core, measured from the PEs'
own processes, on every library (Open MPI's OSHMEM and OSHMPI poll: the governor stops their
waiting PEs; Sandia OpenSHMEM blocks in its waits by itself); the governor never wakes a paused
PE and ends with its job."""

import io
import threading
import time

import psutil
import pytest

from conftest import job_fixture
from shmem_notebook import CellStoppedError, PEError, rc
from shmem_notebook.protocol import BOARD_STRIDE, board_path

job = job_fixture(2, 4, heap="16M", timeout=60, sos=(2, 4), oshmpi=(2,))
ARRAYS = ["flag=int64[1]", "dst=int64[4]", "src=int64[4]"]

#: PE 0 sleeps SLEEP seconds, then the others are released from the wait named by the key
SLEEP = 2.5
RELEASE = {
    "barrier_all": "shmem.barrier_all()",
    "wait_until": (
        "if me == 0:\n"
        "    for pe in range(1, npes):\n"
        "        shmem.atomic_set(flag, 1, pe)\n"
        "else:\n"
        "    shmem.wait_until(flag, shmem.CMP.GE, 1)\n"
        "flag[0] = 0\n"
        "shmem.barrier_all()"
    ),
    "team sync": "team.sync()",
    "small collective": "shmem.sum_reduce(dst, src)",
}


#: before PE 0 sleeps (a team split waits for every PE: PE 0 sleeping would make it the wait)
SETUP = "import time\nteam = shmem.TEAM_WORLD.split_strided(0, 1, npes)\n"


def _cpu(pids):
    return {pe: sum(psutil.Process(pid).cpu_times()[:2]) for pe, pid in pids.items()}


class Shares(dict):
    stopped: dict
    valid: bool


def board(job):
    """The PEs' entries on the job's wait board: ``{pe: monotonic ns it entered a noted call, or 0}``."""
    with open(board_path(job._cluster.profile_dir, job._cluster.cluster_id), "rb") as f:
        entered = memoryview(f.read()).cast("q")
    return {pe: entered[pe * BOARD_STRIDE] for pe in range(job.n)}


def run_measured(job, code, length=0.6):
    """Run ``code`` (PE 0 sleeps first); the share of a core each PE used in ``length`` seconds
    during which (the wait board says) PE 0 slept and every other PE waited in one noted call
    (the same for 0.2 s before), and the cell's wall time. ``shares.stopped``: per PE, the fraction of 30
    looks in that time that found it stopped."""
    pids = {pe: info["pid"] for pe, info in job.pes.items()}
    cell = f"{SETUP}if me == 0:\n    time.sleep({SLEEP})\n{code}\nteam.destroy()\n"
    shares = Shares()

    def waiting():
        entered, now = board(job), time.monotonic_ns()
        return entered if entered[0] == 0 and all(0 < entered[pe] < now - 50e6 for pe in range(1, job.n)) else None

    def sample():
        began, first, seen = time.monotonic(), None, None
        while time.monotonic() - began < SLEEP:  # settled: the same entries 0.2 s apart
            seen, first = first, waiting()
            if first is not None and first == seen:
                break
            time.sleep(0.2)
        before, t0 = _cpu(pids), time.monotonic()
        looks = []
        for _ in range(30):
            looks.append({pe: psutil.Process(pid).status() == psutil.STATUS_STOPPED for pe, pid in pids.items()})
            time.sleep(length / 30)
        after, t1 = _cpu(pids), time.monotonic()
        shares.update({pe: (after[pe] - before[pe]) / (t1 - t0) for pe in pids})
        shares.stopped = {pe: sum(look[pe] for look in looks) / len(looks) for pe in pids}
        shares.valid = first is not None and waiting() == first

    sampler = threading.Thread(target=sample)
    t0 = time.monotonic()
    sampler.start()
    job.run(cell, arrays=ARRAYS)
    took = time.monotonic() - t0
    sampler.join()
    assert shares.valid, "PE 0 did not sleep while the others waited, all through the measurement"
    return shares, took


@pytest.mark.parametrize("wait", list(RELEASE))
def test_a_long_wait_uses_at_most_a_tenth_of_a_core(job, wait):
    shares, took = run_measured(job, RELEASE[wait])
    waiting = {pe: share for pe, share in shares.items() if pe != 0}
    assert all(share <= 0.10 for share in waiting.values()), (wait, shares)
    assert took < SLEEP + 1.0, f"the wait ended {took - SLEEP:.2f} s after it could"
    if job.library.polls:  # the governor stopped them
        assert all(shares.stopped[pe] >= 0.5 for pe in waiting), (wait, shares.stopped)
        assert job._governor is not None and job._governor.cycles > 0
    else:  # a library that blocks in its waits by itself (polls false): nothing to govern
        assert job._governor is None and not any(shares.stopped.values())


def test_without_the_governor_the_same_wait_polls(job, monkeypatch):
    """The twin: ``rc.polite_ms = 0`` lets waiting PEs poll, as the library does: never stopped, and
    (unless the machine is very busy) far above the bound."""
    if job.n != 2 or job.library.name != "oshmem":
        pytest.skip("one configuration shows the library's own polling")
    monkeypatch.setattr(rc, "polite_ms", 0)
    shares, _ = run_measured(job, RELEASE["barrier_all"])
    assert shares.stopped[1] == 0 and shares[1] > 0.10, (shares, shares.stopped)
    assert job._governor is None


def test_waits_shorter_than_polite_ms_are_not_governed(job, monkeypatch):
    """With ``rc.polite_ms = 800`` a 0.5 s wait polls at full speed and a 1.3 s one is governed after
    0.8 s (on a busy machine even a tight loop's barrier may wait longer than the default 10 ms)."""
    if not job.library.polls:
        pytest.skip("the library blocks in its waits (polls false): no governor")
    monkeypatch.setattr(rc, "polite_ms", 800)
    job.run("pass")
    governor, before = job._governor, job._governor.cycles
    job.run("import time\nif me == 0:\n    time.sleep(0.5)\nshmem.barrier_all()")
    assert job._governor is governor and governor.cycles == before
    job.run(f"import time\nif me == 0:\n    time.sleep({SLEEP})\nshmem.barrier_all()")
    assert governor.cycles > before


def test_a_new_polite_ms_gets_a_governor_that_stays(job, monkeypatch):
    """Changing ``rc.polite_ms`` replaces the governor; the old one's end, on the same board, must
    not mark the new one ended (the CI of 2b65555 saw a third governor made one cell later)."""
    if not job.library.polls:
        pytest.skip("the library blocks in its waits (polls false): no governor")
    for ms in (10, 700, 10, 900, 10):
        monkeypatch.setattr(rc, "polite_ms", ms)
        job.run("pass")
        governor = job._governor
        time.sleep(0.3)  # the old governor's thread has ended by now
        assert governor.alive(), ms
        job.run("pass")
        assert job._governor is governor, ms


def test_a_paused_pe_stays_paused_and_restart_ends_the_governor(job):
    """A wait nobody satisfies times out: the PEs are paused (stopped for good, 0% CPU), the governor
    does not wake them; a restart gets a new governor, the old one ends."""
    with pytest.raises(CellStoppedError, match="paused"):
        job.run("if me != 0:\n    shmem.wait_until(flag, shmem.CMP.GE, 7)", arrays=ARRAYS, timeout=1.5)
    old = job._governor
    assert job.paused and (old is not None) == job.library.polls
    time.sleep(0.3)
    for pe in job.paused:
        assert psutil.Process(job.pes[pe]["pid"]).status() == psutil.STATUS_STOPPED
    shares = _cpu({pe: job.pes[pe]["pid"] for pe in job.pes})
    time.sleep(0.5)
    after = _cpu({pe: job.pes[pe]["pid"] for pe in job.pes})
    assert all(after[pe] - shares[pe] <= 0.05 for pe in shares), (shares, after)
    job.restart()
    if old is not None:  # ended by the restart itself, before the new PEs start
        assert not old.alive()
    shares, _ = run_measured(job, RELEASE["barrier_all"])
    assert all(s <= 0.10 for pe, s in shares.items() if pe != 0), shares
    assert job._governor is not old or old is None


@pytest.mark.pe
def test_the_governor_ends_with_the_job():
    from shmem_notebook import start

    with start(2, heap="8M") as j:
        j.run("pass")
        governor = j._governor
        assert governor.alive()
    assert not governor.alive() and j._governor is None  # ended at the stop


def test_a_call_that_raised_on_one_pe_keeps_no_symmetric_object_alive(job):
    """The board's wrapper is in the traceback of a call that raised on one PE only: had it kept the
    call's arguments, that PE would keep an array the others free (a collective) when the next cell
    rebinds its name, and the next cell's barriers would pair wrongly (a hang; found by the race
    catalogue). Any shmem call's frames did so before the engine dropped them after every error."""
    first = "tmp = shmem.zeros(1, dtype=np.int64)\nshmem.barrier_all()\nif me == 1:\n"
    first += "    shmem.wait_until(tmp, 'sideways', 1)\n"
    with pytest.raises(PEError, match="PE 1"):
        job.run(first, timeout=20)
    out = io.StringIO()
    again = "tmp = shmem.zeros(1, dtype=np.int64)\nshmem.barrier_all()\nprint('paired')\nshmem.barrier_all()"
    job.run(again, stdout=out, timeout=20)
    assert "paired" in out.getvalue() and job.state == "running"


#: how a PE notes barrier_all and sync_all: "C" (native_board: shmem4py's own code with a lib whose
#: calls note in C) or "Python" (the wrapper of engine/shims/board.py)
NOTED_IN = (
    "[('C' if f.__code__ is f.__wrapped__.__code__ and f.__globals__.get('lib') is not shmem.lib else 'Python')\n"
    " for f in (shmem.barrier_all, shmem.sync_all)]"
)


def test_barrier_all_and_sync_all_note_in_c(job):
    """Built by the start (native_board.build), loaded by every PE: the board is written in C around
    shmem4py's own function, whose frame still names the call in a stack dump (test_stranded)."""
    assert set(job.run(NOTED_IN).results.values()) == {"['C', 'C']"}, job.last_result.results


@pytest.mark.pe
def test_without_the_c_bookkeeping_a_long_wait_is_still_governed(monkeypatch):
    """The twin: ``SHMEM_NOTEBOOK_NATIVE=0`` (as where no compiler is) leaves the Python wrapper,
    which notes the same waits."""
    from shmem_notebook import start

    monkeypatch.setenv("SHMEM_NOTEBOOK_NATIVE", "0")
    with start(2, heap="8M", timeout=60) as j:
        assert set(j.run(NOTED_IN).results.values()) == {"['Python', 'Python']"}, j.last_result.results
        shares, took = run_measured(j, RELEASE["barrier_all"])
        assert shares[1] <= 0.10 and shares.stopped[1] >= 0.5 and took < SLEEP + 1.0, (shares, shares.stopped)
