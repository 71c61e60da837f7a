"""Crashed and hung PEs, kernel death, long sessions, loopback-only listening.

Real oshrun jobs throughout; the interrupt and kernel-death tests drive a real
Jupyter kernel through jupyter_client, as a notebook front end does.
"""

import contextlib
import io
import os
import re
import signal
import socket
import stat
import subprocess
import sys
import threading
import time
import uuid

import psutil
import pytest

import shmem_notebook
from conftest import job_fixture, needs_sos, quiet
from shmem_notebook import CellStoppedError, JobStateError, PEDiedError
from shmem_notebook.job.processes import wait
from shmem_notebook.job.watchdog import owned_processes
from shmem_notebook.launcher.environment import platform_environment
from shmem_notebook.launcher.shm import SHM_DIR, Segments, SharedMemoryOf, orphan_ucx_files

pytestmark = pytest.mark.pe  # every test starts PEs (a job, or a kernel that starts one)


job2 = job_fixture(2, oshmpi=(2,))


CRASHES = {
    "segfault": ("import ctypes; ctypes.string_at(0)", "signal 11 (SIGSEGV)"),
    # off the cell's thread: a Python thread, and a thread that runs no Python (as a library's own would)
    "thread segfault": (
        "import ctypes, threading; t = threading.Thread(target=ctypes.string_at, args=(0,)); t.start(); t.join()",
        "signal 11 (SIGSEGV)",
    ),
    "C thread segfault": (
        "import ctypes; libc = ctypes.CDLL(None); "
        "libc.pthread_create(ctypes.byref(ctypes.c_ulong()), None, ctypes.c_void_p(16), None)",
        "signal 11 (SIGSEGV)",
    ),
    "os._exit": ("import os; os._exit(3)", "exit code 3"),
    "global_exit": ("shmem.global_exit(2)", "shmem.global_exit(2)"),
    "sigkill": (None, "signal 9 (SIGKILL)"),  # killed from outside
}
#: where the message says the PE was: a fatal signal names the cell's line, or the thread it struck and the
#: cell's line; an exit or SIGKILL cannot (the PE writes nothing). A C thread's death races the cell's thread
#: on: it may be back in its line, at line 4, or in IPython compiling line 4 (a CI run met that)
PLACES = {
    "segfault": " at line 3",
    "thread segfault": r" in string_at \(ctypes/__init__\.py:\d+\) with the cell's thread at line 3",
    "C thread segfault": r" in a thread that runs no Python code \(the OpenSHMEM library's own, or another C "
    r"library's\) with the cell's thread (at line [34]|between two of its statements)",
}


@pytest.mark.parametrize("kind", list(CRASHES))
def test_a_dying_pe_ends_the_cell_with_its_cause(job2, kind):
    death, cause = CRASHES[kind]
    if job2.state != "running":
        job2.restart()
    job2.alloc("keep=int64[4]")
    quiet(job2, "keep[:] = 7")
    if death is None:
        victim = job2.pes[1]["pid"]
        threading.Timer(1.0, os.kill, (victim, signal.SIGKILL)).start()
        death = "import time; time.sleep(60)"
    code = f"print('survivor output', me)\nif me == 1:\n    {death}\nimport time; time.sleep(60)"
    t0 = time.monotonic()
    with pytest.raises(PEDiedError) as info:
        quiet(job2, code)
    elapsed = time.monotonic() - t0
    assert elapsed < 5 + (1 if kind == "sigkill" else 0), f"the cell took {elapsed:.1f} s to end"
    message = str(info.value)
    assert re.search(f"PE 1 died of {re.escape(cause)}{PLACES.get(kind, '')} while the cell ran", message), message
    assert "%shmem restart" in message
    assert sorted(info.value.dumps) == ([1] if "segfault" in kind else [])  # the stacks it wrote, for a bug report
    assert f"so {os.path.basename(job2.library.oshrun)} ended the job" in message  # oshrun, or OSHMPI's mpirun
    assert info.value.causes[1] == cause
    assert job2.last_result.stdout[0] == "survivor output 0\n"  # the other PE's output is kept
    assert job2.state == "dead"
    assert [row["state"] for row in job2.status()] == ["dead", "dead"]
    with pytest.raises(PEDiedError, match="restart"):
        quiet(job2, "pass")
    # nothing of the old PEs is left; the controller (and the fork server) stay for a fast restart
    server = job2.forks.process.pid if job2.forks.process else None
    engines = [p for p in owned_processes(job2._token) if "shmem_notebook.engine" in " ".join(p.cmdline())]
    assert [p for p in engines if p.pid != server] == []
    t0 = time.monotonic()
    job2.restart()
    print(f"restart after {kind}: {time.monotonic() - t0:.2f} s")
    assert job2.state == "running"
    assert not job2.gather("keep").any()  # re-allocated, zeroed
    assert quiet(job2, "print(me)").stdout == {0: "0\n", 1: "1\n"}


