"""Real oshrun jobs at 1, 2 and 4 PEs driven through the Job API."""

import io

import numpy as np
import pytest

import shmem_notebook
from shmem_notebook import HeapFullError, JobStateError, PEError


def run(job, code, **kw):
    out, err = io.StringIO(), io.StringIO()
    result = job.run(code, stdout=out, stderr=err, **kw)
    return result, out.getvalue(), err.getvalue()


def test_engine_id_is_the_pe_number(job):
    result, out, _ = run(job, "print(me, npes, shmem.my_pe(), shmem.n_pes())")
    for pe in range(job.n):
        assert result.stdout[pe] == f"{pe} {job.n} {pe} {job.n}\n"
    assert sorted(job._client.ids) == list(range(job.n))
    assert [info["pe"] for info in job.pes.values()] == list(range(job.n))


def test_declared_arrays_exist_before_the_first_line(job):
    result, _, _ = run(job, "print(A.dtype, A.shape, flags.shape, halo.shape, int(A.sum()))",
                       arrays="A=int64[8] flags=int32[npes] halo=float64[2,npes*4]")
    assert set(result.stdout.values()) == {f"int64 (8,) ({job.n},) (2, {4 * job.n}) 0\n"}


def test_put_to_right_neighbour_and_gather(job):
    run(job, "src[:] = me + 1\nshmem.barrier_all()\nshmem.put(dst, src, (me + 1) % npes)\nshmem.barrier_all()",
        arrays="src=int64[3] dst=int64[3]")
    got = job.gather("dst")
    assert got.shape == (job.n, 3)
    assert got[:, 0].tolist() == [((pe - 1) % job.n) + 1 for pe in range(job.n)]


def test_fcollect(job):
    result, out, _ = run(job, "x[0] = me * me\nshmem.barrier_all()\nshmem.fcollect(y, x)\nprint(y.tolist())",
                         arrays="x=int64[1] y=int64[npes]")
    expected = str([pe * pe for pe in range(job.n)])
    assert out == f"[PE {'0' if job.n == 1 else f'0-{job.n - 1}'}] {expected}\n"


def test_shmem_array_works_in_cells_under_numpy2(job):
    result, _, _ = run(job, "a = shmem.array([[1, 2], [3, 4]], dtype='i4')\nprint(a.sum(), a.dtype, a.shape)\nshmem.free(a)")
    assert set(result.stdout.values()) == {"10 int32 (2, 2)\n"}


def test_respec_reallocates_and_free_removes(job):
    run(job, "pass", arrays="R=int32[4]")
    run(job, "R[:] = 7", arrays="R=int32[4]")  # same spec: kept
    assert job.gather("R").sum() == 7 * 4 * job.n
    run(job, "pass", arrays="R=float64[2,2]")  # new spec: re-allocated, zeroed
    got = job.gather("R")
    assert got.shape == (job.n, 2, 2) and got.dtype == np.float64 and not got.any()
    job.free("R")
    assert "R" not in [a["name"] for a in job.arrays()]
    with pytest.raises(PEError, match="NameError"):
        run(job, "R")


def test_last_expression_is_shown_per_pe(job):
    result, out, _ = run(job, "me * 10")
    assert result.results == {pe: str(pe * 10) for pe in range(job.n)}
    assert "Out[PE 0]: 0" in out


def test_error_on_some_pes_names_them_and_keeps_other_output(job):
    with pytest.raises(PEError) as info:
        run(job, "print('before', me)\nif me == npes - 1:\n    raise ValueError('boom on last')\nprint('after', me)")
    err = info.value
    assert set(err.errors) == {job.n - 1}
    assert f"PE {job.n - 1}: ValueError: boom on last" in str(err)
    result = job.last_result
    for pe in range(job.n - 1):
        assert result.stdout[pe] == f"before {pe}\nafter {pe}\n"
    assert result.stdout[job.n - 1] == f"before {job.n - 1}\n"
    rendered = "\n".join(err._render_traceback_())
    assert "boom on last" in rendered and f"[PE {job.n - 1}] raised:" in rendered
    run(job, "pass")  # still usable


def test_too_large_allocation_names_both_sizes_and_job_survives(job):
    with pytest.raises(HeapFullError) as info:
        job.alloc("huge=float64[64,1024,1024]")
    assert "512.0 MiB" in str(info.value) and "256.0 MiB" in str(info.value)
    result, _, _ = run(job, "print('alive', me)")
    assert all(text == f"alive {pe}\n" for pe, text in result.stdout.items())
    assert all(row["state"] == "idle" for row in job.status())


def test_allocation_larger_than_the_heap_counts_what_cells_allocated(job):
    run(job, "user_block = shmem.zeros(200 * 1024 * 1024, dtype='u1')")  # 200 MiB outside the magics
    try:
        with pytest.raises(HeapFullError, match="needs 64.0 MiB"):
            job.alloc("more=uint8[64*1024*1024]")
    finally:
        run(job, "shmem.free(user_block); del user_block")
    job.alloc("more=uint8[64*1024*1024]")
    job.free("more")


def test_status_rows(job):
    rows = job.status()
    assert [r["pe"] for r in rows] == list(range(job.n))
    for r in rows:
        assert r["state"] == "idle" and r["pid"] > 0 and r["host"]
        assert r["heap_size"] == 256 << 20 and 0 <= r["heap_used"] < r["heap_size"]


def test_timeout_interrupts_first_and_marks_hung_only_what_cannot_stop(job):
    run(job, "T[:] = 5", arrays="T=int64[3] W=int64[1]")
    # a PE in time.sleep stops at the interrupt, as with the stop button: the job stays usable
    with pytest.raises(JobStateError, match="did not finish within 1 s; every PE stopped at the interrupt"):
        run(job, "import time; time.sleep(5 if me == 0 else 0)", timeout=1)
    assert job.state == "running" and job.gather("T").sum() == 15 * job.n
    assert job.last_result.errors[0][0] == "KeyboardInterrupt"
    # a PE blocked inside OpenSHMEM cannot be interrupted: hung, and the message names it
    with pytest.raises(JobStateError, match="within 1 s; PE 0 could not be interrupted .* marked hung"):
        run(job, "if me == 0:\n    shmem.wait_until(W, shmem.CMP.EQ, 99)", timeout=1)
    assert job.state == "hung"
    with pytest.raises(JobStateError, match="restart"):
        run(job, "pass")
    job.restart()
    assert job.state == "running"
    # declared arrays came back, zeroed
    assert "T" in job.specs and not job.gather("T").any()
    run(job, "print(me)")


def test_start_while_running_is_refused():
    job = shmem_notebook.start(1)
    try:
        with pytest.raises(JobStateError, match=r"already running; use `%shmem restart` or `%shmem stop`"):
            shmem_notebook.start(2)
        assert shmem_notebook.current_job() is job
    finally:
        job.stop()
        job.stop()  # twice is harmless
    assert job.state == "stopped"
    with pytest.raises(shmem_notebook.NoJobError, match="start one with `%shmem start -n 4`"):
        job.run("pass")


def test_context_manager_stops_the_job():
    with shmem_notebook.Job(2).start() as job:
        assert job.state == "running"
    assert job.state == "stopped"
