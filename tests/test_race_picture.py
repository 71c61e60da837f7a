"""A picture of each race (issue 48): the space-time diagram's data (lanes, marks, barriers, arrows, the
fix's place) for races found on real jobs (2 and 4 PEs on OSHMEM, 2 on SOS; at 4 PEs the PEs with no part
in a race have no lane, and a race on a third PE's memory has three), its matplotlib drawing, and the races
as flow arrows in the Perfetto export of a cell race-checked and traced at once (and of ``shmem-race --trace``),
the docs' picture, and the pictures a real Jupyter kernel shows under a cell's report (``rc.race_pictures``)."""

import json
import pathlib

import pytest
from race_shapes import TWO_RACES as TWO_RACES_BODY, TWO_RACES_LINE
from test_trace_export import flows

from conftest import job_fixture, quiet, run_race_runner
from shmem_notebook import Access, Race
from shmem_notebook.trace.perfetto import chrome_trace

job = job_fixture(2, 4, heap="8M", timeout=60, sos=(2,))
ROOT = pathlib.Path(__file__).resolve().parent.parent

ARRAYS = "a=int64[4] flag=int64[1]"
#: every cell starts from a zero flag that every PE has seen (line 1-2)
START = "flag[0] = 0\nshmem.barrier_all()\n"

#: PE 0 puts into PE 1's a (line 4) while PE 1 reads it (line 6): nothing orders them
UNORDERED = (
    START
    + """if me == 0:
    shmem.put(a, np.arange(4, dtype=np.int64), 1)
if me == 1:
    seen = int(a[2])
shmem.barrier_all()
"""
)
#: PE 0 raises PE 1's flag (line 5) after its put (line 4) without a fence: the wait (line 7) orders the
#: put's issue, not its delivery, before the read (line 8)
FLAG = (
    START
    + """if me == 0:
    shmem.put(a, np.arange(4, dtype=np.int64), 1)
    shmem.atomic_set(flag, 1, 1)
if me == 1:
    shmem.wait_until(flag, shmem.CMP.EQ, 1)
    seen = int(a[2])
shmem.barrier_all()
"""
)
#: a sync_all (line 5) between the put (line 4) and the read (line 7) orders them but completes nothing
SYNC_ALL = (
    START
    + """if me == 0:
    shmem.put(a, np.arange(4, dtype=np.int64), 1)
shmem.sync_all()
if me == 1:
    seen = int(a[2])
shmem.barrier_all()
"""
)

#: from 3 PEs: PE 0 puts into PE 2's a (line 4), then raises PE 1's flag (line 5) without a quiet (a fence
#: orders puts to one PE only); PE 1 waits for it (line 7) and gets a from PE 2 (line 9)
THIRD = (
    START
    + """if me == 0:
    shmem.put(a, np.arange(4, dtype=np.int64), 2)
    shmem.atomic_set(flag, 1, 1)
if me == 1:
    shmem.wait_until(flag, shmem.CMP.EQ, 1)
    seen = np.zeros(4, dtype=np.int64)
    shmem.get(seen, a, 2)
shmem.barrier_all()
"""
)


def race_of(job, code, **options):
    """The one race of ``code`` (a put of PE 0 into PE 1's ``a`` and PE 1's read of it)."""
    races = quiet(job, code, race=True, arrays=ARRAYS, **options).races
    assert len(races) == 1, races
    return races[0]


def lines_of(pic):
    return {(m.pe, m.line, m.mode) for m in pic.marks}


def test_an_unordered_put_and_read_have_two_lanes_their_marks_and_no_arrow(job):
    pic = race_of(job, UNORDERED).picture()
    assert pic.lanes == (0, 1)
    assert lines_of(pic) == {(0, 4, "write"), (1, 6, "read")}
    assert pic.arrows == ()
    xs = sorted(m.x for m in pic.marks)
    assert xs[0] < pic.fix_x < xs[1] and "barrier" in pic.fix  # the fix: a barrier between them
    before = [s for s in pic.syncs if s.x < xs[0]]  # the cell's first barrier joins both lanes before both marks
    assert [(s.op, s.line, s.pes) for s in before] == [("barrier_all", 2, (0, 1))]
    assert all(s.x > xs[1] for s in pic.syncs if s not in before)  # the last one after both
    assert {m.text for m in pic.marks} == {"line 4 put (write)", "line 6 load (read)"}


