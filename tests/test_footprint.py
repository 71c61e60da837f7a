"""Exact footprints of strided accesses: representation, merging, overlap, indices (pure Python)."""

import numpy as np
import pytest

from shmem_notebook.analysis.footprint import (
    extend,
    flat_ranges,
    format_indices,
    of_view,
    overlap,
    progressions,
    strided,
)
from shmem_notebook.analysis.happens_before import find_races

BOARD = np.zeros((10, 10), dtype=np.int64)


def _fp(view, base=BOARD):
    """``(lo, hi, footprint)`` of a view, in bytes from the start of ``base``."""
    return of_view(
        view.__array_interface__["data"][0] - base.__array_interface__["data"][0],
        view.itemsize,
        view.shape,
        view.strides,
    )


def _bytes(access):
    """Every byte offset an access touches, the slow and obvious way (to check the fast one)."""
    lo, hi, fp = access
    if fp is None:
        return set(range(lo, hi))
    run, dims = fp
    starts = [lo]
    for n, s in dims:
        starts = [a + i * s for a in starts for i in range(n)]
    return {a + k for a in starts for k in range(run)}


VIEWS = {
    "column": BOARD[:, 3],
    "column4": BOARD[:, 4],
    "rows2-4 col3": BOARD[2:5, 3],
    "block": BOARD[2:5, 3:5],
    "even rows": BOARD[::2],
    "reversed": BOARD[::-1, ::-3],
    "transposed": BOARD.T[3],
    "whole": BOARD,
    "row": BOARD[4],
    "diagonal": np.lib.stride_tricks.as_strided(BOARD, (10,), (88,)),
    "windows": np.lib.stride_tricks.as_strided(BOARD.reshape(-1), (5, 3), (16, 8)),
}


def test_contiguous_views_have_no_footprint_and_exact_bounds():
    assert _fp(BOARD) == (0, 800, None)
    assert _fp(BOARD[4]) == (320, 400, None)
    assert _fp(BOARD[2:5]) == (160, 400, None)
    assert _fp(BOARD[:, 3]) == (24, 752, (8, ((10, 80),)))
    assert _fp(BOARD[::-1, ::2])[2] == (8, ((50, 16),))  # rows and every other column: one progression
    assert strided(0, 8, 5, 2) == (0, 72, (8, ((5, 16),)))
    assert strided(0, 8, 5, 1) == (0, 40, None)


@pytest.mark.parametrize("a", sorted(VIEWS))
@pytest.mark.parametrize("b", sorted(VIEWS))
def test_overlap_is_exactly_the_common_bytes(a, b):
    fa, fb = _fp(VIEWS[a]), _fp(VIEWS[b])
    assert _bytes(fa) == set(np.nonzero(_mask(VIEWS[a]))[0])  # the footprint is the view's bytes
    common = set().union(*(range(p, q) for p, q in overlap(fa, fb)))
    assert common == _bytes(fa) & _bytes(fb)


def _mask(view):
    mask = np.zeros(BOARD.nbytes, dtype=bool)
    start = view.__array_interface__["data"][0] - BOARD.__array_interface__["data"][0]
    for index in np.ndindex(view.shape):
        at = start + sum(i * s for i, s in zip(index, view.strides))
        mask[at : at + view.itemsize] = True
    return mask


def test_disjoint_columns_and_interleaved_halves_do_not_overlap():
    assert overlap(_fp(BOARD[:, 3]), _fp(BOARD[:, 4])) == []
    a = np.zeros(20)
    assert overlap(_fp(a[::2], a), _fp(a[1::2], a)) == []
    assert overlap(_fp(a[::2], a), _fp(a[4:9], a)) == [(32, 40), (48, 56), (64, 72)]


