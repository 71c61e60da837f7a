"""Where a job's PEs may run: on one node unbound by default, so that jobs started side by side (two
notebooks, a class on one server) spread over the cores; Open MPI bound every job's PEs to cores 0, 1, ...
(two one-PE jobs shared core 0 while core 1 idled). ``bind_to`` binds a job that asks for it, on
either launcher, also with more PEs than cores. Real jobs; each PE's affinity as the kernel has it."""

import os

import pytest

import shmem_notebook
from conftest import needs_sos, quiet
from shmem_notebook import InputError
from shmem_notebook.launcher.environment import local_slots

pytestmark = pytest.mark.pe


def test_jobs_side_by_side_may_use_every_core():
    """Two one-PE jobs at once (two notebooks): each PE may run on every core the client may."""
    allowed = os.sched_getaffinity(0)
    first, second = shmem_notebook.Job(1, heap="8M"), shmem_notebook.Job(1, heap="8M")
    try:
        first.start(), second.start()
        assert _pe_cpus(first) == _pe_cpus(second) == {0: allowed}
    finally:
        first.stop(), second.stop()


def test_a_two_pe_job_is_unbound_unless_it_asks():
    allowed = os.sched_getaffinity(0)
    with shmem_notebook.start(n=2, heap="8M") as job:
        assert _pe_cpus(job) == {0: allowed, 1: allowed}


@pytest.mark.skipif(local_slots() < 2, reason="needs 2 cores")
@pytest.mark.parametrize("library", ["oshmem", pytest.param("sos", marks=needs_sos)])
def test_bind_to_core_gives_each_pe_a_core_of_its_own(library):
    with shmem_notebook.start(n=2, heap="8M", library=library, bind_to="core") as job:
        cpus = _pe_cpus(job)
        assert all(len(c) == 1 for c in cpus.values()) and cpus[0] != cpus[1], cpus
        assert quiet(job, "shmem.barrier_all()").outcome == "ok"
        job.restart()  # the new PEs are bound as the first were
        assert _pe_cpus(job) == cpus


def test_bind_to_core_with_more_pes_than_cores_shares_them():
    """Open MPI refuses to bind more PEs than cores unless told (``overload-allowed``): the tool tells it."""
    n = local_slots() + 2
    with shmem_notebook.start(n=n, heap="8M", bind_to="core") as job:
        cpus = _pe_cpus(job)
        assert all(len(c) == 1 for c in cpus.values()), cpus
        assert len(set().union(*cpus.values())) == min(n, len(os.sched_getaffinity(0))), cpus


def test_a_binding_the_launchers_do_not_know_is_one_sentence():
    with pytest.raises(InputError, match=r"^bind_to takes core, socket or none, got 'cores'; e\.g\. bind_to='core'$"):
        shmem_notebook.Job(2, bind_to="cores")


def _pe_cpus(job):
    """{PE: the set of CPUs it may run on}, read in a cell."""
    import io

    out = io.StringIO()
    job.run("import os\nprint('CPUS', me, *sorted(os.sched_getaffinity(0)))", stdout=out)
    found = {}
    for line in out.getvalue().splitlines():
        _, pe, *cpus = line.split("CPUS", 1)[1].split(" ")
        found[int(pe)] = {int(c) for c in cpus}
    return found
