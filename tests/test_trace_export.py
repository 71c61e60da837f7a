"""Traces out of the notebook (issue 32): ``trace.save`` as Chrome trace-event JSON (Perfetto) and
OTF2 (read back with the ``otf2`` reader), ``trace.waits()`` and its sentences, a trace cut short
by a timeout or an error, the magics ``--trace=profile`` / ``%shmem trace``, and the race
runner's ``--trace FILE``. Real jobs at 2 and 4 PEs (Sandia OpenSHMEM at 2 where built)."""

import io
import json
import pathlib
import re
import textwrap
from collections import Counter

import pytest

import shmem_notebook
from conftest import ipython_shell, job_fixture, quiet, run_race_runner
from shmem_notebook import InputError
from shmem_notebook.analysis.model import READS
from shmem_notebook.errors import CellStoppedError, PEError
from shmem_notebook.trace.cell_trace import PROFILE_CHART, Trace
from shmem_notebook.trace.ends import ends, said
from shmem_notebook.trace.perfetto import chrome_trace

job = job_fixture(2, 4, heap="32M", sos=(2,), timeout=120)

#: per PE: 2 barriers, a put to the right, a get from the right, an atomic add on PE 0 (5 calls)
CALLS = """\
dst[:] = -1
shmem.barrier_all()
shmem.put(dst[me:me + 1], np.full(1, me), (me + 1) % npes)
shmem.get(buf, dst[:2], (me + 1) % npes)
shmem.atomic_add(counter, 1, 0)
shmem.barrier_all()
"""
ARRAYS = "dst=int64[8] counter=int64[1] buf=int64[2]"


def traced(job, code=CALLS, **options):
    options.setdefault("arrays", ARRAYS)
    return quiet(job, code, trace=True, **options).trace


def flows(document):
    """``{id: (start event, finish event)}`` of the flow arrows, each checked: it ends no earlier than it
    starts, both ends lie in a slice of their lane, and the caller's end lies in the call's own slice (a get's
    at its finish: the data flows from the target to the caller, at the caller's time)."""
    starts = {e["id"]: e for e in document["traceEvents"] if e["ph"] == "s"}
    finishes = {e["id"]: e for e in document["traceEvents"] if e["ph"] == "f"}
    assert starts.keys() == finishes.keys(), "every flow start has its finish"
    slices = [e for e in document["traceEvents"] if e["ph"] == "X"]

    def within(end, name=None):
        return any(
            e["pid"] == end["pid"] and e["tid"] == end["tid"] and e["ts"] <= end["ts"] <= e["ts"] + e["dur"]
            for e in slices
            if name is None or e["name"] == name
        )

    for start, finish in zip(starts.values(), (finishes[i] for i in starts)):
        assert start["ts"] <= finish["ts"], f"a {start['name']} arrow ends before it starts: {start}, {finish}"
        assert within(start) and within(finish), f"a {start['name']} arrow's end is outside every slice"
        caller = finish if start["name"] in READS else start
        assert within(caller, start["name"]), f"a {start['name']} arrow is not at the call: {start}, {finish}"
    return {i: (starts[i], finishes[i]) for i in starts}


