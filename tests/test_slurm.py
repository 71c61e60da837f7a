"""PEs on Slurm's nodes, against a real Slurm started for this module (tests/slurm_cluster.py).

Two fake nodes n1, n2 on this host, 4 CPUs each. Across two nodes on one host
Open MPI's shared-memory transport collides, so those PEs get
``OMPI_MCA_btl=self,tcp`` (only there). Skipped, with the reason, only where
Slurm's packages are not installed.
"""

import _thread
import json
import os
import re
import signal
import subprocess
import sys
import textwrap
import threading
import time

import psutil
import pytest

import shmem_notebook
from conftest import quiet
from slurm_cluster import ShmWatch, SlurmCluster, slurm_missing

pytestmark = [pytest.mark.pe, pytest.mark.skipif(slurm_missing() is not None, reason=slurm_missing() or "")]

TWO_NODES = {"OMPI_MCA_btl": "self,tcp"}  # several fake nodes on one host (see the module docstring)


@pytest.fixture(scope="module")
def cluster():
    from shmem_notebook.job.watchdog import owned_processes

    with SlurmCluster(nodes=2, cpus=4) as c:
        shm = ShmWatch(c.conf)
        yield c
        assert c.wait_no_jobs() == [], "jobs left in the queue by the tests"
        conf = c.conf
    assert owned_processes(conf, "SLURM_CONF") == [], "Slurm daemons or job steps left running"
    assert shm.left() == ([], []), "/dev/shm files or SysV segments of the PEs left behind"


# -- inside an allocation: salloc ... python, as `salloc -N 2 -n 8 jupyter lab` would ---------

IN_ALLOCATION = textwrap.dedent(
    """
    import io, json, os, sys
    import numpy as np
    import shmem_notebook
    job = shmem_notebook.start(n=NPES, heap="32M")
    try:
        args = job._engine_set().args
        rows = job.status()
        quiet = dict(stdout=io.StringIO(), stderr=io.StringIO())
        job.run(
            "right[:] = -1\\n"
            "shmem.barrier_all()\\n"
            "shmem.put(right, np.full(4, me, dtype=np.int64), (me + 1) % npes)\\n"
            "shmem.barrier_all()\\n"
            "shmem.get(got, right, (me + 1) % npes)  # what my right neighbour received from me\\n"
            "src[0] = me\\n"
            "shmem.barrier_all()\\n"
            "shmem.sum_reduce(total, src)\\n"
            "shmem.barrier_all()\\n",
            arrays=["right=int64[4]", "got=int64[4]", "src=int64[1]", "total=int64[1]"], **quiet,
        )
        print(json.dumps({
            "job": os.environ["SLURM_JOB_ID"],
            "oversubscribe": "--oversubscribe" in args,
            "nodes": {r["pe"]: r["node"] for r in rows},
            "right": job.gather("right").tolist(),
            "got": job.gather("got").tolist(),
            "total": job.gather("total").ravel().tolist(),
        }))
    except BaseException:
        print("== oshrun's output:", file=sys.stderr)
        print(job._oshrun_output(lines=200), file=sys.stderr)  # a PE's last words
        raise
    finally:
        job.stop()
    """
)


def in_allocation(cluster, nodes, npes, env=()):
    code = IN_ALLOCATION.replace("NPES", str(npes))
    out = subprocess.run(
        ["salloc", f"--nodes={nodes}", f"--ntasks={npes}", sys.executable, "-c", code],
        capture_output=True,
        text=True,
        timeout=180,
        env={**os.environ, **dict(env)},
    )
    assert out.returncode == 0, out.stdout + out.stderr + cluster.logs()
    return json.loads(out.stdout.strip().splitlines()[-1])


@pytest.mark.parametrize("nodes, npes, env", [(1, 4, {}), (2, 8, TWO_NODES)], ids=["1node", "2nodes"])
def test_inside_an_allocation_pes_go_on_its_nodes(cluster, nodes, npes, env):
    result = in_allocation(cluster, nodes, npes, env)
    assert result["oversubscribe"] is False  # the allocation has the slots: no flag
    placement = {int(pe): node for pe, node in result["nodes"].items()}
    per_node = npes // nodes  # Open MPI fills each node's slots in order
    assert placement == {pe: f"n{pe // per_node + 1}" for pe in range(npes)}
    # put to the right neighbour, get it back, and a reduction: across the nodes when there are two
    assert result["right"] == [[(pe - 1) % npes] * 4 for pe in range(npes)]
    assert result["got"] == [[pe] * 4 for pe in range(npes)]
    assert result["total"] == [sum(range(npes))] * npes
    assert cluster.wait_no_jobs() == []


# -- from a login node: --slurm submits a batch job whose PEs connect back ---------------------

