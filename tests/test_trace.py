"""--trace: events, happens-before order, heap per epoch, replay frames and widget (2 and 4 PEs)."""

import io
import re

import numpy as np
import pytest

from conftest import job_fixture, quiet
from shmem_notebook import InputError
from shmem_notebook.inspector.replay import Replay, draw_frame, replay, transfers

job = job_fixture(2, 4, heap="32M", sos=(2,))


def test_ring_shift_is_recorded_with_lines_arrays_indices_and_epochs(job):
    n = job.n
    out = io.StringIO()
    result = quiet(
        job,
        "right[:] = -1\nshmem.barrier_all()\nshmem.put(right[1:3], np.full(2, me), (me + 1) % npes)\n"
        "shmem.barrier_all()\nx = int(right.sum())",
        arrays="right=int64[4]",
        trace=True,
        stdout=out,
    )
    trace = result.trace
    assert "trace: " in out.getvalue() and "replay with `%shmem replay`" in out.getvalue()
    puts = [e for e in trace.events if e["op"] == "put"]
    assert sorted((e["pe"], e["target"]) for e in puts) == [(pe, (pe + 1) % n) for pe in range(n)]
    for e in puts:
        assert (e["line"], e["array"], e["indices"], e["epoch"], e["values"]) == (
            3,
            "right",
            [1, 3, 1],
            1,
            [e["pe"]] * 2,
        )
    epochs = [e["epoch"] for e in trace.events]
    assert epochs == sorted(epochs)  # barriers order the events
    assert trace.epochs == 4  # start, after each of the 2 barriers, end
    assert (trace.heap(1)["right"] == -1).all()
    after = trace.heap(2)["right"]
    assert after.shape == (n, 4)
    assert after[:, 1].tolist() == [(pe - 1) % n for pe in range(n)]
    frames = trace.frames()
    assert len(frames) == 1 and frames[0]["epoch"] == 1 and len(frames[0]["transfers"]) == n
    assert np.array_equal(frames[0]["heap"]["right"], after)  # values applied = what the barrier saw
    with pytest.raises(IndexError, match="this trace has 4 heap states"):
        trace.heap(7)


@pytest.mark.parametrize(
    "collective, algorithm, steps",
    [
        ("fcollect", "ring", lambda n: n - 1),
        ("fcollect", "recursive_doubling", lambda n: n.bit_length() - 1),
        ("broadcast", "binomial", lambda n: (n - 1).bit_length()),
        ("alltoall", "pairwise", lambda n: n - 1),
    ],
)
def test_teaching_collectives_replay_step_by_step(job, collective, algorithm, steps):
    n = job.n
    call = {
        "fcollect": f"collectives.fcollect(dst, src, algorithm='{algorithm}')",
        "broadcast": f"collectives.broadcast(dst[:2], src, 0, algorithm='{algorithm}')",
        "alltoall": f"collectives.alltoall(dst, a2a, algorithm='{algorithm}')",
    }[collective]
    result = quiet(
        job,
        f"src[:] = me + 1\na2a[:] = me * 10 + np.arange(2 * npes)\nshmem.barrier_all()\n{call}",
        arrays="src=int64[2] dst=int64[2*npes] a2a=int64[2*npes]",
        trace=True,
    )
    frames = [f for f in result.trace.frames() if f["label"]]
    assert len(frames) == steps(n)
    assert [f["label"]["step"] for f in frames] == list(range(1, steps(n) + 1))
    assert all(f["title"].startswith(f"{collective} ({algorithm.replace('_', ' ')})") for f in frames)
    final = frames[-1]["heap"]["dst"]
    if collective == "fcollect":
        assert final.tolist() == [[p + 1 for p in range(n) for _ in range(2)]] * n
    elif collective == "broadcast":
        assert final[:, :2].tolist() == [[1, 1]] * n
    widget = replay(result.trace)
    count = len(result.trace.frames())
    assert isinstance(widget, Replay) and (widget.slider.min, widget.slider.max, widget.slider.value) == (1, count, 1)
    assert widget.title.value.startswith(f"<b>step 1 of {count}: ")  # the slider and the title agree
    widget.slider.value = widget.slider.max
    assert widget.index == count - 1 and widget.image.value[:4] == b"\x89PNG"
    assert widget.title.value.startswith(f"<b>step {count} of {count}: ")
    text = widget.static_text()
    assert f"step 1: {collective} ({algorithm.replace('_', ' ')})" in text and "PE 0 -> PE 1" in text
    assert "<ol><li>" in widget._repr_mimebundle_()["text/html"]
    assert draw_frame(result.trace, 0).axes


