"""The race detector: the labelled catalogue on real 2- and 4-PE jobs, the report, errors, zero cost when off."""

import io
import pathlib
import time

import pytest
from test_race_picture import checked_picture

import shmem_notebook
from conftest import job_fixture, needs_oshmpi, needs_sos, running_job
from race_catalogue import ARRAYS, CASES, RESET
from race_fixes import check_each_fix, notebook_race_cells
from race_score import run_cases
from shmem_notebook import Access, PEError, Race
from shmem_notebook.analysis.happens_before import find_races

NOTEBOOKS = pathlib.Path(__file__).resolve().parent.parent / "notebooks"


#: the libraries the catalogue is scored on, and the OpenSHMEM version each implements
LIBRARIES = [
    pytest.param(("oshmem", "1.4"), id="oshmem"),
    pytest.param(("sos", "1.5"), id="sos", marks=needs_sos),
    pytest.param(("oshmpi", "1.4"), id="oshmpi", marks=needs_oshmpi),
]


def _run_catalogue(job, spec="1.4"):
    """Run every case; return (rows, scores): rows = (case, verdict, detail). ``spec``: the
    OpenSHMEM version of the job's library (1.5 cases end in UnsupportedError below 1.5); every race
    comes with a picture (issue 48), drawn once per race on OSHMEM at 2 PEs."""
    draw = job.n == 2 and job.library.name == "oshmem"
    return run_cases(job, CASES, ARRAYS, RESET, spec, picture=lambda race: checked_picture(race, draw=draw))


@pytest.mark.pe
@pytest.mark.timeout(900)
@pytest.mark.parametrize("library", LIBRARIES)
@pytest.mark.parametrize("npes", [2, 4])
def test_catalogue(npes, library):
    """Every labelled case, in one job per PE count and library; prints precision, recall and accuracy."""
    name, spec = library
    for job in running_job(npes, heap="32M", library=name):
        started = time.perf_counter()
        rows, scores = _run_catalogue(job, spec)
        seconds = time.perf_counter() - started
    wrong = [
        f"{case.name} ({case.category}, race={case.race}, lines={case.lines}): {detail}"
        for case, ok, detail in rows
        if ok is False
    ]
    pending = [f"{case.name} (race={case.race}; {case.pending}): {detail}" for case, ok, detail in rows if ok is None]
    print(
        f"\nrace catalogue on {name} (OpenSHMEM {spec}) at {npes} PEs: "
        f"{len(rows) - len(pending)} cases in {seconds:.1f} s; "
        f"precision {scores['precision']:.2f}, recall {scores['recall']:.2f}, accuracy {scores['accuracy']:.2f} "
        f"(tp {scores['tp']}, fp {scores['fp']}, tn {scores['tn']}, fn {scores['fn']})"
    )
    for line in wrong:
        print("WRONG", line)
    for line in pending:
        print("PENDING, not scored:", line)
    assert len(CASES) >= 60
    assert wrong == []


@pytest.mark.pe
@pytest.mark.timeout(1500)
@pytest.mark.parametrize(
    "npes, library",
    [
        pytest.param(2, ("oshmem", "1.4"), id="2-oshmem"),
        pytest.param(4, ("oshmem", "1.4"), id="4-oshmem"),
        pytest.param(2, ("sos", "1.5"), id="2-sos", marks=needs_sos),
    ],
)
def test_hint_fixes_remove_the_race(npes, library):
    """Every racy case: each race's fix, applied alone, removes that race in a rerun; a race without a fix
    says what to change. A case whose fix is not an edit of the cell (``Case.no_fix`` says why) has such a race."""
    wrong, fixed, unfixed = [], 0, 0
    name, spec = library
    for job in running_job(npes, heap="32M", library=name):
        for case in CASES:
            if not case.race or case.error_on(spec) or case.pending or not case.runs_at(npes):
                continue
            races, problems = check_each_fix(job, case.code, ARRAYS, RESET, timeout=30)
            if case.no_fix and all(r.fix is not None for r in races):
                problems.append(f"a fix for every race, but the case says: {case.no_fix}")
            fixed += sum(r.fix is not None for r in races)
            unfixed += sum(r.fix is None for r in races)
            if problems:
                wrong.append(f"{case.name}:\n    " + "\n    ".join(problems))
    print(f"\nhint fixes on {name} at {npes} PEs: {fixed} races fixed by their fix, {unfixed} without a fix")
    assert wrong == [], "\n".join(wrong)


