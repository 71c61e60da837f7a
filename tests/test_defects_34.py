"""Issue 34: eight paper cuts a new user met, each checked with the real parts.

1. ``%shmem export`` names the interpreter the job used (a bare ``python3`` lacks shmem4py).
2. The exported sbatch script sets Open MPI's run-as-root variables only when its job runs as root.
3. ``%shmem?`` lists every start option (written from the parsers).
4. Index sets of a 1-D array never read as N-D indexing (``A[1:6:2] and [6:11]``).
5. The race runner labels and folds what the PEs print as the notebook does (``[PE 0-1] ...``).
6. The inspector's values table keeps an N-D array's shape per PE; flat only on request.
7. Counts are pluralised by one helper (``1 PE``, ``2 PEs``).
8. ``--sbatch-prologue LINE`` runs a setup line (``module load ...``) in the batch job.
"""

import io
import os
import pathlib
import re
import shlex
import subprocess
import sys
import textwrap

import pytest

import shmem_notebook
from conftest import ipython_shell, job_fixture, quiet, run_race_runner
from shmem_notebook.analysis.footprint import format_indices
from shmem_notebook.errors import InputError
from shmem_notebook.inspector import Inspector, gather_snapshot, tables
from shmem_notebook.job.batch import AS_ROOT, sbatch_script
from shmem_notebook.job.history import CellRecord
from shmem_notebook.launcher.environment import platform_environment
from shmem_notebook.launcher.slurm import sbatch_command
from shmem_notebook.magics.shmem_magics import PARSERS, overview, parsers
from shmem_notebook.words import plural
from slurm_cluster import SlurmCluster, slurm_missing

#: "1 steps", "1 PEs", ...: a count of one followed by a plural
ONE_PLURAL = re.compile(r"(?<![\d.,])1 (PE|step|event|heap state|element|cell|frame|race|operation|seed)s\b")


def _record(code, count=1):
    return CellRecord(
        code=code, arrays={}, options={}, count=count, number=1, outcome="ok", results={}, npes=2, pids=(1, 2)
    )


def _unstarted_job(n=2, code="print('hello from', me, 'of', npes)"):
    """A job never started: its history is what export writes."""
    job = shmem_notebook.Job(n, heap="32M")
    job.history.append(_record(code))
    return job


# -- 7: one pluralising helper --------------------------------------------------------------------
def test_plural_says_one_and_many():
    assert [plural(k, "step") for k in (0, 1, 2, 1500)] == ["0 steps", "1 step", "2 steps", "1,500 steps"]
    assert plural(1, "differs", "differ", number=False) == "differs" and plural(3, "differs", "differ") == "3 differ"
    assert plural(2, "seed", number=False) == "seeds"


# -- 3: the usage lists every start option ------------------------------------------------------
def test_shmem_usage_lists_every_option_of_every_subcommand(capsys):
    shell = ipython_shell()
    shown = shell.object_inspect_text("%shmem")  # what `%shmem?` shows
    shell.run_line_magic("shmem", "help")
    printed = capsys.readouterr().out
    for text in (shown, printed):
        assert "--library NAME" in text and "--sbatch-prologue LINE" in text
        for sub, parser in parsers().items():
            options = [option for action in parser._actions for option in action.option_strings]
            assert sub == "pxshmem" or f"%shmem {sub}" in text
            for option in options:
                assert option in (text if sub != "pxshmem" else shell.object_inspect_text("%%pxshmem")), (
                    f"{sub}: {option} missing from the usage"
                )
    assert printed.strip() == overview()


# -- 4: 1-D index sets ---------------------------------------------------------------------------
def test_one_dimensional_index_sets_cannot_read_as_nd_indexing():
    indices = (range(1, 6, 2), range(6, 11), range(13, 16))
    assert "results" + format_indices(indices, (20,)) == "results[1:6:2] and [6:11] and [13:16]"
    assert format_indices(indices, (20,), limit=2) == "[1:6:2] and [6:11] and more"
    # the same rule as N-D: one bracket per box, boxes joined by "and"
    assert format_indices((range(23, 54, 30),), (10, 10)) == "[2, 3] and [5, 3]"


# -- 1: export names the interpreter -------------------------------------------------------------
def test_export_names_the_interpreter_the_job_used(tmp_path):
    job = _unstarted_job()
    done = job.export(tmp_path / "hello.py")
    python = job.library.python
    assert os.path.isabs(python) and done.python == python
    assert done.command == f"oshrun -n 2 {shlex.quote(python)} {tmp_path}/hello.py"
    assert f"run it: {done.command}" in str(done) and "wrote" in str(done) and "1 cell (In[1])" in str(done)
    text = (tmp_path / "hello.py").read_text()
    assert f"Run:              oshrun -n 2 {python} hello.py" in text
    assert f"Race check:       {python} -m shmem_notebook.race -- oshrun -n 2 {python} hello.py" in text
    assert "1 cell of a shmem_notebook session" in text


