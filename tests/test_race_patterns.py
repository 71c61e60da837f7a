"""Hints for the common pattern bugs (issue 48 item 5), said in the pattern's words with the one edit that
fixes it, checked on the trace before it is offered: a consumer that reads before its ``wait_until`` (move
the read after the wait), a counted gather that waits for too few increments (wait for all of them), a
reduction's destination read in a loop (one barrier after the read). Each racy cell's ``fixed_code`` is
its twin, which runs without races and computes the right values."""

import io

import pytest

from conftest import job_fixture
from shmem_notebook.analysis.edits import Edit, Fix

job = job_fixture(2, 4, heap="8M", timeout=60, sos=(2, 4))

ARRAYS = ["data=int64[1]", "flag=int64[1]", "count=int64[1]", "slots=int64[4]", "dst=int64[1]", "src=int64[1]"]
ARRAYS += ["out=int64[4]"]
RESET = "".join(f"{a.split('=')[0]}[...] = 0\n" for a in ARRAYS) + "shmem.barrier_all()\n"

READ_FIRST = """shmem.barrier_all()
if me == 0:
    val = np.array([42], dtype=np.int64)
    shmem.put(data, val, 1)
    shmem.quiet()
    shmem.atomic_set(flag, 1, 1)
elif me == 1:
    x = int(data[0])
    shmem.wait_until(flag, shmem.CMP.EQ, 1)
    out[0] = x
shmem.barrier_all()
"""

WAIT_FIRST = READ_FIRST.replace(
    "    x = int(data[0])\n    shmem.wait_until(flag, shmem.CMP.EQ, 1)\n",
    "    shmem.wait_until(flag, shmem.CMP.EQ, 1)\n    x = int(data[0])\n",
)

COUNT_SHORT = """shmem.barrier_all()
if me == 0:
    shmem.wait_until(count, shmem.CMP.GE, npes - 2)
    out[0] = int(slots[1:npes].sum())
else:
    shmem.put(slots[me:me + 1], np.array([me * 10], dtype=np.int64), 0)
    shmem.quiet()
    shmem.atomic_inc(count, 0)
shmem.barrier_all()
"""

COUNT_ALL = COUNT_SHORT.replace("npes - 2)", "npes - 1)")

REDUCE_LOOP = """for it in range(3):
    src[0] = me + it
    shmem.sum_reduce(dst, src)
    out[it] = int(dst[0])
"""

REDUCE_FIXED = REDUCE_LOOP + "    shmem.barrier_all()\n"

WHY = "(a sum_reduce may write every PE's destination as soon as any PE has entered it, and a PE that has left "
WHY += "this round's can enter the next)"


def _run(job, code):
    job.run(RESET, arrays=ARRAYS, stdout=io.StringIO())
    return job.run(code, race=True, arrays=ARRAYS, stdout=io.StringIO(), stderr=io.StringIO())


def _fixed_twin_runs_right(job, fixed, expected):
    """The fixed cell, race-checked: no race, and ``out`` holds ``expected`` on each PE (``{pe: [values]}``)."""
    result = _run(job, fixed)
    assert result.races == [] and result.fixed_code is None
    out = job.gather("out")
    for pe, values in expected.items():
        assert list(out[pe][: len(values)]) == values, (pe, out[pe])


def test_a_read_before_its_wait_is_moved_after_it(job):
    """Was: 'no barrier or quiet placed next to either line orders ...: give each round its own buffer', fix None."""
    result = _run(job, READ_FIRST)
    (race,) = result.races
    assert str(race) == (
        "RACE data[0] on PE 1: PE 0 line 4 put (write) / PE 1 line 8 load (read) are unordered; PE 1 reads at "
        "line 8 before its wait at line 9, the wait that orders it after PE 0's put at line 4: move line 8 after "
        "the wait at line 9"
    )
    assert race.fix == Fix((Edit((9,), move=8),))
    assert result.fixed_code == WAIT_FIRST
    _fixed_twin_runs_right(job, WAIT_FIRST, {1: [42]})


