"""Real oshrun jobs at 1, 2 and 4 PEs driven through the Job API."""

import io
import os
import subprocess
import sys

import numpy as np
import pytest

import shmem_notebook
from conftest import job_fixture, quiet
from shmem_notebook import CellStoppedError, HeapFullError, InputError, JobStateError, PEDiedError, PEError

#: 1, 2 and 4 PEs on Open MPI's OSHMEM, 2 on Sandia OpenSHMEM and on OSHMPI (where they are built)
job = job_fixture(1, 2, 4, sos=(2,), oshmpi=(2,))


def test_engine_id_is_the_pe_number(job):
    result = quiet(job, "print(me, npes, shmem.my_pe(), shmem.n_pes())")
    for pe in range(job.n):
        assert result.stdout[pe] == f"{pe} {job.n} {pe} {job.n}\n"
    assert sorted(job._client.ids) == list(range(job.n))
    assert [info["pe"] for info in job.pes.values()] == list(range(job.n))


def test_declared_arrays_exist_before_the_first_line(job):
    result = quiet(
        job,
        "print(A.dtype, A.shape, flags.shape, halo.shape, int(A.sum()))",
        arrays="A=int64[8] flags=int32[npes] halo=float64[2,npes*4]",
    )
    assert set(result.stdout.values()) == {f"int64 (8,) ({job.n},) (2, {4 * job.n}) 0\n"}


def test_put_to_right_neighbour_and_gather(job):
    quiet(
        job,
        "src[:] = me + 1\nshmem.barrier_all()\nshmem.put(dst, src, (me + 1) % npes)\nshmem.barrier_all()",
        arrays="src=int64[3] dst=int64[3]",
    )
    got = job.gather("dst")
    assert got.shape == (job.n, 3)
    assert got[:, 0].tolist() == [((pe - 1) % job.n) + 1 for pe in range(job.n)]


def test_fcollect(job):
    out = io.StringIO()
    quiet(
        job,
        "x[0] = me * me\nshmem.barrier_all()\nshmem.fcollect(y, x)\nprint(y.tolist())",
        arrays="x=int64[1] y=int64[npes]",
        stdout=out,
    )
    expected = str([pe * pe for pe in range(job.n)])
    assert out.getvalue() == f"[PE {'0' if job.n == 1 else f'0-{job.n - 1}'}] {expected}\n"


def test_shmem_array_works_in_cells_under_numpy2(job):
    result = quiet(
        job, "a = shmem.array([[1, 2], [3, 4]], dtype='i4')\nprint(a.sum(), a.dtype, a.shape)\nshmem.free(a)"
    )
    assert set(result.stdout.values()) == {"10 int32 (2, 2)\n"}


def test_respec_reallocates_and_free_removes(job):
    quiet(job, "pass", arrays="R=int32[4]")
    quiet(job, "R[:] = 7", arrays="R=int32[4]")  # same spec: kept
    assert job.gather("R").sum() == 7 * 4 * job.n
    quiet(job, "pass", arrays="R=float64[2,2]")  # new spec: re-allocated, zeroed
    got = job.gather("R")
    assert got.shape == (job.n, 2, 2) and got.dtype == np.float64 and not got.any()
    job.free("R")
    assert "R" not in [a["name"] for a in job.arrays()]
    with pytest.raises(PEError, match="NameError"):
        quiet(job, "R")


def test_last_expression_is_shown_per_pe(job):
    out = io.StringIO()
    result = quiet(job, "me * 10", stdout=out)
    assert result.results == {pe: str(pe * 10) for pe in range(job.n)}
    assert "Out[PE 0]: 0" in out.getvalue()


