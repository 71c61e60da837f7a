"""What a job's helper processes hold while it runs (issue 46: a student's job in 120 MiB): the
watchdog runs isolated and without psutil until its cleanup, the controller without the TLS and
task stores ipcontroller imports and never uses, and ``oshrun`` keeps PMIx's data in its own
memory, not in a shared-memory store only it maps; a one-node job's PEs open no network library
(their constructors sleep). ``bench/student_cost.py`` measures the memory; here each process is
checked for what it must not hold, on a real job, before and after cells."""

import io
import os
import subprocess
import sys

import psutil
import pytest

from conftest import job_fixture
from shmem_notebook.job.watchdog import owned_processes
from shmem_notebook.launcher import platform_environment
from shmem_notebook.rc import rc

job = job_fixture(2, heap="8M")


def _maps(pid):
    with open(f"/proc/{pid}/maps") as maps:
        return maps.read()


def test_the_watchdog_runs_isolated_and_loads_psutil_only_to_clean_up(job):
    job.run("x = me")  # the first cell asks the watchdog for the governor, a thread of it
    watchdog = psutil.Process(job._watchdog.pid)
    assert watchdog.cmdline()[1:4] == ["-I", "-S", "-c"]
    assert "shmem_notebook.job.watchdog" in watchdog.cmdline()[4]
    token, batch, package, *path = watchdog.cmdline()[5:]
    assert (token, batch, os.path.basename(package)) == (job._token, "", "shmem_notebook")
    assert "" not in path, "the working directory is not on its path"
    maps = _maps(watchdog.pid)
    assert "_psutil_linux" not in maps and "numpy" not in maps


def test_the_controller_holds_no_tls_and_no_task_store(job):
    maps = _maps(job._cluster.controller.process.pid)
    assert "_ssl." not in maps and "libssl" not in maps
    assert "_sqlite3." not in maps
    assert job.run("y = me + 1").outcome == "ok"  # and it serves the job as before


def test_oshrun_keeps_pmix_data_in_its_memory_and_the_pes_get_it(job):
    (launcher,) = [p for p in owned_processes(job._token) if p.name() in ("oshrun", "orterun", "mpirun")]
    assert launcher.environ().get("PMIX_MCA_gds") == "hash"
    assert "pmix_dstor" not in _maps(launcher.pid)  # ds21's segments: 8 MiB only oshrun mapped
    seen = job.run("import os; print(os.environ.get('PMIX_MCA_gds'))", stdout=io.StringIO()).stdout
    assert seen == {0: "hash\n", 1: "hash\n"}


def _libraries_opened(env):
    """The shared libraries a one-PE ``oshrun`` of Python + ``shmem_init`` opens, from ld.so's own trace."""
    env = {**env, "LD_DEBUG": "files"}
    code = "from shmem4py import shmem; shmem.barrier_all()"
    proc = subprocess.run(
        [rc.oshrun, "-n", "1", sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=60
    )
    assert proc.returncode == 0, proc.stderr[-2000:]
    return {line.split("file=")[1].split()[0] for line in proc.stderr.splitlines() if "file=" in line}


@pytest.mark.pe  # it runs oshrun itself, without a job fixture
def test_a_one_node_pe_opens_no_network_library_at_shmem_init():
    """Open MPI's MTLs drive networks only; opening them loads libfabric and the PSM libraries,
    whose constructors sleep about 0.1 s each, in every PE's ``shmem_init``. A one-node job's
    environment (``LOCAL_ONLY``) leaves them closed; without it they open (the fact it rests on)."""
    local = {**os.environ, **platform_environment(heap="8M", local_only=True)}
    opened = _libraries_opened(local)
    assert any("liboshmem" in name for name in opened)  # the trace sees shmem_init's libraries
    assert not [name for name in opened if any(lib in name for lib in ("psm", "infinipath", "libfabric"))]
    without = {k: v for k, v in local.items() if k != "OMPI_MCA_mtl"}
    assert [name for name in _libraries_opened(without) if "libpsm2" in name]


def test_pes_of_a_one_node_job_skip_the_network_libraries_and_still_meet(job):
    out = job.run(
        "import os; shmem.barrier_all(); print(os.environ.get('OMPI_MCA_mtl'), shmem.n_pes())", stdout=io.StringIO()
    ).stdout
    assert out == {0: "^psm,psm2,ofi 2\n", 1: "^psm,psm2,ofi 2\n"}