def test_untraced_cells_have_no_trace(job):
    result = quiet(job, "pass")
    assert result.trace is None


def test_race_check_and_trace_record_the_same_cell(job):
    """Both recorders wrap shmem4py at once: the race is found and the put is traced, on its line."""
    out = io.StringIO()
    result = quiet(
        job,
        "shmem.barrier_all()\nif me == 0:\n    shmem.put(flag, np.ones(1, 'i8'), 1)\n"
        "if me == 1:\n    seen = int(flag[0])\nshmem.barrier_all()",
        arrays="flag=int64[1]",
        trace=True,
        race=True,
        stdout=out,
    )
    assert [str(r).split(":")[0] for r in result.races] == ["RACE flag[0] on PE 1"]
    assert "PE 0 line 3 put (write) / PE 1 line 5 load (read)" in str(result.races[0])
    puts = [e for e in result.trace.events if e["op"] == "put"]
    assert [(e["pe"], e["target"], e["line"], e["array"]) for e in puts] == [(0, 1, 3, "flag")]
    assert "1 race found" in out.getvalue() and "trace: " in out.getvalue()


def _texts(fig):
    return [t for ax in fig.axes for t in ax.texts]


def test_replay_reads_well_at_4_pes_with_rabenseifner(job):
    """Issue 23 item 6: labels apart, values inside their box, the work buffer named in words,
    steps worded without "i-0" or "i..i+0", transfers in PE order, unknown arrays refused."""
    from matplotlib.backends.backend_agg import FigureCanvasAgg

    code = (
        "src[:] = np.arange(8) * (me + 1)\nwide[:] = 123456.789 + np.arange(12)\nshmem.barrier_all()\n"
        "collectives.reduce(dst, src, algorithm='rabenseifner')\n"
        "collectives.fcollect(ring, src[:2], algorithm='ring')\ncollectives.fcollect(ring, src[:2], algorithm='bruck')"
    )
    result = quiet(job, code, arrays="src=float64[8] dst=float64[8] wide=float64[12] ring=float64[2*npes]", trace=True)
    trace = result.trace
    titles = [f["title"] for f in trace.frames()]
    assert not [t for t in titles if re.search(r"i-0\b|i\+0\b", t)], titles
    assert any("PE i puts its own block to PE i+1" in t for t in titles), titles
    text = Replay(trace).static_text()
    assert "(scratch)" not in text and ("work buffer" in text or job.n == 1), text
    for frame in trace.frames():
        pairs = [(a, b) for a, b, _ in transfers(trace, frame)]
        assert pairs == sorted(pairs)
    for index in range(len(trace.frames())):
        fig = draw_frame(trace, index)
        renderer = FigureCanvasAgg(fig).get_renderer()
        texts = _texts(fig)
        numbers = [t.get_window_extent(renderer) for t in texts if t.get_text().isdigit()]
        assert all(not a.overlaps(b) for i, a in enumerate(numbers) for b in numbers[i + 1 :]), f"step {index + 1}"
        boxes = [p.get_window_extent(renderer) for p in fig.axes[0].patches if type(p).__name__ == "FancyBboxPatch"]
        for t in texts:
            if t.get_text().startswith("wide ["):
                inside = [b for b in boxes if b.x0 <= t.get_window_extent(renderer).x0 <= b.x1]
                assert inside and t.get_window_extent(renderer).x1 <= inside[0].x1, t.get_text()
    expected = (
        r"the traced cell has no array named 'nope'; its arrays: .*dst, .*ring, src, wide "
        r"\(e.g. `%shmem replay --array "
    )
    with pytest.raises(InputError, match=expected):
        replay(trace, arrays=["nope"])
