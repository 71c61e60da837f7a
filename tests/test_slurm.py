"""PEs on Slurm's nodes, against a real Slurm started for this module (tests/slurm_cluster.py).

Two fake nodes n1, n2 on this host, 4 CPUs each. Across two nodes on one host
Open MPI's shared-memory transport collides, so those PEs get
``OMPI_MCA_btl=self,tcp`` (only there). Skipped, with the reason, only where
Slurm's packages are not installed.
"""

import json
import os
import subprocess
import sys
import textwrap

import pytest
from slurm_cluster import ShmWatch, SlurmCluster, slurm_missing

pytestmark = pytest.mark.skipif(slurm_missing() is not None, reason=slurm_missing() or "")

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
    import json, os, io
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
