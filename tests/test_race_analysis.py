"""The race analysis over synthetic traces, no PEs: large traces, capped traces (a partial check
says so), races across cells (the carry), and the race stage's progress line and interrupt."""

import io
import os
import sys

from shmem_notebook.analysis.happens_before import analyse, find_races
from shmem_notebook.cells import race_stage
from shmem_notebook.cells.result import CellResult

sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "bench"))
import race_traces

A = [["A", "sym", 0, 64, 8, 0], ["buf", "priv", 1000, 1008, 8, 1]]


def _traces(*per_pe, truncated=None):
    return {
        pe: {"events": events, "names": A, "ops": len(events), "truncated": (truncated or {}).get(pe), "cap": 9}
        for pe, events in enumerate(per_pe)
    }


PUT = ["rma", "put", 2, 1, 0, 8, "<i8", "priv", 1000, 1008, 0, [1]]  # PE 0: shmem.put(A[0:1], buf, 1)
LOAD = ["mem", "load", 1, "read", "sym", 0, 8, "<i8"]  # x = A[0]
QUIET = ["sync", "quiet", 3, 0, None]
BARRIER = ["sync", "barrier_all", 1, 0, None]
#: PE 0: a loop of puts to A[i] on PE 1 (line 2)
PUTS = [["rma", "put", 2, 1, 8 * i, 8 * i + 8, "<i8", "priv", 1000, 1008, 0, [1]] for i in range(5)]


def test_scattered_puts_no_false_alarm_and_the_race_found():
    assert find_races(race_traces.scattered_puts(3000), 2) == []
    (race,) = find_races(race_traces.scattered_puts(3000, race_at=0), 2)
    assert str(race).startswith("RACE arr[0] on PE 1: PE 0 line 5 put (write) / PE 1 line 7 load (read) are unordered")


def test_stencil_has_no_race():
    assert find_races(race_traces.stencil(50), 4) == []


def test_same_line_many_times_reports_once_with_every_element():
    puts = [["rma", "put", 2, 1, 8 * i, 8 * i + 8, "<i8", "priv", 1000, 1008, 0, [1]] for i in range(8)] * 3
    races = find_races(_traces(puts, [["mem", "load", 4, "read", "sym", 0, 64, "<i8"]]), 2)
    # the puts of one line to one PE, unfenced, also race each other (delivery order)
    assert [(r.accesses[0].line, r.accesses[1].line, r.indices) for r in races] == [
        (2, 2, (range(0, 8),)),
        (2, 4, (range(0, 8),)),
    ]


def test_capped_trace_is_checked_up_to_the_cap_and_says_so():
    # PE 0 hit the cap inside a loop of puts (line 2) before its barrier; PE 1 reached the
    # barrier and loads after it: that load is not checked (it would be a false alarm)
    traces = _traces(PUTS, [BARRIER, LOAD], truncated={0: 2})
    result = analyse(traces, 2)
    assert result.races == [] and result.checked == {0: 2, 1: 1}
    assert result.checked.describe() == "PE 0 up to line 2; PE 1 up to line 1"
    # a race before the cap is still found
    traces = _traces(PUTS, [LOAD, BARRIER], truncated={0: 2})
    result = analyse(traces, 2)
    assert len(result.races) == 1 and result.checked.describe() == "PE 0 up to line 2; PE 1 up to line 1"
    assert analyse(_traces([PUT, QUIET], [LOAD]), 2).checked is None


def _two_cells(first, second, carry=None):
    one = analyse(_traces(*first), 2, carry=carry, cell="In [4]")
    two = analyse(_traces(*second), 2, carry=one.carry, cell="In [5]")
    return one, two


def test_put_in_one_cell_load_in_the_next_races():
    one, two = _two_cells(([PUT], []), ([], [LOAD]))
    assert one.races == [] and len(one.carry) == 1 and one.carry.cells() == ["In [4]"]
    (race,) = two.races
    assert str(race).startswith(
        "RACE A[0] on PE 1: PE 0 In [4] line 2 put (write) / PE 1 In [5] line 1 load (read) are unordered; "
    )
    assert "shmem.quiet() at the end of In [4]" in race.hint and "barrier_all" in race.hint
    assert [a.cell for a in race.accesses] == ["In [4]", "In [5]"]


