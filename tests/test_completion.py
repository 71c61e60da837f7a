"""Tab completion of %shmem and %%pxshmem (issue 45 item 5, magics/completion.py) in a real IPython
shell: subcommands, the options of start (read from the one declaration, job/options.py) and of the
other subcommands and %%pxshmem (their parsers, the stages' flags), library names, choices, and the
declared arrays of a real 1-PE job; other lines keep IPython's own completions."""

import pytest
from IPython.core.completer import provisionalcompleter

import shmem_notebook
from conftest import ipython_shell, job_fixture
from shmem_notebook.cells import STAGES
from shmem_notebook.job.options import declared, flag
from shmem_notebook.launcher.library import known
from shmem_notebook.magics import completion
from shmem_notebook.magics.shmem_magics import subcommands


@pytest.fixture(scope="module")
def shell():
    return ipython_shell()


def offered(shell, text, cell=None):
    """The completions IPython offers with the cursor at the end of ``text`` (the last line of
    ``cell`` when given): their texts, and what each replaces."""
    full = text if cell is None else cell
    with provisionalcompleter():
        found = list(shell.Completer.completions(full, len(full)))
    return [c.text for c in found], {full[c.start : c.end] for c in found}


def test_subcommands_and_only_them(shell):
    assert offered(shell, "%shmem st") == (["start", "stop", "status"], {"st"})
    words, _ = offered(shell, "%shmem ")
    assert words == [*subcommands(), "help"], "the subcommands, not IPython's generic magics"
    assert "trace" in words  # a stage's own (the trace stage declares it)
    assert not set(offered(shell, "%shmem zz")[0]) & set(subcommands())
    assert offered(shell, "  %shmem re") == (["restart", "replay"], {"re"})


def test_start_options_are_the_declared_ones(shell):
    every = [flag(f) for f, _ in declared()]
    assert len(every) > 10 and "--library" in every
    assert offered(shell, "%shmem start ")[0] == every
    assert offered(shell, "%shmem start -n 2 --heap 8M ")[0] == every
    assert offered(shell, "%shmem start --res") == (["--restart-on-hang"], {"--res"})
    assert offered(shell, "%shmem start --sbatch-") == (["--sbatch-arg", "--sbatch-prologue"], {"--sbatch-"})


def test_library_names(shell):
    names = list(known())
    assert {"oshmem", "sos", "oshmpi"} <= set(names)
    assert offered(shell, "%shmem start -n 2 --library ")[0] == names
    assert offered(shell, "%shmem start --library s") == (["sos"], {"s"})
    assert offered(shell, "%shmem start --library=os") == (["oshmem", "oshmpi"], {"os"})


def test_cell_magic_flags_come_from_the_stages(shell):
    flags = ["--timeout"] + [f"--{name}" for name, stage in STAGES.items() if stage.flag is not None]
    assert {"--race", "--stress", "--trace"} <= set(flags)
    assert offered(shell, "%%pxshmem ")[0] == flags
    assert offered(shell, "%%pxshmem A=int64[4] --ra") == (["--race"], {"--ra"})
    cell = "%%pxshmem --race\nshmem.barrier_all()\n%shmem st"  # a cell magic's line is the first only
    assert offered(shell, "", cell=cell)[0] == ["start", "stop", "status"]


def test_choices_and_other_subcommands(shell):
    assert offered(shell, "%shmem race ")[0] == ["on", "off", "reset"]
    assert offered(shell, "%shmem race o") == (["on", "off"], {"o"})
    assert offered(shell, "%shmem trace p") == (["profile"], {"p"})
    assert offered(shell, "%shmem export ring.py --sl") == (["--slurm"], {"--sl"})
    assert offered(shell, "%shmem inspect --") == (["--auto", "--array", "--reference"], {"--"})


def test_other_lines_keep_ipythons_completions(shell):
    words, _ = offered(shell, "pri")
    assert "print" in words
    words, _ = offered(shell, "%shm")
    assert "%shmem" in words
    assert completion.candidates("x = 1") is None
    assert completion.candidates("%shmem export ri") is None  # a file name: IPython's file matcher


#: a real 1-PE job the magics act on, with two declared arrays
job = job_fixture(1, heap="8M", current=True, setup=lambda job: job.alloc("grid=int64[4]", "flags=int32[npes]"))


def test_declared_array_names(shell, job):
    assert shmem_notebook.current_job() is job
    assert offered(shell, "%shmem gather ")[0] == ["grid", "flags"]
    assert offered(shell, "%shmem gather g") == (["grid"], {"g"})
    assert not {"grid", "flags"} & set(offered(shell, "%shmem gather grid ")[0])  # one name only
    assert offered(shell, "%shmem free grid ")[0] == ["flags"]
    assert offered(shell, "%shmem pull f") == (["flags"], {"f"})
    assert offered(shell, "%shmem inspect --array ")[0] == ["grid", "flags"]
    assert offered(shell, "%shmem replay --array=gr") == (["grid"], {"gr"})
    assert offered(shell, "%shmem inspect --reference ")[0] == ["0"]
