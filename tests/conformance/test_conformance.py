"""The conformance suite (issue 43): every program of :mod:`conformance.programs` as a race-checked
cell on every built library at 2 and 4 PEs, in one job per (library, PE count), each repeated
``SHMEM_NOTEBOOK_CONFORMANCE_REPEAT`` times (default 1; ``make conformance`` runs 5 under load).
Any repetition whose values differ from the program's own answer, a refusal missing, a hang or a
race report fails the program's test. The tests below them (no PEs) check the programs and the
judging itself."""

import ast
import os

import pytest

from conformance.programs import AREAS, PROGRAMS, Program
from conformance.report import BEGIN, END, markdown, update_page
from conformance.runner import Run, judge, problems, run_once, tally
from conftest import job_fixture

#: repetitions of each program per job here (CI); make conformance runs --repeat 5
REPEAT = int(os.environ.get("SHMEM_NOTEBOOK_CONFORMANCE_REPEAT", "1"))

job = job_fixture(2, 4, heap="8M", sos=(2, 4), oshmpi=(2, 4))


@pytest.mark.parametrize("program", PROGRAMS, ids=[p.name for p in PROGRAMS])
def test_program(job, program):
    runs = [run_once(job, program) for _ in range(REPEAT)]
    assert problems(program, job.library.name, job.n, runs) == []


# -- the programs and the judging, without PEs -----------------------------------------------------
def test_the_programs_cover_every_area_issue_43_names():
    assert len(PROGRAMS) >= 80
    assert len({p.name for p in PROGRAMS}) == len(PROGRAMS), "two programs share a name"
    wanted = {"rma", "atomics", "signals", "wait", "locks", "collectives", "teaching", "contexts", "allocation", "ptr"}
    assert wanted <= set(AREAS)
    calls = " ".join(p.code for p in PROGRAMS)
    for call in (
        "put_nbi", "get_nbi", "iput", "iget", "shmem_long_p", "shmem_long_g", "put_signal", "signal_fetch",
        "signal_wait_until", "wait_until_all", "wait_until_any_vector", "test_some", "set_lock", "test_lock",
        "clear_lock", "new_lock", "alltoalls", "collectives.reduce", "split_strided", "Ctx.create",
        "CTX_INVALID.quiet", "CTX_INVALID.fence", "shmem.zeros", "shmem.ones", "shmem.empty", "fromalloc",
        "shmem.ptr",
    ):  # fmt: skip
        assert call in calls, f"no program calls {call}"


@pytest.mark.parametrize("program", PROGRAMS, ids=[p.name for p in PROGRAMS])
def test_each_program_is_python_that_sets_result_and_expects_plain_values(program):
    tree = ast.parse(program.code)
    assigned = [
        t.id for node in ast.walk(tree) if isinstance(node, ast.Assign) for t in node.targets if hasattr(t, "id")
    ]
    assert "result" in assigned
    for npes in (2, 4):
        for me in range(npes):
            assert repr(program.expected(me, npes))  # a closed form or NumPy: no library in sight


SQUARE = Program("square", "test", "result = me * me\n", lambda me, n: me * me)
REFUSED = Program("refused", "test", "shmem.x()\n", lambda me, n: None, refused={"oshmem": "UnsupportedError"})


def test_a_right_run_passes_and_every_kind_of_wrong_one_is_named():
    right = Run(values={0: 0, 1: 1})
    assert judge(SQUARE, "sos", 2, right) == []
    assert judge(SQUARE, "sos", 2, Run(values={0: 0, 1: 2})) == [
        ("wrong", "wrong values on PE [1]: got {1: 2}, expected {1: 1}")
    ]
    assert judge(SQUARE, "sos", 2, Run(values={0: 0})) == [
        ("wrong", "wrong values on PE [1]: got {1: None}, expected {1: 1}")
    ]
    raced = judge(SQUARE, "sos", 2, Run(values={0: 0, 1: 1}, races=["RACE x[0] on PE 1: ..."]))
    assert [kind for kind, _ in raced] == ["race"]
    assert judge(SQUARE, "sos", 2, Run(outcome="hang", errors={-1: "the cell did not end"}))[0][0] == "hang"
    error = Run(outcome="error", errors={0: "ValueError: bad"})
    assert judge(SQUARE, "sos", 2, error) == [("wrong", "raised ValueError: bad (on PE 0)")]
    # one repetition of three differs: the program fails, naming that run
    lines = problems(SQUARE, "sos", 2, [right, Run(values={0: 0, 1: 3}), right])
    assert len(lines) == 1 and "run 2/3" in lines[0]


