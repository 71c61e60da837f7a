"""Issue 45 (paper cuts, round 4), items 7 (the inspector half), 11, 12 and 13: each as it was reported.
Items 5, 6 and 9 have their tests beside the code they exercise (test_completion, test_declared_locks,
test_trace_export)."""

import numpy as np
import pytest

from shmem_notebook.inspector import plots
from shmem_notebook.inspector.snapshot import Snapshot

PNG = b"\x89PNG"


# -- item 7: the inspector's diff says "no data" -------------------------------------------------
def _pe(pe, values=None, state="idle"):
    """One PE of a snapshot as gather_snapshot makes it: with the exact array ``A`` when given."""
    arrays = {}
    if values is not None:
        values = np.asarray(values)
        arrays["A"] = {
            "name": "A",
            "dtype": str(values.dtype),
            "shape": values.shape,
            "bytes": values.nbytes,
            "offset": 0,
            "address": 0,
            "declared": True,
            "aliases": [],
            "exact": True,
            "values": values,
            "summary": None,
        }
    return {"pe": pe, "state": state, "reachable": values is not None, "note": "", "arrays": arrays, "blocks": []}


def test_a_pe_without_data_is_labelled_no_data_not_agreeing():
    """PE 0 hung (no answer), PE 3 differs at one element: PE 0 reads 'no data' in grey (was 'PE 0 (0)',
    as an agreeing PE reads), its row is hatched, and the sentence names it."""
    row = np.arange(6)
    snap = Snapshot(4, [_pe(0, state="hung"), _pe(1, row), _pe(2, row), _pe(3, np.where(row == 4, 9, row))])
    assert plots.diff_labels(snap, "A") == [
        ("PE 0 (no data)", plots.NO_DATA),
        ("PE 1 (0)", plots.AGREES),
        ("PE 2 (0)", plots.AGREES),
        ("PE 3 (1)", plots.DIFFERS),
    ]
    assert plots.diff_labels(snap, "A", reference=1)[:2] == [("PE 0 (no data)", plots.NO_DATA), ("PE 1 (ref)", "black")]
    assert snap.without("A") == {0: "hung"}
    assert snap.describe_diff("A") == "A: PE 3 differs from the consensus at 1 of 6 elements; PE 0 has no data (hung)"
    fig = plots.diff_figure(snap, "A")
    ax = next(a for a in fig.axes if a.get_yticklabels())
    drawn = [(t.get_text(), t.get_color()) for t in ax.get_yticklabels()]
    assert drawn[0] == ("PE 0 (no data)", plots.NO_DATA)
    assert [p.get_hatch() for p in ax.patches] == ["///"], "the row without data is hatched"
    assert plots.figure_png(fig).startswith(PNG)


def test_agreeing_pes_and_pes_without_data_are_told_apart_in_panels_too():
    """A 2-D array draws one panel per PE: PE 1's says 'no data (dead)'; all that answered agree."""
    grid = np.arange(12).reshape(3, 4)
    snap = Snapshot(3, [_pe(0, grid), _pe(1, state="dead"), _pe(2, grid)])
    assert snap.describe_diff("A") == "A: PE 0,2 agree with the consensus on all 12 elements; PE 1 has no data (dead)"
    fig = plots.diff_figure(snap, "A")
    titles = [a.get_title() for a in fig.axes if a.get_title()]
    assert "PE 1: no data (dead)" in titles and "PE 0: 0 elements differ" in titles, titles
    unanswered = Snapshot(3, [_pe(0, grid), _pe(1, grid), {**_pe(2), "reachable": True}])
    assert unanswered.without("A") == {2: "no such array"}


@pytest.mark.parametrize("name", ["B", 3])
def test_without_an_unknown_name_is_one_sentence(name):
    from shmem_notebook import InputError

    with pytest.raises(InputError, match="no symmetric array named"):
        Snapshot(1, [_pe(0, [1])]).without(name)
