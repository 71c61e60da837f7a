"""Exact footprints and NumPy writes on real 2-PE jobs: columns of a 2-D board, ``A[::2]``, iput/iget
strides, and in-place NumPy calls racing another PE's get."""

import io

from conftest import job_fixture, quiet

job2 = job_fixture(2, heap="32M", timeout=120)

ARRAYS = ["board=int64[8,6]", "A=int64[20]", "hist=int64[16]"]

COLUMN_PUTS = """src = np.arange(8, dtype=np.int64)
shmem.barrier_all()
if me == 1:
    for i in range(8):
        shmem.put(board[i, 3:4], src[i:i + 1], 0)
if me == 0:
    {store}
shmem.barrier_all()
"""


def _races(job, code):
    return quiet(job, code, arrays=ARRAYS, race=True).races


def test_disjoint_columns_do_not_race(job2):
    assert _races(job2, COLUMN_PUTS.format(store="board[:, 2] = 7")) == []


def test_overlapping_columns_race_on_the_common_elements(job2):
    (race,) = _races(job2, COLUMN_PUTS.format(store="board[2:5, 3:5] = 7"))
    assert race.array == "board" and race.shape == (8, 6) and race.pe == 0
    assert str(race).startswith("RACE board[2:5, 3] on PE 0: PE 1 line 5 put (write) / PE 0 line 7 store (write)")


def test_a_column_loop_is_one_strided_event(job2):
    """``board[i, 3]`` for every row, as stores and as puts: one event each, not one per row."""
    quiet(job2, "shmem.barrier_all()", arrays=ARRAYS)
    job2.ask("race_start", {})
    quiet(
        job2,
        "src = np.arange(8, dtype=np.int64)\nfor i in range(8):\n    board[i, 3] = i\n"
        "    shmem.put(board[i, 3:4], src[i:i + 1], 1 - me)\n",
    )
    for data in job2.ask("race_stop").values():
        stores = [e for e in data["events"] if e[0] == "mem" and e[1] == "store"]
        puts = [e for e in data["events"] if e[0] == "rma"]
        assert len(stores) == 1 and len(puts) == 1, data["events"]
        assert stores[0][-1] == (8, ((8, 48),)) and puts[0][-2] == (8, ((8, 48),))
        assert puts[0][-1] is None  # the local side, src[0:8], is contiguous


STRIDED = """shmem.barrier_all()
if me == 0:
    {local}
if me == 1:
    {remote}
shmem.barrier_all()
"""


def test_even_and_odd_elements_do_not_race(job2):
    code = STRIDED.format(
        local="A[::2] = 5", remote="shmem.iput(A[1:], np.ones(10, dtype=np.int64), 0, tst=2, sst=1, size=10)"
    )
    assert _races(job2, code) == []
    code = STRIDED.format(
        local="A[1::2] = 5", remote="shmem.iget(np.zeros(10, dtype=np.int64), A, 0, tst=1, sst=2, size=10)"
    )
    assert _races(job2, code) == []


def test_strided_accesses_race_where_they_meet_only(job2):
    code = STRIDED.format(
        local="A[::2] = 5", remote="shmem.iput(A, np.ones(4, dtype=np.int64), 0, tst=3, sst=1, size=4)"
    )
    (race,) = _races(job2, code)  # elements 0, 3, 6, 9 against the even ones: 0 and 6
    assert race.array == "A" and race.indices == (range(0, 7, 6),)
    assert str(race).startswith("RACE A[0] and [6] on PE 0: PE 0 line 3 store (write) / PE 1 line 5 iput (write)")
    code = STRIDED.format(
        local="A[1::2] = 5", remote="shmem.iget(np.zeros(5, dtype=np.int64), A, 0, tst=1, sst=4, size=5)"
    )
    assert _races(job2, code) == []  # reads 0, 4, 8, 12, 16: none odd


def test_add_at_against_a_remote_get_is_found(job2):
    code = STRIDED.format(
        local="np.add.at(hist, np.array([1, 3, 3]), 1)", remote="shmem.get(np.zeros(16, dtype=np.int64), hist, 0)"
    )
    (race,) = _races(job2, code)
    assert race.array == "hist" and {a.line for a in race.accesses} == {3, 5}
    assert race.accesses[0].mode == "write"