job4 = job_fixture(4)


def test_barrier_deadlock_shows_where_every_pe_is(job4):
    """PE 0 alone in a barrier: the others finished; they join it, and the job stays ready."""
    code = "x = 1\nif me == 0:\n    shmem.barrier_all()\ny = 2"
    started = time.monotonic()
    with pytest.raises(CellStoppedError) as info:
        quiet(job4, code, timeout=30)
    assert str(info.value) == (
        "PE 1-3 finished the cell; PE 0 waits in shmem.barrier_all() at line 3 for them; the rest "
        "of the cell was abandoned on every PE; the job is ready and every PE kept its variables"
    )
    assert time.monotonic() - started < 3
    assert job4.state == "running"
    assert quiet(job4, "print('back', x)").stdout[3] == "back 1\n"


def test_a_timeout_with_a_pe_in_a_barrier_joins_it(job4):
    """The timeout interrupts the sleeping PEs; the one in the barrier is released by their joining it."""
    code = "x = 1\nif me == 0:\n    shmem.barrier_all()\nelse:\n    import time\n    time.sleep(60)"
    with pytest.raises(CellStoppedError) as info:
        quiet(job4, code, timeout=2)
    assert info.value.where == ["PE 0: line 3, shmem.barrier_all()", "PE 1-3: line 6, time.sleep(60)"]
    assert "did not finish within 2 s; every PE stopped at the interrupt and the job is still usable" in str(info.value)
    assert job4.state == "running"
    assert quiet(job4, "print('back', x)").stdout[3] == "back 1\n"


def test_a_timeout_nobody_can_be_released_from_marks_the_job_hung(job4, monkeypatch):
    monkeypatch.setattr(shmem_notebook.rc, "deadlock_ms", 0)  # the timeout's path (a deadlock is named before it)
    code = "shmem.wait_until(flag, shmem.CMP.EQ, 1)"
    with pytest.raises(CellStoppedError) as info:
        quiet(job4, code, arrays="flag=int64[1]", timeout=2)
    assert (
        "did not finish within 2 s; PE 0-3 could not be interrupted (blocked in OpenSHMEM) and are paused (no CPU)"
        in str(info.value)
    )
    assert job4.state == "hung"
    with pytest.raises(JobStateError, match="hung .* restart"):
        quiet(job4, "pass")
    job4.restart()
    assert quiet(job4, "print('back')").stdout[3] == "back\n"


def test_wait_until_nobody_sets_shows_the_blocking_call(job4, monkeypatch):
    monkeypatch.setattr(shmem_notebook.rc, "deadlock_ms", 0)  # the timeout's path (a deadlock is named before it)
    code = "print('waiting', me)\nshmem.wait_until(flag, shmem.CMP.EQ, 1)"
    with pytest.raises(CellStoppedError) as info:
        quiet(job4, code, arrays="flag=int64[1]", timeout=1.5)
    assert info.value.where == ["PE 0-3: line 2, shmem.wait_until(flag, shmem.CMP.EQ, 1)"]
    assert all(job4.last_result.stdout[pe] == f"waiting {pe}\n" for pe in range(4))
    job4.restart()


def test_global_exit_names_the_pe_and_the_status(job4):
    """Issue 9 item 8: oshrun's output lost PE 3's note now and then ("oshrun exited while the cell ran")."""
    for _ in range(3):
        if job4.state != "running":
            job4.restart()
        with pytest.raises(PEDiedError) as info:
            quiet(job4, "shmem.barrier_all()\nif me == 3:\n    shmem.global_exit(5)\nprint(me)")
        assert "PE 3 died of shmem.global_exit(5)" in str(info.value), str(info.value)
        assert info.value.causes[3] == "shmem.global_exit(5)"
    job4.restart()


def test_default_timeout_from_start():
    job = shmem_notebook.Job(2, timeout=1).start()
    try:
        with pytest.raises(CellStoppedError, match="within 1 s"):
            quiet(job, "import time\ntime.sleep(5)")
    finally:
        job.stop()


