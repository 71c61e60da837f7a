"""``--stress`` (issue 33 item 8) on real 2- and 4-PE jobs: a race is "real" only when a rerun changes
the memory the race is about; printed output and timing never count; Ctrl-C ends every rerun at
once, is not a result and leaves the job (its arrays, ``job.last_result``) as the cell left it."""

import _thread
import contextlib
import io
import os
import signal
import subprocess
import sys
import threading
import time

import numpy as np
import psutil
import pytest
from test_ctrl_c import Pressed

from conftest import job_fixture, left_of, run_race_runner
from shmem_notebook import Access, Race
from shmem_notebook.cells.stress_stage import Run, compare, summary
from shmem_notebook.job.processes import wait
from shmem_notebook.launcher.environment import platform_environment
from shmem_notebook.launcher.shm import Segments

job = job_fixture(2, 4, heap="32M", timeout=120)

#: every PE puts into its neighbour's W[i] and stores its own W[i], with nothing between: which write
#: lands last is up to timing, so the final W differs between runs (a write/write race)
CLOBBER = """src = np.array([me + 1], dtype=np.int64)
right = (me + 1) % npes
shmem.barrier_all()
for i in range(8):
    shmem.put(W[i:i + 1], src, right)
    W[i] = 100 + me
shmem.barrier_all()
print(W.tolist())
"""
#: the fixed twin: the barrier orders the neighbour's put before the own store, every run ends the same
CLOBBER_FIXED = CLOBBER.replace("    W[i] = 100 + me\n", "    shmem.barrier_all()\n    W[i] = 100 + me\n")

#: no race, but it prints how long its barrier took: different in every run
TIMED = """import time
started = time.perf_counter_ns()
T[me % T.size] = me
shmem.barrier_all()
print(f"barrier took {time.perf_counter_ns() - started} ns")
"""

#: a hundred calls that never block (each delayed 0-20 ms in a rerun): about a second a rerun
SLOW = """S[0] = 7 + me
for i in range(100):
    shmem.quiet()
"""


def run(job, code, arrays, stdout=None, **options):
    out = stdout or io.StringIO()
    result = job.run(code, arrays=arrays, race=True, stress=11, stdout=out, stderr=out, **options)
    return result, out.getvalue()


def stress_lines(text):
    return [line for line in text.splitlines() if line.startswith("stress: ")]


def test_a_race_free_cell_printing_its_timing_is_not_called_racy(job):
    result, text = run(job, TIMED, ["T=int64[4]"])
    assert result.races == [] and job.last_result is result
    last = f"0-{job.n - 1}"
    assert stress_lines(text)[-1].startswith(f"stress: PE {last} printed something else (seed"), text
    assert stress_lines(text)[-1].endswith("; no race found explains it"), text
    assert "real" not in text.split("no races found", 1)[1], text
    # the estimate first, then a line per rerun as it ends
    assert stress_lines(text)[0].startswith(
        "stress: rerunning the cell 4 times (seeds 11-14) with random delays of up "
        "to 20 ms around every shmem call, each from the arrays as they were "
        "before it: 4 x the first run's "
    ), text
    assert "Ctrl-C stops them" in stress_lines(text)[0]
    reruns = [line for line in text.splitlines() if line.startswith("  seed ")]
    assert [line.split(", ")[0] for line in reruns] == [f"  seed {11 + k} (rerun {k + 1} of 4" for k in range(4)], text
    assert all(" s left): " in line for line in reruns[:3]) and "barrier took" in reruns[3]


def test_without_the_race_check_no_race_is_looked_for(job):
    out = io.StringIO()
    job.run(TIMED, arrays=["T=int64[4]"], stress=3, stdout=out, stderr=out)
    assert stress_lines(out.getvalue())[-1].endswith("; the cell was not race-checked (add --race)"), out.getvalue()


