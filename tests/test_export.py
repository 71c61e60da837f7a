"""From notebook to batch job: ``job.export`` / ``%shmem export`` write the cells as one shmem4py program.

Units first (no PEs): IPython syntax made plain, the cells chosen, the program and the sbatch
script as text. Then real jobs: the exported program run under plain ``oshrun`` prints, PE by
PE, what the cells printed. The four notebooks exported and run: ``tests/test_export_notebooks.py``.
"""

import os
import subprocess
import sys
from types import SimpleNamespace

import pytest
from conftest import job_fixture, quiet

from shmem_notebook.errors import InputError
from shmem_notebook.job.export import program, sbatch_script, select
from shmem_notebook.job.history import CellRecord
from shmem_notebook.job.plain import plain_cell, show_last, stored
from shmem_notebook.launcher.environment import platform_environment


def record(code, arrays=None, count=None, number=1, outcome="ok", pids=(1, 2), results=None, **options):
    arrays = arrays or {}
    return CellRecord(code=code, arrays=dict(arrays), options=options, count=count, number=number, outcome=outcome,
                      results=results or {}, npes=2, pids=pids)


FAKE_JOB = SimpleNamespace(n=2, heap="32M")


# -- units: no PEs -----------------------------------------------------------------------------
def test_plain_python_passes_unchanged():
    code = "x = np.arange(4)\nshmem.barrier_all()\nprint(x)"
    assert plain_cell(code) == code


def test_magics_become_plain_python_or_say_why_they_are_left_out():
    needs = set()
    out = plain_cell("%time x = 1\ny = %time f()\n!echo hi\nb = !pwd\n%matplotlib inline\nif me == 0:\n"
                     "    %timeit g()\n!echo {x}\nx?", needs).splitlines()
    assert out[0] == "x = 1  # %time: the timing is the notebook's"
    assert out[1] == "y = f()  # %time: the timing is the notebook's"
    assert out[2] == "subprocess.run('echo hi', shell=True)  # !echo hi"
    assert out[3].startswith("b = subprocess.run('pwd', shell=True, capture_output=True, text=True).stdout.splitlines()")
    assert out[4] == "pass  # left out: %matplotlib inline  (figures are not shown by a program: save them with plt.savefig)"
    assert out[6] == "    pass  # left out: %timeit g()  (IPython magic %timeit: no plain-Python equivalent)"
    assert "IPython's variable expansion" in out[7] and "IPython's help" in out[8]
    assert needs == {"subprocess"}
    compile("\n".join(out), "cell", "exec")


def test_cell_magics_and_get_ipython():
    assert plain_cell("%%time\nx = 1\nprint(x)").splitlines() == ["# %%time: the timing is the notebook's", "x = 1", "print(x)"]
    left = plain_cell("%%capture out\nprint(1)")
    assert left.startswith("pass  # left out, cell magic %%capture") and "# print(1)" in left
    out = plain_cell("x = 1\nget_ipython().run_line_magic('who', '')\nprint(x)").splitlines()
    assert out[1].startswith("pass  # left out: get_ipython()") and "(needs the notebook's IPython shell" in out[1]


def test_last_expression_is_printed_as_the_notebook_shows_it():
    assert show_last("x = 1\nx + 1") == "x = 1\n_show(x + 1)  # the last expression: Out[PE k] in the notebook"
    assert show_last("x = 1\nx;") is None  # IPython shows nothing after ';'
    assert show_last("x = 1; x") is None
    assert show_last("x = 1") is None


def test_names_bound_at_top_level():
    assert stored("a = 1\nfor i in range(3): pass\nimport numpy as np\ndef f():\n    b = 2\n    global c\nwith x as (d, e): pass") == \
        {"a", "i", "np", "f", "c", "d", "e"}


def test_failed_cells_are_left_out_unless_chosen():
    history = [record("a", count=3, number=1), record("b", count=4, number=2, outcome="timeout"),
               record("c", count=None, number=5)]
    chosen, left = select(history)
    assert [r.label for r in chosen] == ["In[3]", "cell 5"]
    assert left == [("In[4]", "it did not finish within its timeout in the notebook")]
    assert [r.label for r in select(history, "4,3")[0]] == ["In[3]", "In[4]"]  # in the order they ran
    assert [r.label for r in select(history, [5])[0]] == ["cell 5"]  # a cell without In[k]: its place in the history
    assert [r.label for r in select(history, "In[3]-4")[0]] == ["In[3]", "In[4]"]
    with pytest.raises(InputError, match="no cell 9 ran in this job; the cells it ran: In\\[3\\], In\\[4\\], cell 5"):
        select(history, "9")
    with pytest.raises(InputError, match="cannot read cells 'x'"):
        select(history, "x")


