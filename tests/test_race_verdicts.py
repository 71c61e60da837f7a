"""Race verdicts that do not overclaim (issue 33 item 7), on real 2- and 4-PE jobs and the runner: a
plain "no races found" only for a cell that ran to its end on every PE with every access checked;
otherwise the verdict says what was checked and why the rest was not."""

import _thread
import io
import os
import signal
import subprocess
import sys
import threading

import pytest

from conftest import job_fixture, running_job
from race_catalogue import Case
from race_score import run_cases
from shmem_notebook import CellStoppedError, PEDiedError, PEError
from shmem_notebook.launcher.environment import platform_environment

job = job_fixture(2, 4, heap="32M", timeout=120)

#: each PE puts its number into its right neighbour's R, then reads what its left neighbour put,
#: then gives up: racy (nothing orders the read after the neighbour's put)
RAISES_RACY = """src = np.array([me], dtype=np.int64)
shmem.put(R[me:me + 1], src, (me + 1) % npes)
seen = int(R[(me - 1) % npes])
raise RuntimeError(f"saw {seen}")
"""
#: the fixed twin: a barrier between the put and the read
RAISES_FIXED = RAISES_RACY.replace("seen = int(", "shmem.barrier_all()\nseen = int(")
#: the fixed twin run to its end
FINISHES = RAISES_FIXED.replace('raise RuntimeError(f"saw {seen}")', 'print("saw", seen)')


def run(job, code, error=None, **options):
    """(result, what the cell printed) of a race-checked cell; ``error``: the exception it must raise."""
    out = io.StringIO()
    if error is None:
        return job.run(code, arrays=["R=int64[4]"], race=True, stdout=out, stderr=out, **options), out.getvalue()
    with pytest.raises(error) as info:
        job.run(code, arrays=["R=int64[4]"], race=True, stdout=out, stderr=out, **options)
    return info.value.result, out.getvalue()


def verdict(text):
    (line,) = [x for x in text.splitlines() if " found" in x and "(cell traced: " in x]
    return line


def test_a_cell_run_to_its_end_gets_the_plain_verdict(job):
    result, text = run(job, FINISHES)
    assert result.races == [] and verdict(text).startswith("no races found (cell traced: "), text


def test_a_cell_that_raised_on_every_pe_says_what_was_checked(job):
    every = f"PE 0-{job.n - 1}"
    result, text = run(job, RAISES_FIXED, PEError)
    assert result.races == []
    assert verdict(text).startswith(
        f"no races found in what was checked: {every} up to line 5; the cell raised "
        f"RuntimeError on {every} at line 5 (cell traced: "
    ), text
    result, text = run(job, RAISES_RACY, PEError)
    assert [sorted(a.line for a in race.accesses) for race in result.races] == [[2, 3]], [str(r) for r in result.races]
    assert verdict(text).startswith(
        f"1 race found in what was checked: {every} up to line 4; the cell raised "
        f"RuntimeError on {every} at line 4 (cell traced: "
    ), text


def test_pes_left_waiting_for_one_that_raised(job):
    code = "R[me] = me\nif me == 0:\n    raise ValueError('PE 0 gives up')\nshmem.barrier_all()\n"
    others = f"PE 1-{job.n - 1}" if job.n > 2 else "PE 1"
    _, text = run(job, code, PEError)
    assert verdict(text).startswith(
        f"no races found in what was checked: PE 0 up to line 3; {others} up to line 4; the cell raised ValueError on "
        f"PE 0 at line 3; the cell was stopped on {others} at line 4, where it waited for the PEs that raised "
    ), text


def test_a_cell_stopped_at_its_timeout(job):
    code = "R[me] = me\nshmem.barrier_all()\nimport time\ntime.sleep(30)\n"
    every = f"PE 0-{job.n - 1}"
    _, text = run(job, code, CellStoppedError, timeout=2)
    assert verdict(text).startswith(
        f"no races found in what was checked: {every} up to line 4; the cell was stopped "
        f"by its timeout of 2 s on {every} at line 4 (cell traced: "
    ), text
    assert job.state == "running"


def test_an_interrupted_cell(job):
    code = "R[me] = me\nshmem.barrier_all()\nimport time\ntime.sleep(30)\n"
    previous = signal.signal(signal.SIGINT, signal.default_int_handler)  # also when started with SIGINT ignored
    timer = threading.Timer(1.5, _thread.interrupt_main)  # the kernel's stop button
    timer.start()
    try:
        _, text = run(job, code, CellStoppedError)
    finally:
        timer.cancel()
        signal.signal(signal.SIGINT, previous)
    every = f"PE 0-{job.n - 1}"
    assert verdict(text).startswith(
        f"no races found in what was checked: {every} up to line 4; the cell was "
        f"interrupted on {every} at line 4 (cell traced: "
    ), text