def test_a_write_write_race_is_real_when_its_elements_differ(job):
    result, text = run(job, CLOBBER, ["W=int64[8]"])
    (race,) = result.races
    assert race.array == "W" and {a.line for a in race.accesses} == {5, 6}, str(race)
    real = [line for line in stress_lines(text) if line.endswith("the race is real, not just possible")]
    assert len(real) == 1 and " changed W[" in real[0] and "the memory of a race above" in real[0], text
    # the per-rerun lines name the elements with both values
    assert any(": W[" in line and "(the cell: " in line for line in text.splitlines() if line.startswith("  seed ")), (
        text
    )
    # afterwards: the cell's result and the arrays as the cell left them, not as a rerun did
    assert job.last_result is result
    assert [str(row.tolist()) + "\n" for row in job.gather("W")] == [result.stdout[pe] for pe in range(job.n)]
    # what the PEs printed changed with W: listed as what the race may explain, never as proof
    assert not [line for line in stress_lines(text) if "printed" in line and "no race found explains" in line], text


def test_the_fixed_twin_gives_the_cell_result_every_time(job):
    result, text = run(job, CLOBBER_FIXED, ["W=int64[8]"])
    assert result.races == [], [str(r) for r in result.races]
    assert stress_lines(text)[-1] == "stress: every rerun gave the cell's result", text
    assert (job.gather("W") == 100 + np.arange(job.n)[:, None]).all()


class Interrupting(io.StringIO):
    """The cell's output, which presses the stop button 0.3 s into the first rerun (once the
    estimate line is out)."""

    def write(self, text):
        if text.startswith("stress: rerunning"):
            threading.Timer(0.3, _thread.interrupt_main).start()
        return super().write(text)


class DroppedInAFinalizer(io.StringIO):
    """The cell's output, where Ctrl-C lands in a finalizer as the first rerun starts (as it once did in
    a zmq socket's ``__del__``)."""

    def write(self, text):
        if text.startswith("stress: rerunning"):
            Pressed()  # finalized at once
        return super().write(text)


@pytest.mark.parametrize("press", [Interrupting, DroppedInAFinalizer], ids=["pressed", "dropped-in-a-finalizer"])
def test_ctrl_c_ends_every_rerun_and_the_job_stays_usable(job, press):
    out = press()
    result, text = run(job, SLOW, ["S=int64[2]"], stdout=out)
    assert (
        "stress: interrupted during the rerun with seed 11: the reruns after it were not run and it is not counted"
        in stress_lines(text)
    ), text
    assert not [line for line in text.splitlines() if line.startswith("  seed ")], text  # no rerun counted
    assert len(stress_lines(text)) == 2, text  # the estimate, the interrupt: no verdict from nothing
    assert job.state == "running" and job.last_result is result and result.outcome == "ok"
    assert list(job.gather("S")[:, 0]) == [7 + pe for pe in range(job.n)]  # as the cell left them
    assert job.run("print(me)", stdout=io.StringIO()).stdout == {pe: f"{pe}\n" for pe in range(job.n)}


WAITING = """import time
if me == 0:
    shmem.wait_until(F, shmem.CMP.GE, 1)
else:
    time.sleep(0.6)
    shmem.atomic_set(F, 1, 0)
"""

BLOCKED = """import time
if me == 0:
    shmem.set_lock(L)
shmem.barrier_all()
if me == 0:
    time.sleep(0.6)
    shmem.clear_lock(L)
else:
    shmem.set_lock(L)
    shmem.clear_lock(L)
"""


def test_ctrl_c_that_leaves_a_pe_in_a_wait_releases_it(job):
    """Ctrl-C while PE 0 waits in wait_until during a rerun: the PEs that stopped release it
    (cells/unblock), the stress line says the rerun was interrupted, and the job stays usable."""
    out = Interrupting()
    run(job, WAITING, ["F=int64[1]"], stdout=out)
    text = out.getvalue()
    assert job.state == "running", text
    lines = [line for line in stress_lines(text) if "interrupted during the rerun with seed 11" in line]
    assert lines and "hung" not in lines[0], text
    assert job.run("print(me)", stdout=io.StringIO()).stdout == {pe: f"{pe}\n" for pe in range(job.n)}


