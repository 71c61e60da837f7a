"""OSHMPI, OpenSHMEM 1.4 over MPI-3, as the third library (issue 35): what is its own.

Without PEs: its launch line (Open MPI's ``mpirun``, as OSHMPI has no ``oshrun``), a site's
MPICH-built OSHMPI, the one sentence when it is not built, its build script's second run, how
``%shmem status`` names it. With real 2-PE jobs (skipped, saying why, where it is not built):
``%shmem start --library oshmpi`` through a real IPython shell; an exported program run under
``mpirun``; a Slurm batch job; the differences docs/oshmpi.md states, measured (no ``shmem_ptr`` to another PE; an
atomic waits for a target that makes no OpenSHMEM call, a put does not). The other areas run on
OSHMPI through ``job_fixture(..., oshmpi=...)`` and ``every_library`` in their own files.
"""

import json
import os
import pathlib
import re
import subprocess
import sys
import time

import pytest

import shmem_notebook
from conftest import NO_OSHMPI, ipython_shell, oshmpi_built, quiet, running_job
from shmem_notebook.engine.mpi_version import short_name
from shmem_notebook.errors import LaunchError
from shmem_notebook.launcher import OshrunEngineSetLauncher
from shmem_notebook.launcher.environment import platform_environment
from shmem_notebook.launcher.library import OSHMPI_DIR, library
from shmem_notebook.magics.shmem_magics import format_status
from slurm_cluster import SlurmCluster, slurm_missing

ROOT = pathlib.Path(__file__).resolve().parent.parent
built = pytest.mark.skipif(not oshmpi_built(), reason=NO_OSHMPI)


# -- no PEs ---------------------------------------------------------------------------------------
def test_the_launch_line_is_open_mpis_mpirun_with_the_platforms_environment(monkeypatch):
    monkeypatch.delenv("OMPI_MCA_osc", raising=False)
    launcher = OshrunEngineSetLauncher(library="oshmpi", n=4, oversubscribe=True)
    oshmpi = library("oshmpi")
    args = launcher.find_args()
    assert os.path.basename(oshmpi.oshrun) in ("mpirun.openmpi", "mpirun")
    assert args[:4] == [oshmpi.oshrun, "-n", "4", "--oversubscribe"]
    assert "-x" in args and "OMPI_MCA_osc" in args  # the environment reaches PEs on every node
    assert args[-3:] == [os.path.join(OSHMPI_DIR, "venv", "bin", "python"), "-m", "shmem_notebook.engine"]
    assert launcher.get_env()["OMPI_MCA_osc"] == "^rdma"  # as for Open MPI's OSHMEM


def test_an_mpich_built_oshmpi_comes_from_a_sites_file(tmp_path, monkeypatch):
    path = tmp_path / "libraries.json"
    path.write_text(
        json.dumps(
            {"oshmpi-mpich": {"oshrun": "mpiexec.hydra", "python": "/opt/oshmpi-mpich/bin/python", "launcher": "hydra"}}
        )
    )
    monkeypatch.setenv("SHMEM_NOTEBOOK_LIBRARIES", str(path))
    args = OshrunEngineSetLauncher(library="oshmpi-mpich", n=4).find_args()
    assert args == ["mpiexec.hydra", "-n", "4", "/opt/oshmpi-mpich/bin/python", "-m", "shmem_notebook.engine"]


def test_not_built_says_how_to_build_it(monkeypatch, tmp_path):
    monkeypatch.setenv("SHMEM_NOTEBOOK_OSHMPI_DIR", str(tmp_path))
    with pytest.raises(
        LaunchError,
        match=r"\(the Python of oshmpi's PEs\) was not found; build it with "
        r"`scripts/setup.sh --with-oshmpi /path/to/oshmpi-ee5cf11.tar.gz`, a tarball of "
        r"https://github.com/pmodels/oshmpi at commit ee5cf11",
    ):
        library("oshmpi").check()