@pytest.mark.pe
@pytest.mark.timeout(600)
@pytest.mark.parametrize("npes", [2, 4])
def test_notebook_race_cells_fixes(npes):
    """Every ``%%pxshmem --race`` cell of the shipped notebooks: each race's fix removes it in a rerun."""
    cells = [c for path in sorted(NOTEBOOKS.glob("*.ipynb")) for c in notebook_race_cells(path)]
    arrays = sorted({d for declared, _ in cells for d in declared})
    reset = "".join(f"{d.split('=')[0]}[...] = 0\n" for d in arrays) + "shmem.barrier_all()\n"
    wrong, racy = [], 0
    for job in running_job(npes, heap="32M"):
        for _, code in cells:
            races, problems = check_each_fix(job, code, arrays, reset)
            racy += bool(races)
            wrong += problems
    assert racy >= 3 and wrong == [], "\n".join(wrong)


job2 = job_fixture(2, heap="32M")


ISSUE_CELL = """localbuf = np.array([1], dtype=np.int32)
shmem.barrier_all()
if me == 0:
    shmem.put(remote, localbuf, 1)
if me == 1:
    print(f"remote is {int(remote[0])}")
shmem.barrier_all()
"""


def test_issue_example_report(job2):
    out = io.StringIO()
    result = job2.run(ISSUE_CELL, arrays=["remote=int32[1]"], race=True, stdout=out)
    (race,) = result.races
    assert race.array == "remote" and race.pe == 1 and race.indices == (range(0, 1),)
    assert race.accesses == (Access(0, 4, "put", "write", (0,)), Access(1, 6, "load", "read", (1,)))
    assert str(race).startswith(
        "RACE remote[0] on PE 1: PE 0 line 4 put (write) / PE 1 line 6 load (read) are unordered; "
    )
    assert "barrier_all" in race.hint
    text = out.getvalue()
    assert str(race) in text
    assert "1 race found (cell traced: " in text and "operations on 2 PEs, +" in text


def test_untraced_cells_are_untouched(job2):
    """Off is off: shmem4py's functions are the originals and the cell is not rewritten."""
    job2.run("x = 1", race=True, stdout=io.StringIO())
    out = io.StringIO()
    job2.run(
        "print(hasattr(shmem.put, '__shmem_race_skip__'), len(get_ipython().ast_transformers), "
        "'transform_ast' in vars(get_ipython()))",
        stdout=out,
    )
    assert out.getvalue().strip().endswith("False 0 False")


def test_error_carries_result_and_races_up_to_it(job2):
    code = ISSUE_CELL + "raise ValueError('late')\n"
    with pytest.raises(PEError) as info:
        job2.run(code, arrays=["remote=int32[1]"], race=True, stdout=io.StringIO(), stderr=io.StringIO())
    result = info.value.result
    assert result.outcome == "error" and set(result.errors) == {0, 1}
    assert [r.accesses[0].line for r in result.races] == [4]


def test_folding_across_pe_pairs():
    """The same race between many PE pairs is one Race naming every PE."""
    traces = {}
    for pe in range(4):
        events = [["sync", "barrier_all", 1, 0]]
        events.append(["rma", "put", 3, (pe + 1) % 4, 0, 8, "<i8", "priv", 1000, 1008, 0, [1]])
        events.append(["mem", "load", 5, "read", "sym", 0, 8, "<i8"])
        events.append(["sync", "barrier_all", 6, 0])
        traces[pe] = {"events": events, "names": [["A", "sym", 0, 64, 8, 0]], "ops": 4}
    (race,) = find_races(traces, 4)
    assert race.pes == (0, 1, 2, 3) and race.array == "A" and race.indices == (range(0, 1),)
    assert str(race).startswith("RACE A[0] on PE 0-3: PE 0-3 line 3 put (write) / PE 0-3 line 5 load (read)")


def test_race_is_public():
    assert shmem_notebook.Race is Race and "Race" in shmem_notebook.__all__ and "Access" in shmem_notebook.__all__


@pytest.mark.pe
def test_magics(capsys):
    """`%shmem race on|off` and `%%pxshmem --race` in a real IPython shell."""
    from IPython.core.error import UsageError

    from conftest import ipython_shell

    shmem_notebook.job._current = None
    ip = ipython_shell()
    try:
        assert ip.run_cell("%shmem start -n 2 --heap 32M").success
        capsys.readouterr()
        ip.run_cell("%shmem race on")
        assert "race check on for every %%pxshmem cell" in capsys.readouterr().out
        ip.run_cell("%%pxshmem remote=int32[1]\n" + ISSUE_CELL)
        out = capsys.readouterr().out
        assert "RACE remote[0] on PE 1: PE 0 line 4 put (write) / PE 1 line 6 load (read) are unordered" in out
        assert "1 race found" in out
        ip.run_cell("%shmem race off")
        capsys.readouterr()
        ip.run_cell("%%pxshmem\nx = remote[0]")
        assert "race" not in capsys.readouterr().out
        ip.run_cell("%%pxshmem --race\nx = remote[0]")
        assert "no races found (cell traced:" in capsys.readouterr().out
        result = ip.run_cell("%shmem race maybe")
        assert isinstance(result.error_in_exec, UsageError) and "invalid choice: 'maybe'" in str(result.error_in_exec)
    finally:
        ip.run_cell("%shmem stop")