def test_quiet_or_barrier_orders_across_cells():
    assert _two_cells(([PUT, QUIET], []), ([], [LOAD]))[1].races == []  # completed in its own cell
    assert _two_cells(([PUT], []), ([BARRIER], [BARRIER, LOAD]))[1].races == []  # the next cell's barrier
    # a quiet on PE 0 alone completes the put but does not order PE 1's load after it
    assert len(_two_cells(([PUT], []), ([QUIET], [LOAD]))[1].races) == 1


def test_in_flight_operations_carry_until_completed():
    one, two = _two_cells(([PUT], []), ([], []))
    assert len(two.carry) == 1
    three = analyse(_traces([], [LOAD]), 2, carry=two.carry, cell="In [6]")
    (race,) = three.races
    assert [a.cell for a in race.accesses] == ["In [4]", "In [6]"]
    four = analyse(_traces([QUIET], []), 2, carry=three.carry, cell="In [7]")
    assert len(four.carry) == 0


def test_put_nbi_source_reused_in_the_next_cell():
    put_nbi = ["rma", "put_nbi", 2, 1, 0, 8, "<i8", "priv", 1000, 1008, 0, None]
    store = ["mem", "store", 1, "write", "priv", 1000, 1008, "<i8"]
    (race,) = _two_cells(([put_nbi], []), ([store], []))[1].races
    assert race.array == "buf" and race.accesses[0].cell == "In [4]" and race.accesses[1].op == "store"


def test_races_within_a_cell_keep_their_format():
    one, two = _two_cells(([PUT], [LOAD]), ([], []))
    (race,) = one.races
    assert race.accesses[0].cell is None and " line 2 put" in str(race) and "In [" not in str(race)
    assert two.races == []  # the pair was reported in In [4]; only new accesses are checked against it


class _Job:
    """What the race stage reads of a job."""

    def __init__(self, traces):
        self.n, self.traces, self.history, self.pes, self.stage_state = (
            2,
            traces,
            [],
            {0: {"pid": 1}, 1: {"pid": 2}},
            {},
        )


class _Request:
    """The dispatched cell: what the PEs answered to the requests made after it."""

    def __init__(self, job, after):
        self.job, self.after = job, after

    def answers(self, op):
        assert op in {r if isinstance(r, str) else r[0] for r in self.after}  # asked for by the stage before the cell
        return self.job.traces if op == "race_stop" else {}


class _Cell:
    def __init__(self, job, out):
        self.job, self.write_out, self.timeout = job, out.write, None
        self.before_requests, self.after_requests = [], []
        self.request = _Request(job, self.after_requests)


_Result = CellResult  # what the path hands the stage


def _stage(traces, progress=None, monkeypatch=None):
    job, out = _Job(traces), io.StringIO()
    stage, result = race_stage.RaceStage(), _Result()
    cell = _Cell(job, out)
    stage.before(cell)
    cell.before_requests, cell.request.after[:] = stage.requests(cell)
    stage.after(cell, result)
    stage.report(cell, result, out.write)
    return job, result, out.getvalue()


def _next_cell(job, traces):
    """The same job running its next race-checked cell."""
    job.traces, out, result = traces, io.StringIO(), _Result()
    stage, cell = race_stage.RaceStage(), _Cell(job, out)
    stage.before(cell)
    cell.before_requests, cell.request.after[:] = stage.requests(cell)
    stage.after(cell, result)
    stage.report(cell, result, out.write)
    job.history.append(None)  # recorded by the history once its stages ran
    return result, out.getvalue()


def test_stage_carries_between_cells_and_reset_forgets(monkeypatch):
    monkeypatch.setattr(race_stage, "notebook_count", lambda: None)  # outside a notebook, whatever shell ran before
    job = _Job(None)
    result, text = _next_cell(job, _traces([PUT], []))
    assert text.startswith("no races found (cell traced: 1 operation on 2 PEs, +")
    assert len(race_stage.RaceStage.state(job)) == 1
    result, text = _next_cell(job, _traces([], [LOAD]))
    (race,) = result.races
    assert [a.cell for a in race.accesses] == ["cell 1", "cell 2"] and str(race) in text
    assert "1 race found (cell traced: 1 operation on 2 PEs, after what cell 1 left in flight, +" in text
    race_stage.RaceStage.reset(job)
    assert _next_cell(job, _traces([], [LOAD]))[0].races == []
    _next_cell(job, _traces([PUT], []))
    job.history.append(None)  # a cell without race=True ran in between: it may have completed the put
    assert _next_cell(job, _traces([], [LOAD]))[0].races == []
    _next_cell(job, _traces([PUT], []))
    job.pes[1]["pid"] = 3  # the PEs were restarted
    assert _next_cell(job, _traces([], [LOAD]))[0].races == []