def test_eight_pes_on_two_cores():
    with shmem_notebook.Job(8).start() as job:
        result = quiet(job, "shmem.barrier_all()\nprint(me)")
        assert result.stdout == {pe: f"{pe}\n" for pe in range(8)}


def test_two_hundred_cells_lose_no_output_and_memory_stays_flat(job4):
    def cells(count):
        for i in range(count):
            out = io.StringIO()
            job4.run(f"print('cell', {i}, me)\nprint('end', {i})", stdout=out)
            lines = out.getvalue().splitlines()
            assert lines[:4] == [f"[PE {pe}] cell {i} {pe}" for pe in range(4)], lines
            assert lines[4:] == [f"[PE 0-3] end {i}"], lines

    client = psutil.Process()
    cells(300)  # the first ~250 cells warm up zmq's and Python's pools (~15 MiB), then RSS flattens
    before = client.memory_info().rss
    cells(200)
    growth = (client.memory_info().rss - before) / 2**20
    print(f"client RSS growth over 200 cells after 300 warm-up cells: {growth:.2f} MiB")
    # measured 0.2-6 MiB: jupyter_client's Session keeps the signature of every message it
    # received (~30 a cell at 4 PEs) up to 2**16 of them, then culls; outputs kept per cell would be far more
    assert growth < 10, f"client memory grew {growth:.1f} MiB over 200 cells"


def test_listens_on_loopback_only_and_files_are_private(job2):
    if job2.state != "running":
        job2.restart()
    procs = owned_processes(job2._token)
    launcher = os.path.basename(job2.library.oshrun)  # oshrun, OSHMPI's mpirun: PMIx servers (docs/architecture.md)
    ours = [p for p in procs if p.name() != launcher]
    assert len(ours) >= 1 + 2  # controller and PEs
    listening = []
    for proc in ours:
        for conn in proc.net_connections(kind="inet"):
            if conn.status == psutil.CONN_LISTEN:
                listening.append((proc.pid, conn.laddr.ip, conn.laddr.port))
    # the controller of a job on one host listens on Unix sockets in security/ (test_listen), on no TCP port
    assert all(ip in ("127.0.0.1", "::1") for _, ip, _ in listening), listening
    security = os.path.join(job2._cluster.profile_dir, "security")
    files = [f for f in os.listdir(security) if job2._cluster.cluster_id in f]
    assert len(files) >= 3  # client and engine connection files, cluster file (and the controller's sockets)
    for name in files:  # the user's only: 0600 files, 0700 sockets
        assert stat.S_IMODE(os.stat(os.path.join(security, name)).st_mode) & 0o077 == 0, name


# -- a real kernel: interrupt, shutdown, restart ---------------------------------


@pytest.fixture
def kernel():
    from jupyter_client.manager import start_new_kernel

    km, kc = start_new_kernel(kernel_name="python3")
    try:
        yield km, kc
    finally:
        kc.stop_channels()
        if km.is_alive():
            km.shutdown_kernel(now=True)


def execute(kc, code, timeout=120, during=None):
    """Run code in the kernel; return (printed text, error text)."""
    msg_id = kc.execute(code)
    if during:
        during()
    text, error = [], []
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        msg = kc.get_iopub_msg(timeout=deadline - time.monotonic())
        if msg["parent_header"].get("msg_id") != msg_id:
            continue
        kind, content = msg["msg_type"], msg["content"]
        if kind == "stream":
            text.append(content["text"])
        elif kind == "error":
            error.append("\n".join(content["traceback"]))
        elif kind == "status" and content["execution_state"] == "idle":
            return "".join(text), "\n".join(error)
    raise TimeoutError(code)


def test_kernel_interrupt_shows_where_pes_are_and_restart_recovers(kernel):
    km, kc = kernel
    execute(kc, "%load_ext shmem_notebook")
    # the interrupt's path: a deadlock is named before it
    execute(kc, "import shmem_notebook; shmem_notebook.rc.deadlock_ms = 0")
    out, err = execute(kc, "%shmem start -n 2")
    assert "ready" in out, err
    out, err = execute(
        kc,
        "%%pxshmem F=int64[1]\nprint('entering', me)\nshmem.wait_until(F, shmem.CMP.EQ, 1)",
        during=lambda: (time.sleep(3), km.interrupt_kernel()),
    )
    assert "[PE 0] entering 0" in out and "[PE 1] entering 1" in out
    assert (
        "CellStoppedError: the cell was interrupted; PE 0-1 could not be interrupted (blocked in OpenSHMEM) and are "
        "paused (no CPU), so the job is marked hung"
    ) in err, err
    assert "PE 0-1: line 2, shmem.wait_until(F, shmem.CMP.EQ, 1)" in err
    out, err = execute(kc, "%shmem status")
    out, err = execute(kc, "%shmem restart")
    assert "restarted: 2 PEs" in out, err
    out, err = execute(kc, "%%pxshmem\nprint('after', me)")
    assert out == "[PE 0] after 0\n[PE 1] after 1\n", err
    # Ctrl-C in a cell that PEs can leave: the job stays usable
    out, err = execute(
        kc, "%%pxshmem\nimport time\ntime.sleep(30)", during=lambda: (time.sleep(2), km.interrupt_kernel())
    )
    assert "every PE stopped at the interrupt and the job is still usable" in err
    out, err = execute(kc, "%%pxshmem\nprint('still', me)")
    assert out == "[PE 0] still 0\n[PE 1] still 1\n", err