def test_a_cells_text_is_transformed_once_and_a_transform_added_later_still_applies(job):
    """A PE keeps the static transform of a cell's text (ipykernel and IPython each ran it, tokenizing the
    cell: a millisecond per run of a 20-line cell) and whether it awaits (IPython compiled it twice to know):
    a re-run reuses them, and a transform the user adds applies."""
    count = (
        "import IPython.core.inputtransformer2 as _t2\n"
        "_calls = []\n"
        "_make = _t2.make_tokens_by_line\n"
        "_t2.make_tokens_by_line = lambda lines: _calls.append(1) or _make(lines)"
    )
    job.run(count)
    cell = "x = 1\ny = x + 1"
    for _ in range(3):
        job.run(cell)
    out = job.run(
        "import IPython.core.interactiveshell as _i\n"
        "print(len(_calls), _i._should_be_async.cache_info().hits >= 5); _t2.make_tokens_by_line = _make",
        stdout=io.StringIO(),
    ).stdout
    # the cell's text tokenized once, then the printing cell's; whether a text awaits compiled once per text
    assert out == {pe: "2 True\n" for pe in range(job.n)}
    job.run("get_ipython().input_transformers_cleanup.append(lambda lines: [l.replace('ONE', '1') for l in lines])")
    try:
        out = job.run("z = ONE\nprint(z + 1)", stdout=io.StringIO()).stdout
        assert out == {pe: "2\n" for pe in range(job.n)}
        assert job.run("z = ONE\nprint(z + 1)", stdout=io.StringIO()).stdout == out  # re-run: the same
    finally:
        job.run("get_ipython().input_transformers_cleanup.pop()")
    with pytest.raises(PEError, match="NameError"):
        job.run("z = ONE\nprint(z)")  # the transform is gone: not kept under the text alone


def test_rich_output_is_kept_per_pe(job):
    printed = io.StringIO()
    result = quiet(
        job,
        "from IPython.display import HTML, display\ndisplay(HTML('<b>same</b>'))\n"
        "display(HTML(f'<i>{me}</i>'))\nHTML('<u>last</u>')",
        stdout=printed,
    )
    out = printed.getvalue()
    assert set(result.displays) == set(range(job.n))
    assert [[d["data"]["text/html"] for d in result.displays[pe]] for pe in range(job.n)] == [
        ["<b>same</b>", f"<i>{pe}</i>"] for pe in range(job.n)
    ]
    assert {pe: data["text/html"] for pe, data in result.result_data.items()} == {
        pe: "<u>last</u>" for pe in range(job.n)
    }
    everyone = "0" if job.n == 1 else f"0-{job.n - 1}"
    assert out.startswith(f"[PE {everyone}]\n")  # the identical display, folded
    assert f"Out[PE {everyone}]:" in out and "Out[PE 0]: <IPython" not in out


def test_a_warning_holding_each_pes_pid_is_folded(job):
    printed = io.StringIO()
    quiet(job, "import os, sys\nprint(f'warning: process {os.getpid()} is slow', file=sys.stderr)", stderr=printed)
    err = printed.getvalue()
    everyone = "0" if job.n == 1 else f"0-{job.n - 1}"
    assert err == f"[PE {everyone}] warning: process <pid> is slow\n" if job.n > 1 else err.startswith("[PE 0] warning")


def test_error_on_some_pes_names_them_and_keeps_other_output(job):
    with pytest.raises(PEError) as info:
        quiet(job, "print('before', me)\nif me == npes - 1:\n    raise ValueError('boom on last')\nprint('after', me)")
    err = info.value
    assert set(err.errors) == {job.n - 1}
    assert f"PE {job.n - 1}: ValueError: boom on last" in str(err)
    result = job.last_result
    for pe in range(job.n - 1):
        assert result.stdout[pe] == f"before {pe}\nafter {pe}\n"
    assert result.stdout[job.n - 1] == f"before {job.n - 1}\n"
    rendered = "\n".join(err._render_traceback_())
    assert "boom on last" in rendered and f"[PE {job.n - 1}] raised:" in rendered
    quiet(job, "pass")  # still usable


def test_too_large_allocation_names_both_sizes_and_job_survives(job):
    with pytest.raises(HeapFullError) as info:
        job.alloc("huge=float64[64,1024,1024]")
    assert "512.0 MiB" in str(info.value) and "256.0 MiB" in str(info.value)
    result = quiet(job, "print('alive', me)")
    assert all(text == f"alive {pe}\n" for pe, text in result.stdout.items())
    assert all(row["state"] == "idle" for row in job.status())


def test_allocation_larger_than_the_heap_counts_what_cells_allocated(job):
    quiet(job, "user_block = shmem.zeros(200 * 1024 * 1024, dtype='u1')")  # 200 MiB outside the magics
    try:
        with pytest.raises(HeapFullError, match="needs 64.0 MiB"):
            job.alloc("more=uint8[64*1024*1024]")
    finally:
        quiet(job, "shmem.free(user_block); del user_block")
    job.alloc("more=uint8[64*1024*1024]")
    job.free("more")