def _without_the_virtualenv():
    """The platform's environment with a PATH that does not lead to the job's Python (a new shell)."""
    path = ":".join(p for p in os.environ["PATH"].split(":") if not p.startswith(sys.prefix))
    return dict(os.environ, **platform_environment(), PATH=path)


@pytest.mark.pe
def test_the_command_export_prints_runs_where_python3_fails(tmp_path):
    done = _unstarted_job().export(tmp_path / "hello.py")
    command = shlex.split(done.command)
    command[3:3] = ["--oversubscribe"]  # after "-n 2": the test machine has fewer cores than some PE counts
    ran = subprocess.run(command, capture_output=True, text=True, env=_without_the_virtualenv(), timeout=120)
    assert ran.returncode == 0, ran.stderr
    assert sorted(ran.stdout.splitlines()) == ["hello from 0 of 2", "hello from 1 of 2"]
    bare = command[:4] + ["python3"] + command[5:]  # what the message said before: a python3 without shmem4py
    failed = subprocess.run(bare, capture_output=True, text=True, env=_without_the_virtualenv(), timeout=120)
    assert failed.returncode != 0 and "No module named 'shmem4py'" in failed.stdout + failed.stderr


# -- 2: run as root only when the job runs as root ------------------------------------------------
def _environment_of(script, user=None):
    """The environment the batch script gives its command, run by bash (as ``user``: a uid)."""
    body = script.rsplit("\nexec ", 1)[0] + "\nexec env\n"
    prefix = [] if user is None else ["setpriv", f"--reuid={user}", f"--regid={user}", "--clear-groups"]
    env = {k: v for k, v in os.environ.items() if not k.startswith("OMPI_ALLOW")}
    ran = subprocess.run(
        prefix + ["bash", "-s"], input=body, capture_output=True, text=True, env=env, timeout=60, cwd="/"
    )
    assert ran.returncode == 0, ran.stderr
    return dict(line.split("=", 1) for line in ran.stdout.splitlines() if "=" in line)


def test_sbatch_script_sets_run_as_root_only_for_a_job_run_as_root(tmp_path):
    script = sbatch_script(2, tmp_path / "prog.py", "32M", python="/py")
    exec_line = script.splitlines()[-1]
    assert exec_line.startswith("exec oshrun -n 2 -x ") and "ALLOW_RUN_AS_ROOT" not in exec_line
    lines = script.splitlines()
    start = next(i for i, line in enumerate(lines) if line.startswith('if [ "$(id -u)" = 0 ]; then'))
    assert [line for line in lines if "ALLOW_RUN_AS_ROOT" in line] == lines[start + 1 : start + 3]
    assert lines[start + 3] == "fi"
    if os.geteuid() == 0:
        as_root = _environment_of(script)
        assert all(as_root[name] == "1" for name in AS_ROOT)
        nobody = _environment_of(script, user=65534)
        assert not any(name in nobody for name in AS_ROOT), "a job run by another user gets no run-as-root variables"
        assert nobody["SMA_SYMMETRIC_SIZE"] == str(32 << 20)  # the rest of the environment is there
    else:
        mine = _environment_of(script)
        assert not any(name in mine for name in AS_ROOT)