#: in-place NumPy calls on the symmetric S (float64[16]) or M (float64[4,4]): each is a write
WRITES = [
    "S.sort()",
    "S.partition(3)",
    "S.fill(0)",
    "S.put([1], [2.0])",
    "S.setfield(1.0, np.float64)",
    "S.byteswap(inplace=True)",
    "np.copyto(S, 1.0)",
    "np.put(S, [1], 2)",
    "np.place(S, np.arange(16) % 2 == 0, [0])",  # a mask that selects elements: an empty one writes none
    "np.putmask(S, np.arange(16) > 3, 0)",
    "np.fill_diagonal(M, 0)",
    "np.put_along_axis(S, np.array([1]), 5.0, 0)",
    "np.nan_to_num(S, copy=False)",
    "np.add.at(S, [1, 1], 1)",
    "np.negative(T, S)",
    "np.add(T, T, S)",
    "np.add(T, 1, out=S)",
    "np.divmod(T, 2, S, T2)",
    "np.multiply.accumulate(T, 0, None, S)",
    "np.add.reduce(T4, 0, None, S[:4])",
    "np.cumsum(T, out=S)",
    "np.clip(T, 0, 1, out=S)",
    "np.sum(np.ones((2, 16)), axis=0, out=S)",
    "np.matmul(np.eye(4), np.ones((4, 4)), M)",
    "rng.shuffle(S)",
    "np.random.shuffle(S)",
    "rng.permuted(T, out=S)",
    "rng.random(out=S)",
    "S.__iadd__(1)",
]
#: calls that only read S
READS = [
    "np.sum(S)",
    "S.sum()",
    "np.sort(S)",
    "np.cumsum(S)",
    "np.add(S, 1)",
    "np.add.reduce(S)",
    "S.copy()",
    "np.mean(S)",
    "np.dot(S, S)",
    "np.where(S > 0)",
    "np.concatenate([S, S])",
    "np.linalg.norm(S)",
    "S.astype(np.int64)",
    "np.unique(S)",
    "rng.permutation(S)",
    "np.argsort(S)",
    "np.add(S, 1, out=T)",
    "np.copyto(T, S)",
    "rng.permuted(S, out=T)",
    "np.add.at(T, [1], S[:1])",
    "np.histogram(S, bins=4)",
]
#: the probe changes nothing the cell can see (each line raises if it did)
AFTER = """R = np.zeros(3); R.flags.writeable = False; R.sum(); np.sum(R); assert not R.flags.writeable
v = S.reshape(4, 4); v[0, 0] = 1.0; parts = np.split(S, 2); parts[1][0] = 2.0; w = np.asarray(M); w[0, 0] = 3.0
assert S.flags.writeable and M.flags.writeable and S[0] == 1.0 and S[8] == 2.0 and M[0, 0] == 3.0
try:
    np.copyto(R, 1.0)
except ValueError as exc:
    assert "read-only" in str(exc) and not R.flags.writeable
else:
    raise AssertionError("a read-only array was written")
"""


def test_in_place_numpy_calls_are_writes_and_pure_ones_reads(job2):
    """A sweep of the in-place NumPy API: the recording sees every write, and no write in pure calls."""
    head = "rng = np.random.default_rng(1)\nT = np.ones(16); T2 = np.ones(16); T4 = np.ones((4, 4))\n"
    lines = head.splitlines() + WRITES + READS + ["U.clip(0, 1, S)", "np.copyto(U, S, where=np.arange(16) % 2 == 0)"]
    quiet(job2, "shmem.barrier_all()", arrays=["S=float64[16]", "M=float64[4,4]", "U=float64[16]"])
    job2.ask("race_start", {})
    try:
        quiet(job2, "\n".join(lines) + "\n" + AFTER)
    finally:
        traces = job2.ask("race_stop")
    modes, where = {}, {}
    ranges = {n[0]: (n[2], n[3]) for n in traces[0]["names"] if n[1] == "sym"}
    for e in traces[0]["events"]:
        if e[0] == "mem" and e[4] == "sym":
            modes.setdefault(e[2], set()).add(e[3])
            array = next(name for name, (lo, hi) in ranges.items() if lo <= e[5] < hi)
            where.setdefault(e[2], set()).add((array, e[3]))
    first = len(head.splitlines()) + 1
    missed = [code for i, code in enumerate(WRITES, first) if "write" not in modes.get(i, ())]
    wrong = [code for i, code in enumerate(READS, first + len(WRITES)) if modes.get(i) != {"read"}]
    assert missed == [] and wrong == []
    last = len(lines)  # a receiver before the written argument, then a write of the first one
    assert where[last - 1] == {("U", "read"), ("S", "write")} and where[last] == {("U", "write"), ("S", "read")}