PUT_CELL = "%%pxshmem inbox=int64[1]\nshmem.barrier_all()\nif me == 0:\n    shmem.put(inbox, np.array([42]), 1)\n"
LOAD_CELL = "%%pxshmem\nif me == 1:\n    print('inbox holds', inbox[0])\nshmem.barrier_all()\n"


@pytest.mark.pe
def test_magics_races_across_cells(capsys):
    """`%shmem race on`: a put left in flight at the end of a cell races with a load in the next;
    a quiet at the end of the first cell fixes it; `%shmem race reset` forgets the put."""
    import re

    from conftest import ipython_shell

    shmem_notebook.job._current = None
    ip = ipython_shell()
    try:
        assert ip.run_cell("%shmem start -n 2 --heap 32M").success
        ip.run_cell("%shmem race on")
        ip.run_cell(PUT_CELL, store_history=True)
        assert "no races found (cell traced:" in capsys.readouterr().out
        ip.run_cell(LOAD_CELL, store_history=True)
        out = capsys.readouterr().out
        found = re.search(
            r"RACE inbox\[0\] on PE 1: PE 0 In \[(\d+)\] line 3 put \(write\) / PE 1 In \[(\d+)\] "
            r"line 2 load \(read\) are unordered; ",
            out,
        )
        assert found and int(found.group(2)) == int(found.group(1)) + 1, out
        assert f"call shmem.quiet() at the end of In [{found.group(1)}]" in out and "1 race found" in out
        ip.run_cell(PUT_CELL + "shmem.quiet()\n", store_history=True)
        ip.run_cell(LOAD_CELL, store_history=True)
        out = capsys.readouterr().out
        assert "RACE" not in out and out.count("no races found (cell traced:") == 2, out
        ip.run_cell(PUT_CELL, store_history=True)
        ip.run_cell("%shmem race reset")
        assert "race check: forgot the operations earlier cells left in flight" in capsys.readouterr().out
        ip.run_cell(LOAD_CELL, store_history=True)
        out = capsys.readouterr().out
        assert "RACE" not in out and "no races found (cell traced:" in out, out
        ip.run_cell(PUT_CELL, store_history=True)
        assert shmem_notebook.current_job().stage_state.get("race") is not None
        ip.run_cell("%shmem race off")
        assert shmem_notebook.current_job().stage_state.get("race") is None
    finally:
        ip.run_cell("%shmem stop")


def test_private_memory_is_recorded_only_where_a_nonblocking_call_may_use_it(job2):
    """No other PE reaches private memory: its accesses are recorded only where a put_nbi/get_nbi
    issued earlier (in this cell, or in flight from an earlier one) may still use it."""
    job2.race_reset()
    job2.ask("race_start", {})
    job2.run(
        "work = np.zeros(100)\nwork[:] = 2\nwork[3] += 1\ntotal = (work * 2).sum()\n"
        "buf = np.ones(4)\nshmem.put_nbi(inbox, buf, (me + 1) % npes)\nbuf[1] = 5\nx = work[0]\nshmem.quiet()\n",
        arrays=["inbox=float64[4]"],
        stdout=io.StringIO(),
    )
    for data in job2.ask("race_stop").values():
        private = [(e[1], e[2]) for e in data["events"] if e[0] == "mem" and e[4] == "priv"]
        assert private == [("store", 7)], private  # buf[1] = 5 while the put_nbi reads buf; not work
    # across cells: the client tells each PE which of its private bytes are still in flight
    first = job2.run(
        "buf = np.ones(4)\nshmem.put_nbi(inbox, buf, (me + 1) % npes)\n",
        arrays=["inbox=float64[4]"],
        race=True,
        stdout=io.StringIO(),
    )
    out = io.StringIO()
    second = job2.run("buf[0] = 5\nshmem.quiet()\nshmem.barrier_all()\n", race=True, stdout=out)
    assert first.races == [] and len(second.races) == 1, out.getvalue()
    (race,) = second.races
    assert race.array == "buf" and [(a.op, a.line) for a in race.accesses] == [("put_nbi", 2), ("store", 1)]
    assert race.accesses[0].cell != race.accesses[1].cell and race.pes == (0, 1)
    job2.race_reset()