PUT_GET_REDUCE = (
    "right[:] = -1\n"
    "shmem.barrier_all()\n"
    "shmem.put(right, np.full(4, me, dtype=np.int64), (me + 1) % npes)\n"
    "shmem.barrier_all()\n"
    "shmem.get(got, right, (me + 1) % npes)\n"
    "src[0] = me\n"
    "shmem.barrier_all()\n"
    "shmem.sum_reduce(total, src)\n"
    "shmem.barrier_all()\n"
)
ARRAYS = ["right=int64[4]", "got=int64[4]", "src=int64[1]", "total=int64[1]"]


def batch_job(**options):
    """A started --slurm job (the fake nodes are this host, so the controller may stay on loopback)."""
    return shmem_notebook.Job(heap="32M", slurm=True, ip="127.0.0.1", time="10", **options).start()


@pytest.mark.parametrize("nodes, npes", [(1, 2), (2, 4)], ids=["1node", "2nodes"])
def test_slurm_batch_job_runs_the_pes_and_stop_restart_end_it(cluster, monkeypatch, capsys, nodes, npes):
    if nodes > 1:
        monkeypatch.setenv("OMPI_MCA_btl", "self,tcp")
    job = batch_job(n=npes, nodes=nodes)
    try:
        progress = capsys.readouterr().out
        [(job_id, name, state)] = cluster.jobs()
        assert name.startswith("shmem_notebook-") and state == "RUNNING"
        assert f"Slurm job {job_id}: RUNNING" in progress  # the progress line, before ready
        placement = [row["node"] for row in job.status()]  # Slurm decides how many per node
        assert set(placement) == {f"n{k + 1}" for k in range(nodes)} and placement == sorted(placement)
        quiet(job, PUT_GET_REDUCE, arrays=ARRAYS)
        assert job.gather("got").tolist() == [[pe] * 4 for pe in range(npes)]  # across nodes with 2
        assert job.gather("total").ravel().tolist() == [sum(range(npes))] * npes
        job.restart()  # a new batch job replaces the old one
        [(new_id, _, state)] = cluster.jobs()
        assert new_id != job_id and state == "RUNNING"
        assert quiet(job, "print(me)").stdout == {pe: f"{pe}\n" for pe in range(npes)}
    finally:
        job.stop()
    assert cluster.jobs() == []


def occupy_every_cpu(cluster):
    """A job holding all CPUs of the cluster, so that the next one waits (reason: Resources)."""
    out = cluster.run(["sbatch", "--parsable", "--nodes=2", "--ntasks=8", "--output=/dev/null", "--wrap", "sleep 300"])
    blocker = out.strip().split(";")[0]
    deadline = time.monotonic() + 30
    while (
        "RUNNING" not in cluster.run(["squeue", "-h", f"--jobs={blocker}", "-o", "%T"])
    ) and time.monotonic() < deadline:
        time.sleep(0.1)
    return blocker


def once_waiting_for_resources(cluster, action, settle=2.0, limit=60.0):
    """In a thread: ``action()`` ``settle`` s after our batch job shows PENDING (Resources) in the
    queue (the progress line has caught up by then), or after ``limit`` s."""

    def watch():
        deadline = time.monotonic() + limit
        while time.monotonic() < deadline:
            out = cluster.run(["squeue", "-h", "-o", "%j %T %r"], check=False)
            if any(
                line.startswith("shmem_notebook-") and line.endswith("PENDING Resources") for line in out.splitlines()
            ):
                time.sleep(settle)
                break
            time.sleep(0.2)
        action()

    threading.Thread(target=watch, daemon=True).start()


def test_queue_progress_then_running_when_resources_free_up(cluster, capsys):
    blocker = occupy_every_cpu(cluster)
    once_waiting_for_resources(cluster, lambda: cluster.run(["scancel", blocker]))
    job = batch_job(n=2)
    try:
        lines = capsys.readouterr().out.split("\r")
        job_id = next(j for j, name, _ in cluster.jobs() if name.startswith("shmem_notebook-"))
        pending = [line for line in lines if f"Slurm job {job_id}: PENDING (Resources), " in line]
        running = [line for line in lines if f"Slurm job {job_id}: RUNNING" in line]
        assert pending and running, lines
        assert int(pending[-1].rsplit(", ", 1)[1].split()[0]) >= 1  # the elapsed seconds count up
        assert lines.index(pending[-1]) < lines.index(running[0])
    finally:
        job.stop()
    assert cluster.wait_no_jobs() == []


def test_interrupting_a_pending_job_cancels_it(cluster, capsys):
    blocker = occupy_every_cpu(cluster)
    previous = signal.signal(signal.SIGINT, signal.default_int_handler)  # also when started with SIGINT ignored
    try:
        once_waiting_for_resources(cluster, _thread.interrupt_main)
        t0 = time.monotonic()
        with pytest.raises(shmem_notebook.LaunchError, match=r"interrupted; .* \(its Slurm batch job was cancelled\)"):
            batch_job(n=2)
        assert time.monotonic() - t0 < 70
        assert "PENDING (Resources)" in capsys.readouterr().out
        assert [job[0] for job in cluster.jobs()] == [blocker]  # ours left the queue, the other stays
    finally:
        signal.signal(signal.SIGINT, previous)
        cluster.run(["scancel", blocker])
    assert cluster.wait_no_jobs() == []