def test_a_capped_trace_of_a_cell_that_raised_says_both(job, monkeypatch):
    from shmem_notebook.cells import race_stage

    monkeypatch.setattr(race_stage, "CAP", 60)
    code = (
        "src = np.ones(1, dtype=np.int64)\nfor i in range(200):\n"
        "    j = i * i % 997  # distinct for i < 499, in no progression\n"
        "    shmem.put(big[j:j + 1], src, (me + 1) % npes)\nshmem.barrier_all()\nraise KeyError('done')\n"
    )
    out = io.StringIO()
    with pytest.raises(PEError):
        job.run(code, arrays=["big=int64[997]"], race=True, stdout=out, stderr=out)
    line = verdict(out.getvalue())
    assert line.startswith(
        f"no races found in what was checked: PE 0-{job.n - 1} up to line 4; accesses after that "
        "were not checked (a PE's trace reached the cap of 60 events: trace fewer iterations); the "
        f"cell raised KeyError on PE 0-{job.n - 1} at line 6 (cell traced: "
    ), line


@pytest.mark.pe
def test_a_pe_that_died_checks_nothing():
    for job2 in running_job(2, heap="32M"):
        out = io.StringIO()
        with pytest.raises(PEDiedError):
            job2.run(
                "import os\nR[me] = me\nshmem.barrier_all()\nif me == 1:\n    os._exit(3)\nshmem.barrier_all()\n",
                arrays=["R=int64[4]"],
                race=True,
                stdout=out,
                stderr=out,
                timeout=60,
            )
        assert "race check: no PE sent its trace, so nothing was checked" in out.getvalue(), out.getvalue()
        assert "races found" not in out.getvalue()


def test_the_catalogue_runs_a_case_again_after_a_crash_in_a_library_thread_once(tmp_path):
    """race_score's rule on a real job: a PE whose C thread (no Python) segfaults in a case's first run is a
    warning and a second run on a fresh job, which scores; a crash in every run fails."""
    crash = (
        "import ctypes, os\n"
        "if me == 1 and {first}:\n"
        "    ctypes.CDLL(None).pthread_create(ctypes.byref(ctypes.c_ulong()), None, ctypes.c_void_p(16), None)\n"
        "    import time; time.sleep(10)\n"
        "src = np.full(1, me + 1, dtype=np.int64)\n"
        "shmem.put(R[me : me + 1], src, (me + 1) % npes)  # A\n"
        "x = R[(me - 1) % npes]  # B\n"
    )
    reset = "R[:] = 0\nshmem.barrier_all()"
    flag = str(tmp_path / "crashed")
    first = f"not os.path.exists({flag!r}) and not open({flag!r}, 'w').close()"
    once = Case("c-thread-crash-once", "test", True, crash.format(first=first))
    for job2 in running_job(2, heap="32M"):
        with pytest.warns(UserWarning, match=r"c-thread-crash-once.*in a thread that runs no Python code"):
            rows, scores = run_cases(job2, [once], ["R=int64[4]"], reset)
        assert [(case.name, ok) for case, ok, _ in rows] == [("c-thread-crash-once", True)], rows
        always = Case("c-thread-crash", "test", True, crash.format(first="True"))
        with pytest.raises(PEDiedError, match="in a thread that runs no Python code"), pytest.warns(UserWarning):
            run_cases(job2, [always], ["R=int64[4]"], reset)


# -- the runner: the same report --------------------------------------------------------------------
PROGRAM = """import numpy as np
from shmem4py import shmem

me, npes = shmem.my_pe(), shmem.n_pes()
R = shmem.zeros(4, dtype=np.int64)
shmem.barrier_all()  # Open MPI zeroes after the allocation's barrier: the runner reports a put before this
src = np.array([me], dtype=np.int64)
shmem.put(R[me:me + 1], src, (me + 1) % npes)
shmem.barrier_all()
seen = int(R[(me - 1) % npes])
raise RuntimeError(f"saw {seen}")
"""


@pytest.mark.pe
@pytest.mark.parametrize("racy", [False, True], ids=["fixed", "racy"])
def test_the_runner_says_a_program_that_raised_was_checked_in_part(tmp_path, racy):
    code = PROGRAM.replace("shmem.barrier_all()\nseen", "seen") if racy else PROGRAM
    (tmp_path / "gives_up.py").write_text(code)
    done = subprocess.run(
        [sys.executable, "-m", "shmem_notebook.race", "--", "oshrun", "-n", "2", sys.executable, "gives_up.py"],
        cwd=tmp_path,
        env=dict(os.environ, **platform_environment()),
        capture_output=True,
        text=True,
        timeout=240,
        check=False,
    )
    lines = done.stdout.splitlines()
    found = "1 race found" if racy else "no races found"
    assert done.returncode == (1 if racy else 3), done.stdout + done.stderr
    assert lines[-2].startswith(
        f"{found} in what was checked: PE 0-1 up to where it stopped; the program exited "
        "with status 1 on PE 0-1 (program traced: "
    ), lines
    assert lines[-1] == "the program exited with status 1"