def test_stage_says_a_capped_check_is_partial():
    _, _, text = _stage(_traces(PUTS, [BARRIER, LOAD], truncated={0: 2}))
    assert "no races found (" not in text and "RACE" not in text  # never the plain verdict
    assert text.startswith(
        "no races found in what was checked: PE 0 up to line 2; PE 1 up to line 1; accesses after "
        "that were not checked (a PE's trace reached the cap of 9 events"
    )


def test_stage_progress_line_and_interrupt(monkeypatch):
    monkeypatch.setattr(race_stage, "PROGRESS_AFTER", 0.0)
    _, _, text = _stage(race_traces.scattered_puts(40000))
    assert "\rrace check: analysing 80,002 events on 2 PEs... " in text and "race check: analysed 80,002 events" in text

    def interrupted(*args, **kwargs):
        raise KeyboardInterrupt

    monkeypatch.setattr(race_stage, "analyse", interrupted)
    job, result, text = _stage(_traces([PUT], [LOAD]))
    assert text.strip().splitlines() == [
        "race check: interrupted after 0.0 s of analysis; the cell ran, its races were not checked and earlier "
        "cells' operations in flight are forgotten"
    ]
    assert result.races == [] and race_stage.RaceStage.state(job) is None


def test_a_ctrl_c_that_a_finalizer_dropped_stops_the_analysis():
    """The press lands in a finalizer (Python drops it) while the cell path runs: the analysis stops
    at its next progress step, as it does at a KeyboardInterrupt raised in it."""
    from test_ctrl_c import Pressed

    from shmem_notebook.cells import ctrl_c

    with ctrl_c.watching():
        Pressed()
        _, result, text = _stage(race_traces.scattered_puts(40000))
    assert text.strip().splitlines()[-1].startswith("race check: interrupted after "), text
    assert result.races == []


def test_many_unordered_puts_to_one_element():
    """A loop of puts to one element with no quiet: the puts race each other and the load; the
    shadow keeps only the latest few of them, and the report is the same."""
    puts = [["rma", "put", 3, 1, 0, 8, "<i8", "priv", 1000, 1008, 0, [i]] for i in range(2000)]
    loads = [["mem", "load", 2, "read", "sym", 0, 8, "<i8"]] * 2000
    races = find_races(_traces(puts + [BARRIER], loads + [BARRIER]), 2)
    assert sorted((r.accesses[0].line, r.accesses[1].line) for r in races) == [(2, 3), (3, 3)]
    assert all(r.indices == (range(0, 1),) for r in races)


def test_a_strided_access_supersedes_only_the_same_footprint():
    """``A[2] = ...`` then ``A[1::2] = ...`` on one line: the second spans A[2] without touching it, so
    it does not hide the first from PE 1's put into A[2]; the same strided write repeated is kept
    once and still races."""
    two = ["mem", "store", 3, "write", "sym", 16, 24, "<i8"]
    evens, odds = (
        ["mem", "store", 3, "write", "sym", 0, 56, "<i8", (8, ((4, 16),))],
        ["mem", "store", 3, "write", "sym", 8, 64, "<i8", (8, ((4, 16),))],
    )
    (race,) = find_races(_traces([two, odds], [["rma", "put", 5, 0, 16, 24, "<i8", "priv", 1000, 1008, 0, [1]]]), 2)
    assert (race.accesses[0].line, race.accesses[1].line, race.indices) == (3, 5, (range(2, 3),))
    put = ["rma", "put", 5, 0, 0, 8, "<i8", "priv", 1000, 1008, 0, [1]]
    (race,) = find_races(_traces([evens] * 1000, [put]), 2)
    assert (race.accesses[0].line, race.accesses[1].line, race.indices) == (3, 5, (range(0, 1),))
    put_odd = ["rma", "put", 5, 0, 8, 16, "<i8", "priv", 1000, 1008, 0, [1]]
    assert find_races(_traces([evens] * 10, [put_odd]), 2) == []  # interleaved, never touching
