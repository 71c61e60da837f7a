"""A traced cell that hangs keeps its trace, and a hung PE is called ``hung`` everywhere (issue
47, item 4): the PEs that never finish give their lanes up to the call they are blocked in (from
their spool), and ``job.status()``, the job's state file (the instructor's view) and the words of
:mod:`shmem_notebook.job.states` agree."""

import io

import pytest

from conftest import job_fixture
from shmem_notebook import CellStoppedError
from shmem_notebook.job.state_file import read_state
from shmem_notebook.job.states import HUNG, IDLE, MEANING

job = job_fixture(3, heap="8M", timeout=60)

ONE_WAITS = """\
f = shmem.zeros(1, dtype='i4')
x = shmem.zeros(4, dtype='i8')
shmem.put(x, x, (me + 1) % npes)
shmem.barrier_all()
if me == 0:
    shmem.wait_until(f, shmem.CMP.EQ, 1)
"""
ALL_WAIT = "f = shmem.zeros(1, dtype='i4')\nshmem.barrier_all()\nshmem.wait_until(f, shmem.CMP.EQ, 1)\n"


def hung_run(job, code):
    """Run ``code`` traced until it is stopped (the PEs that cannot finish are paused); its result."""
    out = io.StringIO()
    with pytest.raises(CellStoppedError) as info:
        job.run(code, trace=True, timeout=20, stdout=out, stderr=out)
    assert job.state == HUNG, job.state
    return info.value.result, out.getvalue()


def test_a_pe_that_never_finishes_keeps_its_lane_up_to_its_wait(job, tmp_path):
    try:
        result, said = hung_run(job, ONE_WAITS)
        trace = result.trace
        assert trace is not None, said
        lane = [e for e in trace.events if e["pe"] == 0]
        assert [e["op"] for e in lane] == ["alloc", "alloc", "put", "barrier_all", "wait_until"], lane
        assert lane[-1]["line"] == 6 and lane[-1]["t"] >= lane[-1]["t0"]
        assert {e["pe"] for e in trace.events} == {0, 1, 2}
        assert list(trace.ends) == [0] and "line 6" in trace.ends[0], trace.ends
        assert "trace: none" not in said and "cut short" in said, said
        assert trace.save(str(tmp_path / "hang.json")).endswith("hang.json")
        rows = {row["pe"]: row for row in job.status()}
        assert [rows[pe]["state"] for pe in range(3)] == [HUNG, IDLE, IDLE]
        assert rows[0]["heap_used"] is None and rows[1]["heap_used"] is not None
        # the instructor's view reads the same word from the job's state file
        assert read_state(job._cluster.profile_dir, job._cluster.cluster_id)["state"] == HUNG
    finally:
        job.restart()


def test_every_pe_blocked_still_gives_every_lane(job):
    try:
        result, said = hung_run(job, ALL_WAIT)
        trace = result.trace
        assert trace is not None, said
        for pe in range(3):
            assert [e["op"] for e in trace.events if e["pe"] == pe] == ["alloc", "barrier_all", "wait_until"]
        assert sorted(trace.ends) == [0, 1, 2] and all("line 3" in end for end in trace.ends.values()), trace.ends
        assert trace.epochs == 2  # the start and after the barrier: every PE passed it
        assert [row["state"] for row in job.status()] == [HUNG] * 3
    finally:
        job.restart()


def test_a_finished_traced_cell_leaves_no_spool(job):
    import glob
    import os

    result = job.run("shmem.barrier_all()", trace=True, stdout=io.StringIO())
    assert len(result.trace.events) == 3 and not result.trace.cut
    log = os.path.join(job._cluster.profile_dir, "log")
    assert glob.glob(os.path.join(log, f"shmem-{job._cluster.cluster_id}-pe*.trace")) == []
    assert [row["state"] for row in job.status()] == [IDLE] * 3 and set(MEANING) >= {IDLE, HUNG}
