"""The race detector on waits and collectives as notebook code uses them: counters as flags, cells run
again, collective destinations reused. Racy and fixed twins on real 2- and 4-PE jobs.

In each program the two accesses a racy twin is about carry ``# A`` and ``# B``; the fixed twin
differs in one place and must report nothing.
"""

import io

import pytest

from conftest import job_fixture, needs_sos, running_job

pytestmark = pytest.mark.pe

ARRAYS = [
    "buf=int64[4]",
    "slots=int64[2,4]",
    "ready=int64[1]",
    "ack=int64[1]",
    "filled=int64[1]",
    "freed=int64[1]",
    "count=int64[1]",
    "flag=int64[1]",
    "results=int64[16]",
    "dest=int64[8]",
    "total=int64[1]",
    "src=int64[4]",
    "field=float64[18]",
    "table=int64[8]",
    "vals=int64[8]",
]
RESET = (
    "for _a in (buf, slots, ready, ack, filled, freed, count, flag, results, dest, total, src, field, table, vals):\n"
    "    _a[...] = 0\nshmem.barrier_all()\n"
)

job = job_fixture(2, 4, heap="16M", timeout=90)


def _lines(code):
    marked = {}
    for n, text in enumerate(code.splitlines(), 1):
        for mark in ("# A", "# B"):
            if text.rstrip().endswith(mark):
                marked[mark] = n
    return {marked["# A"], marked["# B"]}


def _races(job, code, reset=True):
    """The races of ``code`` run on ``job`` (arrays zeroed first unless ``reset`` is False), and what it printed."""
    if reset:
        job.run(RESET, arrays=ARRAYS, stdout=io.StringIO())
    out = io.StringIO()
    result = job.run(code, race=True, stdout=out, stderr=io.StringIO(), timeout=90)
    return result.races, out.getvalue()


def _assert_racy(job, code, **options):
    races, printed = _races(job, code, **options)
    want = _lines(code)
    assert any({a.line for a in r.accesses} == want for r in races), f"lines {sorted(want)} not reported:\n{printed}"
    return races, printed


def _assert_clean(job, code, **options):
    races, printed = _races(job, code, **options)
    assert not races, printed
    assert "no races found" in printed
    return printed


# -- counters as flags -------------------------------------------------------------------------
#: PE 0 sends two items through one buffer; PE 1 acknowledges each with a counter. Racy: PE 1
#: acknowledges before it reads, so PE 0's next item may overwrite the one being read.
ACK_RACY = """item = np.zeros(4, dtype=np.int64)
if me == 0:
    for k in range(1, 4):
        item[...] = k
        shmem.put(buf, item, 1)  # A
        shmem.fence()
        shmem.atomic_inc(ready, 1)
        shmem.wait_until(ack, shmem.CMP.GE, k)
elif me == 1:
    got = []
    for k in range(1, 4):
        shmem.wait_until(ready, shmem.CMP.GE, k)
        shmem.atomic_inc(ack, 0)
        got.append(int(buf[0]))  # B
shmem.barrier_all()
"""
ACK_FIXED = ACK_RACY.replace(
    """        shmem.atomic_inc(ack, 0)
        got.append(int(buf[0]))  # B""",
    """        got.append(int(buf[0]))  # B
        shmem.atomic_inc(ack, 0)""",
)

#: a two-slot queue with credits: PE 0 produces six items into PE 1's slots, waiting for a slot to be
#: freed before reusing it. Racy: the credit wait is off by one (three items in flight in two slots).
QUEUE_RACY = """item = np.zeros(4, dtype=np.int64)
if me == 0:
    for k in range(6):
        if k >= 2:
            shmem.wait_until(freed, shmem.CMP.GE, k - 1 - 1)
        item[...] = k + 1
        shmem.put(slots[k % 2], item, 1)  # A
        shmem.fence()
        shmem.atomic_inc(filled, 1)
elif me == 1:
    seen = []
    for k in range(6):
        shmem.wait_until(filled, shmem.CMP.GE, k + 1)
        seen.append(int(slots[k % 2, 0]))  # B
        shmem.atomic_inc(freed, 0)
shmem.barrier_all()
"""
QUEUE_FIXED = QUEUE_RACY.replace("k - 1 - 1)", "k - 1)")

