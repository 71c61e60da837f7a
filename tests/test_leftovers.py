"""Nothing of a job outlives its end (issue 47, item 3): no file in the ipyparallel profile, no
Open MPI session directory, no ``/dev/shm`` file or SysV segment and no process, after a stop,
a ``shmem.global_exit`` and a stop, a crash, a hang, a restart, two jobs in turn in one process,
or the kernel's death.

Other jobs run on this machine at the same time: a job's leftovers are told apart by its cluster
id (profile files), its processes (shared memory, sampled while they live: conftest.ShmTracker;
Open MPI's session directory ``ompi.<host>.<uid>/pid.<launcher pid>``) and its token (processes).
"""

import glob
import io
import os
import subprocess
import sys
import tempfile
import time

import pytest

import shmem_notebook
from conftest import ShmTracker
from shmem_notebook import CellStoppedError, PEDiedError
from shmem_notebook.job.processes import wait
from shmem_notebook.job.site import running_jobs
from shmem_notebook.job.watchdog import OWNER, owned_processes

pytestmark = pytest.mark.pe

QUIET = {"stdout": io.StringIO(), "stderr": io.StringIO()}


class Traces:
    """What one job leaves where: profile files named by each cluster id it had, the session
    directories of the launchers it ran, its shared memory and its processes."""

    def __init__(self, job):
        self.job, self.token = job, job._token
        self.profile, self.clusters = job._cluster.profile_dir, {job._cluster.cluster_id}
        self.shm = ShmTracker(self.token)

    def note(self):
        """Note the job's cluster now (a restart whose controller died makes a new one)."""
        if self.job._cluster is not None:
            self.clusters.add(self.job._cluster.cluster_id)
        self.shm.sample()

    def files(self):
        return sorted(
            os.path.join(folder, name)
            for folder in ("log", "security")
            for name in os.listdir(os.path.join(self.profile, folder))
            if any(cluster in name for cluster in self.clusters)
        )

    def session_dirs(self):
        tmp = os.environ.get("TMPDIR") or tempfile.gettempdir()
        return sorted(
            path
            for pid in self.shm.segments.pids
            for path in glob.glob(os.path.join(tmp, f"ompi.*.{os.getuid()}", f"pid.{pid}"))
        )

    def now(self):
        """``{what: [names]}`` of everything of the job that exists now (empty lists: nothing)."""
        self.note()
        files, shmids = self.shm.left()
        return {
            "profile files": self.files(),
            "session directories": self.session_dirs(),
            "shared memory": files + [f"SysV shmid {s}" for s in shmids],
            "processes": sorted(" ".join(p.cmdline()[:3]) for p in owned_processes(self.token)),
        }

    def left(self):
        """What is left once the job ended (the tracker stopped sampling)."""
        self.shm.stop()
        return {what: names for what, names in self.now().items() if names}


def started(n=2):
    job = shmem_notebook.Job(n, heap="8M", timeout=60).start()
    traces = Traces(job)
    job.run("x = 1", **QUIET)  # a state note, the governor's board: what a first cell leaves
    during = traces.now()
    assert during["profile files"] and during["shared memory"] and during["processes"], during
    return job, traces


def test_a_jobs_processes_are_those_whose_environment_carries_its_token():
    """The look-up the watchdog cleans up by (and a site's ``max_jobs`` counts by): the token as the whole
    value of its variable (not a prefix or a suffix of another token's, nor another variable's value), of
    this user's processes; a zombie no longer counts."""
    token = f"t{os.getpid()}-{time.monotonic_ns()}"

    def sleeper(**env):
        return subprocess.Popen(["sleep", "30"], env={**os.environ, **env})

    mine = sleeper(**{OWNER: token})
    others = [sleeper(**{OWNER: token + "0"}), sleeper(**{OWNER: "0" + token}), sleeper(OTHER_VARIABLE=token)]
    ended = subprocess.Popen([sys.executable, "-c", "pass"], env={**os.environ, OWNER: token})
    try:
        assert wait(lambda: open(f"/proc/{ended.pid}/stat").read().rsplit(")", 1)[1].split()[0] == "Z", 10.0)
        assert [p.pid for p in owned_processes(token)] == [mine.pid]
        assert token in running_jobs() and token not in running_jobs(uid=os.getuid() + 1)  # a site's max_jobs
    finally:
        for proc in [mine, *others]:
            proc.kill()
        for proc in [mine, *others, ended]:
            proc.wait()
    assert owned_processes(token) == []