# -- Chrome trace-event JSON -------------------------------------------------------------------
def test_json_has_a_lane_per_pe_a_slice_per_call_and_an_arrow_per_transfer(job, tmp_path):
    n = job.n
    trace = traced(job)
    path = trace.save(tmp_path / "cell.json")
    document = json.loads(pathlib.Path(path).read_text())
    events = document["traceEvents"]
    slices = [e for e in events if e["ph"] == "X"]
    assert len(slices) == 5 * n == len(trace.events)  # the calls the cell made
    assert Counter(e["name"] for e in slices) == {"barrier_all": 2 * n, "put": n, "get": n, "atomic_add": n}
    for e in slices:
        assert e["dur"] >= 0 and e["ts"] >= 0 and isinstance(e["pid"], int) and e["args"]["line"] in range(2, 7)
        assert e["args"]["code"] == CALLS.splitlines()[e["args"]["line"] - 1].strip()
    names = {e["tid"]: e["args"]["name"] for e in events if e["ph"] == "M" and e["name"] == "thread_name"}
    assert names == {pe: f"PE {pe}" for pe in range(n)}
    assert {e["tid"] for e in slices} == set(range(n))
    processes = [e["args"]["name"] for e in events if e["ph"] == "M" and e["name"] == "process_name"]
    assert len(processes) == 1 and processes[0].endswith(f"(PE 0-{n - 1})")  # one node: one pid
    for pe in range(n):  # a lane's slices do not overlap: calls do not nest
        lane = sorted((e["ts"], e["ts"] + e["dur"]) for e in slices if e["tid"] == pe)
        assert all(a[1] <= b[0] + 1e-3 for a, b in zip(lane, lane[1:]))
    arrows = sorted((s["name"], s["tid"], f["tid"]) for s, f in flows(document).values())
    expected = [("put", pe, (pe + 1) % n) for pe in range(n)] + [("get", (pe + 1) % n, pe) for pe in range(n)]
    expected += [("atomic_add", pe, 0) for pe in range(1, n)]  # PE 0's own add moves nothing between PEs
    assert arrows == sorted(expected)
    meta = document["otherData"]
    assert meta["library"] == job.library.name and meta["job"].startswith(f"{n} PEs")
    assert meta["cell"] and meta["complete"] is True and meta["calls"] == 5 * n and "clock" in meta


def test_a_get_from_a_pe_between_calls_points_into_the_get(job):
    """PE 0 gets from PE 1 while PE 1 is between calls (it polls a flag in Python, which PE 0 sets after
    its get): the arrow was drawn from PE 1's next call, after the get had ended (issue 45 item 3)."""
    code = textwrap.dedent(
        """\
        shmem.barrier_all()
        if me == 0:
            shmem.get(buf, dst[:2], 1)
            shmem.atomic_set(counter, 1, 1)
        elif me == 1:
            while counter[0] == 0:
                pass
        shmem.barrier_all()
        """
    )
    document = chrome_trace(traced(job, code))
    (arrow,) = [(s, f) for s, f in flows(document).values() if s["name"] == "get"]
    assert (arrow[0]["tid"], arrow[1]["tid"]) == (1, 0)


def test_waits_slices_have_their_real_duration(job, tmp_path):
    trace = traced(job, "import time\nif me == 0:\n    time.sleep(0.4)\nshmem.barrier_all()\n", arrays=None)
    document = chrome_trace(trace)
    assert not flows(document)
    barriers = {e["tid"]: e["dur"] for e in document["traceEvents"] if e["ph"] == "X" and e["name"] == "barrier_all"}
    assert all(barriers[pe] > 0.3e6 for pe in range(1, job.n))  # µs: they waited for PE 0's sleep
    assert barriers[0] < 0.2e6


# -- OTF2 --------------------------------------------------------------------------------------
def test_otf2_reads_back_with_a_location_per_pe_and_records_per_call(job, tmp_path):
    import otf2

    n = job.n
    trace = traced(job)
    trace.save(tmp_path / "run.otf2")
    assert (tmp_path / "run.otf2").is_file() and (tmp_path / "run.def").is_file()
    with otf2.reader.open(str(tmp_path / "run.otf2")) as archive:
        locations = sorted(location.name for location in archive.definitions.locations)
        read = list(archive.events)
        records = Counter(type(event).__name__ for _, event in read)
        puts = [
            (location.name, event.remote, event.bytes)
            for location, event in read
            if isinstance(event, otf2.events.RmaPut)
        ]
        regions = {region.name for region in archive.definitions.regions}
    assert locations == sorted(f"PE {pe}" for pe in range(n))
    assert records["Enter"] == records["Leave"] == 5 * n
    assert (records["RmaPut"], records["RmaGet"], records["RmaAtomic"]) == (n, n, n)
    assert records["RmaOpCompleteBlocking"] == 3 * n
    assert records["RmaCollectiveBegin"] == records["RmaCollectiveEnd"] == 2 * n  # the barriers
    assert sorted(puts) == sorted((f"PE {pe}", (pe + 1) % n, 8) for pe in range(n))
    assert {"barrier_all @ line 2", "put @ line 3", "barrier_all @ line 6"} <= regions
    trace.save(tmp_path / "run.otf2")  # saving again replaces the archive