#: every PE puts its part into PE 0's results and counts itself in; PE 0 reads once all have
#: counted. Racy: PE 0 waits for one arrival too few.
GATHER_RACY = """mine = np.array([10 * (me + 1)], dtype=np.int64)
shmem.put(results[me:me + 1], mine, 0)  # A
shmem.fence()
shmem.atomic_inc(count, 0)
if me == 0:
    shmem.wait_until(count, shmem.CMP.GE, npes - 1)
    parts = results[:npes].copy()  # B
shmem.barrier_all()
"""
GATHER_FIXED = GATHER_RACY.replace("npes - 1)", "npes)")

#: a counter barrier over three rounds (the count only grows): no race, whatever the round
COUNTER_ROUNDS = """for r in range(3):
    results[me] = r
    shmem.atomic_inc(count, 0)
    if me == 0:
        shmem.wait_until(count, shmem.CMP.GE, npes * (r + 1))
    shmem.barrier_all()
"""


def test_ack_counter_before_the_read_races(job):
    races, printed = _assert_racy(job, ACK_RACY)
    assert "buf[0" in printed


def test_ack_counter_after_the_read_is_clean(job):
    _assert_clean(job, ACK_FIXED)


def test_credit_off_by_one_races(job):
    races, printed = _assert_racy(job, QUEUE_RACY)
    assert "slots" in printed


def test_credit_right_is_clean(job):
    _assert_clean(job, QUEUE_FIXED)


def test_gather_counting_one_short_races(job):
    _assert_racy(job, GATHER_RACY)


def test_gather_counting_all_is_clean(job):
    _assert_clean(job, GATHER_FIXED)


def test_counter_barrier_over_rounds_is_clean(job):
    _assert_clean(job, COUNTER_ROUNDS)


#: a ping-pong whose flags are taken down by the PE that waited on them (stores of the PE's own)
TOGGLE_FIXED = """item = np.zeros(4, dtype=np.int64)
if me == 0:
    for k in range(3):
        if k:
            shmem.wait_until(ack, shmem.CMP.EQ, 1)
            ack[0] = 0
        item[...] = k + 1
        shmem.put(buf, item, 1)  # A
        shmem.fence()
        shmem.atomic_set(flag, 1, 1)
elif me == 1:
    got = []
    for k in range(3):
        shmem.wait_until(flag, shmem.CMP.EQ, 1)
        flag[0] = 0
        got.append(int(buf[0]))  # B
        shmem.atomic_set(ack, 1, 0)
    print(got)
shmem.barrier_all()
"""
#: racy: PE 1 acknowledges before it reads
TOGGLE_RACY = TOGGLE_FIXED.replace(
    """        got.append(int(buf[0]))  # B
        shmem.atomic_set(ack, 1, 0)""",
    """        shmem.atomic_set(ack, 1, 0)
        got.append(int(buf[0]))  # B""",
)

#: the counters reset by the cell itself, so that it can be run again (as notebook 03 does)
RESET_FIRST = "ready[0] = 0\nack[0] = 0\nshmem.barrier_all()\n"


def test_flags_taken_down_by_their_waiter(job):
    _assert_racy(job, TOGGLE_RACY)
    printed = _assert_clean(job, TOGGLE_FIXED)
    assert "[1, 2, 3]" in printed


@pytest.mark.parametrize("racy", [True, False], ids=["racy", "fixed"])
def test_counters_reset_by_the_cell_run_twice(job, racy):
    code = RESET_FIRST + (ACK_RACY if racy else ACK_FIXED)
    for reset in (True, False):  # the second run starts with the counters the first left
        if racy:
            _assert_racy(job, code, reset=reset)
        else:
            _assert_clean(job, code, reset=reset)


# -- a cell run again ----------------------------------------------------------------------
#: PE 0 sends a value and raises a flag; PE 1 waits for the flag and reads. Run twice, the flag
#: is still up from the first run: the second run's wait orders nothing.
RERUN = """if me == 0:
    buf[0] = 7
    shmem.put(buf, buf, 1)  # A
    shmem.fence()
    shmem.atomic_set(flag, 1, 1)
elif me == 1:
    shmem.wait_until(flag, shmem.CMP.EQ, 1)
    got = int(buf[0])  # B
shmem.barrier_all()
"""
#: the same, taking the flag down after use (the next run starts from 0)
RERUN_FIXED = RERUN.replace("    got = int(buf[0])  # B\n", "    got = int(buf[0])  # B\n    flag[0] = 0\n")