def test_a_refusal_is_expected_on_its_library_only():
    refused = Run(outcome="error", errors={0: "UnsupportedError: no", 1: "UnsupportedError: no"})
    assert judge(REFUSED, "oshmem", 2, refused) == []
    assert judge(REFUSED, "sos", 2, refused)[0][0] == "wrong"
    ran = judge(REFUSED, "oshmem", 2, Run(values={0: None, 1: None}))
    assert ran == [("wrong", "expected the tool's UnsupportedError on every PE, got values {0: None, 1: None}")]
    other = Run(outcome="error", errors={0: "UnsupportedError: no", 1: "TypeError: other"})
    assert judge(REFUSED, "oshmem", 2, other)[0][0] == "wrong"


def test_the_table_counts_and_lands_between_its_markers(tmp_path):
    rows = [
        tally(SQUARE, "oshmem", 2, [Run(values={0: 0, 1: 1}), Run(values={0: 0, 1: 5})]),
        tally(REFUSED, "oshmem", 2, [Run(outcome="error", errors={0: "UnsupportedError: no"})]),
    ]
    assert (rows[0]["runs"], rows[0]["wrong"], rows[0]["hangs"], rows[0]["races"]) == (2, 1, 0, 0)
    results = {"date": "today", "commit": "abc", "machine": "here", "repeat": 2, "load": 2,
               "seconds": {"total": 1.0}, "rows": rows}  # fmt: skip
    text = markdown(results)
    assert "**1 wrong, 0 hangs or PE deaths, 0 with a race report**" in text
    assert "| test | `square` | 1 wrong of 2 |" in text
    assert "| test | `refused` | 1/1 (refused: UnsupportedError) |" in text
    page = tmp_path / "page.md"
    page.write_text(f"intro\n{BEGIN}\nold\n{END}\nafter\n")
    update_page(page, results)
    assert page.read_text().startswith(f"intro\n{BEGIN}\n\nMeasured today") and page.read_text().endswith(
        f"{END}\nafter\n"
    )


@pytest.mark.pe
def test_ctrl_c_stops_the_whole_run_and_leaves_nothing(tmp_path):
    """Ctrl-C in ``make conformance`` (SIGINT to the terminal's process group) ends the run, not only the
    program it was in (it was taken for a hang, and the next program ran); the busy loops and the PEs go
    with it."""
    import signal
    import subprocess
    import sys

    results = tmp_path / "results.json"
    here = os.path.dirname(os.path.dirname(__file__))
    run = subprocess.Popen(
        [sys.executable, "-m", "conformance", "--library", "oshmem", "--npes", "2", "--repeat", "1000"]
        + ["--program", PROGRAMS[0].name, "--load", "1", "--results", str(results)],
        cwd=os.path.dirname(here),
        env={**os.environ, "PYTHONPATH": here},
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        start_new_session=True,
    )
    try:
        for line in run.stdout:  # the event: the job started, its programs run from now on
            if line.startswith("oshmem at 2 PEs: started"):
                break
        os.killpg(run.pid, signal.SIGINT)
        assert run.wait(timeout=60) == 130
    finally:
        if run.poll() is None:
            os.killpg(run.pid, signal.SIGKILL)
    assert "interrupted:" in run.stdout.read()
    assert not results.exists()  # no job finished
