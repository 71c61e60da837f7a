"""Help and small messages a user sees (issue 23 items 8 and 10), through a real IPython shell."""

import pytest

import shmem_notebook
from conftest import ipython_shell, job_fixture
from shmem_notebook import InputError
from shmem_notebook.engine import shims


@pytest.fixture
def cell(capsys):
    shell = ipython_shell()

    def run(source):
        capsys.readouterr()
        result = shell.run_cell(source)
        captured = capsys.readouterr()
        return result.error_before_exec or result.error_in_exec, captured.out + captured.err

    return run


@pytest.mark.parametrize("sub", ["start", "alloc", "free", "gather", "pull", "inspect", "race", "replay"])
@pytest.mark.parametrize("flag", ["--help", "-h"])
def test_every_subcommand_prints_its_usage_for_help(cell, sub, flag):
    err, printed = cell(f"%shmem {sub} {flag}")
    assert err is None, err
    assert printed.startswith(f"%shmem {sub}") and "options:" in printed or "positional" in printed, printed
    assert "required" not in printed


@pytest.mark.parametrize("sub", ["stop", "restart", "status", "arrays"])
def test_subcommands_without_options_say_what_they_do(cell, sub):
    err, printed = cell(f"%shmem {sub} --help")
    assert err is None and printed.startswith(f"%shmem {sub}: "), printed


def test_the_magics_help(cell):
    for source in ("%shmem --help", "%shmem help"):
        err, printed = cell(source)
        assert err is None and printed.startswith("%shmem start -n N") and "%shmem replay" in printed, printed
    err, printed = cell("%%pxshmem --help\nprint('not run')")
    assert err is None and printed.startswith("%%pxshmem") and "--race" in printed and "not run" not in printed


@pytest.mark.pe
def test_stress_takes_a_seed_or_true_in_python_as_in_the_magic():
    with shmem_notebook.Job(1, heap="32M").start() as job:
        with pytest.raises(InputError, match=r"stress takes True or an integer seed, got 'x'"):
            job.run("pass", stress="x")
        assert job.run("print(me)", stdout=open("/dev/null", "w")).outcome == "ok"  # nothing lost


job3 = job_fixture(3, heap="32M", current=True)


def test_the_same_error_on_every_pe_is_shown_once_with_the_notebooks_cell_number(job3, capsys):
    shmem_notebook.job._current = job3  # the job the magics act on
    shell = ipython_shell()
    while shell.execution_count < 41:  # the notebook's counter well past the PEs' engines' (at 1 or 2)
        shell.run_cell("pass", store_history=True)
    capsys.readouterr()
    count = shell.run_cell(
        "%%pxshmem\nx = 1\nprint(undefined_name)", store_history=True
    ).execution_count  # as a kernel runs it
    captured = capsys.readouterr()
    printed = captured.out + captured.err
    assert printed.count("raised:") == 1 and "[PE 0-2] raised:" in printed, printed
    assert "execute]" not in printed and f"In[{count}]" in printed.replace("\x1b[39m", "").replace("\x1b[32m", "")
    assert len([line for line in printed.splitlines() if line.strip()]) <= 8, printed


def test_frames_inside_shmem4py_and_the_tool_are_hidden(job3, cell):
    shmem_notebook.job._current = job3  # the job the magics act on
    err, printed = cell("%%pxshmem\nx = np.zeros(3)\nshmem.zeros(10**12)")
    assert "frames inside shmem4py / shmem_notebook hidden" in printed and "shmem4py/shmem.py" not in printed
    assert "the symmetric heap has no room for it" in printed
    assert len(printed.splitlines()) < 15, printed
    err, printed = cell("%%pxshmem --race\nshmem.put(np.zeros(2), np.zeros(2), 'right')")
    assert "raised:" in printed and "engine/record" not in printed and "wrapper" not in printed, printed
    err, printed = cell("%%pxshmem\nprint('still usable', me)")
    assert err is None and "still usable" in printed