def test_rerun_with_the_flag_left_up_races_and_says_why(job):
    _assert_clean(job, RERUN)  # the first run: the flag was down
    races, printed = _assert_racy(job, RERUN, reset=False)
    assert "the wait at line 7 was satisfied by the value flag[0] held before the cell (1)" in printed, printed
    assert "reset flag[0] first" in printed
    race = next(r for r in races if {a.line for a in r.accesses} == _lines(RERUN))
    assert race.fix is None  # no sync fixes it: the hint says what to change


def test_rerun_taking_the_flag_down_is_clean(job):
    _assert_clean(job, RERUN_FIXED)
    _assert_clean(job, RERUN_FIXED, reset=False)
    _assert_clean(job, RERUN_FIXED, reset=False)


def test_a_condition_true_before_any_write_says_so(job):
    code = RERUN.replace("shmem.CMP.EQ, 1)", "shmem.CMP.GE, 0)")
    races, printed = _assert_racy(job, code)
    assert "satisfied at once (flag[0] was 0 and 0 >= 0)" in printed, printed


# -- collective destinations reused --------------------------------------------------------
#: each round gathers every PE's value into dest, then reads it; the next round's fcollect may
#: write a PE's dest while that PE still reads the last round's. Fixed: a barrier between rounds.
FCOLLECT_RACY = """src[0] = me
shmem.barrier_all()
for r in range(3):
    shmem.fcollect(dest[:npes], src[:1])  # A
    seen = dest[:npes].sum()  # B
"""
FCOLLECT_FIXED = FCOLLECT_RACY + "    shmem.barrier_all()\n"

#: a CG-like loop: one reduction scratch word reused every iteration
REDUCE_RACY = """src[0] = me + 1
shmem.barrier_all()
acc = 0
for it in range(4):
    shmem.sum_reduce(total, src[:1])  # A
    acc += int(total[0])  # B
"""
REDUCE_FIXED = REDUCE_RACY.replace(
    "    acc += int(total[0])  # B\n", "    acc += int(total[0])  # B\n    shmem.sync_all()\n"
)

#: the root broadcasts again while the other PEs still update their copy in place
BROADCAST_RACY = """src[:] = np.arange(4)
shmem.barrier_all()
for r in range(2):
    shmem.broadcast(buf, src, 0)  # A
    buf[:] += 1  # B
"""
BROADCAST_FIXED = BROADCAST_RACY + "    shmem.barrier_all()\n"


@pytest.mark.parametrize(
    "racy, fixed",
    [(FCOLLECT_RACY, FCOLLECT_FIXED), (REDUCE_RACY, REDUCE_FIXED), (BROADCAST_RACY, BROADCAST_FIXED)],
    ids=["fcollect", "reduce", "broadcast"],
)
def test_collective_destination_reused(job, racy, fixed):
    _assert_racy(job, racy)
    _assert_clean(job, fixed)


def test_collective_with_fresh_destinations_is_clean(job):
    code = """src[0] = me
shmem.barrier_all()
for r in range(2):
    shmem.fcollect(dest[4 * r:4 * r + npes], src[:1])
    seen = dest[4 * r:4 * r + npes].sum()
"""
    if job.n <= 4:
        _assert_clean(job, code)


# -- put_signal with SIGNAL_ADD (OpenSHMEM 1.5) ----------------------------------------------
SIGNAL_RACY = """sig = shmem.new_signal()
shmem.barrier_all()
if me > 0:
    for k in range(2):
        part = np.array([me * 10 + k], dtype=np.int64)
        shmem.put_signal(results[2 * me + k:2 * me + k + 1], part, 0, sig, 1, shmem.SIGNAL_ADD)  # A
else:
    shmem.signal_wait_until(sig, shmem.CMP.GE, 2 * (npes - 1) - 1)
    parts = results[2:2 * npes].copy()  # B
shmem.barrier_all()
shmem.del_signal(sig)
"""
SIGNAL_FIXED = SIGNAL_RACY.replace("2 * (npes - 1) - 1)", "2 * (npes - 1))")


@pytest.fixture(scope="module", params=[pytest.param(n, id=f"{n}pe-sos", marks=needs_sos) for n in (2, 4)])
def sos_job(request):
    """put_signal is OpenSHMEM 1.5: a job on Sandia OpenSHMEM."""
    yield from running_job(request.param, heap="16M", timeout=90, library="sos")


def test_put_signal_add_counts(sos_job):
    _assert_racy(sos_job, SIGNAL_RACY)
    _assert_clean(sos_job, SIGNAL_FIXED)