# -- 8: --sbatch-prologue ----------------------------------------------------------------------
def test_sbatch_prologue_reaches_the_batch_job_from_every_front_end(tmp_path):
    args = PARSERS["start"].parse_args(
        [
            "-n",
            "2",
            "--slurm",
            "--ip",
            "0.0.0.0",
            "--sbatch-prologue",
            "module load openmpi/4.1",
            "--sbatch-prologue",
            "export X=1",
        ]
    )
    assert args.sbatch_prologue == ["module load openmpi/4.1", "export X=1"]
    job = shmem_notebook.Job(2, slurm=True, ip="0.0.0.0", sbatch_prologue="module load openmpi/4.1\nexport X=1")
    assert job.batch["sbatch_prologue"] == args.sbatch_prologue
    with pytest.raises(InputError, match="sbatch_prologue only apply to a Slurm batch job"):
        shmem_notebook.Job(2, sbatch_prologue="module load openmpi")
    with pytest.raises(InputError, match="sbatch_prologue is shell lines"):
        shmem_notebook.Job(2, slurm=True, ip="0.0.0.0", sbatch_prologue=[1])
    wrap = sbatch_command(2, ["oshrun", "-n", "2", "prog"], "x", "out", prologue=args.sbatch_prologue)[-1]
    assert wrap == "module load openmpi/4.1\nexport X=1\nexec oshrun -n 2 prog"
    from shmem_notebook.launcher import OshrunEngineSetLauncher

    launcher = OshrunEngineSetLauncher(n=2, slurm=True, sbatch_prologue=args.sbatch_prologue, profile_dir=str(tmp_path))
    assert launcher.find_args()[-1].startswith("module load openmpi/4.1\nexport X=1\nexec ")
    # the exported batch script runs the lines before the PEs start
    script = sbatch_script(2, tmp_path / "prog.py", "32M", {"sbatch_prologue": ["export PROLOGUE_SEEN=yes"]})
    assert script.index("export PROLOGUE_SEEN=yes") < script.index("\nexec ")
    assert _environment_of(script)["PROLOGUE_SEEN"] == "yes"


def test_export_magic_takes_the_prologue(tmp_path, capsys):
    shell = ipython_shell()
    old = shmem_notebook.job._current
    try:
        shmem_notebook.job._current = _unstarted_job()
        shell.run_line_magic("shmem", f"export {tmp_path}/p.py --slurm --sbatch-prologue 'module load openmpi/4.1'")
        assert "\nmodule load openmpi/4.1\n" in (tmp_path / "p.sbatch").read_text()
        assert f"wrote {tmp_path}/p.sbatch" in capsys.readouterr().out
    finally:
        shmem_notebook.job._current = old


def test_many_nodes_page_says_what_the_compute_nodes_need():
    section = (pathlib.Path(__file__).parent.parent / "docs" / "many-nodes.md").read_text()
    flat = " ".join(section.split())
    assert "the same Open MPI" in flat and "--sbatch-prologue 'module load openmpi/4.1'" in flat
    assert "the kernel's host name (`socket.gethostname()`), which the compute nodes must resolve" in flat


# -- 8 (and 2) on a real Slurm ------------------------------------------------------------------
@pytest.mark.pe
@pytest.mark.timeout(300)
@pytest.mark.skipif(slurm_missing() is not None, reason=slurm_missing() or "")
def test_prologue_runs_in_a_real_batch_job_for_start_and_export(tmp_path):
    with SlurmCluster(nodes=1, cpus=4) as cluster:
        job = shmem_notebook.Job(
            2, heap="32M", slurm=True, ip="127.0.0.1", time="10", sbatch_prologue="export SHMEM34_SETUP=ran"
        )
        job.start()
        try:
            out = quiet(job, "import os\nprint(os.environ.get('SHMEM34_SETUP'))", stdout=io.StringIO())
            assert out.stdout == {0: "ran\n", 1: "ran\n"}
        finally:
            job.stop()
        exported = _unstarted_job()
        done = exported.export(tmp_path / "env.py", slurm={"sbatch_prologue": ["export SHMEM34_SETUP=exported"]})
        (tmp_path / "env.py").write_text(
            (tmp_path / "env.py")
            .read_text()
            .replace("print('hello from', me, 'of', npes)", "print(os.environ.get('SHMEM34_SETUP'), me)")
        )
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
        assert sorted((tmp_path / f"env-{job_id}.out").read_text().split("\n")[:2]) == ["exported 0", "exported 1"]
        assert cluster.wait_no_jobs() == []


# -- 5: the race runner's output, labelled and folded ----------------------------------------------
PROGRAM = textwrap.dedent("""
    import numpy as np
    from shmem4py import shmem

    me, npes = shmem.my_pe(), shmem.n_pes()
    inbox = shmem.zeros(1, dtype=np.int64)
    print("hello from every PE")
    shmem.barrier_all()
    shmem.put(inbox, np.array([me + 1], dtype=np.int64), (me + 1) % npes)
    {sync}print("got", int(inbox[0]))
    print("no newline at the end", end="")
    shmem.barrier_all()
    shmem.free(inbox)
    """)