def test_batch_job_needs_an_address_for_the_controller(cluster, monkeypatch):
    monkeypatch.delenv("SHMEM_NOTEBOOK_IP", raising=False)
    with pytest.raises(shmem_notebook.InputError) as info:
        shmem_notebook.start(n=2, slurm=True)
    assert "pass ip='0.0.0.0' (`--ip 0.0.0.0`)" in str(info.value)
    assert cluster.jobs() == []


def test_kernel_death_cancels_the_batch_job(cluster):
    from jupyter_client.manager import start_new_kernel
    from test_reliability import execute

    km, kc = start_new_kernel(kernel_name="python3")  # inherits SLURM_CONF: the kernel sees our Slurm
    try:
        execute(kc, "%load_ext shmem_notebook")
        out, err = execute(kc, "%shmem start -n 2 --slurm")
        assert "UsageError" not in err and "pass ip='0.0.0.0' (`--ip 0.0.0.0`)" in err
        out, err = execute(kc, "%shmem start -n 2 --heap 32M --slurm --ip 127.0.0.1 --time 10")
        assert "OpenSHMEM job ready: 2 PEs" in out, err
        [(job_id, _, state)] = cluster.jobs()
        out, err = execute(kc, "%shmem status")
        assert out.count("n1 (") == 2, out
        pes = [int(pid) for pid in re.findall(r"^\d+\s+(?:idle|busy)\s+(\d+)", out, re.M)]
        assert len(pes) == 2, out
        km.provisioner.process.kill()  # SIGKILL: only the watchdog is left to clean up
        assert cluster.wait_no_jobs(20) == [], "the batch job outlived the kernel"
        _, alive = psutil.wait_procs([psutil.Process(p) for p in pes if psutil.pid_exists(p)], timeout=15)
        assert alive == []
    finally:
        kc.stop_channels()
        if km.is_alive():
            km.shutdown_kernel(now=True)


def test_a_pe_crashing_on_the_second_node_is_named_and_ends_the_batch_job(cluster, monkeypatch):
    monkeypatch.setenv("OMPI_MCA_btl", "self,tcp")
    job = batch_job(n=4, nodes=2)
    try:
        nodes = {row["pe"]: row["node"] for row in job.status()}
        victim = max(pe for pe, node in nodes.items() if node == "n2")
        with pytest.raises(shmem_notebook.PEDiedError) as info:
            quiet(job, f"import time\nif me == {victim}:\n    import ctypes; ctypes.string_at(0)\ntime.sleep(60)")
        assert f"PE {victim} died of signal 11 (SIGSEGV)" in str(info.value)
        assert job.state == "dead"
        assert cluster.wait_no_jobs() == []  # the batch job ended with its PEs
        job.restart()  # and a fresh batch job takes its place
        assert quiet(job, "print(me)").stdout == {pe: f"{pe}\n" for pe in range(4)}
    finally:
        job.stop()
    assert cluster.wait_no_jobs() == []


def test_the_many_nodes_page_example_runs(cluster, monkeypatch, capsys):
    page = open(os.path.join(os.path.dirname(__file__), "..", "docs", "many-nodes.md")).read()
    block = page.split("<!-- many-nodes:start -->")[1].split("<!-- many-nodes:end -->")[0]
    code = block.split("```python")[1].split("```")[0]
    monkeypatch.setenv("OMPI_MCA_btl", "self,tcp")  # two fake nodes on one host
    try:
        exec(compile(code, "docs/many-nodes.md", "exec"), {})
    finally:
        job = shmem_notebook.current_job()
        if job is not None:
            job.stop()
    out = capsys.readouterr().out
    assert "['n1', 'n2']" in out and "[PE 0-3] 6" in out, out
    assert cluster.wait_no_jobs() == []


def test_srun_runner_starts_the_pes_without_oshrun(cluster, monkeypatch):
    from shmem_notebook.rc import rc

    monkeypatch.setattr(rc, "slurm_runner", "srun")  # SHMEM_NOTEBOOK_SLURM_RUNNER=srun
    monkeypatch.setenv("OMPI_MCA_btl", "self,tcp")
    job = batch_job(n=4, nodes=2)
    try:
        quiet(job, PUT_GET_REDUCE, arrays=ARRAYS)
        assert job.gather("total").ravel().tolist() == [6] * 4
        nodes = {row["pe"]: row["node"] for row in job.status()}
        assert set(nodes.values()) == {"n1", "n2"}
        victim = max(pe for pe, node in nodes.items() if node == "n2")
        with pytest.raises(shmem_notebook.PEDiedError, match=f"PE {victim} died of exit code 7"):
            quiet(job, f"import os, time\nif me == {victim}:\n    os._exit(7)\ntime.sleep(60)")
        assert cluster.wait_no_jobs() == []
    finally:
        job.stop()
    assert cluster.wait_no_jobs() == []