def test_every_api_takes_every_form_of_declarations(job):
    result = quiet(job, "print(A.dtype, A.shape)", arrays={"A": "int64[8]"})
    assert set(result.stdout.values()) == {"int64 (8,)\n"}
    job.alloc("E=int64[8] F=float32[npes]")
    job.alloc(["G=int64[4]"])
    job.alloc({"H": "int64[4]"})
    job.alloc(I="int8[2]")
    shapes = {a["name"]: (a["dtype"], a["shape"]) for a in job.arrays()}
    assert {k: shapes[k] for k in "AEFGHI"} == {
        "A": ("int64", (8,)),
        "E": ("int64", (8,)),
        "F": ("float32", (job.n,)),
        "G": ("int64", (4,)),
        "H": ("int64", (4,)),
        "I": ("int8", (2,)),
    }
    result = quiet(job, "print(E.shape, F.shape, G.shape, H.shape, I.shape)")
    assert set(result.stdout.values()) == {f"(8,) ({job.n},) (4,) (4,) (2,)\n"}
    for name in "AEFGHI":
        job.free(name)


def test_status_heap_use_counts_what_cells_allocated(job):
    before = job.status()[0]["heap_used"]
    quiet(job, "B = shmem.zeros(16 << 20, dtype='u1')")
    try:
        rows = job.status()
        assert all(r["heap_used"] >= before + (16 << 20) for r in rows), rows
        from shmem_notebook.inspector import gather_snapshot

        snap = gather_snapshot(job)
        assert [p["heap"]["used"] for p in snap.pes] == [r["heap_used"] for r in rows]
    finally:
        quiet(job, "shmem.free(B); del B")
    assert [r["heap_used"] for r in job.status()] == [before] * job.n


def test_gather_any_symmetric_array_and_pull_any_value(job):
    quiet(
        job,
        "B = shmem.zeros(8, dtype='i8'); B[:] = me\nv = B[2:5]\nword = 'pe%d' % me\ntenfold = me * 10\n"
        "gen = (i for i in range(3))\nmine = np.arange(me + 1)",
    )
    try:
        assert job.gather("B").tolist() == [[pe] * 8 for pe in range(job.n)]
        assert job.pull("tenfold").tolist() == [pe * 10 for pe in range(job.n)]
        assert job.pull("B").shape == (job.n, 8)
        assert job.pull("word") == {pe: f"pe{pe}" for pe in range(job.n)}
        assert job.pull("tenfold", stack=False) == {pe: pe * 10 for pe in range(job.n)}
        with pytest.raises(InputError, match=r"no variable named 'nothere' on any PE"):
            job.pull("nothere")
        with pytest.raises(InputError, match=r"'word' on any PE is a str, not a symmetric array; `%shmem pull word`"):
            job.gather("word")
        with pytest.raises(InputError, match=r"'gen' on any PE cannot be sent to the notebook \(a generator"):
            job.pull("gen")
        with pytest.raises(InputError, match=r"a variable name"):
            job.pull("B[0]")
        if job.n > 1:
            assert job.pull("mine")[1].tolist() == [0, 1]  # shapes differ: a dict
            with pytest.raises(InputError, match=r"cannot be stacked"):
                job.pull("mine", stack=True)
            quiet(job, "if me == 0:\n    del tenfold")
            with pytest.raises(InputError, match=r"no variable named 'tenfold' on PE 0;"):
                job.pull("tenfold")
        else:
            assert job.gather("v").tolist() == [[0, 0, 0]]  # a view inside a symmetric allocation
    finally:
        quiet(job, "shmem.free(B); del B, v")


