"""From notebook to batch job: ``job.export`` / ``%shmem export`` write the cells as one shmem4py program.

Units first (no PEs): IPython syntax made plain, the cells chosen, the program and the sbatch
script as text. Then real jobs: the exported program run under plain ``oshrun`` prints, PE by
PE, what the cells printed; the four notebooks executed headless with an export before their
``%shmem stop``, the program compared line by line with what the cells printed (notebook 03's
also under the race runner); an exported sbatch script submitted to a private Slurm.
"""

import json
import os
import pathlib
import re
import subprocess
import sys
from types import SimpleNamespace

import pytest

from conftest import job_fixture, quiet, run_race_runner
from shmem_notebook.errors import InputError, PEError, notebook_count
from shmem_notebook.job.history import CellRecord
from shmem_notebook.job.plain_python import plain_cell, show_last, stored
from shmem_notebook.job.script_export import program, sbatch_script, select
from shmem_notebook.launcher.environment import platform_environment
from slurm_cluster import SlurmCluster, slurm_missing


def record(code, arrays=None, count=None, number=1, outcome="ok", pids=(1, 2), results=None, **options):
    arrays = arrays or {}
    return CellRecord(
        code=code,
        arrays=dict(arrays),
        options=options,
        count=count,
        number=number,
        outcome=outcome,
        results=results or {},
        npes=2,
        pids=pids,
    )


FAKE_JOB = SimpleNamespace(n=2, heap="32M")


# -- units: no PEs -----------------------------------------------------------------------------
def test_plain_python_passes_unchanged():
    code = "x = np.arange(4)\nshmem.barrier_all()\nprint(x)"
    assert plain_cell(code) == code


def test_magics_become_plain_python_or_say_why_they_are_left_out():
    needs = set()
    out = plain_cell(
        "%time x = 1\ny = %time f()\n!echo hi\nb = !pwd\n%matplotlib inline\nif me == 0:\n"
        "    %timeit g()\n!echo {x}\nx?",
        needs,
    ).splitlines()
    assert out[0] == "x = 1  # %time: the timing is the notebook's"
    assert out[1] == "y = f()  # %time: the timing is the notebook's"
    assert out[2] == "subprocess.run('echo hi', shell=True)  # !echo hi"
    assert out[3].startswith(
        "b = subprocess.run('pwd', shell=True, capture_output=True, text=True).stdout.splitlines()"
    )
    assert (
        out[4]
        == "pass  # left out: %matplotlib inline  (figures are not shown by a program: save them with plt.savefig)"
    )
    assert out[6] == "    pass  # left out: %timeit g()  (IPython magic %timeit: no plain-Python equivalent)"
    assert "IPython's variable expansion" in out[7] and "IPython's help" in out[8]
    assert needs == {"subprocess"}
    compile("\n".join(out), "cell", "exec")


def test_cell_magics_and_get_ipython():
    assert plain_cell("%%time\nx = 1\nprint(x)").splitlines() == [
        "# %%time: the timing is the notebook's",
        "x = 1",
        "print(x)",
    ]
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
    assert stored(
        "a = 1\nfor i in range(3): pass\nimport numpy as np\ndef f():\n    b = 2\n    global c\nwith x as (d, e): pass"
    ) == {"a", "i", "np", "f", "c", "d", "e"}


def test_failed_cells_are_left_out_unless_chosen():
    history = [
        record("a", count=3, number=1),
        record("b", count=4, number=2, outcome="timeout"),
        record("c", count=None, number=5),
    ]
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


@pytest.mark.parametrize("count, want", [(None, ["cell 1", "cell 2", "cell 3"]), (4, ["In[4]", "In[4].2", "In[4].3"])])
def test_several_runs_in_one_notebook_cell_are_parts_of_it(count, want, monkeypatch):
    from shmem_notebook.job import history as history_module

    monkeypatch.setattr(history_module, "notebook_count", lambda: count)
    job = SimpleNamespace(cell_callbacks=[], specs={}, n=1, pes={0: {"pid": 7}})
    history = history_module.History(job)
    for code in ("a", "b", "c"):
        with history.running(code, None, {}):
            history.record(job, SimpleNamespace(outcome="ok", stdout={0: ""}, results={}))
    assert [r.label for r in history] == want
    assert [r.code for r in select(history, [count or 2])[0]] == (["a", "b", "c"] if count else ["b"])


