"""%shmem and %%pxshmem through a real IPython shell, against a real 2-PE job."""

import numpy as np
import pytest
from IPython.core.error import UsageError

import shmem_notebook
from conftest import ipython_shell
from shmem_notebook import CellSyntaxError, HeapFullError, InputError, JobStateError, NoJobError, PEError, SpecError


@pytest.fixture(scope="module")
def ip():
    shmem_notebook.job._current = None  # no job from earlier test modules
    shell = ipython_shell()
    yield shell
    shell.run_cell("%shmem stop")


@pytest.fixture
def cell(ip, capsys):
    """Run source in the shell: (error or None, everything printed)."""

    def run(source):
        result = ip.run_cell(source)
        captured = capsys.readouterr()
        return result.error_before_exec or result.error_in_exec, captured.out + captured.err

    return run


def one_line(text):
    lines = [line for line in text.strip().splitlines() if line.strip()]
    assert len(lines) == 1, text
    return lines[0]


@pytest.mark.parametrize(
    "source, error, message",
    [
        ("%shmem", UsageError, "a subcommand is missing; use one of start, stop"),
        ("%shmem launch", UsageError, "unknown subcommand 'launch'"),
        ("%shmem start", UsageError, "the following arguments are required: -n"),
        ("%shmem start -n four", UsageError, "the number of PEs must be a positive integer, got 'four'"),
        ("%shmem start -n 0", UsageError, "the number of PEs must be a positive integer, got '0'"),
        ("%shmem start -n -2", UsageError, "positive integer"),
        ("%shmem start -n 2 --heap lots", SpecError, "cannot read size 'lots'"),
        ("%shmem start -n 2 --timeout soon", UsageError, "a timeout is a positive number of seconds"),
        ("%shmem start -n 2 --nodes 0", UsageError, "argument --nodes: --nodes must be a positive integer, got '0'"),
        ("%shmem status", NoJobError, "start one with `%shmem start -n 4`"),
        ("%shmem alloc A=int64[8]", NoJobError, "start one with `%shmem start -n 4`"),
        ("%shmem gather A", NoJobError, "start one with `%shmem start -n 4`"),
        ("%%pxshmem\nprint(1)", NoJobError, "no OpenSHMEM job is running for %%pxshmem; start one"),
        ("%shmem restart", NoJobError, "start one"),
    ],
)
def test_mistakes_without_a_job(cell, source, error, message):
    err, printed = cell(source)
    assert isinstance(err, error)
    assert message in str(err)
    assert message in one_line(printed)  # shown as one line, no traceback of ours


def test_missing_oshrun_names_the_packages(cell, monkeypatch):
    monkeypatch.setattr(shmem_notebook.rc, "oshrun", "no-such-oshrun")
    err, printed = cell("%shmem start -n 2")
    assert "apt-get install openmpi-bin libopenmpi-dev" in one_line(printed)
    assert shmem_notebook.current_job() is None or shmem_notebook.current_job().state == "stopped"


@pytest.mark.pe
def test_interrupting_a_start_says_so_in_one_line_and_leaves_nothing(ip, cell):
    import _thread
    import threading

    from conftest import wait_for_no_processes

    timer = threading.Timer(1.0, _thread.interrupt_main)  # the kernel's stop button, 1 s into the start
    timer.start()
    try:
        err, printed = cell("%shmem start -n 8 --heap 32M")
    finally:
        timer.cancel()
    assert isinstance(err, shmem_notebook.LaunchError), printed
    assert "the start of 8 PEs was interrupted; its processes were stopped" in one_line(printed)
    assert len(printed) < 400
    assert wait_for_no_processes() == []
    assert shmem_notebook.current_job() is None or shmem_notebook.current_job().state == "stopped"