def test_large_gathers_are_read_from_the_pes_or_come_through_dev_shm_and_leave_no_file(job, monkeypatch):
    """Arrays from 1 MiB per PE are read straight from the PEs' memory when contiguous, else
    written by the PEs into one file in /dev/shm that the result maps; rc.gather = 'file' forces
    the file, 'pickle' sends them in the reply; every route gives the same; no file is left."""
    import glob

    from shmem_notebook.launcher.shm import transfer_prefix

    n, width = job.n, 1 << 17  # L 3 MiB, strided 1.5 MiB, I 2 MiB per PE
    quiet(
        job,
        f"L = shmem.zeros((3, {width}), 'f8'); L[:] = me + np.arange({width})\nstrided = L[:, ::2]\n"
        f"I = shmem.zeros({width * 4}, 'i4'); I[:] = -me\nT = I.view('i8') if me == 0 else I",
    )
    rows = np.broadcast_to(np.arange(n).reshape(n, 1, 1) + np.arange(width, dtype="f8"), (n, 3, width))
    ints = -np.arange(n, dtype="i4").repeat(width * 4).reshape(n, -1)
    left = lambda: glob.glob(glob.escape(transfer_prefix(job._token)) + "*")  # noqa: E731
    try:
        for mode, contiguous in (("shm", "memory"), ("file", "file"), ("pickle", "message")):
            monkeypatch.setattr(shmem_notebook.rc, "gather", mode)
            for name, expected, route in (
                ("L", rows, contiguous),
                ("strided", rows[:, :, ::2], "file" if mode != "pickle" else "message"),
                ("I", ints, contiguous),
            ):
                got = job.gather(name)
                assert job.last_gather == route, (mode, name)
                assert got.dtype == expected.dtype and np.array_equal(got, expected), (mode, name)
                got[:] = -1  # the result is the notebook's own: writable, and the PEs' arrays are untouched
                assert np.array_equal(job.gather(name), expected), (mode, name)
            if n > 1:
                with pytest.raises(InputError, match=r"'T' has a different dtype or shape on different PEs"):
                    job.gather("T")
            assert left() == []
        monkeypatch.setattr(shmem_notebook.rc, "gather", "mmap")
        with pytest.raises(InputError, match=r"rc.gather is 'mmap'; use one of 'shm', 'file', 'pickle'"):
            job.gather("L")
    finally:
        quiet(job, "shmem.free(L); shmem.free(I); del L, strided, I, T")
    assert left() == []


def test_reading_a_gone_pe_gives_none_not_a_crash():
    """The memory route returns None (the caller takes the file route) for a pid that cannot be read."""
    from shmem_notebook.job.remote import HeapReader

    proc = subprocess.Popen([sys.executable, "-c", "pass"])
    proc.wait()
    namespace, reader = os.readlink("/proc/self/ns/pid"), HeapReader()
    assert reader.read([(namespace, proc.pid, 4096)], np.dtype("f8"), (1 << 17,)) is None
    assert reader.read([(namespace, os.getpid(), 8)], np.dtype("f8"), (4,)) is None  # unmapped address
    assert reader.read([("pid:[0]", os.getpid(), 8)], np.dtype("f8"), (4,)) is None  # another namespace
    here = np.arange(4.0)
    assert reader.read([(namespace, os.getpid(), here.ctypes.data)], here.dtype, here.shape).tolist() == [[0, 1, 2, 3]]


def _sysv_ids(pid):
    """The shmids of the SysV segments ``pid`` maps."""
    from shmem_notebook.launcher.shm import segments_of

    return segments_of([pid])[1]


@pytest.mark.pe
def test_a_gather_from_oshmems_sysv_heap_is_live_and_lets_go_of_it_at_restart_crash_hang_and_stop():
    """OSHMEM's heap is a SysV segment: the client attaches it once and copies from it; every
    gather sees the last cell's writes; restart, a crash, a hang and stop detach it, and none is left."""
    job = shmem_notebook.Job(2, heap="8M").start()
    heaps = set()
    try:
        for step in ("start", "again", "restart", "crash + restart", "hang + restart"):
            if step == "restart":
                job.restart()
            elif step == "crash + restart":
                with pytest.raises(PEDiedError):
                    quiet(job, "import os\nif me == 1:\n    os.kill(os.getpid(), 9)\nshmem.barrier_all()")
                job.restart()
            elif step == "hang + restart":
                with pytest.raises(CellStoppedError):
                    quiet(job, "import time\nif me == 0:\n    time.sleep(60)", timeout=2)
                job.restart()
            base = 10 if step == "again" else 0
            declare = "" if step == "again" else "H = shmem.zeros(1 << 18, 'f8')\n"
            quiet(job, f"{declare}H[:] = {base} + me + np.arange(1 << 18)")
            got = job.gather("H")
            assert job.last_gather == "memory", step
            assert np.array_equal(got, base + np.arange(2).reshape(2, 1) + np.arange(1 << 18)), step
            pe_heaps = set().union(*(_sysv_ids(job.pes[pe]["pid"]) for pe in range(job.n)))
            attached = _sysv_ids(os.getpid())
            assert attached & pe_heaps, f"{step}: the client attached none of the PEs' SysV segments"
            assert attached & (heaps - pe_heaps) == set(), f"{step}: an old PE's heap is still attached"
            heaps |= attached & pe_heaps
    finally:
        job.stop()
    assert _sysv_ids(os.getpid()) & heaps == set(), "stop left a PE heap attached to the client"
    from shmem_notebook.launcher.shm import sysv_segments

    assert heaps & set(sysv_segments()) == set(), "a PE heap outlived the job"