@pytest.mark.parametrize("how", ["shutdown", "kill", "restart"])
def test_kernel_end_stops_the_job(kernel, how):
    km, kc = kernel
    execute(kc, "%load_ext shmem_notebook")
    out, err = execute(kc, "%shmem start -n 2")
    assert "ready" in out, err
    tree = psutil.Process(km.provisioner.process.pid).children(recursive=True)
    assert any("shmem_notebook.engine" in " ".join(p.cmdline()) for p in tree)
    segments = Segments()
    segments.note(p.pid for p in tree)  # this job's /dev/shm files and SysV segments
    assert segments.files and segments.shmids
    out, err = execute(
        kc,
        "from shmem_notebook import current_job\n"
        "print(current_job()._cluster.profile_dir, current_job()._cluster.cluster_id)",
    )
    profile, cluster_id = out.split()

    def profile_files():
        return [n for d in ("log", "security") for n in os.listdir(os.path.join(profile, d)) if cluster_id in n]

    assert profile_files(), err  # the controller's log and connection files, the cluster file
    if how == "shutdown":
        km.shutdown_kernel()
    elif how == "kill":
        km.provisioner.process.kill()  # SIGKILL: only the watchdog can clean up
    else:
        km.restart_kernel(now=True)
    _, alive = psutil.wait_procs(tree, timeout=15)
    assert [" ".join(p.cmdline())[:100] for p in alive if p.status() != psutil.STATUS_ZOMBIE] == []
    assert wait(lambda: segments.left() == (set(), set()), 5.0), segments.left()
    assert wait(lambda: profile_files() == [], 5.0), profile_files()


@needs_sos
def test_sos_crash_and_kernel_death_leave_nothing(kernel):
    """On Sandia OpenSHMEM (mpiexec.hydra and its proxies start the PEs): a PE killed is named
    with its cause, restart recovers, a PE that aborts leaves no crash file, and a SIGKILLed kernel
    leaves no process, segment or file."""
    km, kc = kernel
    execute(kc, "%load_ext shmem_notebook")
    out, err = execute(kc, "%shmem start -n 2 --library sos --heap 8M")
    assert "ready" in out, err
    out, err = execute(kc, "%%pxshmem\nimport os, time\nif me == 1:\n    os.kill(os.getpid(), 9)\ntime.sleep(30)")
    # PE 1 died first; hydra then killed PE 0 too (the two are told apart unless both ended before a look;
    # when PE 1 was reaped before the look, its cause is not known, but it is still the PE named; when the
    # look cannot order them, PE 0 is named too: postmortem.with_first_deaths)
    named = r"PEDiedError: (PE 0 died of [^;]+; )?PE (1|0-1) died of ({}|a cause the launcher did not report){} while"
    # a fatal signal names the cell's line the PE ran (its own stacks); SIGKILL leaves none
    assert re.search(named.format(r"signal 9 \(SIGKILL\)", ""), err), err
    out, err = execute(kc, "%shmem restart")
    assert "restarted: 2 PEs" in out, err
    # a PE that aborts leaves no crash file in the notebook's folder (libfabric's libinfinipath writes
    # python.80s-PID,HOST.btr there unless told not to: the launcher's environment)
    out, err = execute(kc, "import os; print(os.getcwd())")
    folder = out.strip()
    before = {n for n in os.listdir(folder) if n.endswith(".btr")}
    out, err = execute(kc, "%%pxshmem\nimport os, time\nif me == 1:\n    os.abort()\ntime.sleep(30)")
    # hydra then SIGTERMs PE 0 and may name it; the PE seen ending first is named (with_first_deaths)
    assert re.search(named.format(r"signal 6 \(SIGABRT\)", "( at line 3)?"), err), err
    assert {n for n in os.listdir(folder) if n.endswith(".btr")} == before, f"a crash file was left in {folder}"
    out, err = execute(kc, "%shmem restart")
    assert "restarted: 2 PEs" in out, err
    out, err = execute(kc, "%shmem status")
    assert "library: sos (Sandia OpenSHMEM, OpenSHMEM 1.5)" in out, err
    tree = psutil.Process(km.provisioner.process.pid).children(recursive=True)
    names = " ".join(" ".join(p.cmdline()) for p in tree)
    assert "shmem_notebook.engine" in names and "hydra" in names, names
    segments = Segments()
    segments.note(p.pid for p in tree)
    km.provisioner.process.kill()  # SIGKILL: only the watchdog can clean up
    _, alive = psutil.wait_procs(tree, timeout=15)
    assert [" ".join(p.cmdline())[:100] for p in alive if p.status() != psutil.STATUS_ZOMBIE] == []
    assert wait(lambda: segments.left() == (set(), set()), 5.0), segments.left()