@pytest.mark.pe
def test_session(ip, cell):
    err, printed = cell("%shmem start -n 2")
    assert err is None and "OpenSHMEM job ready: 2 PEs" in printed

    err, printed = cell("%shmem start -n 4")
    assert isinstance(err, JobStateError)
    assert "use `%shmem restart` or `%shmem stop`" in one_line(printed)

    err, printed = cell("%%pxshmem A=int64[8] flags=int32[npes]\nA[:] = me + 1\nprint('hi', A.sum(), flags.shape)")
    assert err is None
    assert printed.splitlines() == ["[PE 0] hi 8 (2,)", "[PE 1] hi 16 (2,)"]

    err, printed = cell("%%pxshmem\nprint('same on all')")
    assert printed == "[PE 0-1] same on all\n"

    err, printed = cell("%shmem arrays")
    assert printed.split() == "name dtype shape bytes A int64 (8,) 64 flags int32 (2,) 8".split()

    err, printed = cell("%shmem status")
    lines = printed.strip().splitlines()
    assert lines[0].split() == ["PE", "state", "pid", "host", "heap", "used", "/", "size"]
    assert [line.split()[:2] for line in lines[1:-2]] == [["0", "idle"], ["1", "idle"]]
    assert all(line.endswith("/ 256.0 MiB") for line in lines[1:-2])
    assert lines[-2] == "library: oshmem (Open MPI's OSHMEM, OpenSHMEM 1.4)"
    assert lines[-1].startswith("teams: emulated (OpenSHMEM 1.4 library")

    ip.run_cell("x = %shmem gather A")
    assert np.array_equal(ip.user_ns["x"], np.array([[1] * 8, [2] * 8]))

    for source, error, message in [
        ("%shmem alloc A=int64", SpecError, "expected NAME=DTYPE[SHAPE]"),
        ("%shmem alloc A=notatype[8]", SpecError, "unknown dtype 'notatype'"),
        ("%shmem alloc huge=float64[64,1024,1024]", HeapFullError, "needs 512.0 MiB per PE but the symmetric heap has"),
        ("%shmem gather nothere", InputError, "no variable named 'nothere' on any PE; declared arrays: A, flags"),
        ("%shmem pull nothere", InputError, "no variable named 'nothere' on any PE"),
        ("%shmem free nothere", SpecError, "no array named 'nothere'"),
        ("%%pxshmem B=int64[npes-5]\npass", SpecError, "negative dimension"),
        ("%%pxshmem --timeout=-1\npass", UsageError, "a timeout is a positive number of seconds"),
    ]:
        err, printed = cell(source)
        assert isinstance(err, error), source
        assert message in one_line(printed), (source, printed)

    # an error on one PE: named, and PE 0's output kept
    err, printed = cell("%%pxshmem\nprint('start', me)\nif me == 1:\n    raise KeyError('k')\nprint('end', me)")
    assert isinstance(err, PEError)
    assert "[PE 0-1] start" not in printed  # different text per PE
    assert "[PE 0] start 0" in printed and "[PE 0] end 0" in printed and "[PE 1] start 1" in printed
    assert "[PE 1] raised:" in printed
    assert "the cell raised on 1 of 2 PEs: PE 1: KeyError: 'k'" in printed

    err, printed = cell("%%pxshmem\nx = 1\nif x = 2:\n    pass")
    assert isinstance(err, CellSyntaxError) and "(line 2 of the cell: if x = 2:)" in str(err)
    assert "nothing was sent to the PEs" in str(err) and ".py, line" not in printed
    # IPython allows a top-level await; an engine cannot run it (ipykernel's async path needs a shell thread)
    err, printed = cell("%%pxshmem\nimport asyncio\nawait asyncio.sleep(0)")
    assert isinstance(err, CellSyntaxError) and "a cell cannot await at its top level" in str(err)
    assert "asyncio.run(...)" in str(err) and "nothing was sent to the PEs" in str(err)

    err, printed = cell("%%pxshmem\nB = shmem.zeros(1 << 20, dtype='u1'); B[:3] = me + 1\nword = 'w%d' % me")
    assert err is None
    err, printed = cell("%shmem status")  # heap use counts what the cell allocated
    rows = [line.split() for line in printed.strip().splitlines()[1:] if line[:1].isdigit()]
    assert len(rows) == 2 and all(r[-4] == "MiB" and float(r[-5]) >= 1.0 for r in rows), printed
    ip.run_cell("b = %shmem gather B")
    assert ip.user_ns["b"][:, :4].tolist() == [[1, 1, 1, 0], [2, 2, 2, 0]]
    ip.run_cell("w = %shmem pull word")
    assert ip.user_ns["w"] == {0: "w0", 1: "w1"}
    err, printed = cell("%%pxshmem A=int64[4]\nold = A\nprint('ok')")  # A=int64[8] was: re-allocated
    err, printed = cell("%%pxshmem A=int64[8]\nold[:] = 7")
    assert "`old` referred to the old A, which was re-allocated" in printed
    assert "FreedArrayError" in printed and isinstance(err, PEError)
    cell("%%pxshmem\nshmem.free(B); del B, old\nA[:] = me + 1")

    err, printed = cell("%shmem free flags")
    assert err is None
    err, printed = cell("%shmem restart")
    assert "restarted: 2 PEs, arrays A re-allocated (zeroed)" in printed
    ip.run_cell("y = %shmem gather A")
    assert not ip.user_ns["y"].any()

    err, printed = cell("%shmem stop")
    assert err is None and printed == "OpenSHMEM job stopped: 2 PEs\n"
    err, printed = cell("%shmem stop")  # twice: says so, no error
    assert err is None and printed == "no OpenSHMEM job is running; nothing to stop\n"
