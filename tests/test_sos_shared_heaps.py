"""Sandia OpenSHMEM built with shared heaps (``SOS_SHARED_HEAPS=1 scripts/build_sos.sh``, docs/libraries.md):
its syncs hold under repetition. SOS's linear sync hung there within a million barriers at 2 PEs (the root
found two arrivals where it waits for one; in C as well), and a team sync of 2 PEs with it; the library entry
has its PEs sync by dissemination. Runs where ``SHMEM_NOTEBOOK_SOS_DIR`` is such a build (CI builds the
default, libfabric one, whose syncs take 0.1-2 ms each: a million would take minutes)."""

import io

import pytest

from conftest import needs_sos, running_job
from shmem_notebook.launcher.library import library

pytestmark = [
    pytest.mark.pe,
    needs_sos,
    pytest.mark.skipif(not library("sos").shares_heaps, reason="SOS here is the libfabric build, not shared heaps"),
]

SYNCS = """
pair = shmem.TEAM_WORLD.split_strided(me % 2, 2, npes // 2)
for i in range({count}):
    shmem.barrier_all()
for i in range({count} // 2):
    pair.sync()
pair.destroy()
done = 1
"""


@pytest.fixture(scope="module", params=[2, 4], ids=["2pe-sos", "4pe-sos"])
def job(request):
    yield from running_job(request.param, library="sos", heap="8M", timeout=120)


def test_a_million_barriers_and_team_syncs_all_end(job):
    job.run(SYNCS.format(count=1_000_000), stdout=io.StringIO(), timeout=90)
    assert job.pull("done").tolist() == [1] * job.n