def test_a_loop_over_a_column_merges_into_one_progression():
    lo, hi, fp = 24, 32, None
    for i in range(1, 10):
        lo, hi, fp = extend(lo, hi, fp, 80 * i + 24, 80 * i + 32, None)
    assert (lo, hi, fp) == _fp(BOARD[:, 3])
    lo, hi, fp = 9 * 80 + 24, 9 * 80 + 32, None  # downwards too
    for i in range(8, -1, -1):
        lo, hi, fp = extend(lo, hi, fp, 80 * i + 24, 80 * i + 32, None)
    assert (lo, hi, fp) == _fp(BOARD[:, 3])
    assert extend(0, 8, None, 8, 16, None) == (0, 16, None)  # touching ranges, as before
    assert extend(24, 752, (8, ((10, 80),)), 40, 48, None) is None  # off the progression: a new event
    assert extend(0, 8, None, 16, 32, None) is None  # blocks of another length


def test_repeated_columns_merge_into_the_block_they_fill():
    lo, hi, fp = _fp(BOARD[:, 0])
    lo, hi, fp = extend(lo, hi, fp, *_fp(BOARD[:, 1]))
    assert (lo, hi, fp) == _fp(BOARD[:, 0:2])


def test_flat_ranges_and_indices_in_the_arrays_shape():
    blocks = overlap(_fp(BOARD[:, 3]), _fp(BOARD[2:5, 3:5]))
    ranges = flat_ranges(blocks, 0, 8, (10, 10), (80, 8))
    assert ranges == (range(23, 44, 10),)
    assert format_indices(ranges, (10, 10)) == "[2:5, 3]"
    assert format_indices(flat_ranges([(0, 800)], 0, 8, (10, 10), (80, 8)), (10, 10)) == "[:, :]"
    assert (
        format_indices(progressions([range(3, 4), range(13, 14), range(20, 22)]), (10, 10)) == "[0:2, 3] and [2, 0:2]"
    )
    assert format_indices((range(0, 20, 2),), (20,)) == "[0:19:2]"
    assert format_indices((range(0, 7, 6),), (20,)) == "[0] and [6]"  # two elements: two indices
    assert format_indices((range(23, 54, 30),), (10, 10)) == "[2, 3] and [5, 3]"
    # a view's own layout: its elements, not the bytes' order in memory
    column = BOARD[:, 3]
    start = column.__array_interface__["data"][0] - BOARD.__array_interface__["data"][0]
    assert flat_ranges([(start + 160, start + 168)], start, 8, (10,), (80,)) == (range(2, 3),)


def test_one_dimensional_indices_read_as_before():
    assert format_indices((range(0, 1),)) == "[0]"
    assert format_indices((range(2, 5), range(7, 8))) == "[2:5] and [7]"
    assert format_indices(()) == ""
    assert progressions([range(0, 1), range(2, 3), range(4, 5), range(5, 6)]) == (range(0, 5, 2), range(5, 6))


def _traces(first, second, names):
    """PE 0 stores ``first`` (lo, hi, fp) of its board while PE 1 puts ``second`` into it, unordered."""
    traces = {}
    for pe, (lo, hi, fp) in enumerate((first, second)):
        events = [["sync", "barrier_all", 1, 0]]
        if pe == 0:
            events.append(["mem", "store", 3, "write", "sym", lo, hi, "<i8", fp])
        else:
            events.append(["rma", "iput", 5, 0, lo, hi, "<i8", "priv", 1000, 1080, 0, None, fp, None])
        events.append(["sync", "barrier_all", 7, 0])
        traces[pe] = {"events": events, "names": names, "ops": 3}
    return traces


def test_find_races_uses_footprints_and_names_the_elements_in_the_arrays_shape():
    names = [["board", "sym", 0, 800, 8, 0, (0, (10, 10), (80, 8))]]
    assert find_races(_traces(_fp(BOARD[:, 2]), _fp(BOARD[:, 3]), names), 2) == []
    (race,) = find_races(_traces(_fp(BOARD[2:5, 3:5]), _fp(BOARD[:, 3]), names), 2)
    assert race.array == "board" and race.shape == (10, 10) and race.indices == (range(23, 44, 10),)
    assert str(race).startswith("RACE board[2:5, 3] on PE 0: PE 0 line 3 store (write) / PE 1 line 5 iput (write)")
    # traces without footprints (older PEs) still read as ranges
    old = [["board", "sym", 0, 800, 8, 0]]
    (race,) = find_races(_traces((0, 16, None), (8, 24, None), old), 2)
    assert race.indices == (range(1, 2),) and race.shape == ()