def test_ctrl_c_that_leaves_a_pe_blocked_says_the_job_is_hung(job):
    """Ctrl-C while PEs wait in set_lock for PE 0, which holds the lock and stops at the interrupt (nothing
    releases a lock): the stress line says the job is hung and how to get a fresh one (the rerun's own
    message goes to no one)."""
    out = Interrupting()
    try:
        run(job, BLOCKED, ["L=int64[1]"], stdout=out)
        text = out.getvalue()
        assert job.state == "hung", text
        assert any(
            "interrupted during the rerun with seed 11" in line and "left the job hung" in line and "restart" in line
            for line in stress_lines(text)
        ), text
    finally:
        job.restart()


# -- what a rerun changed, without PEs -------------------------------------------------------------
def _race(array, pe, indices):
    return Race(array, pe, indices, (Access(0, 4, "put", "write"), Access(pe, 6, "load", "read")), "hint")


def test_only_the_elements_of_a_race_make_it_real():
    race = _race("A", 1, (range(2, 4),))
    cell = Run({0: "x\n", 1: "y\n"}, [{"A": np.zeros(6)}, {"A": np.zeros(6)}], "ok")
    other = np.zeros(6)
    other[0] = 5  # outside the race
    rerun = Run({0: "x\n", 1: "y\n"}, [{"A": np.zeros(6)}, {"A": other}], "ok")
    (found,) = compare(cell, rerun, [race])
    assert found.races == () and found.text == "PE 1: A[0] = 5 (the cell: 0)"
    assert summary([(3, [found])], [race])[0] == (
        "PE 1 left other values in A (seed 3); a race above may explain "
        "it (such a difference alone does not make a race real)"
    )
    raced = other.copy()
    raced[3] = 9
    found = compare(cell, Run(cell.stdout, [{"A": np.zeros(6)}, {"A": raced}], "ok"), [race])
    assert [d.races for d in found] == [(race,), ()] and found[0].text == "PE 1: A[3] = 9 (the cell: 0)"
    assert summary([(4, found)], [race])[0] == (
        "seed 4 changed A[2:4] on PE 1, the memory of a race above: the race is real, not just possible"
    )
    # the same element on the other PE is not the race's memory
    found = compare(cell, Run(cell.stdout, [{"A": raced}, {"A": np.zeros(6)}], "ok"), [race])
    assert [d.races for d in found] == [()]
    assert summary([(5, found)], [race])[-1].startswith("no rerun changed the memory a race above is about")
    # printed output on a PE no race touched: listed, explained by no race
    found = compare(cell, Run({0: "z\n", 1: "y\n"}, cell.values, "ok"), [race])
    assert summary([(6, found)], [race])[0] == "PE 0 printed something else (seed 6); no race found explains it"


# -- the runner's --stress ---------------------------------------------------------------------------
SLOW_PROGRAM = """from shmem4py import shmem

for i in range(100):
    shmem.quiet()
print("done", shmem.my_pe())
"""


@pytest.mark.pe
def test_ctrl_c_ends_the_runners_reruns(tmp_path):
    """Ctrl-C in the terminal (SIGINT to the runner's process group) during the second rerun: the
    reruns end, that one is not counted, nothing is left running, and no shared memory of the
    interrupted PEs (Open MPI's vader files) is left behind."""
    (tmp_path / "slow.py").write_text(SLOW_PROGRAM)
    ours = Segments()
    env = dict(os.environ, **dict(platform_environment(), PYTHONUNBUFFERED="1"))
    runner = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "shmem_notebook.race",
            "--stress",
            "5",
            "--",
            "oshrun",
            "-n",
            "2",
            sys.executable,
            "slow.py",
        ],
        cwd=tmp_path,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        start_new_session=True,
    )
    lines = []
    try:
        for line in runner.stdout:
            lines.append(line.rstrip("\n"))
            if line.startswith("  seed 5 "):
                time.sleep(1.0)  # the second rerun's oshrun is up
                ours.note(_session(runner.pid))  # its PEs' Open MPI job id and what they map now
                os.killpg(runner.pid, signal.SIGINT)
                break
        lines += runner.communicate(timeout=120)[0].splitlines()
    finally:
        if runner.poll() is None:
            os.killpg(runner.pid, signal.SIGKILL)
    assert any(x.startswith("stress: rerunning the program 4 times (seeds 5-8)") for x in lines), lines
    assert (
        "stress: interrupted during the rerun with seed 6: the reruns after it were not run and it is not counted"
        in lines
    ), lines
    assert not [x for x in lines if x.startswith(("  seed 6", "  seed 7", "  seed 8"))], lines
    assert lines[-1] == "stress: every rerun gave the output of the run without delays", lines  # the one rerun that ran
    assert runner.returncode == 0, lines  # no race: the interrupted rerun is no result
    assert _session_ended(runner.pid) and ours.jobs, "the rerun's PEs carried no Open MPI job id"
    # what its PEs made: mapped when looked at, SysV segments they created, the vader files of their Open MPI job
    # (named by its id, also when made after the look); not what another test's job (pytest -n) leaves meanwhile
    assert wait(lambda: left_of(ours) == (set(), set()), 10.0), left_of(ours)


