"""Whole programs as users write them, each a racy and a fixed twin, on real 2- and 4-PE jobs: a
sample sort's count exchange, red-black Gauss-Seidel with halos, a hash table built with
compare-and-swap. ``# A`` and ``# B`` mark the two accesses a racy twin must be reported for."""

import pytest
from test_race_waits import _assert_clean, _assert_racy

from conftest import job_fixture

pytestmark = pytest.mark.pe

job = job_fixture(2, 4, heap="16M", timeout=90)

#: a sample sort's first steps: count the keys bound for each PE, exchange the counts with
#: alltoall, size the incoming keys, then exchange again (the sums) into the same destination
#: while another PE may still be sizing from the first exchange
SAMPLE_SORT_RACY = """src[:] = 0
for k in (np.arange(6) * (me + 3) + me) % 16:
    src[k * npes // 16] += 1
shmem.barrier_all()
shmem.alltoall(dest[:npes], src[:npes])
incoming = int(dest[:npes].sum())  # B
shmem.alltoall(dest[:npes], src[:npes])  # A
shmem.barrier_all()
"""
SAMPLE_SORT_FIXED = SAMPLE_SORT_RACY.replace(
    """  # B
shmem.alltoall""",
    """  # B
shmem.sync_all()
shmem.alltoall""",
)

#: red-black Gauss-Seidel on a 1-D field with one ghost cell each side: update one colour
#: (reading the ghosts), send the edges to the neighbours' ghosts, wait for them. Racy: no
#: barrier between reading the ghosts and the neighbours overwriting them.
GAUSS_SEIDEL_FIXED = """left, right = (me - 1) % npes, (me + 1) % npes
field[:] = me
shmem.barrier_all()
for it in range(3):
    for color in (0, 1):
        field[1 + color:17:2] = 0.5 * (field[color:16:2] + field[2 + color:18:2])  # B
        shmem.barrier_all()
        shmem.put(field[17:18], field[1:2], left)  # A
        shmem.put(field[0:1], field[16:17], right)
        shmem.barrier_all()
"""
GAUSS_SEIDEL_RACY = GAUSS_SEIDEL_FIXED.replace(
    """  # B
        shmem.barrier_all()
""",
    """  # B
""",
)

#: a distributed hash table: each key goes to PE key % npes, into the first free slot found by
#: compare-and-swap; its value is put beside it. Racy: the owner lists its table right away.
HASH_TABLE_RACY = """for j in range(3):
    key = 1 + me * 3 + j
    owner, slot = key % npes, (key * 7) % 8
    while shmem.atomic_compare_swap(table[slot:slot + 1], 0, key, owner) != 0:
        slot = (slot + 1) % 8
    shmem.put(vals[slot:slot + 1], np.array([key * 10], dtype=np.int64), owner)  # A
stored = {int(k): int(v) for k, v in zip(table, vals) if k}  # B
shmem.barrier_all()
"""
HASH_TABLE_FIXED = HASH_TABLE_RACY.replace(
    """  # A
stored""",
    """  # A
shmem.barrier_all()
stored""",
)


@pytest.mark.parametrize(
    "racy, fixed",
    [
        (SAMPLE_SORT_RACY, SAMPLE_SORT_FIXED),
        (GAUSS_SEIDEL_RACY, GAUSS_SEIDEL_FIXED),
        (HASH_TABLE_RACY, HASH_TABLE_FIXED),
    ],
    ids=["sample-sort", "gauss-seidel", "hash-table"],
)
def test_program_twins(job, racy, fixed):
    _assert_racy(job, racy)
    _assert_clean(job, fixed)


def test_hash_table_holds_every_key(job):
    """The fixed table is right: every PE's slots hold the keys it owns, with their values."""
    printed = _assert_clean(job, HASH_TABLE_FIXED + "print(sorted(stored.items()))\n")
    for pe in range(job.n):
        keys = [k for k in range(1, 3 * job.n + 1) if k % job.n == pe]
        assert str(sorted((k, 10 * k) for k in keys)) in printed, printed
