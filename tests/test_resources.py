"""Shared memory and start-up limits (issue 9, item 1): an impossible heap is refused before
anything is launched, a start that never becomes ready times out, and no ``/dev/shm`` file or
SysV segment of a job survives stop, crash, a failed start or everything being SIGKILLed.

Other jobs run on this machine at the same time, so a job's segments are identified by its own
processes (conftest.ShmTracker), never by assuming /dev/shm is empty. No test starts a heap
bigger than a few MiB.
"""

import io
import os
import signal
import time

import psutil
import pytest

import shmem_notebook
from conftest import ShmTracker
from shmem_notebook import LaunchError, PEDiedError
from shmem_notebook.job import heap_fit as fit
from shmem_notebook.job.processes import alive, wait
from shmem_notebook.job.watchdog import owned_processes
from shmem_notebook.rc import rc

GiB = 1 << 30


# -- the fit check, pure -----------------------------------------------------------------


def test_refusal_names_both_sizes_and_the_largest_heap_that_fits():
    with pytest.raises(LaunchError) as info:
        fit.check_heap_fits(2, 100 * GiB, environ={}, memory=24 * GiB, shm_free=GiB)
    message = str(info.value)
    assert "2 PEs x heap 100.0 GiB need 200.2 GiB" in message
    assert "can give 24.0 GiB" in message
    # (24 GiB - 2 x 128 MiB) / 2 = 11.875 GiB = 12160 MiB
    assert "the largest heap that fits is 12160M per PE: use `--heap 12160M`" in message
    fit.check_heap_fits(2, 12160 << 20, environ={}, memory=24 * GiB, shm_free=GiB)  # that one fits
    with pytest.raises(LaunchError, match="12161.0 MiB|need"):
        fit.check_heap_fits(2, 12161 << 20, environ={}, memory=24 * GiB, shm_free=GiB)


def test_no_heap_fits_and_dev_shm_too_small():
    with pytest.raises(LaunchError, match=r"at most 7 PEs per node fit with a heap of 1\.0 MiB: use -n 7 or fewer"):
        fit.check_heap_fits(16, 1 << 20, environ={}, memory=GiB, shm_free=GiB)
    with pytest.raises(LaunchError, match=r"/dev/shm .* has 64.0 MiB free.*--shm-size"):
        fit.check_heap_fits(16, 1 << 20, environ={}, memory=64 * GiB, shm_free=64 << 20)
    fit.check_heap_fits(16, 100 * GiB, environ={"SHMEM_NOTEBOOK_HEAP_CHECK": "off"}, memory=GiB, shm_free=0)


def test_pes_per_node_with_hostfile_and_slurm(tmp_path):
    hosts = tmp_path / "hosts"
    hosts.write_text("# nodes\nnode1 slots=4\nnode2 slots=4  # second\n\nnode3 slots=2\n")
    assert fit.pes_per_node(6, str(hosts), environ={}) == 4
    assert fit.pes_per_node(3, str(hosts), environ={}) == 3
    assert fit.pes_per_node(13, str(hosts), environ={}) == 5  # oversubscribed: 3 extra round-robin
    assert fit.pes_per_node(8, environ={"SLURM_TASKS_PER_NODE": "2(x3),1"}) == 3
    assert fit.pes_per_node(5, environ={}) == 5
    # spread over nodes of 4: 16 PEs x 5 GiB fit where 16 on one node would not
    fit.check_heap_fits(16, 5 * GiB, environ={"SLURM_TASKS_PER_NODE": "4(x4)"}, memory=24 * GiB, shm_free=GiB)
    with pytest.raises(LaunchError, match="4 PEs on its busiest node x heap 6.0 GiB"):
        fit.check_heap_fits(16, 6 * GiB, environ={"SLURM_TASKS_PER_NODE": "4(x4)"}, memory=24 * GiB, shm_free=GiB)


def test_node_memory_reads_this_node():
    memory, what = fit.node_memory()
    assert 0 < memory <= psutil.virtual_memory().total
    assert "MemAvailable" in what or "shmall" in what