def test_a_flag_race_has_an_arrow_from_the_writer_to_the_waiter(job):
    pic = race_of(job, FLAG).picture()
    assert pic.lanes == (0, 1) and lines_of(pic) == {(0, 4, "write"), (1, 8, "read")}
    (arrow,) = pic.arrows
    assert (arrow.src, arrow.op, arrow.line) == (0, "atomic_set", 5)
    assert (arrow.dst, arrow.wait, arrow.wait_line) == (1, "wait_until", 7)
    put, read = sorted(pic.marks, key=lambda m: m.pe)
    assert put.x < arrow.src_x < arrow.dst_x < read.x  # program order along the lanes, the arrow forward
    assert put.x < pic.fix_x < read.x and pic.fix_x < arrow.src_x  # the fix (a fence or quiet) before the flag
    assert not [s for s in pic.syncs if put.x < s.x < read.x]


def test_a_sync_that_completes_nothing_is_drawn_between_the_marks(job):
    race = race_of(job, SYNC_ALL)
    pic = race.picture()
    put, read = sorted(pic.marks, key=lambda m: m.pe)
    between = [(s.op, s.line, s.pes) for s in pic.syncs if put.x < s.x < read.x]
    assert between == [("sync_all", 5, (0, 1))]
    assert put.x < pic.fix_x < read.x and pic.arrows == ()
    fig = race.figure()  # drawn: a lane per PE, the marks' lines written on it
    (ax,) = fig.axes
    assert [t.get_text() for t in ax.get_yticklabels()] == ["PE 0", "PE 1"]
    texts = {t.get_text() for t in ax.texts}
    assert {"line 4 put (write)", "line 7 load (read)", "sync_all\nline 5"} <= texts
    assert [line.get_linestyle() for line in ax.lines].count("--") == 1  # the fix's one dashed line


def test_a_race_on_a_third_pes_memory_has_its_lane_and_the_flag_arrow(job):
    """From 3 PEs: the memory's owner (PE 2) is a lane of its own, between no marks; PE 3, with no part, has
    none; the barriers join the three lanes, the flag's arrow goes from PE 0 to PE 1, the quiet before it."""
    if job.n < 3:
        pytest.skip("a third PE's memory: 3 PEs or more")
    race = race_of(job, THIRD)
    pic = race.picture()
    assert pic.lanes == (0, 1, 2) and lines_of(pic) == {(0, 4, "write"), (1, 9, "read")}
    assert {m.text for m in pic.marks} == {"line 4 put (write)", "line 9 get (read)"}
    (arrow,) = pic.arrows
    assert (arrow.src, arrow.op, arrow.line, arrow.dst, arrow.wait, arrow.wait_line) == (
        0,
        "atomic_set",
        5,
        1,
        "wait_until",
        7,
    )
    put, get = sorted(pic.marks, key=lambda m: m.pe)
    assert put.x < pic.fix_x < arrow.src_x < arrow.dst_x < get.x and pic.fix == "shmem.quiet()"
    assert [(s.op, s.line, s.pes) for s in pic.syncs] == [("barrier_all", 2, (0, 1, 2)), ("barrier_all", 10, (0, 1, 2))]
    assert pic.syncs[0].x < put.x and get.x < pic.syncs[1].x
    checked_picture(race)
    (ax,) = race.figure().axes
    assert [t.get_text() for t in ax.get_yticklabels()] == ["PE 0", "PE 1", "PE 2"]


