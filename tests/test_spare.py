"""Spare PEs (``spare=True``, ``--spare``; job/spare.py, engine/spare_wait.py): N more PEs wait, imports
done and before ``shmem_init``, using no CPU and no shared memory; a restart (healthy, after a crash,
after a hang, right after the start) makes them the job's PEs; a stop, or the kernel's death, ends
them and leaves nothing. On every library. test_transitions.py runs every method and magic around
a spare job's transitions."""

import glob
import io
import os
import subprocess
import sys
import time

import psutil
import pytest

import shmem_notebook
from conftest import job_fixture, left_of
from shmem_notebook import CellStoppedError, InputError, PEDiedError
from shmem_notebook.job.processes import wait
from shmem_notebook.job.watchdog import OWNER
from shmem_notebook.launcher.shm import Segments

job = job_fixture(2, 4, heap="16M", timeout=60, spare=True, sos=(2,), oshmpi=(2,))


def spare_pes(job):
    """The pids of the spare set's PEs, once every one of them waits."""
    assert wait(lambda: job.spares.waiting() == job.n, 60), f"{job.spares.waiting()} of {job.n} spare PEs wait"
    launcher = job._cluster.engines[job.spares.set_id]
    return {
        p.pid
        for p in psutil.Process(launcher.process.pid).children(recursive=True)
        if "shmem_notebook.engine" in " ".join(p.cmdline())
    }


def cpu(pids):
    return sum(sum(psutil.Process(pid).cpu_times()[:2]) for pid in pids)


def test_spare_pes_wait_without_cpu_or_shared_memory(job):
    pids = spare_pes(job)
    assert len(pids) == job.n
    time.sleep(0.5)  # a PE says it waits just before its wait: the steady state comes after (CI once met 10 ms more)
    before = cpu(pids)
    time.sleep(1.0)
    assert cpu(pids) - before <= 0.02 * job.n, "spare PEs used CPU while they waited"
    for pid in pids:  # before shmem_init: no symmetric heap, no transport segments
        with open(f"/proc/{pid}/maps") as maps:
            mapped = maps.read()
        assert "/dev/shm/" not in mapped and "SYSV" not in mapped, pid


def test_a_restart_makes_the_spare_pes_the_jobs(job):
    job.alloc("A=int64[4]")
    job.run("A[:] = 7", stdout=io.StringIO())
    spare, old = spare_pes(job), {info["pid"] for info in job.pes.values()}
    job.restart()
    assert {info["pid"] for info in job.pes.values()} == spare  # the spare set became the job
    assert all(not psutil.pid_exists(pid) or psutil.Process(pid).status() == psutil.STATUS_ZOMBIE for pid in old)
    assert (job.gather("A") == 0).all()  # declared arrays come back zeroed, as after any restart
    result = job.run("print(me, npes)", stdout=io.StringIO())
    assert sorted(result.stdout.values()) == [f"{pe} {job.n}\n" for pe in range(job.n)]
    assert spare_pes(job).isdisjoint(spare)  # and a new spare set waits for the next restart


def test_after_a_crash_or_a_hang_the_restart_takes_the_spare_pes(job):
    spare = spare_pes(job)
    with pytest.raises(PEDiedError):
        job.run("import os\nif me == npes - 1:\n    os._exit(3)\nshmem.barrier_all()", stdout=io.StringIO())
    job.restart()
    assert {info["pid"] for info in job.pes.values()} == spare
    spare = spare_pes(job)
    with pytest.raises(CellStoppedError):
        job.run(
            "if me == 0:\n    shmem.wait_until(F, shmem.CMP.EQ, 9)",
            arrays=["F=int64[1]"],
            timeout=1,
            stdout=io.StringIO(),
        )
    assert job.state == "hung"
    job.restart()
    assert {info["pid"] for info in job.pes.values()} == spare and job.state == "running"
    job.run("shmem.barrier_all()", stdout=io.StringIO())


@pytest.mark.pe
def test_a_restart_right_after_the_start_waits_for_the_spare_pes_still_importing():
    with shmem_notebook.start(2, heap="8M", spare=True) as j:
        j.restart()  # the spare PEs have not reached their wait yet
        assert [r["state"] for r in j.status()] == ["idle", "idle"]
        j.restart()
        j.run("shmem.barrier_all()", stdout=io.StringIO())


def _owned(token):
    found = []
    for p in psutil.process_iter():
        try:
            if p.environ().get(OWNER) == token and p.status() != psutil.STATUS_ZOMBIE:
                found.append(p.pid)
        except psutil.Error:
            pass
    return found


@pytest.mark.pe
def test_stop_ends_the_spare_pes_and_leaves_nothing():
    j = shmem_notebook.start(2, heap="8M", spare=True)
    spare_pes(j)
    files = os.path.join(j._cluster.profile_dir, "security", f"spare-{j._cluster.cluster_id}-*")
    assert len(glob.glob(files)) == 2  # the lock and the count of the PEs that wait on it
    ours = Segments()  # what the job's processes map, their SysV segments and Open MPI job's files
    ours.note(_owned(j._token))
    assert ours.files or ours.shmids, "the job's PEs map no shared memory"
    j.stop()
    assert wait(lambda: not _owned(j._token), 10), _owned(j._token)
    assert not glob.glob(files)
    # not what another test's job (pytest -n) leaves meanwhile: this job's only
    assert wait(lambda: left_of(ours) == (set(), set()), 10), left_of(ours)


@pytest.mark.pe
def test_the_kernels_death_ends_the_spare_pes(tmp_path):
    """A kernel killed by SIGKILL: its watchdog ends the spare PEs with the rest of the job."""
    code = (
        "import os, sys, time, shmem_notebook\n"
        "j = shmem_notebook.start(2, heap='8M', spare=True)\n"
        "while j.spares.waiting() < 2:\n    time.sleep(0.1)\n"
        "print(j._token, flush=True)\n"
        "os.kill(os.getpid(), 9)\n"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    token = done.stdout.strip().splitlines()[-1]
    assert wait(lambda: not _owned(token), 15), _owned(token)


def test_spare_pes_are_for_this_host_only():
    with pytest.raises(InputError, match="spare PEs wait on this host only"):
        shmem_notebook.Job(2, spare=True, hostfile="hosts.txt")
