"""Locks in declared arrays (issue 45 item 6, engine/shims/locks.py): ``shmem.set_lock(lock)`` on a
declared ``lock=int64[1]`` excludes as ``shmem.new_lock()`` does, with ``set_lock``/``clear_lock`` and
with ``test_lock``, race-checked too; any other array is refused in one sentence. Real jobs of 2 and 4
PEs on every built library."""

import textwrap

import pytest

from conftest import job_fixture, quiet
from shmem_notebook.errors import PEError

job = job_fixture(2, 4, heap="8M", timeout=120, sos=(2, 4), oshmpi=(2, 4))

ROUNDS = 20
#: a read-modify-write of PE 0's counter that is not atomic: exact only if the lock excludes
UNDER_LOCK = """
counter[:] = 0  # declared again, an array keeps its values
shmem.barrier_all()
seen = np.zeros(1, dtype=np.int64)
for _round in range({rounds}):
    {take}
    shmem.get(seen, counter, 0)
    shmem.put(counter, seen + 1, 0)
    shmem.clear_lock(lock)
shmem.barrier_all()
shmem.get(seen, counter, 0)
counted = int(seen[0])
shmem.barrier_all()
"""
TAKES = {
    "set_lock": "shmem.set_lock(lock)",
    "test_lock": "while shmem.test_lock(lock):\n        pass",
}


@pytest.mark.parametrize("take", list(TAKES))
def test_a_declared_int64_word_is_a_lock(job, take):
    """Every PE adds ROUNDS to PE 0's counter under the declared lock: the count is exact."""
    code = textwrap.dedent(UNDER_LOCK).format(rounds=ROUNDS, take=TAKES[take])
    quiet(job, code, arrays=["counter=int64[1]", "lock=int64[1]"])
    assert job.pull("counted").tolist() == [ROUNDS * job.n] * job.n


def test_a_declared_lock_orders_the_race_check(job):
    """Race-checked, the gets and puts under the declared lock are ordered by it: no race; without
    the lock the same read-modify-write is one."""
    code = textwrap.dedent(UNDER_LOCK).format(rounds=3, take=TAKES["set_lock"])
    result = quiet(job, code, arrays=["counter=int64[1]", "lock=int64[1]"], race=True)
    assert result.races == [], [str(r) for r in result.races]
    assert job.pull("counted").tolist() == [3 * job.n] * job.n
    unlocked = code.replace("shmem.set_lock(lock)", "pass").replace("shmem.clear_lock(lock)", "pass")
    assert quiet(job, unlocked, arrays=["counter=int64[1]", "lock=int64[1]"], race=True).races


@pytest.mark.parametrize(
    ("cell", "got"),
    [
        ("shmem.set_lock(wide)", "an array of 1 int32 element"),
        ("shmem.test_lock(pair)", "an array of 2 int64 elements"),
        ("shmem.clear_lock(np.zeros(1, dtype=np.int64))", "an array of 1 int64 element that is not symmetric"),
    ],
)
def test_an_array_that_is_no_lock_is_refused_in_one_sentence(job, cell, got):
    with pytest.raises(PEError) as raised:
        quiet(job, cell, arrays=["wide=int32[1]", "pair=int64[2]"])
    name = cell.split("(")[0]
    said = (
        f"ShmemArgumentError: {name} takes a lock made by shmem.new_lock() or a symmetric int64 array of one "
        f"element (e.g. declared lock=int64[1], zero before its first use), got {got}"
    )
    assert said in str(raised.value) and len(raised.value.errors) == job.n
    quiet(job, "ok = me")  # the job goes on
    assert job.pull("ok").tolist() == list(range(job.n))