def test_a_race_made_by_hand_has_no_picture_and_says_so():
    race = Race("a", 1, (range(2, 3),), (Access(0, 4, "put", "write"), Access(1, 6, "load", "read")), "hint")
    with pytest.raises(ValueError, match="no recorded events to draw"):
        race.picture()


def test_show_outside_ipython_returns_the_figure(job, monkeypatch):
    import IPython

    race = race_of(job, UNORDERED)
    # as in a plain Python process: an earlier test module may have started the session's IPython shell
    monkeypatch.setattr(IPython, "get_ipython", lambda: None)
    assert race.show().axes


def test_the_perfetto_export_joins_the_two_accesses_with_a_flow(job):
    result = quiet(job, FLAG, race=True, trace=True, arrays=ARRAYS)
    (race,) = result.races
    assert result.trace.races == result.races
    document = json.loads(json.dumps(chrome_trace(result.trace), default=str))
    arrows = [(s, f) for s, f in flows(document).values() if s["cat"] == "race"]  # flows() checks them all
    (arrow,) = arrows
    assert {arrow[0]["tid"], arrow[1]["tid"]} == {0, 1}
    marks = [e for e in document["traceEvents"] if e["ph"] == "X" and e["name"] == "race"]
    assert sorted((e["tid"], e["args"]["line"]) for e in marks) == [(0, 4), (1, 8)]
    put = next(e for e in document["traceEvents"] if e["ph"] == "X" and e["name"] == "put")
    (at_put,) = [e for e in marks if e["tid"] == 0]
    assert put["ts"] <= at_put["ts"] <= put["ts"] + put["dur"]  # the put's mark inside the put's slice
    wait = next(e for e in document["traceEvents"] if e["ph"] == "X" and e["name"] == "wait_until")
    (at_read,) = [e for e in marks if e["tid"] == 1]
    assert at_read["ts"] >= wait["ts"] + wait["dur"] - 1e-3  # the read after the wait it follows


def test_a_traced_cell_without_race_check_has_no_race_flows(job):
    result = quiet(job, UNORDERED, trace=True, arrays=ARRAYS)
    document = chrome_trace(result.trace)
    assert not [e for e in document["traceEvents"] if e.get("cat") == "race"]


def checked_picture(race, draw=True):
    """``race``'s picture, checked by its data (the race catalogue draws every race it finds): a lane for each
    mark, the marks at the race's lines on their lanes with the fix between them, barriers across lanes of the
    picture, arrows forward from one lane to another, nothing outside ``range(width)``, no two things at one
    place of a lane; then, with ``draw``, drawn (a Figure with a lane per PE; not rendered)."""
    pic = race.picture()
    assert list(pic.lanes) == sorted(set(pic.lanes)) and {m.pe for m in pic.marks} <= set(pic.lanes)
    assert [(m.line, m.op) for m in pic.marks] == [(a.line, a.op) for a in race.accesses]  # the racing events
    a, b = pic.marks
    assert a.x < pic.fix_x < b.x, pic
    places = [(m.pe, m.x) for m in pic.marks] + [(pe, s.x) for s in pic.syncs for pe in s.pes]
    places += sorted({(w.src, w.src_x) for w in pic.arrows})
    assert len(places) == len(set(places)), pic
    for s in pic.syncs:
        assert s.pes and set(s.pes) <= set(pic.lanes), pic
    for w in pic.arrows:
        assert w.src != w.dst and {w.src, w.dst} <= set(pic.lanes) and w.src_x < w.dst_x, pic
    assert all(0 <= x < pic.width for x in [m.x for m in pic.marks] + [s.x for s in pic.syncs]), pic
    if draw:
        fig = race.figure()
        assert len(fig.axes[0].get_yticks()) == len(pic.lanes)
    return pic


