"""The cell with its races' fixes applied (issue 48 item 8): ``result.fixed_code`` and ``%shmem fix``,
which puts it into the next input cell, on a real 2-PE job in a real IPython shell."""

import pytest
from race_shapes import TWO_RACES, TWO_RACES_LINE as LINE

from conftest import ipython_shell, job_fixture
from shmem_notebook.analysis.edits import Edit, Fix, apply_fixes

job = job_fixture(2, heap="8M", timeout=60, current=True)


@pytest.fixture
def cell(job, capsys):
    """Run source in the shell: (error or None, everything printed)."""
    shell = ipython_shell()

    def run(source):
        result = shell.run_cell(source)
        captured = capsys.readouterr()
        return result.error_before_exec or result.error_in_exec, captured.out + captured.err

    shell.rl_next_input = None
    yield run
    shell.rl_next_input = None


def test_fixed_code_and_fix_put_the_fixed_cell_next(job, cell):
    error, out = cell(f"%%pxshmem {LINE}\n{TWO_RACES}")
    result = job.last_result
    assert error is None and len(result.races) == 2, out
    assert result.code == TWO_RACES and all(race.fix is not None for race in result.races)
    fixed = result.fixed_code
    assert fixed is not None and fixed.count("shmem.barrier_all()") == 4, fixed

    error, out = cell("%shmem fix")
    assert error is None and out.strip() == "%shmem fix: the next cell is the last one with 2 fixes applied", out
    next_input = ipython_shell().rl_next_input
    assert next_input == f"%%pxshmem {LINE}\n{fixed.rstrip()}"

    error, out = cell(next_input)  # the fixed cell, as the user runs it: no race left
    assert error is None and job.last_result.races == [] and job.last_result.fixed_code is None, out
    ipython_shell().rl_next_input = None
    error, out = cell("%shmem fix")
    assert error is None and out.strip() == "%shmem fix: nothing to fix: the last race-checked cell found no race"
    assert ipython_shell().rl_next_input is None


def test_fix_after_a_cell_not_race_checked(job, cell):
    error, out = cell("%%pxshmem\nx = 1")
    assert job.last_result.code is None and job.last_result.fixed_code is None
    error, _ = cell("%shmem fix")
    assert str(error) == "%shmem fix: the last cell was not race-checked; run it with `%%pxshmem --race` first"


def test_fixed_code_from_python(job):
    """``job.run`` keeps the cell too; its fixed code is the cell's alone (no magic line)."""
    result = job.run(TWO_RACES, race=True, arrays=["a=int64[4]", "b=int64[4]"], stdout=None)
    again = job.run(result.fixed_code, race=True, arrays=["a=int64[4]", "b=int64[4]"], stdout=None)
    assert len(result.races) == 2 and again.races == []


CELL = "if me == 0:\n    shmem.put(a, src, 1)\nif me == 1:\n    x = int(a[0])\n    y = int(b[0])\n"


def test_one_barrier_for_two_races_and_one_move_per_statement():
    barrier = Fix((Edit((2,), "shmem.barrier_all()", every_pe=True),))
    same_place = Fix((Edit((3,), "shmem.barrier_all()", every_pe=True, before=True),))
    fixed, applied = apply_fixes(CELL, [barrier, same_place])
    assert fixed.count("barrier_all") == 1 and applied == [barrier, same_place]
    first, second = Fix((Edit((4,), move=5, before=True),)), Fix((Edit((2,), move=5),))
    fixed, applied = apply_fixes(CELL, [first, second])
    assert fixed.count("y = int(b[0])") == 1 and applied == [first]