@pytest.mark.pe
@pytest.mark.parametrize("npes", [2, 4])
@pytest.mark.parametrize("sync", ["", "shmem.barrier_all()\n"], ids=["racy", "fixed"])
def test_race_runner_labels_the_output_as_the_notebook_does(tmp_path, npes, sync):
    (tmp_path / "ring.py").write_text(PROGRAM.format(sync=sync))
    done = run_race_runner(tmp_path, "ring.py", npes=npes, oversubscribe=True, timeout=240)
    assert done.returncode == (0 if sync else 1), done.stdout + done.stderr
    lines = done.stdout.splitlines()
    printed = [line for line in lines if line.startswith("[PE ")]
    assert printed[0] == f"[PE 0-{npes - 1}] hello from every PE"
    assert f"[PE 0-{npes - 1}] no newline at the end" in printed  # unterminated last lines are lines, folded too
    got = sorted(line for line in printed if " got " in line)
    if sync:  # PE k got k from its left neighbour: each PE its own line
        assert got == sorted(f"[PE {pe}] got {(pe - 1) % npes + 1}" for pe in range(npes))
    else:
        assert len(got) >= 1 and all(re.fullmatch(r"\[PE [0-9,-]+\] got \d+", line) for line in got)
        assert any(line.startswith("RACE inbox[0] on PE ") for line in lines)
    assert not any("shmem-race PE" in line for line in lines), "the PEs' marks never reach the user"
    assert lines[-1].endswith(f"on {npes} PEs)") and not ONE_PLURAL.search(done.stdout)


# -- 6: the inspector keeps an N-D array's shape -----------------------------------------------------
job2 = job_fixture(2, heap="32M", timeout=120)


def test_values_table_shows_an_nd_array_in_its_shape_and_flat_on_request(job2):
    job2.alloc("G=int64[6,8]", "C=int32[2,3,4]")
    quiet(job2, "G[:] = np.arange(48).reshape(6, 8) + 100 * me\nC[:] = 7\nif me == 1: C[1, 2, 3] = 9")
    try:
        snap = gather_snapshot(job2)
        text = tables.values_table(snap, "G", html_out=False).splitlines()
        assert text[0].split() == ["PE", "[i,", ":]"] + [str(j) for j in range(8)]
        assert len(text) == 1 + 2 * 6  # 6 rows of 8 per PE
        assert text[1].split() == ["PE", "0", "0"] + [str(v) for v in range(8)]
        assert text[6].split() == ["5"] + [str(v) for v in range(40, 48)]
        assert text[7].split() == ["PE", "1", "0"] + [str(v) for v in range(100, 108)]
        flat = tables.values_table(snap, "G", html_out=False, flat=True).splitlines()
        assert len(flat) == 3 and flat[0].split()[1:3] == ["0,0", "0,1"] and len(flat[1].split()) == 2 + 48
        three = tables.values_table(snap, "C", html_out=False).splitlines()
        assert three[0].split()[:3] == ["PE", "[i,", "j,"] and len(three) == 1 + 2 * 6
        assert three[12].split()[0] == "1,2" and three[12].split()[-1] == "9"
        shaped, flat_html = tables.values_table(snap, "C"), tables.values_table(snap, "C", flat=True)
        assert shaped.count("diff") == flat_html.count("diff") >= 1  # the same differing elements marked
        first_row = re.findall(r'class="[^"]*\bfirst\b', shaped)  # each PE's first row set apart: label, index, values
        assert len(first_row) == 2 * (2 + 4)
        insp = Inspector(job2, array="G")
        try:
            assert insp.flat is False and insp.values_html.value.count("<tr>") == 1 + 12
            insp.flat_box.value = True  # the checkbox asks for the flat view
            assert insp.flat is True and insp.values_html.value.count("<tr>") == 1 + 2
            assert len(insp.static_text().splitlines()) > 0 and "0,7" in insp.static_text()
        finally:
            insp.close()
    finally:
        job2.free("G")
        job2.free("C")


# -- 7: counts of one, said in the singular, on a real job of one PE ------------------------------
@pytest.mark.pe
def test_a_job_of_one_pe_says_one_pe(capsys):
    shell = ipython_shell()
    old = shmem_notebook.job._current
    shmem_notebook.job._current = None
    try:
        shell.run_line_magic("shmem", "start -n 1 --heap 16M --timeout 120")
        shell.run_cell_magic("pxshmem", "--trace x=int64[1]", "x[0] = 1\nshmem.barrier_all()\n")
        shell.run_line_magic("shmem", "stop")
        out = capsys.readouterr().out
    finally:
        job = shmem_notebook.job._current
        if job is not None and job.state != "stopped":
            job.stop()
        shmem_notebook.job._current = old
    assert "OpenSHMEM job ready: 1 PE, heap 16M per PE" in out and "OpenSHMEM job stopped: 1 PE" in out
    assert "on 1 PE," in out and not ONE_PLURAL.search(out), out