def test_the_docs_picture_is_the_flag_race_the_script_draws(tmp_path):
    """docs/races.md shows scripts/race_picture.py's drawing (make docs redraws it): the race the analysis finds
    in the events two PEs recorded for the page's cell, with the flag's arrow and the fence's place."""
    import importlib.util

    spec = importlib.util.spec_from_file_location("race_picture_script", ROOT / "scripts" / "race_picture.py")
    script = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(script)
    race = script.race()
    assert str(race).startswith("RACE data[2] on PE 1: PE 0 line 3 put (write) / PE 1 line 7 load (read)")
    pic = checked_picture(race)
    (arrow,) = pic.arrows
    assert (arrow.src, arrow.line, arrow.dst, arrow.wait_line) == (0, 4, 1, 6) and pic.fix == "shmem.fence()"
    assert [(s.op, s.line) for s in pic.syncs] == [("barrier_all", 1), ("barrier_all", 8)]
    page = (ROOT / "docs" / "races.md").read_text()
    assert "](race-picture.png)" in page and script.CELL in page  # the page shows the cell the events are of
    script.main(str(tmp_path / "drawn.png"))
    assert (tmp_path / "drawn.png").read_bytes() == (ROOT / "docs" / "race-picture.png").read_bytes()


@pytest.mark.pe
def test_the_race_runner_draws_the_races_in_its_perfetto_export(tmp_path):
    """``shmem-race --trace out.json`` on a racy program: its race's two accesses joined by a flow, as in a cell."""
    program = (
        "import numpy as np\nfrom shmem4py import shmem\n\nme = shmem.my_pe()\na = shmem.zeros(4, dtype=np.int64)\n"
    )
    (tmp_path / "racy.py").write_text(program + UNORDERED.replace("flag[0] = 0\n", "") + "shmem.free(a)\n")
    done = run_race_runner(tmp_path, "racy.py", "--trace", "out.json", timeout=240)
    assert done.returncode == 1 and "1 race found" in done.stdout, done.stdout + done.stderr
    document = json.loads((tmp_path / "out.json").read_text())
    (arrow,) = [(s, f) for s, f in flows(document).values() if s["cat"] == "race"]
    marks = [e for e in document["traceEvents"] if e["ph"] == "X" and e["name"] == "race"]
    assert sorted((e["tid"], e["args"]["access"].split(" ", 2)[2]) for e in marks) == [
        (0, "racy.py:8 put (write)"),
        (1, "racy.py:10 load (read)"),
    ]


#: race_shapes.TWO_RACES as a notebook cell
TWO_RACES = f"%%pxshmem {TWO_RACES_LINE}\n{TWO_RACES_BODY.rstrip()}"


@pytest.mark.pe
def test_a_notebook_draws_rc_race_pictures_races_under_the_report(tmp_path):
    """In a real Jupyter kernel: with ``rc.race_pictures = 1`` a cell with two races shows one picture (a PNG
    whose text names the first race) under its report, with 0 none; the report itself is the same."""
    import nbformat
    from nbclient import NotebookClient

    cells = [
        "%load_ext shmem_notebook",
        "%shmem start -n 2 --heap 8M",
        "import shmem_notebook\nshmem_notebook.rc.race_pictures = 1",
        TWO_RACES,
        "shmem_notebook.rc.race_pictures = 0",
        TWO_RACES,
        "%shmem stop",
    ]
    nb = nbformat.v4.new_notebook(cells=[nbformat.v4.new_code_cell(c) for c in cells])
    NotebookClient(nb, timeout=180, kernel_name="python3", resources={"metadata": {"path": str(tmp_path)}}).execute()
    for c in nb.cells:
        assert not any(o.output_type == "error" for o in c.outputs), c.source
    one, none = nb.cells[3], nb.cells[5]
    for c in (one, none):
        text = "".join(o.get("text", "") for o in c.outputs)
        assert text.count("\nRACE ") + text.startswith("RACE ") == 2 and "2 races found" in text, text
    pictures = [o.data for o in one.outputs if "image/png" in o.get("data", {})]
    assert [p["text/plain"].split(",")[0] for p in pictures] == ["<race picture: RACE a[0] on PE 1"]
    assert not [o for o in none.outputs if "image/png" in o.get("data", {})]