# -- real jobs -----------------------------------------------------------------------------


def test_impossible_heap_is_refused_before_anything_starts():
    too_big = 4 * psutil.virtual_memory().total
    job = shmem_notebook.Job(2, heap=str(too_big))
    t0 = time.monotonic()
    with pytest.raises(LaunchError) as info:
        job.start()
    assert time.monotonic() - t0 < 1.0
    assert "the largest heap that fits is" in str(info.value) and "--heap" in str(info.value)
    assert job.state == "stopped" and owned_processes(job._token) == []


def test_magic_refuses_an_impossible_heap():
    from conftest import ipython_shell

    ip = ipython_shell()
    with pytest.raises(LaunchError, match="largest heap that fits"):
        ip.run_line_magic("shmem", f"start -n 2 --heap {4 * psutil.virtual_memory().total >> 30}G")


@pytest.mark.pe
def test_a_start_that_never_becomes_ready_times_out_and_leaves_nothing(monkeypatch):
    # counted from the client's connection to the controller: a PE then still needs its kernel
    # built and a heartbeat (~0.1 s at least) to register
    monkeypatch.setattr(rc, "start_timeout", 0.01)
    job = shmem_notebook.Job(2, heap="8M")
    tracker = ShmTracker(job._token)
    with pytest.raises(LaunchError) as info:
        job.start()
    tracker.stop()
    assert "only 0 of 2 PEs registered in 0.01 s" in str(info.value) and "oshrun said" in str(info.value)
    assert owned_processes(job._token) == []
    assert tracker.segments.pids, "the tracker never saw the job's processes"
    assert tracker.left() == ([], [])


def _small_job(tracker_box):
    job = shmem_notebook.Job(2, heap="8M")
    job.start()
    tracker_box.append(ShmTracker(job._token))
    tracker_box[-1].sample()
    return job


@pytest.mark.pe
def test_stop_leaves_no_shared_memory():
    box = []
    job = _small_job(box)
    files, shmids = box[0].left()
    assert any(f.startswith("/dev/shm/vader_segment") for f in files) and shmids, "the job holds no shared memory?"
    job.stop()
    assert box[0].stop().left() == ([], [])


@pytest.mark.pe
def test_a_crash_leaves_no_shared_memory():
    box = []
    job = _small_job(box)
    try:
        with pytest.raises(PEDiedError):
            job.run(
                "if me == 1:\n    import os; os.kill(os.getpid(), 9)\nimport time; time.sleep(30)",
                stdout=io.StringIO(),
                stderr=io.StringIO(),
            )
        assert box[0].stop().left() == ([], [])
    finally:
        job.stop()


@pytest.mark.pe
def test_restart_leaves_nothing_of_the_old_pes():
    """restart kills the old PEs and returns once the new ones answer; their oshrun, which
    lingers 1-2 s, is reaped at the next cell (or status, restart, stop) with its segments."""
    box = []
    job = _small_job(box)
    try:
        old_oshrun = job._engine_set().process
        old_pes = {info["pid"] for info in job.pes.values()}
        old_segments = box[0].left()
        assert old_segments[0], "the job holds no shared memory?"
        job.restart()
        assert not old_pes & {info["pid"] for info in job.pes.values()}
        assert [p.pid for p in psutil.Process().children(recursive=True) if p.pid in old_pes and _living(p)] == []
        assert wait(lambda: not alive(old_oshrun), 10), "the old oshrun did not end"
        assert job.run("print(me)", stdout=io.StringIO()).stdout == {0: "0\n", 1: "1\n"}
        assert list(job._cluster.engines) == [job._engine_set_id], "the old engine set was not reaped"
        assert [f for f in old_segments[0] if os.path.exists(f)] == [], "the old PEs' /dev/shm files are left"
    finally:
        job.stop()
    assert box[0].stop().left() == ([], [])


def _living(proc):
    """Running and not a zombie (a killed PE is one until its oshrun reaps it)."""
    try:
        return proc.status() != psutil.STATUS_ZOMBIE
    except psutil.NoSuchProcess:
        return False