def test_redeclaring_retires_names_pointing_into_the_old_array(job, capfd):
    quiet(job, "old = A\nview = A[1:]\nA[:] = 1.5\nkept = [A]", arrays="A=float32[3]")
    capfd.readouterr()
    quiet(job, "pass", arrays="A=int64[5]")
    err = capfd.readouterr().err
    assert "`old` referred to the old A, which was re-allocated; `old` is now a read-only copy" in err
    assert "`view` referred to the old A" in err
    with pytest.raises(
        PEError,
        match="FreedArrayError: 'old' referred to symmetric memory that was freed "
        r"\(A was re-allocated as int64\[5\]\)",
    ):
        quiet(job, "old[:] = 7")
    with pytest.raises(PEError, match="read-only"):
        quiet(job, "view += 1")
    with pytest.raises(PEError, match="read-only"):
        quiet(job, "kept[0][:] = 7")  # the old ndarray object itself is read-only
    result = quiet(job, "print(old.tolist(), (old * 2).tolist(), A.tolist())")
    assert set(result.stdout.values()) == {"[1.5, 1.5, 1.5] [3.0, 3.0, 3.0] [0, 0, 0, 0, 0]\n"}
    assert not job.gather("A").any()  # nothing was written into the new A
    quiet(job, "alias = A")
    capfd.readouterr()
    job.free("A")
    assert "`alias` referred to the old A, which was freed" in capfd.readouterr().err
    quiet(job, "del old, view, kept, alias")


def test_an_openshmem_15_routine_says_what_the_library_lacks(job):
    if job.library.name == "sos":
        pytest.skip("Sandia OpenSHMEM implements OpenSHMEM 1.5: nothing of it is missing")
    code = (
        "sig = shmem.new_signal(); dst = shmem.zeros(2, dtype='i8')\n"
        "try:\n    shmem.put_signal(dst, np.ones(2, dtype='i8'), (me + 1) % npes, sig, 1, shmem.SIGNAL_SET)\n"
        "finally:\n    shmem.free(dst); shmem.del_signal(sig)"
    )
    with pytest.raises(PEError) as info:
        quiet(job, code)
    text = str(info.value)
    assert "NotImplementedError: shmem_long_put_signal" not in text
    assert "put_signal" in text and "OpenSHMEM 1.4" in text and "shmem.fence()" in text, text
    assert len(info.value.errors) == job.n
    quiet(job, "pass")  # the job is fine


def test_status_rows(job):
    rows = job.status()
    assert [r["pe"] for r in rows] == list(range(job.n))
    for r in rows:
        assert r["state"] == "idle" and r["pid"] > 0 and r["host"]
        assert r["heap_size"] == 256 << 20 and 0 <= r["heap_used"] < r["heap_size"]


def test_timeout_interrupts_first_and_marks_hung_only_what_cannot_stop(job, monkeypatch):
    monkeypatch.setattr(shmem_notebook.rc, "deadlock_ms", 0)  # the timeout's path (a deadlock is named before it)
    quiet(job, "T[:] = 5", arrays="T=int64[3] W=int64[1]")
    # a PE in time.sleep stops at the interrupt, as with the stop button: the job stays usable
    with pytest.raises(JobStateError, match="did not finish within 1 s; every PE stopped at the interrupt"):
        quiet(job, "import time; time.sleep(5 if me == 0 else 0)", timeout=1)
    assert job.state == "running" and job.gather("T").sum() == 15 * job.n
    assert job.last_result.errors[0][0] == "KeyboardInterrupt"
    # a PE blocked inside OpenSHMEM cannot be interrupted: hung, and the message names it
    with pytest.raises(JobStateError, match="within 1 s; PE .* could not be interrupted .* paused .* marked hung"):
        quiet(job, "shmem.wait_until(W, shmem.CMP.EQ, 99)", timeout=1)
    assert job.state == "hung"
    with pytest.raises(JobStateError, match="restart"):
        quiet(job, "pass")
    job.restart()
    assert job.state == "running"
    # declared arrays came back, zeroed
    assert "T" in job.specs and not job.gather("T").any()
    quiet(job, "print(me)")


@pytest.mark.pe
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


@pytest.mark.pe
def test_context_manager_stops_the_job():
    with shmem_notebook.Job(2).start() as job:
        assert job.state == "running"
    assert job.state == "stopped"
