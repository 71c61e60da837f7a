"""The fork server (issue 46): a job's PEs are forked from one process that imported the engine once.

Checked on real jobs: who is whose parent, that each PE is still its own PE (its rank, environment,
random numbers, working directory), that a restart forks again from the same server, that the server and
its socket are gone after a stop, that every way a PE or its stub ends reaches the job as it did before
(a crash, a kill of the stub, the server's own death), that ``rc.forkserver = "off"`` starts PEs as
oshrun's own processes, and that by default (``"auto"``) only a job with more PEs than cores has a server."""

import io
import os
import signal
import time

import psutil
import pytest

import shmem_notebook
from conftest import job_fixture
from shmem_notebook.errors import CellStoppedError, InputError, PEDiedError
from shmem_notebook.launcher.environment import local_slots
from shmem_notebook.launcher.stub_program import is_stub
from shmem_notebook.rc import rc

pytestmark = pytest.mark.pe


@pytest.fixture(scope="module", autouse=True)
def forked_at_every_size():
    """The server for the 1- and 2-PE jobs too (by default only jobs with more PEs than cores have one)."""
    saved, rc.forkserver = rc.forkserver, "on"
    yield
    rc.forkserver = saved


job = job_fixture(1, 2, 4, heap="8M")


def _pe_pids(job):
    return {pe: info["pid"] for pe, info in job.pes.items()}


def _stubs(job):
    oshrun = job._engine_set().process
    return [p for p in oshrun.children(recursive=True) if is_stub(p.cmdline())]


def test_each_pe_is_a_child_of_the_server_and_oshrun_runs_a_stub_for_it(job):
    server = job.forks.process.pid
    pids = _pe_pids(job)
    assert sorted(pids.values()) == sorted(job.forks.pids())
    assert all(psutil.Process(pid).ppid() == server for pid in pids.values())
    assert len(_stubs(job)) == job.n
    out = job.run(
        "import os; print(me, npes, os.environ['PMIX_RANK'], os.getpgid(0) == os.getpid())", stdout=io.StringIO()
    )
    assert out.stdout == {pe: f"{pe} {job.n} {pe} True\n" for pe in range(job.n)}


def test_each_pe_draws_its_own_random_numbers_and_sees_the_working_directory(job):
    out = job.run("import os; print(np.random.randint(1 << 62), os.getcwd())", stdout=io.StringIO()).stdout
    draws = [line.split()[0] for line in out.values()]
    assert len(set(draws)) == job.n
    assert {line.split()[1] for line in out.values()} == {os.getcwd()}


def test_the_instructors_view_counts_forked_pes_as_pes(job):
    from shmem_notebook.jobs_view import jobs

    (view,) = [v for v in jobs(sample=0.05) if v.token == job._token]
    assert (view.pes, view.n, view.state) == (job.n, job.n, "idle")


def test_a_restart_forks_from_the_same_server_and_a_crash_is_reported_as_before(job):
    server = job.forks.process.pid
    with pytest.raises(PEDiedError, match=r"^PE 0 died of signal 11 \(SIGSEGV\) at line 2 while the cell ran; "):
        job.run("import ctypes\nif me == 0: ctypes.string_at(0)\nshmem.barrier_all()", timeout=60)
    job.restart()
    assert job.forks.process.pid == server
    assert all(psutil.Process(pid).ppid() == server for pid in _pe_pids(job).values())
    assert job.run("shmem.barrier_all()").outcome == "ok"


def test_a_killed_stub_takes_its_pe_with_it(job):
    pe = job.n - 1
    pid = _pe_pids(job)[pe]
    (stub,) = [s for s in _stubs(job) if s.environ().get("PMIX_RANK") == str(pe)]
    stub.kill()
    deadline = time.monotonic() + 10
    while psutil.pid_exists(pid) and psutil.Process(pid).status() != psutil.STATUS_ZOMBIE:
        assert time.monotonic() < deadline, "the PE outlived its stub"
        time.sleep(0.02)
    with pytest.raises(PEDiedError):
        job.run("shmem.barrier_all()", timeout=60)
    job.restart()
    assert job.run("shmem.barrier_all()").outcome == "ok"


def test_the_server_killed_ends_its_pes_and_a_restart_starts_a_new_one(job):
    old = job.forks.process.pid
    pids = list(_pe_pids(job).values())
    os.kill(old, signal.SIGKILL)
    assert psutil.wait_procs([psutil.Process(p) for p in pids if psutil.pid_exists(p)], timeout=10)[1] == []
    with pytest.raises(PEDiedError):
        job.run("shmem.barrier_all()", timeout=60)
    job.restart()
    assert job.forks.process.pid != old
    assert job.run("shmem.barrier_all()").outcome == "ok"


def test_stop_ends_the_server(job):
    job.run("x = 1")
    server, address = job.forks.process.pid, job.forks.address()
    job.stop()
    assert not psutil.pid_exists(server) or psutil.Process(server).status() == psutil.STATUS_ZOMBIE
    assert job.forks.address() == "" and job.forks.process is None
    assert address.startswith("@")
    job.start()  # the module's fixture goes on with a running job, and a new server
    assert job.forks.process.pid != server