def test_a_slice_seen_again_is_placed_anew_when_its_array_changed_shape(job2):
    """A loop's slices are found again without asking NumPy, but not after the array was reshaped
    in place (the same index then means other elements)."""
    job2.ask("race_start", {})
    job2.run(
        "s = shmem.zeros(8, dtype=np.int64)\nfor _ in range(2):\n    x = s[0:2].sum()\n"
        "s.shape = (2, 4)\nfor _ in range(2):\n    y = s[0:2].sum()\nshmem.free(s)\n",
        stdout=io.StringIO(),
    )
    for data in job2.ask("race_stop").values():
        reads = {e[2]: e[6] - e[5] for e in data["events"] if e[0] == "mem" and e[4] == "sym"}
        assert reads == {3: 16, 6: 64}, data["events"]  # 2 elements, then 2 rows of 4


def test_capped_trace_says_what_was_checked(job2, monkeypatch):
    """Past the cap the verdict is partial: which PEs were checked up to which line, never a plain
    "no races found"; a race before the cap is still found."""
    from shmem_notebook.cells import race_stage

    monkeypatch.setattr(race_stage, "CAP", 100)
    # elements in no arithmetic progression, so the puts do not summarise into strided events
    code = (
        "src = np.ones(1, dtype=np.int64)\nif me == 1:\n    x = arr[143]\nfor i in range(600):\n"
        "    j = (i * i * 31 + 7 * i) % 1009\n    shmem.put(arr[j:j + 1], src, (me + 1) % npes)\nshmem.barrier_all()\n"
    )
    out = io.StringIO()
    result = job2.run(code, arrays=["arr=int64[1009]"], race=True, stdout=out)
    text = out.getvalue()
    assert "no races found (" not in text
    assert (
        "1 race found in what was checked: PE 0-1 up to line 6; accesses after that were not checked (a PE's "
        "trace reached the cap of 100 events: trace fewer iterations) (cell traced: "
    ) in text, text
    (race,) = result.races  # PE 0's put to arr[143] (i = 10) races PE 1's load at line 3
    assert [(a.line, a.op) for a in race.accesses] == [(3, "load"), (6, "put")] and race.indices == (range(143, 144),)


def test_stress_reruns_with_seeds(job2):
    """--stress: reruns from the arrays as they were, with seeded delays; a line per seed says only
    what differs from the cell itself (issue 23 item 5: not every array at full precision)."""
    out = io.StringIO()
    result = job2.run(ISSUE_CELL, arrays=["remote=int32[1]"], race=True, stress=5, stdout=out)
    text = out.getvalue()
    assert len(result.races) == 1 and job2.last_result is result
    assert (
        "stress: rerunning the cell 4 times (seeds 5-8) with random delays of up to 20 ms around every shmem "
        "call, each from the arrays as they were before it"
    ) in text
    for seed in (5, 6, 7, 8):
        line = next(x for x in text.splitlines() if x.startswith(f"  seed {seed} ("))
        what = line.split("): ", 1)[1]
        # the final arrays match the cell's (restored before each rerun); only PE 1's printed value may differ
        assert what == "same output and arrays as the cell" or (
            what.startswith("PE 1 printed 'remote is ") and "remote[" not in what
        ), line
    # remote[0] ends 1 in every run: printed output alone never makes the race "real" (tests/test_stress.py)
    assert "stress: no rerun changed the memory a race above is about" in text and "real, not just" not in text
    assert len(text) < 2000, text


def test_stress_shows_the_differing_elements_with_both_values(job2):
    out = io.StringIO()
    code = "import time\nif me == 0:\n    A[3] = time.perf_counter_ns() % 1000 + 1000\nshmem.barrier_all()\n"
    job2.run(code, arrays=["A=float64[66]"], race=True, stress=1, stdout=out)
    lines = [x for x in out.getvalue().splitlines() if x.startswith("  seed ")]
    assert len(lines) == 4 and all("PE 0: A[3] = " in x and "(the cell: " in x and "PE 1" not in x for x in lines), (
        lines
    )


def test_inspector_marks_racing_elements(job2):
    """The inspector's values table outlines the elements the last cell's races touch."""
    from shmem_notebook.inspector import gather_snapshot, tables

    result = job2.run(ISSUE_CELL, arrays=["remote=int32[1]"], race=True, stdout=io.StringIO())
    snap = gather_snapshot(job2)
    text = tables.values_table(snap, "remote", races=result.races, html_out=False)
    rows = {line.split()[1]: line.split()[2:] for line in text.splitlines()[1:]}
    assert rows["1"] == ["1!"] and rows["0"] == ["0"]  # PE 1's remote[0] raced, PE 0's did not
    assert 'class="diff race">1<' in tables.values_table(snap, "remote", races=result.races)
    assert 'race"' not in tables.values_table(snap, "remote")