# -- where each PE waits ----------------------------------------------------------------------
@pytest.mark.parametrize("sleeper", ["first", "last"])
def test_waits_name_the_pe_that_sleeps_and_those_that_wait(job, sleeper):
    """The sleeping PE spent the cell outside OpenSHMEM, off the CPU (issue 45 item 9: it was 'computed')."""
    late = 0 if sleeper == "first" else job.n - 1
    code = f"import time\nx = 1\nif me == {late}:\n    time.sleep(0.5)\nshmem.barrier_all()\n"
    waits = traced(job, code, arrays=None).waits()
    sentences = waits.sentences()
    assert (
        sentences[late].startswith(f"PE {late} spent ")
        and "of the cell outside OpenSHMEM (at least " in (sentences[late])
    ), sentences[late]
    assert "off the CPU: sleeping, blocked or waiting for a core" in sentences[late] and "comput" not in sentences[late]
    for pe in set(range(job.n)) - {late}:
        assert sentences[pe].startswith(f"PE {pe} waited ") and "in barrier_all at line 5" in sentences[pe]
        assert "(outside OpenSHMEM " in sentences[pe]
        assert waits[pe].share(waits[pe].waiting[("barrier_all", 5)]) > 0.6
    assert waits[late].share(waits[late].outside) > 0.6
    assert waits[late].off_cpu > 0.4, "a sleep of 0.5 s takes no CPU time, whatever the load"
    rows = waits.rows()
    assert {row["pe"] for row in rows} == set(range(job.n)) and all(row["seconds"] >= 0 for row in rows)
    timeline = waits.trace.timeline()
    assert [label.get_text() for label in timeline.axes[0].get_yticklabels()] == [f"PE {pe}" for pe in range(job.n)]
    figure = waits.trace.profile()
    assert [label.get_text() for label in figure.axes[0].get_yticklabels()] == [f"PE {pe}" for pe in range(job.n)]


def test_waits_tell_computing_from_sleeping_by_the_pes_cpu_time(job):
    """A PE that computes a fixed amount of work ran on the CPU at least that long over the cell (its own
    clock of CPU time says so); where each PE waited counts that time as computing, not as off the CPU,
    as far as the load let it run: its sentence says what its CPU time shows."""
    code = (
        "import time\nwork = 0.0\nif me == 0:\n    started = time.thread_time()\n    total = sum(i * i for i in "
        "range(3_000_000))\n    work = time.thread_time() - started\nshmem.barrier_all()\n"
    )
    waits = traced(job, code, arrays=None).waits()
    work, entry = float(job.pull("work")[0]), waits[0]
    assert work > 0.05 and entry.cpu is not None and entry.cpu >= work, (work, entry)
    assert entry.on_cpu >= work - (entry.cell - entry.outside) and entry.on_cpu + entry.off_cpu <= entry.outside + 1e-9
    said = waits.sentence(0)
    assert said.startswith("PE 0 spent "), said
    if entry.off_cpu >= entry.outside / 2:  # a machine too loaded to give it a core half the time: said so
        assert "off the CPU: sleeping, blocked or waiting for a core" in said, said
    elif entry.on_cpu >= entry.outside / 2:  # its CPU time shows it computed most of the time outside
        assert "on the CPU, computing" in said, said
    else:  # its CPU time covers half the time outside only with the calls' time counted: it cannot tell
        assert "(computing or sleeping;" in said and "comput" not in said.replace("computing or sleeping", ""), said
    assert {"outside", "off_cpu", "on_cpu"} <= set(waits.rows()[0])