def test_program_declares_rebinds_frees_and_notes_options():
    history = [
        record("A[:] = me\nme = 5", arrays={"A": "A=int64[npes,2]"}, count=4, declared=["A=int64[npes,2]"], race=True),
        record("print(A.sum(), me)\nA", arrays={"A": "A=int64[npes,2]", "B": "B=float32[3]"}, count=5,
               results={0: "x"}, timeout=3),
        record("print(B)", arrays={"B": "B=float32[4]"}, count=6, pids=(7, 8)),
    ]
    text = program(history, [("In[9]", "it raised in the notebook")], FAKE_JOB, "p.py")
    compile(text, "p.py", "exec")
    lines = text.splitlines()
    assert "# ---- In[4]: %%pxshmem A=int64[npes,2] --race " in text
    assert 'A = _declared["A"] = shmem.zeros((npes, 2), dtype="int64")  # declared (zeroed)' in lines
    block5 = text.split("# ---- In[5]")[1].split("# ---- In[6]")[0]
    assert "# the notebook binds these names again before every cell\nme = shmem.my_pe()\n" in block5
    assert "_show(A)  # the last expression: Out[PE k] in the notebook" in lines
    assert any("--timeout: a program has no per-cell timeout" in line for line in lines)
    assert any("run this program under `python -m shmem_notebook.race" in line for line in lines)
    assert 'shmem.free(_declared.pop("B"))  # B=float32[3] re-declared as B=float32[4] before this cell' in lines
    assert 'shmem.free(_declared.pop("A"))  # A=int64[npes,2] freed (%shmem free) before this cell' in lines
    assert "del A" in lines
    assert any(line.startswith("# the job was restarted before this cell") for line in lines)
    assert "Left out: In[9], because it raised in the notebook" in lines
    assert 'os.environ.setdefault("SMA_SYMMETRIC_SIZE", "33554432")  # heap 32M per PE (Open MPI reads this one)' in lines
    assert lines[-3:] == ["shmem.barrier_all()", "for _array in reversed(list(_declared.values())):", "    shmem.free(_array)"]


def test_program_without_shmem_notebook_fixes_shmem_array_itself():
    text = program([record("a = shmem.array([1, 2])")], [], FAKE_JOB, "p.py")
    assert 'shims.install(shmem, exclude=("diagnostics",))' in text
    assert "shmem.array = _array" in text and "collectives" not in text
    assert "from shmem_notebook.engine import collectives" in program([record("collectives.broadcast(A, B, 0)")], [], FAKE_JOB, "p")


def test_sbatch_script_has_the_jobs_options_and_the_platforms_environment(tmp_path):
    text = sbatch_script(4, tmp_path / "prog.py", "64M", {"partition": "debug", "time": "10", "nodes": 2,
                                                          "sbatch_args": ["--qos=low"]}, python="/py")
    lines = text.splitlines()
    for line in ("#SBATCH --ntasks=4", "#SBATCH --partition=debug", "#SBATCH --time=10", "#SBATCH --nodes=2",
                 "#SBATCH --qos=low", "#SBATCH --output=prog-%j.out", 'export OMPI_MCA_osc="${OMPI_MCA_osc-^rdma}"',
                 'export SMA_SYMMETRIC_SIZE="${SMA_SYMMETRIC_SIZE-67108864}"'):
        assert line in lines
    assert lines[-1].startswith("exec oshrun -n 4 -x ") and lines[-1].endswith(f"/py {tmp_path}/prog.py")
    srun = sbatch_script(4, "prog.py", "64M", runner="srun", python="/py").splitlines()[-1]
    assert srun == f"exec srun --mpi=pmix --kill-on-bad-exit=1 --ntasks=4 /py {os.path.abspath('prog.py')}"


def test_export_magic_needs_a_job_and_says_what_it_wrote(tmp_path, capsys):
    from conftest import ipython_shell
    from IPython.core.error import UsageError

    import shmem_notebook

    shell = ipython_shell()
    old = shmem_notebook.job._current
    try:
        shmem_notebook.job._current = None
        with pytest.raises(Exception, match="no OpenSHMEM job is running for %shmem export"):
            shell.run_line_magic("shmem", f"export {tmp_path}/p.py")
        job = shmem_notebook.Job(2, heap="32M")  # never started: its history is what counts
        job.history.append(record("print(me)", count=7))
        shmem_notebook.job._current = job
        shell.run_line_magic("shmem", f"export {tmp_path}/p.py --slurm --partition debug")
        out = capsys.readouterr().out
        assert f"wrote {tmp_path}/p.py: 1 cell (In[7])" in out and f"wrote {tmp_path}/p.sbatch" in out
        assert "#SBATCH --partition=debug" in (tmp_path / "p.sbatch").read_text()
        with pytest.raises(UsageError, match="--time only apply with --slurm"):
            shell.run_line_magic("shmem", f"export {tmp_path}/p.py --time 5")
        shell.run_line_magic("shmem", "export --help")
        assert "--cells SPEC" in capsys.readouterr().out
    finally:
        shmem_notebook.job._current = old