def test_status_names_the_library_its_mpi_and_its_version():
    row = {
        "pe": 0,
        "state": "idle",
        "pid": 7,
        "host": "h",
        "heap_used": 0,
        "heap_size": 1 << 20,
        "library": "oshmpi",
        "vendor": "OSHMPI",
        "spec": "1.4",
        "mpi": "Open MPI v4.1.4",
        "teams": "emulated",
    }
    assert "library: oshmpi (OSHMPI over Open MPI v4.1.4, OpenSHMEM 1.4)" in format_status([row])
    oshmem = dict(row, library="oshmem", vendor="http://www.open-mpi.org/")  # Open MPI's own: no "over"
    assert "library: oshmem (Open MPI's OSHMEM, OpenSHMEM 1.4)" in format_status([oshmem])


def test_mpi_library_versions_in_a_few_words():
    assert short_name("Open MPI v4.1.4, package: Debian OpenMPI, ident: 4.1.4, repo rev: v4.1.4") == "Open MPI v4.1.4"
    assert short_name("MPICH Version:\t4.0.2\nMPICH Release date:\tThu May 19 2022") == "MPICH 4.0.2"


@built
def test_the_build_script_run_again_does_nothing():
    started = time.monotonic()
    done = subprocess.run([str(ROOT / "scripts" / "build_oshmpi.sh")], capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    assert done.stdout.startswith("== OSHMPI already built in .oshmpi/") and time.monotonic() - started < 10


# -- real jobs ------------------------------------------------------------------------------------
@pytest.fixture(scope="module")
def job():
    """A real 2-PE job on OSHMPI (skipped, saying why, where it is not built)."""
    if not oshmpi_built():
        pytest.skip(NO_OSHMPI)
    yield from running_job(2, heap="16M", timeout=60, library="oshmpi")


@pytest.mark.pe
@built
def test_magics_start_run_status_restart_and_stop_on_oshmpi(capsys):
    shmem_notebook.job._current = None
    shell = ipython_shell()

    def cell(source):
        result = shell.run_cell(source)
        captured = capsys.readouterr()
        return result.error_before_exec or result.error_in_exec, captured.out + captured.err

    try:
        err, printed = cell("%shmem start -n 2 --library oshmpi --heap 16M")
        assert err is None and "OpenSHMEM job ready: 2 PEs" in printed, printed
        err, printed = cell("%%pxshmem A=int64[4]\nA[:] = me + 1\nshmem.barrier_all()\nprint(shmem.info_get_name())")
        assert err is None and printed == "[PE 0-1] OSHMPI\n", printed
        err, printed = cell("%shmem status")
        said = r"^library: oshmpi \(OSHMPI over Open MPI v4\.1\.\d+, OpenSHMEM 1\.4\)$"
        assert re.search(said, printed, re.M), printed
        assert "teams: emulated" in printed
        err, printed = cell("%shmem restart")
        assert "restarted: 2 PEs, arrays A re-allocated (zeroed)" in printed, printed
        shell.run_cell("a = %shmem gather A")
        assert shell.user_ns["a"].tolist() == [[0] * 4, [0] * 4]
    finally:
        err, printed = cell("%shmem stop")
    assert err is None and printed == "OpenSHMEM job stopped: 2 PEs\n"


@pytest.mark.pe
@built
def test_an_exported_program_names_mpirun_and_runs_under_it(job, tmp_path):
    quiet(
        job,
        "mine = np.full(2, me, dtype=np.int64)\nshmem.put(right, mine, (me + 1) % npes)\nshmem.barrier_all()\n"
        "print('received', right.tolist())",
        arrays="right=int64[2]",
    )
    done = job.export(tmp_path / "ring.py", cells=[job.history[-1].label])
    oshmpi = library("oshmpi")
    assert done.command.startswith(f"{oshmpi.oshrun} -n 2 {oshmpi.python} "), done.command
    env = dict(os.environ, **platform_environment())
    ran = subprocess.run(
        [oshmpi.oshrun, "-n", "2", "--oversubscribe", "--tag-output", oshmpi.python, str(tmp_path / "ring.py")],
        capture_output=True,
        text=True,
        env=env,
        timeout=120,
    )
    assert ran.returncode == 0, ran.stderr
    assert sorted(line.split("<stdout>:")[1] for line in ran.stdout.splitlines() if "received" in line) == [
        "received [0, 0]",
        "received [1, 1]",
    ]


REUSED = """import numpy as np
from shmem4py import shmem

me = shmem.my_pe()
first = shmem.zeros(8192, dtype="i8")
later = shmem.zeros(4, dtype="i8")
shmem.free(first)
reused = shmem.zeros(4, dtype="i8")  # where first was: below later, the program's lowest allocation now
shmem.barrier_all()
if me == 0:
    shmem.put(reused, np.ones(4, dtype="i8"), 1)
SYNC
if me == 1:
    x = reused[0]
shmem.barrier_all()
"""


@pytest.mark.pe
@built
@pytest.mark.parametrize("sync, races", [("", 1), ("shmem.barrier_all()", 0)], ids=["racy", "fixed"])
def test_the_race_runner_checks_a_program_under_mpirun(tmp_path, sync, races):
    """``shmem-race -- mpirun ...``: OSHMPI's heap offsets agree across PEs when memory is reused below
    a later allocation (they count from the page of the lowest live one)."""
    (tmp_path / "prog.py").write_text(REUSED.replace("SYNC", sync))
    oshmpi = library("oshmpi")
    command = [sys.executable, "-m", "shmem_notebook.race", "--", oshmpi.oshrun, "-n", "2", oshmpi.python, "prog.py"]
    ran = subprocess.run(command, cwd=tmp_path, capture_output=True, text=True, timeout=120)
    if races:
        assert (
            ran.returncode == 1
            and "RACE first[0] on PE 1: PE 0 prog.py:11 put (write) / PE 1 prog.py:14 load (read) are unordered"
            in ran.stdout
        ), ran.stdout + ran.stderr
    else:
        assert ran.returncode == 0 and "no races found" in ran.stdout, ran.stdout + ran.stderr


DIFFERENCES = """
import time
x = shmem.zeros(4, dtype='i8')
ptr = shmem.ptr(x, (me + 1) % npes) is not None
shmem.barrier_all()
if me == 1:  # computes in Python, no OpenSHMEM call, for 1.5 s
    started = time.monotonic()
    while time.monotonic() - started < 1.5:
        pass
else:
    time.sleep(0.1)
    started = time.monotonic(); shmem.put(x[:1], np.array([7]), 1); shmem.quiet(); put = time.monotonic() - started
    started = time.monotonic(); shmem.atomic_fetch_add(x[1:2], 1, 1); amo = time.monotonic() - started
    print('put', round(put, 3), 'amo', round(amo, 3))
shmem.barrier_all()
print('ptr', ptr, 'landed', x[:2].tolist())
shmem.free(x)
"""


@pytest.mark.pe
@built
@pytest.mark.skipif(slurm_missing() is not None, reason=slurm_missing() or "")
def test_a_slurm_batch_job_runs_its_pes_on_oshmpi():
    """``--slurm`` on one node of a private Slurm (tests/slurm_cluster.py): the batch job's mpirun starts them."""
    with SlurmCluster(nodes=1, cpus=4) as cluster:
        job = shmem_notebook.Job(2, heap="32M", slurm=True, ip="127.0.0.1", time="10", library="oshmpi").start()
        try:
            assert {(row["node"], row["vendor"]) for row in job.status()} == {("n1", "OSHMPI")}
            quiet(
                job,
                "shmem.put(right, np.full(2, me, dtype=np.int64), (me + 1) % npes)\nshmem.barrier_all()",
                arrays="right=int64[2]",
            )
            assert job.gather("right").tolist() == [[1, 1], [0, 0]]
        finally:
            job.stop()
        assert cluster.wait_no_jobs() == []


@pytest.mark.pe
@built
def test_what_docs_say_differs_measured(job):
    """No shmem_ptr to another PE; a put completes while its target computes, an atomic waits for it."""
    out = quiet(job, DIFFERENCES).stdout
    assert out[1].splitlines() == ["ptr False landed [7, 1]"], out
    put, amo = (float(v) for v in out[0].split()[1:4:2])
    assert put < 0.5 and amo > 0.7, out  # the atomic waited for PE 1's next call (~1.4 s), the put did not