# -- cut short ---------------------------------------------------------------------------------
def test_a_cell_stopped_by_its_timeout_keeps_its_events_and_says_where_it_ends(job, tmp_path):
    out = io.StringIO()
    code = (
        "import time\nshmem.barrier_all()\nfor i in range(1000):\n"
        "    shmem.put(dst[:1], np.full(1, i), (me + 1) % npes)\n    time.sleep(0.02)\n"
    )
    with pytest.raises(CellStoppedError):
        quiet(job, code, arrays=ARRAYS, trace=True, timeout=2, stdout=out)
    trace = job.last_result.trace
    assert trace is not None and trace.cut and len(trace.events) > 10
    assert set(trace.ends) == set(range(job.n))
    # each PE is stopped inside the loop: in its sleep (line 5) or, on a loaded machine, in its put (line 4)
    for pe, end in trace.ends.items():
        assert re.fullmatch(rf"PE {pe} was stopped by its timeout of 2 s at line [45]", end), end
    assert f"trace: cut short, it ends where {said(trace.ends)}" in out.getvalue()
    document = json.loads(pathlib.Path(trace.save(tmp_path / "cut.json")).read_text())
    ended = [e for e in document["traceEvents"] if e["ph"] == "i"]
    assert sorted(e["tid"] for e in ended) == list(range(job.n)) and document["otherData"]["complete"] is False
    flows(document)
    trace.save(tmp_path / "cut.otf2")
    assert trace.frames() and shmem_notebook.replay(trace).static_text().startswith("replay: ")


def test_a_cell_that_raised_keeps_its_trace(job):
    with pytest.raises(PEError):
        quiet(job, "shmem.barrier_all()\nraise ValueError('boom')\n", trace=True)
    trace = job.last_result.trace
    assert len(trace.events) == job.n
    assert trace.ends == {pe: f"PE {pe} raised ValueError at line 2" for pe in range(job.n)}


# -- the magics --------------------------------------------------------------------------------
CHART = PROFILE_CHART  # a PNG displayed in a terminal IPython prints its text: the profile's chart


def test_magics_trace_profile_and_save(job, tmp_path, capsys):
    from IPython.core.error import UsageError

    import shmem_notebook.job as jobs

    shell = ipython_shell()
    jobs._current = job
    try:
        cell = "import time\nif me == 0:\n    time.sleep(0.3)\nshmem.barrier_all()\n"
        shell.run_cell_magic("pxshmem", "--trace=profile", cell)
        out = capsys.readouterr().out
        assert "trace: PE 0 spent " in out and "outside OpenSHMEM (at least " in out and "off the CPU" in out
        assert "trace: PE 1 waited" in out and "in barrier_all at line 4" in out
        assert out.count(CHART) == 1 and out.index(CHART) > out.index("trace: PE 1 waited"), out  # then the chart
        shell.run_line_magic("shmem", f"trace save {tmp_path / 'm.json'}")
        assert "trace saved: " in capsys.readouterr().out and (tmp_path / "m.json").is_file()
        flows(json.loads((tmp_path / "m.json").read_text()))
        shell.run_line_magic("shmem", "trace profile")
        out = capsys.readouterr().out
        assert "PE 1 waited" in out and out.count(CHART) == 1, out
        shell.run_cell_magic("pxshmem", "--trace", cell)
        assert CHART not in capsys.readouterr().out  # a plain trace draws nothing
        drawn = job.last_result.trace.profile()  # show=False: returned, not shown
        assert drawn.axes and CHART not in capsys.readouterr().out
        with pytest.raises(PEError):  # a cell that failed keeps its profile, chart included
            shell.run_cell_magic("pxshmem", "--trace=profile", "shmem.barrier_all()\nraise ValueError('x')\n")
        assert capsys.readouterr().out.count(CHART) == 1
        with pytest.raises(UsageError, match="name it \\*.json or \\*.otf2"):
            shell.run_line_magic("shmem", f"trace save {tmp_path / 'm.txt'}")
        shell.run_cell_magic("pxshmem", "--trace x=int64[2]", "x[:] = me\n")  # --trace takes no value from the line
        assert job.last_result.trace is not None and "x" in job.specs
    finally:
        jobs._current = None


