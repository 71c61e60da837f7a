"""Reductions stay right while the PEs take signals, in C and in a cell, on every library built here.

The tool signals running PEs: SIGINT at an interrupt or a timeout, SIGUSR1 when it reads their stacks
(``Job.locate``: the deadlock watch, a timeout, an interrupt). A library whose collectives go wrong when a
signal handler runs in the middle of them would give wrong values the tool cannot see, so each library is
checked against the closed form (``bench/sos_signal_reduce.c``, a no-op handler every 100 us). Sandia
OpenSHMEM's shared-heaps build fails it (docs/libraries.md): there it is skipped, and a job on that build
warns when it starts instead (``Library.caution``).
"""

import os
import signal
import subprocess
import threading
import time

import pytest

from conftest import job_fixture, needs_oshmpi, needs_sos, quiet
from shmem_notebook.launcher.environment import platform_environment
from shmem_notebook.launcher.library import library

PROGRAM = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "bench", "sos_signal_reduce.c")
#: name -> (PEs, reductions), a few seconds each: Sandia OpenSHMEM over libfabric's sockets takes ~25 ms a reduction
RUNS = {"oshmem": (3, 100_000), "sos": (2, 200), "oshmpi": (3, 30_000)}


def _command(name, n, exe):
    """The library's ``oshcc`` and how to run ``exe`` on ``n`` PEs (its environment as the launcher gives it)."""
    lib = library(name)
    env = {**os.environ, **platform_environment(heap="8M", local_only=True), **lib.env}
    if name == "oshmem":
        return "oshcc", ["oshrun", "-n", str(n), "--oversubscribe", exe], env
    if name == "sos":
        if lib.caution:
            pytest.skip(
                "this SOS build (shared heaps) is known to fail it and says so when a job starts: docs/libraries.md"
            )
        env["SHMEM_SYMMETRIC_SIZE"] = "8M"
        return os.path.join(os.path.dirname(lib.oshrun), "oshcc"), [lib.oshrun, "-n", str(n), exe], env
    home = os.path.dirname(os.path.dirname(os.path.dirname(lib.python)))  # .oshmpi/venv/bin/python
    return os.path.join(home, "install", "bin", "oshcc"), [lib.oshrun, "-n", str(n), "--oversubscribe", exe], env


@pytest.mark.pe
@pytest.mark.parametrize(
    "name", ["oshmem", pytest.param("sos", marks=needs_sos), pytest.param("oshmpi", marks=needs_oshmpi)]
)
def test_reductions_stay_right_while_pes_take_signals(name, tmp_path):
    n, count = RUNS[name]
    exe = str(tmp_path / "signal_reduce")
    oshcc, run, env = _command(name, n, exe)
    subprocess.run([oshcc, "-O2", "-o", exe, PROGRAM], check=True, capture_output=True, timeout=120)
    with subprocess.Popen(
        [*run, str(count), "100"],
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        env=env,
        cwd=tmp_path,
        start_new_session=True,
    ) as child:
        try:
            out, _ = child.communicate(timeout=240)
        except subprocess.TimeoutExpired:
            os.killpg(child.pid, signal.SIGKILL)
            out, _ = child.communicate()
            pytest.fail(f"{count} reductions on {n} PEs did not end within 240 s: {out[-2000:]}")
    assert child.returncode == 0 and f"{count} reductions right" in out, out[-3000:]
    assert int(out.rsplit(", ", 1)[1].split()[0]) > 0, out  # PE 0 took signals while it reduced


job = job_fixture(3, sos=(2,), oshmpi=(3,), heap="16M", timeout=180)
CHECKED = """
wrong = 0
for i in range({count}):
    src[:] = me + i + np.arange(4)
    shmem.reduce(dst, src, op=shmem.OP.SUM)
    want = npes * (npes - 1) // 2 + npes * i
    wrong += int(dst[0] != want or dst[3] != want + 3 * npes)
print(wrong)
"""
#: reductions per library through shmem4py, a few seconds each
CELL_RUNS = {"oshmem": 20_000, "sos": 150, "oshmpi": 10_000}


def test_a_cells_reductions_stay_right_while_the_tool_reads_the_pes_stacks(job):
    """The tool's own signals, end to end: SIGUSR1 stack dumps (``job.locate``, as the deadlock watch and a
    timeout take them) all through a cell of reductions, each checked on every PE."""
    if job.library.caution:
        pytest.skip("this library build is known to fail it and says so when a job starts: docs/libraries.md")
    stop, looks = threading.Event(), []

    def look():
        while not stop.is_set():
            looks.append(job.locate(range(job.n)))
            time.sleep(0.02)

    looking = threading.Thread(target=look)
    looking.start()
    try:
        count = CELL_RUNS[job.library.name]
        result = quiet(job, CHECKED.format(count=count), arrays=["src=int64[4]", "dst=int64[4]"])
    finally:
        stop.set()
        looking.join()
    assert result.stdout == {pe: "0\n" for pe in range(job.n)}, result.stdout
    assert sum(where == (4, "reduce") for seen in looks for where in seen.values()) >= 3, looks[:3]  # dumped inside