IPUT_COLUMNS = """src = np.arange(8, dtype=np.int64)
flat = board.reshape(-1)
shmem.barrier_all()
shmem.iput(flat[{column}:], src, 0, tst=6, sst=1, size=8)
shmem.barrier_all()
"""


def test_iputs_into_columns_race_only_on_a_shared_column(job2):
    assert _races(job2, IPUT_COLUMNS.format(column="me")) == []
    (race,) = _races(job2, IPUT_COLUMNS.format(column="1"))
    assert race.array == "board" and race.indices == (range(1, 44, 6),)
    assert str(race).startswith("RACE board[:, 1] on PE 0: PE 0 line 4 iput (write) / PE 1 line 4 iput (write)")


#: the footprints of index sets, masks and the NumPy calls that take them (issue 48 item 2): line -> elements
INDEXED = {
    "S[[0, 2, 4, 6]] = 1": {0, 2, 4, 6},
    "S[[9, 1, 5]] += 1": {1, 5, 9},
    "x = S[[3, 12]]": {3, 12},
    "S[np.arange(16) % 4 == 1] = 2": {1, 5, 9, 13},
    "np.put(S, [0, -1], 3)": {0, 15},
    "S.put([7, 8, 10], 3)": {7, 8, 10},
    "np.place(S, np.arange(16) >= 14, [0])": {14, 15},
    "np.putmask(S, np.arange(16) < 2, 0)": {0, 1},
    "np.add.at(S, [4, 4, 11], 1)": {4, 11},
    "np.copyto(S, np.ones(16), where=np.arange(16) % 8 == 0)": {0, 8},
    "S.flat[[2, 6]] = 1": {2, 6},
    "M[[0, 3], [1, 2]] = 1": {1, 14},
}


def _touched(job, lines):
    """``{line: elements of S or M}`` the recording noted for the cell made of ``lines`` (on PE 0)."""
    from shmem_notebook.analysis.footprint import flat_ranges, overlap

    quiet(job, "shmem.barrier_all()", arrays=["S=float64[16]", "M=float64[4,4]"])
    job.ask("race_start", {})
    try:
        quiet(job, "\n".join(lines) + "\n")
    finally:
        traces = job.ask("race_stop")
    names = {n[0]: n[2] for n in traces[0]["names"] if n[1] == "sym"}
    touched = {}
    for e in traces[0]["events"]:
        if e[0] == "mem" and e[4] == "sym":
            array = "M" if names["M"] <= e[5] < names["M"] + 128 else "S"
            blocks = overlap((e[5], e[6], e[8]), (names[array], names[array] + 128, None))
            elements = {i for r in flat_ranges(blocks, names[array], 8) for i in r}
            touched.setdefault(e[2], set()).update(elements)
    return touched


def test_index_sets_and_masks_touch_their_elements_only(job2):
    """Each line's recorded events cover exactly the elements its index set, mask or call selects."""
    assert _touched(job2, INDEXED) == {line: want for line, want in enumerate(INDEXED.values(), 1)}


#: stores by unpacking and chained assignment, and through memoryviews (line: the elements of S it stores)
UNPACKED = {
    "i = 0": set(),
    "i, S[i] = 3, 1.0": {3},  # Python assigns i first: S[3], not S[0]
    "S[5], (S[7], x) = 2.0, (3.0, 0)": {5, 7},
    "S[9] = S[11] = 4.0": {9, 11},
    "mv = memoryview(S)": set(),
    "mv[13] = 5.0": {13},
    "S.data.cast('B')[8 * 15] = 1": {15},
}


def test_unpacked_and_viewed_stores_touch_their_elements_only(job2):
    """An unpacking or chained assignment stores each of its subscripts, in Python's order; a memoryview's
    store is one of the array's elements. The cell's values are those of the same code unrecorded."""
    want = {line: e for line, e in enumerate(UNPACKED.values(), 1) if e}
    assert _touched(job2, UNPACKED) == want
    out = io.StringIO()
    quiet(job2, "print(S[[3, 5, 7, 9, 11, 13]].tolist(), S.view(np.uint8)[120])", stdout=out)
    assert out.getvalue() == "[PE 0-1] [1.0, 2.0, 3.0, 4.0, 4.0, 5.0] 1\n"  # both PEs (identical lines fold)