def test_a_process_noted_before_its_exec_is_asked_its_job_again():
    """A PE noted between its launcher's fork and its exec shows no Open MPI job id yet: the next look asks again."""
    later = "sleep 0.5; exec env OMPI_MCA_ess_base_jobid=123456 sleep 30"
    process = subprocess.Popen(["sh", "-c", later], start_new_session=True)
    try:
        segments = Segments()
        segments.note([process.pid])
        assert segments.jobs == set() and segments.jobless == {process.pid}
        assert wait(lambda: segments.note([process.pid]) or segments.jobs == {123456}, 10.0), segments.jobless
        assert segments.jobless == set()
    finally:
        os.killpg(process.pid, signal.SIGKILL)
        process.wait()


def test_a_ucx_file_no_process_holds_goes_at_a_jobs_release():
    """UCX's ``ucx_shm_posix_*`` files name no job; one left by a process killed before UCX removed it (held by
    no process, made since the job began) goes when a job's shared memory is released, one still held stays."""
    old = f"{SHM_DIR}/ucx_shm_posix_{uuid.uuid4().hex[:8]}"
    open(old, "w").close()
    os.utime(old, (time.time() - 3600, time.time() - 3600))  # older than the job: not this job's to judge
    segments = Segments()
    held, orphan = (f"{SHM_DIR}/ucx_shm_posix_{uuid.uuid4().hex[:8]}" for _ in range(2))
    holder = subprocess.Popen([sys.executable, "-c", f"f = open({held!r}, 'w'); input()"], stdin=subprocess.PIPE)
    try:
        assert wait(lambda: os.path.exists(held), 10.0)
        for _ in range(5):  # another test's job (pytest -n) that ends meanwhile may remove the orphan first
            open(orphan, "w").close()
            found = orphan_ucx_files(segments.since)  # (and may leave one of its own: not asked about)
            files, _ = segments.release()
            if orphan in files or os.path.exists(orphan):  # else another release took it: again
                break
        assert orphan in found and held not in found and old not in found
        assert orphan in files and not os.path.exists(orphan) and os.path.exists(held) and os.path.exists(old)
    finally:
        holder.communicate(b"\n", timeout=10)
        for path in (old, held, orphan):
            with contextlib.suppress(FileNotFoundError):
                os.unlink(path)


def test_a_vader_file_made_after_the_last_look_goes_with_its_job():
    """A PE that makes its vader file after SharedMemoryOf's last look and dies before the next leaves a file
    no process maps (the race runner's Ctrl-C, CI): it goes by the Open MPI job id the PEs carry."""
    pe = "from shmem4py import shmem; import time; time.sleep(60)"
    env = dict(os.environ, **platform_environment())
    runner = subprocess.Popen(["oshrun", "-n", "2", sys.executable, "-c", pe], env=env, start_new_session=True)
    try:
        with SharedMemoryOf(runner) as shm:
            assert wait(lambda: len(shm.segments.jobs) == 1 and shm.segments.files, 60.0), "no PE came up"
            (job,) = shm.segments.jobs
            late = f"{SHM_DIR}/vader_segment.{socket.gethostname()}.0.{job:x}.7"  # as a third rank's would be
            open(late, "w").close()
            os.killpg(runner.pid, signal.SIGKILL)
    finally:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(runner.pid, signal.SIGKILL)
    assert not os.path.exists(late)
    assert not [path for path in shm.segments.files if os.path.exists(path)]