# -- no PEs ------------------------------------------------------------------------------------
def test_a_pe_that_sent_nothing_has_an_empty_lane(tmp_path):
    sent = {
        "pe": 0,
        "host": "a",
        "started": 0,
        "stopped": 100,
        "snapshots": [{}],
        "events": [
            {
                "pe": 0,
                "seq": 1,
                "t0": 10,
                "t": 20,
                "line": 1,
                "op": "put",
                "target": 1,
                "array": "x",
                "indices": [0, 1, 1],
                "epoch": 0,
                "label": None,
                "values": [1],
                "bytes": 8,
            }
        ],
    }
    trace = Trace([sent], "shmem.put(x, y, 1)", npes=2)
    assert trace.ends == {1: "PE 1 sent no trace"} and trace.cut
    document = chrome_trace(trace)
    processes = sorted(e["args"]["name"] for e in document["traceEvents"] if e["name"] == "process_name")
    assert processes == ["PE 1: no trace", "node a (PE 0)"]
    assert not [e for e in document["traceEvents"] if e["ph"] in "sf"]  # no lane to bind the arrow's head to
    with pytest.raises(InputError, match="name it \\*.json or \\*.otf2"):
        trace.save(tmp_path / "t.csv")
    capped = ends({0: dict(sent, dropped=5)}, 1)
    assert capped == {0: "PE 0's trace reached the cap of 50,000 events at line 1 (5 later calls not kept)"}
    assert (
        said({0: "PE 0 was interrupted at line 4", 1: "PE 1 was interrupted at line 4", 2: "PE 2 sent no trace"})
        == "PE 0-1 was interrupted at line 4; PE 2 sent no trace"
    )


# -- the race runner ---------------------------------------------------------------------------
PROGRAM = """
import numpy as np
from shmem4py import shmem

me, npes = shmem.my_pe(), shmem.n_pes()
remote = shmem.zeros(1, dtype=np.int64)
shmem.barrier_all()
shmem.put(remote, np.array([me], dtype=np.int64), (me + 1) % npes)
shmem.barrier_all()
shmem.free(remote)
"""


@pytest.mark.pe
@pytest.mark.parametrize("fmt", ["json", "otf2"])
def test_race_runner_writes_the_programs_timeline(tmp_path, fmt):
    (tmp_path / "ring.py").write_text(textwrap.dedent(PROGRAM).lstrip())
    done = run_race_runner(tmp_path, "ring.py", "--trace", f"out.{fmt}", timeout=240)
    assert done.returncode == 0, done.stdout + done.stderr
    assert f"written to out.{fmt}" in done.stdout
    if fmt == "otf2":
        import otf2

        with otf2.reader.open(str(tmp_path / "out.otf2")) as archive:
            assert Counter(type(e).__name__ for _, e in archive.events)["RmaPut"] == 2
        return
    document = json.loads((tmp_path / "out.json").read_text())
    slices = [e for e in document["traceEvents"] if e["ph"] == "X"]
    puts = [e for e in slices if e["name"] == "put"]
    assert sorted(e["tid"] for e in puts) == [0, 1] and all(e["args"]["where"] == "ring.py:7" for e in puts)
    assert len(flows(document)) == 2 and document["otherData"]["cell"] == "ring.py"