def test_program_declares_rebinds_frees_and_notes_options():
    history = [
        record("A[:] = me\nme = 5", arrays={"A": "A=int64[npes,2]"}, count=4, declared=["A=int64[npes,2]"], race=True),
        record(
            "print(A.sum(), me)\nA",
            arrays={"A": "A=int64[npes,2]", "B": "B=float32[3]"},
            count=5,
            results={0: "x"},
            timeout=3,
        ),
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
    assert (
        'os.environ.setdefault("SMA_SYMMETRIC_SIZE", "33554432")  # heap 32M per PE (Open MPI reads this one)' in lines
    )
    assert lines[-3:] == [
        "shmem.barrier_all()",
        "for _name in reversed(list(_declared)):",
        "    shmem.free(_declared[_name])",
    ]


def test_program_without_shmem_notebook_fixes_shmem_array_itself():
    text = program([record("a = shmem.array([1, 2])")], [], FAKE_JOB, "p.py")
    assert 'shims.install(shmem, exclude=("diagnostics",))' in text
    assert "shmem.array = _array" in text and "collectives" not in text
    assert "from shmem_notebook.engine import collectives" in program(
        [record("collectives.broadcast(A, B, 0)")], [], FAKE_JOB, "p"
    )


def test_sbatch_script_has_the_jobs_options_and_the_platforms_environment(tmp_path):
    text = sbatch_script(
        4,
        tmp_path / "prog.py",
        "64M",
        {"partition": "debug", "time": "10", "nodes": 2, "sbatch_args": ["--qos=low"]},
        python="/py",
    )
    lines = text.splitlines()
    for line in (
        "#SBATCH --ntasks=4",
        "#SBATCH --partition=debug",
        "#SBATCH --time=10",
        "#SBATCH --nodes=2",
        "#SBATCH --qos=low",
        "#SBATCH --output=prog-%j.out",
        'export OMPI_MCA_osc="${OMPI_MCA_osc-^rdma}"',
        'export SMA_SYMMETRIC_SIZE="${SMA_SYMMETRIC_SIZE-67108864}"',
    ):
        assert line in lines
    assert lines[-1].startswith("exec oshrun -n 4 -x ") and lines[-1].endswith(f"/py {tmp_path}/prog.py")
    srun = sbatch_script(4, "prog.py", "64M", runner="srun", python="/py").splitlines()[-1]
    assert srun == f"exec srun --mpi=pmix --kill-on-bad-exit=1 --ntasks=4 /py {os.path.abspath('prog.py')}"


def test_export_magic_needs_a_job_and_says_what_it_wrote(tmp_path, capsys):
    from IPython.core.error import UsageError

    import shmem_notebook
    from conftest import ipython_shell

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


def test_export_from_a_job_on_another_library_names_its_launcher_and_refuses_slurm(tmp_path):
    import shmem_notebook
    from shmem_notebook.launcher.library import library

    job = shmem_notebook.Job(2, heap="32M", library="sos")  # never started: its history is what counts
    job.history.append(record("print(me)", count=3))
    done = job.export(tmp_path / "p.py")
    sos = library("sos")
    assert done.command.startswith(f"{sos.oshrun} -n 2 {sos.python} "), done.command
    with pytest.raises(
        shmem_notebook.InputError, match="the sos library is not supported there yet: export without --slurm"
    ):
        job.export(tmp_path / "q.py", slurm=True)
    assert not (tmp_path / "q.py").exists()


# -- real jobs -----------------------------------------------------------------------------------
def run_program(path, n, tmp_path, extra=()):
    """``oshrun -n N python PATH`` in the platform's environment; ``{pe: stdout}``, the exit status, stderr."""
    out_dir = tmp_path / f"out-{os.path.basename(path)}"
    env = dict(os.environ, **platform_environment())
    command = [
        "oshrun",
        "-n",
        str(n),
        "--oversubscribe",
        "--output-filename",
        str(out_dir),
        *extra,
        sys.executable,
        str(path),
    ]
    done = subprocess.run(command, capture_output=True, text=True, env=env, timeout=240)
    outputs = {}
    for pe in range(n):
        file = out_dir / "1" / f"rank.{pe}" / "stdout"
        outputs[pe] = file.read_text() if file.exists() else ""
    errors = "".join(
        (out_dir / "1" / f"rank.{pe}" / "stderr").read_text()
        for pe in range(n)
        if (out_dir / "1" / f"rank.{pe}" / "stderr").exists()
    )
    return outputs, done.returncode, done.stderr + errors


def expected_output(job, labels):
    """What the exported cells printed on each PE, in order (the last expression as Out shows it)."""
    chosen = [r for r in job.history if r.label in labels]
    printed = {
        pe: "".join(r.stdout.get(pe, "") + (r.results[pe] + "\n" if r.results.get(pe) else "") for r in chosen)
        for pe in range(job.n)
    }
    return {
        pe: "".join(line for line in text.splitlines(True) if not line.startswith(TIMINGS))
        for pe, text in printed.items()
    }


#: what %time prints: the notebook's, not the program's (the program runs the statement untimed)
TIMINGS = ("CPU times: ", "Wall time: ")


job = job_fixture(2, heap="32M", timeout=120)


@pytest.mark.pe
def test_exported_program_prints_what_the_cells_printed(job, tmp_path):
    start = len(job.history)
    quiet(
        job,
        "mine = np.full(4, me, dtype=np.int64)\nshmem.put(right, mine, (me + 1) % npes)\nshmem.barrier_all()\n"
        "print('received', right)",
        arrays="right=int64[4]",
    )
    quiet(
        job,
        "src[0] = me * me\nshmem.barrier_all()\nshmem.fcollect(everyone, src)\nprint('squares', everyone)\n"
        "everyone.sum()",
        arrays="src=int64[1] everyone=int64[npes]",
    )
    quiet(job, "%time total = int(right.sum())\ndef helper(a):\n    return a * 2\nprint(helper(total), me)")
    with pytest.raises(PEError):
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
    assert len(set(labels)) == len(labels)  # In[k].2 when one notebook cell runs several (as here under a shell)
    assert "me = shmem.my_pe()" in text.split(f"# ---- {labels[5]}:")[1]  # bound again after a cell rebound it
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
    assert rec.pids == tuple(job.pes[pe]["pid"] for pe in range(job.n))
    assert rec.count == notebook_count()  # None, or In[k] of the shell another test module left behind


# -- the four notebooks, exported and run under plain oshrun --------------------------------------
NOTEBOOKS = pathlib.Path(__file__).parent.parent / "notebooks"

#: a cell added before the notebook's first `%shmem stop`: what the history holds, for the comparison
DUMP = """import json, shmem_notebook
_job = shmem_notebook.current_job()
json.dump({{"n": _job.n, "cells": [{{"label": r.label, "code": r.code, "outcome": r.outcome, "stdout": r.stdout,
            "results": r.results}} for r in _job.history]}}, open({path!r}, "w"))
for _r in _job.history:  # each cell alone too
    _job.export({directory!r} + f"/cell{{_r.count}}.py", cells=[_r.count])"""


def execute_with_export(name, tmp_path):
    """Execute notebook ``name`` headless with an export (and a dump of its history) before its first
    ``%shmem stop``; the cells after that stop (04's latency table: other jobs, client cells) are left out."""
    import nbformat
    from nbclient import NotebookClient

    nb = nbformat.read(NOTEBOOKS / name, as_version=4)
    stop = next(i for i, c in enumerate(nb.cells) if c.cell_type == "code" and c.source.startswith("%shmem stop"))
    program, dump = tmp_path / (name.split(".")[0].replace("-", "_") + ".py"), tmp_path / "history.json"
    nb.cells = nb.cells[:stop] + [
        nbformat.v4.new_code_cell(f"%shmem export {program}"),
        nbformat.v4.new_code_cell(DUMP.format(path=str(dump), directory=str(tmp_path))),
        nb.cells[stop],
    ]
    NotebookClient(nb, timeout=300, kernel_name="python3", resources={"metadata": {"path": str(tmp_path)}}).execute()
    said = "".join(o.get("text", "") for o in nb.cells[stop].outputs)
    assert said.startswith(f"wrote {program}: "), said
    return nb, program, json.loads(dump.read_text())


def _racy_cells(nb):
    """In[k] of the cells whose --race report found races (their printed values may differ between runs)."""
    return {
        f"In[{c.execution_count}]"
        for c in nb.cells
        if c.cell_type == "code" and any("RACE " in o.get("text", "") for o in c.get("outputs", []))
    }


@pytest.mark.pe
@pytest.mark.timeout(900)
@pytest.mark.parametrize("name", sorted(p.name for p in NOTEBOOKS.glob("0*.ipynb")))
def test_notebook_exported_prints_the_same_per_pe(name, tmp_path):
    nb, program_path, history = execute_with_export(name, tmp_path)
    n, cells = history["n"], [c for c in history["cells"] if c["outcome"] == "ok"]
    racy = _racy_cells(nb)
    expected = {pe: [] for pe in range(n)}  # (cell, line)
    for cell in cells:
        for pe in range(n):
            text = cell["stdout"].get(str(pe), "") + (
                cell["results"][str(pe)] + "\n" if cell["results"].get(str(pe)) else ""
            )
            expected[pe] += [(cell["label"], line) for line in text.splitlines() if not line.startswith(TIMINGS)]
    outputs, status, err = run_program(program_path, n, tmp_path)
    assert status == 0, err
    for pe in range(n):
        got = outputs[pe].splitlines()
        assert len(got) == len(expected[pe]), (pe, got, expected[pe])
        for line, (label, want) in zip(got, expected[pe]):
            if label in racy:  # a race the notebook reported: the values may differ, not the lines
                line, want = re.sub(r"\d+", "#", line), re.sub(r"\d+", "#", want)
            assert line == want, (pe, label)
    left = [c["label"] for c in history["cells"] if c["outcome"] != "ok"]
    assert all(f"Left out: {label}" in program_path.read_text() for label in left)
    if name.startswith("03"):
        check_races_as_in_the_notebook(nb, program_path, history, tmp_path)


def check_races_as_in_the_notebook(nb, program_path, history, tmp_path):
    """The race runner reports the races --race reported in notebook 03: each racy cell exported alone
    (``job.export(path, cells=[k])``), the same report lines (cell lines for program lines); the whole
    notebook's program, the same races
    (lines and operations: over a whole program a private buffer's name is the last one its memory had,
    and the hint also sees the flags earlier cells waited on)."""
    reported = {}  # In[k] -> its RACE lines
    for c in nb.cells:
        text = "".join(o.get("text", "") for o in c.get("outputs", []))
        if "RACE " in text:
            reported[f"In[{c.execution_count}]"] = [line for line in text.splitlines() if line.startswith("RACE ")]
    # four --race cells (one a counter queue), the cell calling job.run(code, race=True), and the second cell
    # of the race across two cells (which names both cells itself: `In [10] line 3 put / In [11] line 2 load`)
    assert len(reported) == 6
    across = re.compile(r"In \[(\d+)\] line")
    by_label = {cell["label"]: cell for cell in history["cells"]}
    for label, lines in reported.items():
        if any(across.search(line) for line in lines):
            continue  # exported alone, the cell has no put in flight from the cell before
        found = race_lines(tmp_path / f"cell{label[3:-1]}.py", tmp_path, history, [by_label[label]])
        assert found == sorted(re.sub(r"line (\d+)", rf"{label} line \1", line) for line in lines), label
    found = race_lines(program_path, tmp_path, history, history["cells"])

    def accesses(line):
        return tuple(re.findall(r"(In\[\d+\] line \d+ \S+ \(\w+\))", line.split(" are unordered; ")[0]))

    def as_program(label, line):
        if across.search(line):
            return across.sub(r"In[\1] line", line)
        return re.sub(r"line (\d+)", rf"{label} line \1", line)

    assert sorted(map(accesses, found)) == sorted(
        accesses(as_program(label, line)) for label, lines in reported.items() for line in lines
    )


def race_lines(path, tmp_path, history, cells):
    """The runner's RACE lines for the exported program at ``path`` (of ``cells``), with ``In[k] line N``
    for its lines."""
    done = run_race_runner(tmp_path, path.name, npes=history["n"], timeout=240)
    assert done.returncode == 1, done.stdout + done.stderr
    lines = path.read_text().splitlines()
    starts = []  # (program line where the cell's code starts, label)
    for cell in cells:
        header = next(i for i, line in enumerate(lines) if line.startswith(f"# ---- {cell['label']}:"))
        first = cell["code"].splitlines()[0]
        starts.append((next(i for i in range(header, len(lines)) if lines[i] == first) + 1, cell["label"]))

    def as_cell(match):
        line = int(match.group(1))
        start, at = max(s for s in starts if s[0] <= line)
        return f"{at} line {line - start + 1}"

    return sorted(
        re.sub(rf"{path.name}:(\d+)", as_cell, line) for line in done.stdout.splitlines() if line.startswith("RACE ")
    )


# -- an exported --slurm script, submitted to a private Slurm --------------------------------------
@pytest.mark.pe
@pytest.mark.timeout(300)
@pytest.mark.skipif(slurm_missing() is not None, reason=slurm_missing() or "")
def test_exported_sbatch_script_runs_in_slurm(job, tmp_path):
    quiet(
        job,
        "src[0] = me + 1\nshmem.barrier_all()\nshmem.sum_reduce(total, src)\nprint('total', total[0], 'on', me)",
        arrays="src=int64[1] total=int64[1]",
    )
    label = job.history[-1].label
    done = job.export(tmp_path / "reduce.py", cells=[job.history[-1].label], slurm={"nodes": 1, "time": "5"})
    assert done.sbatch == str(tmp_path / "reduce.sbatch") and done.cells == [label]
    with SlurmCluster(nodes=2, cpus=4) as cluster:
        submitted = subprocess.run(
            ["sbatch", "--parsable", "--wait", done.sbatch],
            cwd=tmp_path,
            capture_output=True,
            text=True,
            timeout=240,
            env=dict(os.environ, SLURM_CONF=cluster.conf),
        )
        assert submitted.returncode == 0, submitted.stderr + cluster.logs()
        job_id = submitted.stdout.strip().split(";")[0]
        out = (tmp_path / f"reduce-{job_id}.out").read_text()
        assert cluster.wait_no_jobs() == []
    assert sorted(out.splitlines()) == sorted(f"total {sum(range(1, job.n + 1))} on {pe}" for pe in range(job.n)), out