# -- real jobs -----------------------------------------------------------------------------------
def run_program(path, n, tmp_path, extra=()):
    """``oshrun -n N python PATH`` in the platform's environment; ``{pe: stdout}``, the exit status, stderr."""
    out_dir = tmp_path / f"out-{os.path.basename(path)}"
    env = dict(os.environ, **platform_environment())
    command = ["oshrun", "-n", str(n), "--oversubscribe", "--output-filename", str(out_dir), *extra, sys.executable,
               str(path)]
    done = subprocess.run(command, capture_output=True, text=True, env=env, timeout=240)
    outputs = {}
    for pe in range(n):
        file = out_dir / "1" / f"rank.{pe}" / "stdout"
        outputs[pe] = file.read_text() if file.exists() else ""
    errors = "".join((out_dir / "1" / f"rank.{pe}" / "stderr").read_text()
                     for pe in range(n) if (out_dir / "1" / f"rank.{pe}" / "stderr").exists())
    return outputs, done.returncode, done.stderr + errors


def expected_output(job, labels):
    """What the exported cells printed on each PE, in order (the last expression as Out shows it)."""
    chosen = [r for r in job.history if r.label in labels]
    printed = {pe: "".join(r.stdout.get(pe, "") + (r.results[pe] + "\n" if r.results.get(pe) else "") for r in chosen)
               for pe in range(job.n)}
    return {pe: "".join(line for line in text.splitlines(True) if not line.startswith(TIMINGS))
            for pe, text in printed.items()}


#: what %time prints: the notebook's, not the program's (the program runs the statement untimed)
TIMINGS = ("CPU times: ", "Wall time: ")


job = job_fixture(2, heap="32M", timeout=120)


@pytest.mark.pe
def test_exported_program_prints_what_the_cells_printed(job, tmp_path):
    start = len(job.history)
    quiet(job, "mine = np.full(4, me, dtype=np.int64)\nshmem.put(right, mine, (me + 1) % npes)\nshmem.barrier_all()\n"
               "print('received', right)", arrays="right=int64[4]")
    quiet(job, "src[0] = me * me\nshmem.barrier_all()\nshmem.fcollect(everyone, src)\nprint('squares', everyone)\n"
               "everyone.sum()", arrays="src=int64[1] everyone=int64[npes]")
    quiet(job, "%time total = int(right.sum())\ndef helper(a):\n    return a * 2\nprint(helper(total), me)")
    with pytest.raises(Exception):
        quiet(job, "if me == 1:\n    raise ValueError('only PE 1')\nshmem.barrier_all()")
    job.free("src")
    quiet(job, "a = shmem.array([1, 2, 3])\nprint(a, 'src' in dir())\nshmem.free(a)\nme = 99", arrays="src=int32[2]")
    quiet(job, "print('me is', me, 'src', src.dtype, src.shape)")
    labels = [r.label for r in job.history[start:]]
    done = job.export(tmp_path / "cells.py", cells=None)
    assert done.left_out == [(labels[3], "it raised in the notebook")]
    assert done.cells == labels[:3] + labels[4:]
    text = (tmp_path / "cells.py").read_text()
    assert 'shmem.free(_declared.pop("src"))  # src=int64[1] re-declared as src=int32[2] before this cell' in text
    assert "me = shmem.my_pe()" in text.split(labels[5])[1]  # bound again after a cell rebound it
    outputs, status, err = run_program(tmp_path / "cells.py", job.n, tmp_path)
    assert status == 0, err
    assert outputs == expected_output(job, done.cells)
    assert outputs[1].splitlines()[-1] == "me is 1 src int32 (2,)"


@pytest.mark.pe
def test_history_records_the_cell_and_not_the_stress_reruns(job):
    start = len(job.history)
    quiet(job, "x = 1", race=True, stress=3, timeout=60)
    assert len(job.history) == start + 1
    rec = job.history[-1]
    assert rec.options == {"race": True, "stress": 3, "timeout": 60} and rec.outcome == "ok"
    assert rec.pids == tuple(job.pes[pe]["pid"] for pe in range(job.n)) and rec.count is None