@pytest.mark.parametrize("heap, shown", [(0, "0"), ("0", "'0'"), ("1", "'1'"), (1, "1"), ("512K", "'512K'")])
def test_too_small_a_heap_is_refused_before_launch_in_one_sentence(heap, shown):
    import time

    started = time.monotonic()
    with pytest.raises(
        shmem_notebook.SpecError,
        match=rf"a symmetric heap of {shown} .* per PE is too small: "
        r"the smallest that works is 1\.0 MiB",
    ):
        shmem_notebook.Job(2, heap=heap)
    assert time.monotonic() - started < 1  # nothing was launched


def test_too_small_a_heap_in_the_magic_is_one_line(cell):
    shmem_notebook.job._current = None
    err, printed = cell("%shmem start -n 2 --heap 0")
    assert isinstance(err, shmem_notebook.SpecError)
    assert len([line for line in printed.splitlines() if line.strip()]) == 1, printed
    assert "the smallest that works is 1.0 MiB" in printed and "oshrun" not in printed


def test_heap_advice_is_a_size_that_holds_the_array_or_says_none_can():
    from shmem_notebook.job.site import heap_to_ask

    assert heap_to_ask(300 << 20, 2).endswith("--heap 512M`)")
    assert heap_to_ask(2 << 30, 1).endswith("--heap 4G`)")
    assert heap_to_ask(8192 << 30, 2).startswith("no heap this node can give 2 PEs holds it (the largest is ")


def test_too_many_pes_says_how_many_fit():
    from shmem_notebook.job.heap_fit import check_heap_fits

    with pytest.raises(shmem_notebook.LaunchError, match=r"at most 14 PEs per node fit with a heap of 1\.0 GiB"):
        check_heap_fits(10000, 1 << 30, memory=16 << 30, shm_free=1 << 40)


def test_a_destroyed_team_says_destroyed_not_not_a_member(job3):
    with pytest.raises(shmem_notebook.PEError, match=r"PE 0-2: TeamError: Team.my_pe got a team that was destroyed"):
        job3.run("t = shmem.TEAM_WORLD.split_strided(0, 1, npes)\nt.destroy()\nt.my_pe()")
    with pytest.raises(shmem_notebook.PEError, match=r"PE 1-2: TeamError: .* not a member of that team"):
        job3.run("t = shmem.TEAM_WORLD.split_strided(0, 1, 1)\nt.my_pe()")


def test_a_syntax_error_is_caught_in_the_notebook_before_any_pe_runs_the_cell(job3, cell):
    shmem_notebook.job._current = job3  # the job the magics act on
    job3.run("ran = 0")
    err, printed = cell("%%pxshmem\nran = 1\nif ran = 2:\n    pass")
    assert isinstance(err, shmem_notebook.CellSyntaxError), err
    lines = [line for line in printed.splitlines() if line.strip()]
    assert len(lines) == 1 and "line 2 of the cell: if ran = 2:" in lines[0] and "nothing was sent" in lines[0], printed
    assert job3.pull("ran").tolist() == [0, 0, 0]  # no PE ran the first line
    err, printed = cell("%%pxshmem\n%time x = 1\n!true\nprint('magics are fine', me)")
    assert err is None and "magics are fine" in printed, printed


def test_a_routine_the_library_lacks_is_named_as_itself_and_refused_in_one_sentence(job3):
    """Item 8: the stub's repr names the routine, not the tool's inner function."""
    assert job3.pes[0]["shims"] == [shim.name for shim in shims.SHIMS]  # every one applies here (test_shims)
    out = job3.run("print(repr(shmem.atomic_fetch_inc_nbi))", stdout=__import__("io").StringIO()).stdout
    assert all(text.startswith("<function atomic_fetch_inc_nbi at ") for text in out.values()), out
    with pytest.raises(
        shmem_notebook.PEError,
        match=r"PE 0-2: UnsupportedError: shmem.atomic_fetch_inc_nbi is an "
        r"OpenSHMEM 1.5 routine, but Open MPI 4.1.4's OSHMEM implements OpenSHMEM 1.4 and lacks it; "
        r"instead, use the blocking form",
    ):
        job3.run("x = shmem.zeros(1, dtype='int64')\nshmem.atomic_fetch_inc_nbi(x, 0)")