@pytest.mark.pe
def test_everything_sigkilled_leaves_no_shared_memory():
    """oshrun and every PE killed at once (what the OOM killer or a kill -9 does): Open MPI
    cannot remove its vader files; stop must."""
    box = []
    job = _small_job(box)
    tracker = box[0].stop()
    oshrun = job._engine_set().process
    victims = [oshrun] + oshrun.children(recursive=True)
    for proc in victims:
        proc.send_signal(signal.SIGKILL)
    psutil.wait_procs(victims, timeout=5)
    job.stop()
    assert tracker.left() == ([], [])


# -- files in the IPython profile (item 10) and a missing shmem4py (item 12) ----------------


@pytest.mark.pe
def test_stop_removes_the_files_the_job_created():
    job = shmem_notebook.Job(2, heap="8M").start()
    profile, cluster_id = job._cluster.profile_dir, job._cluster.cluster_id

    def ours():
        return sorted(
            name
            for folder in ("log", "security")
            for name in os.listdir(os.path.join(profile, folder))
            if cluster_id in name
        )

    job.locate([0, 1])  # the PEs' stack dumps, as after a hang
    during = ours()
    assert f"shmem-{cluster_id}-pe1.stacks" in during and f"engines{cluster_id}.json" in during, during
    assert f"shmem-{cluster_id}-pe1.crash" in during, during  # where a fatal signal would write the PE's stacks
    job.stop()
    assert ours() == []


def test_missing_shmem4py_is_reported_before_launching(tmp_path):
    """A Python where everything but shmem4py is installed (pip install shmem_notebook without [pe])."""
    import subprocess
    import sys
    import sysconfig

    site = tmp_path / "site"
    site.mkdir()
    purelib = sysconfig.get_paths()["purelib"]
    for name in os.listdir(purelib):
        if not name.startswith("shmem4py"):
            os.symlink(os.path.join(purelib, name), site / name)
    repo = os.path.dirname(os.path.dirname(os.path.abspath(shmem_notebook.__file__)))
    code = (
        "import shmem_notebook\n"
        "try:\n    shmem_notebook.Job(1, heap='8M').start()\n"
        "except shmem_notebook.LaunchError as e:\n    print(e)\n"
    )
    env = {**os.environ, "PYTHONPATH": f"{repo}:{site}"}
    out = subprocess.run([sys.executable, "-S", "-c", code], env=env, capture_output=True, text=True, timeout=120)
    assert out.stdout.startswith("the PEs need shmem4py, which is not installed"), out.stdout + out.stderr
    assert "pip install 'shmem_notebook[pe]'" in out.stdout and "oshcc" in out.stdout


def test_a_container_memory_limit_counts(tmp_path):
    """Binder and docker limit memory with a cgroup while MemAvailable shows the host's."""
    (tmp_path / "memory" / "pod").mkdir(parents=True)
    (tmp_path / "memory" / "pod" / "memory.limit_in_bytes").write_text(str(2 * GiB))
    (tmp_path / "memory" / "pod" / "memory.usage_in_bytes").write_text(str(GiB // 2))
    (tmp_path / "memory" / "pod" / "memory.stat").write_text(f"cache 1\ntotal_inactive_file {GiB // 4}\n")
    (tmp_path / "cgroup").write_text("4:memory:/pod\n3:cpu:/\n")
    assert fit._cgroup_room(str(tmp_path / "cgroup"), str(tmp_path)) == 2 * GiB - GiB // 2 + GiB // 4
    (tmp_path / "v2").mkdir()
    (tmp_path / "v2" / "memory.max").write_text("max\n")
    (tmp_path / "cgroup2").write_text("0::/v2\n")
    assert fit._cgroup_room(str(tmp_path / "cgroup2"), str(tmp_path)) is None  # no limit
    (tmp_path / "v2" / "memory.max").write_text(str(GiB))
    (tmp_path / "v2" / "memory.current").write_text(str(GiB // 4))
    assert fit._cgroup_room(str(tmp_path / "cgroup2"), str(tmp_path)) == GiB - GiB // 4