def _session(sid):
    """The pids of session ``sid``'s processes."""
    pids = []
    for pid in psutil.pids():
        with contextlib.suppress(OSError):
            if os.getsid(pid) == sid:
                pids.append(pid)
    return pids


def _session_ended(sid, timeout=15.0):
    """Whether every process of session ``sid`` (the runner, its oshrun, the PEs) is gone within ``timeout`` s."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        alive = False
        for pid in _session(sid):
            with contextlib.suppress(psutil.Error):
                alive = alive or psutil.Process(pid).status() != psutil.STATUS_ZOMBIE
        if not alive:
            return True
        time.sleep(0.1)
    return False


#: CLOBBER as a program of its own: the runner's --stress compares the raced array's elements too
CLOBBER_PROGRAM = (
    "import numpy as np\nfrom shmem4py import shmem\n\nme, npes = shmem.my_pe(), shmem.n_pes()\n"
    "W = shmem.zeros(8, dtype=np.int64)\n" + CLOBBER + "shmem.free(W)\n"
)


@pytest.mark.pe
@pytest.mark.parametrize("npes", [2, 4])
def test_the_runners_stress_calls_a_race_real_when_its_elements_differ(tmp_path, npes):
    """The runner's PEs report the raced array at their end: seeds that changed W's elements make the
    race real (as a cell's --stress); the fixed twin has no race and every rerun ends as the first run."""
    (tmp_path / "clobber.py").write_text(CLOBBER_PROGRAM)
    done = run_race_runner(tmp_path, "clobber.py", "--stress", "11", npes=npes, oversubscribe=npes > 2)
    lines = stress_lines(done.stdout)
    assert done.returncode == 1 and "1 race found" in done.stdout, done.stdout + done.stderr
    real = [line for line in lines if line.endswith("the race is real, not just possible")]
    assert len(real) == 1 and " changed W[" in real[0], done.stdout
    assert any(": W[" in x and "(the run without delays: " in x for x in done.stdout.splitlines()), done.stdout
    assert not [x for x in lines if "only printed output was compared" in x], done.stdout

    (tmp_path / "fixed.py").write_text(CLOBBER_PROGRAM.replace(CLOBBER, CLOBBER_FIXED))
    done = run_race_runner(tmp_path, "fixed.py", "--stress", "11", npes=npes, oversubscribe=npes > 2)
    assert done.returncode == 0 and "no races found" in done.stdout, done.stdout + done.stderr
    assert stress_lines(done.stdout)[-1] == "stress: every rerun gave the output of the run without delays", done.stdout


def test_the_runner_compares_only_memory_its_recorded_run_reported():
    """Ranges without values (OSHMPI's heap, whose offsets move between runs) are not passed to the
    reruns: the verdict then says only printed output was compared."""
    from shmem_notebook.race import raced_memory

    race = _race("W", 1, (range(0, 8),))
    reports = {pe: {"pe": pe, "ranges": {"W": (0, 64, "<i8", None), "V": (64, 72, "<i8", None)}} for pe in (0, 1)}
    assert raced_memory(reports, [race]) == {}
    reports[1]["values"] = {"W": np.zeros(8, np.int64), "V": np.zeros(1, np.int64)}
    assert raced_memory(reports, [race]) == {"W": (0, 64, "<i8", None)}  # V is no race's memory
    assert summary([(3, [])], [race], memory=False)[-1].startswith("only printed output was compared")