def test_crash_restart_stop_leaves_nothing():
    job, traces = started()
    try:
        with pytest.raises(PEDiedError, match="SIGSEGV"):
            job.run(
                "import os, signal\nif me == 1:\n    os.kill(os.getpid(), signal.SIGSEGV)\nshmem.barrier_all()", **QUIET
            )
        job.restart()
        traces.note()
        assert job.run("print(me)", **QUIET).stdout == {0: "0\n", 1: "1\n"}
    finally:
        job.stop()
    assert traces.left() == {}


def test_hang_restart_stop_leaves_nothing():
    """The PEs paused in a wait nobody ends (their stacks dumped), a restart (the old launcher
    lingers: reaped at the stop), then a stop."""
    job, traces = started()
    try:
        with pytest.raises(CellStoppedError):
            job.run("f = shmem.zeros(1, dtype='i4')\nshmem.wait_until(f, shmem.CMP.EQ, 1)", timeout=2, **QUIET)
        assert job.state == "hung"
        job.restart()
        traces.note()
        job.run("x = 2", **QUIET)
    finally:
        job.stop()
    assert traces.left() == {}


def test_stop_then_global_exit_and_stop_in_one_process_leave_nothing():
    """Two jobs in turn in one process: the first stopped after what writes files (a gather handed
    over in /dev/shm, the PEs' stack dumps); the second ended by ``shmem.global_exit`` (the
    issue's sequence), then stopped."""
    first, traces = started(3)
    first.alloc("big=int64[40000]")
    first.gather("big")
    first.locate([0, 1, 2])
    assert any(name.endswith(".stacks") for name in traces.files())
    assert traces.session_dirs(), "no Open MPI session directory found: the test would not see one left"
    first.stop()
    assert traces.left() == {}
    second, traces = started(2)
    try:
        with pytest.raises(PEDiedError, match=r"global_exit\(5\)"):
            second.run("if me == 0:\n    shmem.global_exit(5)\nimport time; time.sleep(30)", **QUIET)
    finally:
        second.stop()
    assert traces.left() == {}


KERNEL = """
import io, sys
sys.modules.setdefault("shmem4py", None)
import shmem_notebook
job = shmem_notebook.Job(2, heap="8M").start()
job.run("x = 1", stdout=io.StringIO())
job.locate([0, 1])
print(job._token, job._cluster.profile_dir, job._cluster.cluster_id, job._engine_set().process.pid, flush=True)
sys.stdin.read()
"""


def test_a_kernel_that_died_leaves_nothing():
    """The kernel SIGKILLed with its job running: its watchdog removes what the job left."""
    kernel = subprocess.Popen([sys.executable, "-c", KERNEL], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    try:
        token, profile, cluster, launcher = kernel.stdout.readline().split()
        owned = owned_processes(token)
        shm = ShmTracker(token)
        tmp = os.environ.get("TMPDIR") or tempfile.gettempdir()
        session = glob.glob(os.path.join(tmp, f"ompi.*.{os.getuid()}", f"pid.{launcher}"))
        assert owned and session
    finally:
        kernel.kill()
        kernel.wait()
    # the event: every process carrying the job's token is gone, its watchdog (which removes the
    # files and shared memory last) included
    assert wait(lambda: not owned_processes(token), 30), "the job's processes outlived the kernel"
    folders = [os.path.join(profile, folder) for folder in ("log", "security")]
    assert [name for folder in folders for name in os.listdir(folder) if cluster in name] == []
    assert [path for path in session if os.path.exists(path)] == []
    assert shm.stop().left() == ([], [])
