"""What a job's helper processes hold while it runs (issue 46: a student's job in 120 MiB): the
watchdog runs isolated and without psutil until its cleanup, the controller without the TLS and
task stores ipcontroller imports and never uses, and ``oshrun`` keeps PMIx's data in its own
memory, not in a shared-memory store only it maps. ``bench/student_cost.py`` measures the memory;
here each process is checked for what it must not hold, on a real job, before and after cells."""

import io
import os

import psutil

from conftest import job_fixture
from shmem_notebook.job.watchdog import owned_processes

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