def test_a_counted_gather_waits_for_all_of_its_increments(job):
    """Waiting for ``npes - 2`` of ``npes - 1`` increments: wait for all of them (was: one unfolded race per
    producer, 'give each round its own buffer', fix None)."""
    fix = Fix((Edit((3,), replace=("npes - 2", "npes - 1")),))
    if job.n == 2:  # npes - 2 is 0: the wait is satisfied at once, which the hint says first
        result = _run(job, COUNT_SHORT)
        (race,) = result.races
        assert race.hint == (
            "the wait at line 3 was satisfied at once (count[0] was 0 and 0 >= 0), so it orders nothing: its "
            "condition must need the write it waits for; the wait at line 3 counts 0 of the 1 increment PE 1 makes "
            "at line 8 (npes - 2 is 0 here), so it can return before the data of the last is in: wait for all of "
            "them: npes - 1 instead of npes - 2 at line 3"
        )
        assert race.fix == fix and result.fixed_code == COUNT_ALL
        _fixed_twin_runs_right(job, COUNT_ALL, {0: [10]})
        return
    result = _run(job, COUNT_SHORT)
    (race,) = result.races
    assert str(race) == (
        "RACE slots[1:4] on PE 0: PE 0 line 4 sum (read) / PE 1-3 line 6 put (write) are unordered; the wait at "
        "line 3 counts 2 of the 3 increments PE 1-3 make at line 8 (npes - 2 is 2 here), so it can return before "
        "the data of the last is in: wait for all of them: npes - 1 instead of npes - 2 at line 3"
    )
    assert race.fix == fix and result.fixed_code == COUNT_ALL
    _fixed_twin_runs_right(job, COUNT_ALL, {0: [10 * sum(range(job.n))]})


def test_a_reductions_destination_read_in_a_loop_takes_one_barrier_after_the_read(job):
    """Was: 'PEs 0 and 0 run line 3 on this memory in different rounds: a barrier after line 3' (a PE's race
    with itself, reported per PE) and a barrier after line 4 for the read: two barriers in the fixed cell."""
    result = _run(job, REDUCE_LOOP)
    pes = f"PE 0-{job.n - 1}"
    barrier = "a shmem.barrier_all() after line 4 in the loop"
    assert sorted(map(str, result.races)) == [
        f"RACE dst[0] on {pes}: {pes} line 3 sum_reduce (write) / {pes} line 3 sum_reduce (write) are unordered; "
        "line 3's sum_reduce writes its destination in one round and again in the next, and the next round's may "
        f"begin before this round's is done {WHY}: {barrier}, after the round's last use of it, where every PE "
        "passes, separates the rounds",
        f"RACE dst[0] on {pes}: {pes} line 3 sum_reduce (write) / {pes} line 4 load (read) are unordered; the next "
        f"round's sum_reduce at line 3 may write its destination while line 4 still reads this round's result "
        f"{WHY}: {barrier}, where every PE passes, separates the rounds",
    ]
    assert {race.fix for race in result.races} == {Fix((Edit((4,), "shmem.barrier_all()", every_pe=True),))}
    assert result.fixed_code == REDUCE_FIXED
    total = sum(range(job.n))
    _fixed_twin_runs_right(job, REDUCE_FIXED, {pe: [total + job.n * it for it in range(3)] for pe in range(job.n)})


@pytest.mark.parametrize(
    "text, more, said",
    [("npes - 2", 1, "npes - 1"), ("npes - 1", 1, "npes"), ("npes", 2, "npes + 2"), ("3", 1, "4"), ("n // 2", 1, None)],
)
def test_a_count_is_rewritten_as_the_user_wrote_it(text, more, said):
    from shmem_notebook.analysis.edits import count_delta, count_value, recount

    new = recount(text, more)
    assert new == (said or f"{text} + {more}")
    if said is not None:
        assert count_value(new, 4) == count_value(text, 4) + more
    else:
        assert count_value(text, 4) is None  # not a number of npes alone: recount cannot simplify it
        assert count_delta(text, new, 4) == more  # yet the rewrite adds exactly ``more``: fixcheck can check it


def test_replacing_an_argument_edits_only_that_argument():
    from shmem_notebook.analysis.edits import apply_fix

    code = "if me == 0:\n    shmem.wait_until(count, shmem.CMP.GE, npes - 2)  # npes - 2\n"
    fixed = apply_fix(code, Fix((Edit((2,), replace=("npes - 2", "npes - 1")),)))
    assert fixed == "if me == 0:\n    shmem.wait_until(count, shmem.CMP.GE, npes - 1)  # npes - 2\n"
    assert str(Edit((2,), replace=("npes - 2", "npes - 1"))) == "at line 2: npes - 1 instead of npes - 2"
    with pytest.raises(ValueError, match="no argument 'npes - 3'"):
        apply_fix(code, Fix((Edit((2,), replace=("npes - 3", "npes - 1")),)))