def test_without_it_pes_are_oshrun_s_own_processes(monkeypatch):
    monkeypatch.setattr(rc, "forkserver", "off")
    with shmem_notebook.start(n=2, heap="8M") as plain:
        assert plain.forks.process is None and plain.forks.address() == ""
        oshrun = plain._engine_set().process
        descendants = {p.pid for p in oshrun.children(recursive=True)}
        assert set(_pe_pids(plain).values()) <= descendants
        assert plain.run("shmem.barrier_all()").outcome == "ok"


def test_by_default_only_a_job_with_more_pes_than_cores_has_a_server(monkeypatch):
    monkeypatch.setattr(rc, "forkserver", "auto")
    for n, served in ((local_slots(), False), (local_slots() + 1, True)):
        with shmem_notebook.start(n=n, heap="8M") as sized:
            assert (sized.forks.process is not None) == served, n
            assert sized.run("shmem.barrier_all()").outcome == "ok"


def test_by_default_a_small_job_forks_its_pes_from_its_second_restart_on(monkeypatch):
    """A job with no more PEs than cores starts its server after its first restart (a user who restarted once
    restarts again), so the restarts after that fork their PEs; a stop ends the server, a start has none."""
    monkeypatch.setattr(rc, "forkserver", "auto")
    with shmem_notebook.start(n=2, heap="8M") as small:
        assert small.forks.process is None
        small.restart()
        server = small.forks.process
        assert server is not None and not set(_pe_pids(small).values()) & set(small.forks.pids())
        small.run("x = me")
        small.restart()  # forked: PEs of the server, each still its own PE
        assert sorted(_pe_pids(small).values()) == sorted(small.forks.pids()) and small.forks.process is server
        out = small.run("shmem.barrier_all(); print(me, npes, 'x' in dir())", stdout=io.StringIO()).stdout
        assert out == {0: "0 2 False\n", 1: "1 2 False\n"}
        small.stop()
        assert small.forks.process is None and not psutil.pid_exists(server.pid)
        small.start()
        assert small.forks.process is None


def test_by_default_a_small_job_that_died_or_hung_forks_the_pes_of_its_restart(monkeypatch):
    """A job whose PEs died or hung is restarted next: its server starts then, so that restart forks."""
    monkeypatch.setattr(rc, "forkserver", "auto")
    quiet = {"stdout": io.StringIO(), "stderr": io.StringIO()}
    with shmem_notebook.start(n=2, heap="8M") as small:
        for trouble, code, error, options in (
            ("died", "import os\nif me == 1:\n    os._exit(3)\nshmem.barrier_all()", PEDiedError, {}),
            (
                "hung",
                "f = shmem.zeros(1, dtype='i4')\nshmem.wait_until(f, shmem.CMP.EQ, 1)",
                CellStoppedError,
                {"timeout": 2},
            ),
        ):
            small.stop()
            small.start()
            assert small.forks.process is None, trouble
            with pytest.raises(error):
                small.run(code, **quiet, **options)
            assert small.state == {"died": "dead", "hung": "hung"}[trouble]
            assert small.forks.process is not None, trouble
            small.restart()
            assert sorted(_pe_pids(small).values()) == sorted(small.forks.pids()), trouble  # forked
            out = small.run("shmem.barrier_all(); print(me, npes)", stdout=io.StringIO()).stdout
            assert out == {0: "0 2\n", 1: "1 2\n"}, trouble


def test_a_server_that_cannot_start_after_a_crash_loses_nothing(monkeypatch):
    """The server is only speed: when it cannot start (no process left to this user), the crash is still
    reported, and the restart starts its PEs as processes of their own."""
    from shmem_notebook.job import forks

    monkeypatch.setattr(rc, "forkserver", "auto")
    with shmem_notebook.start(n=1, heap="8M") as small:

        def refused(*args, **kwargs):
            raise BlockingIOError(11, "Resource temporarily unavailable")

        monkeypatch.setattr(forks.subprocess, "Popen", refused)
        with pytest.raises(PEDiedError, match="PE 0"):
            small.run("import os\nos._exit(3)", stdout=io.StringIO(), stderr=io.StringIO())
        assert small.state == "dead" and small.forks.process is None
        monkeypatch.undo()
        monkeypatch.setattr(rc, "forkserver", "auto")
        small.restart()
        assert small.run("print(me)", stdout=io.StringIO()).stdout == {0: "0\n"}
        assert not small.forks.pids()


def test_a_setting_it_does_not_know_is_one_sentence(monkeypatch):
    monkeypatch.setattr(rc, "forkserver", "yes")
    with pytest.raises(
        InputError, match=r"^rc.forkserver is 'yes'; use 'auto', 'on' or 'off' \(SHMEM_NOTEBOOK_FORKSERVER\)$"
    ):
        shmem_notebook.Job(2, heap="8M").start()
