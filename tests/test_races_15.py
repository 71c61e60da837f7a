"""The race detector on OpenSHMEM 1.5 calls: put_signal (data before signal), signal_wait_until and
signal_fetch as waits, non-blocking atomics (complete at quiet), contexts of teams.

Over synthetic traces (no PEs) and on Sandia OpenSHMEM (skipped, saying why, where it is not built);
on Open MPI's OSHMEM 1.4 the same cells end in the one-line unsupported error (tests/test_missing.py).
"""

import io

import pytest

from conftest import job_fixture
from shmem_notebook.analysis.happens_before import find_races

NAMES = [["A", "sym", 0, 64, 8, 0], ["B", "sym", 64, 128, 8, 0], ["fetched", "priv", 5000, 5008, 8, 1]]


def _traces(pe0, pe1):
    return {0: {"events": pe0, "names": NAMES, "ops": len(pe0)}, 1: {"events": pe1, "names": NAMES, "ops": len(pe1)}}


def _summary(races):
    return sorted((r.array, r.accesses[0].line, r.accesses[0].op, r.accesses[1].line, r.accesses[1].op) for r in races)


def test_put_signal_delivers_its_own_data_before_the_signal_not_earlier_puts():
    pe0 = [
        ["rma", "put", 2, 1, 0, 8, "<i8", "priv", 1000, 1008, 0, [7]],  # A: not ordered by the signal
        ["rma", "put_signal", 3, 1, 64, 72, "<i8", "priv", 2000, 2008, 0, [8]],  # B
        ["rma", "signal_set", 3, 1, 1024, 1032, "<u8", None, None, None, 0, [1]],
        ["sync", "barrier_all", 4, 0, None],
    ]
    pe1 = [
        ["wait", "signal_wait_until", 2, 1024, 1032, "<u8", [1]],
        ["mem", "load", 3, "read", "sym", 64, 72, "<i8"],  # B: delivered with the signal
        ["mem", "load", 4, "read", "sym", 0, 8, "<i8"],  # A: a race
        ["sync", "barrier_all", 5, 0, None],
    ]
    assert _summary(find_races(_traces(pe0, pe1), 2)) == [("A", 2, "put", 4, "load")]


def test_signal_fetch_that_saw_the_signal_is_a_wait():
    pe0 = [
        ["rma", "put_signal_nbi", 2, 1, 64, 72, "<i8", "priv", 2000, 2008, 0, None],
        ["rma", "signal_add", 2, 1, 1024, 1032, "<u8", None, None, None, 0, None],
        ["sync", "barrier_all", 3, 0, None],
    ]
    waited = [["wait", "signal_fetch", 2, 1024, 1032, "<u8", [1]], ["mem", "load", 3, "read", "sym", 64, 72, "<i8"]]
    assert find_races(_traces(pe0, waited + [["sync", "barrier_all", 4, 0, None]]), 2) == []
    unwaited = [["mem", "load", 3, "read", "sym", 64, 72, "<i8"], ["sync", "barrier_all", 4, 0, None]]
    assert _summary(find_races(_traces(pe0, unwaited), 2)) == [("B", 2, "put_signal_nbi", 3, "load")]


def test_a_non_blocking_atomic_writes_its_fetch_only_at_quiet():
    amo = ["rma", "atomic_fetch_add_nbi", 2, 1, 0, 8, "<i8", "priv", 5000, 5008, 0, None]
    early = [amo, ["mem", "load", 3, "read", "priv", 5000, 5008, "<i8"], ["sync", "barrier_all", 4, 0, None]]
    quiet = [
        amo,
        ["sync", "quiet", 3, 0, None],
        ["mem", "load", 4, "read", "priv", 5000, 5008, "<i8"],
        ["sync", "barrier_all", 5, 0, None],
    ]
    other = [["sync", "barrier_all", 9, 0, None]]
    assert _summary(find_races(_traces(early, other), 2)) == [("fetched", 2, "atomic_fetch_add_nbi", 3, "load")]
    assert find_races(_traces(quiet, other), 2) == []


# -- on Sandia OpenSHMEM ---------------------------------------------------------------------------
job = job_fixture(2, heap="16M", sos=(2,))

SIGNAL_CELL = """\
sig = shmem.new_signal()
shmem.barrier_all()
if me == 0:
    shmem.put(A, np.full(4, 7), 1)                                  # line 4
    shmem.put_signal(B, np.full(4, 8), 1, sig, 1, shmem.SIGNAL_SET) # line 5
else:
    shmem.signal_wait_until(sig, shmem.CMP.EQ, 1)
    b = B.sum()                                                     # line 8
    a = A.sum()                                                     # line 9
shmem.barrier_all()
shmem.del_signal(sig)
"""

NBI_CELL = """\
mine = np.zeros(1, dtype="i8")
shmem.barrier_all()
shmem.atomic_fetch_add_nbi(mine, C, 1, (me + 1) % npes)   # line 3
QUIET
got = int(mine[0])                                        # line 5
shmem.barrier_all()
"""

TEAM_CTX_CELL = """\
ctx = shmem.TEAM_WORLD.create_ctx()
shmem.barrier_all()
if me == 0:
    shmem.put(A, np.full(4, 5), 1, ctx=ctx)   # line 4
    CTX_QUIET
shmem.barrier_all()
if me == 1:
    a = A.sum()                    # line 8
shmem.barrier_all()
ctx.destroy()
"""


def _races(job, code):
    result = job.run(code, arrays=["A=int64[4]", "B=int64[4]", "C=int64[1]"], race=True, stdout=io.StringIO())
    return _summary(result.races)


def test_the_15_calls_on_a_15_library(job):
    if job.library.name != "sos":
        pytest.skip("OpenSHMEM 1.5 calls: Open MPI 4.1.4's OSHMEM refuses them in one line (test_missing.py)")
    assert _races(job, SIGNAL_CELL) == [("A", 4, "put", 9, "sum")]
    polling = SIGNAL_CELL.replace(
        "shmem.signal_wait_until(sig, shmem.CMP.EQ, 1)", "while shmem.signal_fetch(sig) != 1: pass"
    )
    assert _races(job, polling) == [("A", 4, "put", 9, "sum")]
    assert _races(job, NBI_CELL.replace("QUIET", "pass")) == [("mine", 3, "atomic_fetch_add_nbi", 5, "load")]
    assert _races(job, NBI_CELL.replace("QUIET", "shmem.quiet()")) == []
    # the default context's quiet (and barrier_all) do not complete a put on a team's context
    assert _races(job, TEAM_CTX_CELL.replace("CTX_QUIET", "shmem.quiet()")) == [("A", 4, "put", 8, "sum")]
    assert _races(job, TEAM_CTX_CELL.replace("CTX_QUIET", "ctx.quiet()")) == []
