"""Submission to ready with ``--slurm`` on 1 and 2 nodes of a private Slurm, against the same PEs started here.

The Slurm is the test suite's (tests/slurm_cluster.py: slurmctld and two slurmd posing as
nodes n1, n2 on this host). One warm-up job first (the first job after slurmctld starts
waits longer: reported apart). Then, interleaved per repeat: ``start(n, slurm=True,
nodes=K)`` for each K, and ``start(n)`` on this host. The batch job's own state lines
(the local batch proxy process asks squeue once a second) split the wait into: submitting
(python + sbatch), queued (until RUNNING was seen: 1 s resolution) and the PEs starting and
registering.
"""

import contextlib
import io
import os
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(os.path.dirname(HERE), "tests"))

import common  # noqa: E402
import shmem_notebook  # noqa: E402
from common import median  # noqa: E402
from shmem_notebook.launcher.batch_proxy import all_marks  # noqa: E402
from slurm_cluster import SlurmCluster, slurm_missing  # noqa: E402

HEAP = "32M"


def batch_start(n, nodes):
    """One --slurm start and stop: seconds of each phase."""
    env = {"OMPI_MCA_btl": "self,tcp"} if nodes > 1 else {}  # two fake nodes on one host
    with common.env(**env), contextlib.redirect_stdout(io.StringIO()):
        t0_wall, t0 = time.time(), time.perf_counter()
        job = shmem_notebook.Job(n, heap=HEAP, slurm=True, ip="127.0.0.1", nodes=nodes, time="10").start()
        total = time.perf_counter() - t0
        with open(job._engine_set().output_file) as f:
            marks = all_marks(f.read())
        t1 = time.perf_counter()
        job.stop()
        stop = time.perf_counter() - t1
    return phases(marks, t0_wall, total, stop)


def phases(marks, t0_wall, total, stop):
    """Seconds of each phase of one --slurm start from its state lines (``marks``, see
    :func:`~shmem_notebook.launcher.batch_proxy.all_marks`). The batch proxy process polls squeue
    once a second: on a quiet machine the PEs may be ready before RUNNING was printed; the
    queue and PE phases are then unknown (None), not made up."""
    ready = t0_wall + total
    submitted = _first(marks, "SUBMITTED", default=t0_wall)
    running = _first(marks, "RUNNING", default=None)
    return {
        "total": total,
        "submit": submitted - t0_wall,
        "queued": None if running is None else running - submitted,
        "pes": None if running is None else ready - running,
        "stop": stop,
    }


def _first(marks, state, default):
    """Time (epoch s) of the first state line saying ``state``, else ``default``."""
    return next((float(m["t"]) for m in marks if m["state"] == state), default)


def local_start(n):
    with contextlib.redirect_stdout(io.StringIO()):
        t0 = time.perf_counter()
        job = shmem_notebook.Job(n, heap=HEAP).start()
        total = time.perf_counter() - t0
        job.stop()
    return total


def run(n=4, nodes=(1, 2), repeats=3):
    reason = slurm_missing()
    if reason:
        return {"available": False, "reason": reason}
    with SlurmCluster(nodes=max(nodes), cpus=4) as cluster:
        first = batch_start(n, 1)
        samples = {k: [] for k in nodes}
        local = []
        for _ in range(repeats):
            for k in nodes:
                samples[k].append(batch_start(n, k))
            local.append(local_start(n))
        assert cluster.wait_no_jobs() == [], "benchmark jobs left in the queue"
    rows = []
    for k in nodes:
        phases = {p: median([s[p] for s in samples[k] if s[p] is not None]) for p in samples[k][0]}
        rows.append({"nodes": k, "n": n, **phases})
    return {
        "available": True,
        "n": n,
        "repeats": repeats,
        "rows": rows,
        "first_job": first,
        "local_start": median(local),
    }
