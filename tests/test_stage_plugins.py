"""Stages are plugins: a stage defined here only (one class) gets its %%pxshmem flag, its requests
riding with the cell, its slot in result.stages and its state on the job; the built-in stages keep
their CellResult attributes as aliases, and --stress reruns go through the cell path."""

import io

import pytest

import shmem_notebook
from conftest import ipython_shell, job_fixture, quiet
from shmem_notebook.cells import STAGES, Stage, register
from shmem_notebook.cells.stages import Command, stages_for
from shmem_notebook.protocol import Op

job = job_fixture(2, heap="8M", current=True)


class HeapCheck(Stage):
    """After the cell, every PE says how much of its symmetric heap is in use (a request riding with the cell)."""

    name = "heapcheck"
    flag = {"action": "store_true", "help": "say each PE's heap use after the cell (a stage of the tests)"}

    def requests(self, cell):
        return [], [(Op.HEAP_USAGE, ())]

    def after(self, cell, result):
        result.stages[self.name] = cell.request.answers(Op.HEAP_USAGE)
        self.keep(cell.job, (self.state(cell.job) or 0) + 1)  # how many cells it checked

    def report(self, cell, result, write):
        write(f"heapcheck: {len(result.stages[self.name])} PEs answered\n")

    def _now(job, args):
        if args.pe is not None and args.pe not in range(job.n):
            raise shmem_notebook.InputError(f"%shmem heapcheck: no PE {args.pe}; the PEs are 0-{job.n - 1}")
        used = job.ask(Op.HEAP_USAGE, pes=None if args.pe is None else [args.pe])
        print(f"heapcheck now: {len(used)} PEs answered")

    command = Command(
        "Say each PE's heap use now (a stage's subcommand, of the tests).",
        lambda p: p.add_argument("--pe", type=int, default=None, help="only this PE"),
        _now,
    )


@pytest.fixture
def heapcheck():
    register(HeapCheck)
    yield HeapCheck
    STAGES.pop(HeapCheck.name)


def test_a_new_stage_is_a_flag_of_the_magic_and_a_cell_option(heapcheck, capsys):
    shell = ipython_shell()
    shell.run_cell_magic("pxshmem", "--help", "pass")
    shown = " ".join(capsys.readouterr().out.split())
    assert "[--heapcheck]" in shown
    assert "--heapcheck say each PE's heap use after the cell (a stage of the tests)" in shown
    assert "--heapcheck" in shell.object_inspect_text("%%pxshmem")
    assert [type(s) for s in stages_for({"heapcheck": True, "race": False})] == [HeapCheck]


def test_a_new_stage_brings_its_own_subcommand(job, heapcheck, capsys):
    """Registered after the magics were loaded: %shmem lists it, parses it, runs it on the job, and says a
    mistake in its words as a usage error."""
    from IPython.core.error import UsageError

    from shmem_notebook.magics.shmem_magics import subcommands

    shell = ipython_shell()
    assert subcommands()[-4:] == ("trace", "heapcheck", "export", "fix")  # the stages' after the magic's own
    shell.run_line_magic("shmem", "help")
    assert "%shmem heapcheck [--pe PE]" in capsys.readouterr().out
    shell.run_line_magic("shmem", "heapcheck")
    assert "heapcheck now: 2 PEs answered" in capsys.readouterr().out
    shell.run_line_magic("shmem", "heapcheck --pe 1")
    assert "heapcheck now: 1 PEs answered" in capsys.readouterr().out
    with pytest.raises(UsageError, match=r"^%shmem heapcheck: no PE 5; the PEs are 0-1$"):
        shell.run_line_magic("shmem", "heapcheck --pe 5")
    with pytest.raises(UsageError, match=r"^%shmem heapcheck: argument --pe: invalid int value: 'x'"):
        shell.run_line_magic("shmem", "heapcheck --pe x")
    STAGES.pop("heapcheck")
    with pytest.raises(UsageError, match="unknown subcommand 'heapcheck'"):
        shell.run_line_magic("shmem", "heapcheck")
    register(HeapCheck)  # the fixture removes it again


def test_a_stage_is_declared_whole_or_refused():
    class NoHelp(Stage):
        name = "nohelp"
        flag = {"action": "store_true"}

    with pytest.raises(TypeError, match="NoHelp.flag needs a help text"):
        register(NoHelp)
    assert "nohelp" not in STAGES

    class Timeout(Stage):  # job.run(code, timeout=...) is the cell's timeout, never this stage's option
        name = "timeout"

    with pytest.raises(TypeError, match=r"^Timeout.name 'timeout' is a parameter of job.run, .*choose another name$"):
        register(Timeout)
    assert STAGES.get("timeout") is None


def test_the_names_refused_are_job_runs_own_parameters():
    """stages.RUN_PARAMETERS is written out (cells.path imports stages): it follows job.run and run_cell."""
    import inspect

    from shmem_notebook.cells.path import run_cell
    from shmem_notebook.cells.stages import RUN_PARAMETERS

    def named(function, skip):
        parameters = inspect.signature(function).parameters.values()
        return tuple(p.name for p in parameters if p.name != skip and p.kind is not p.VAR_KEYWORD)

    assert named(shmem_notebook.Job.run, "self") == named(run_cell, "job") == RUN_PARAMETERS


def test_a_stage_command_never_replaces_one_of_the_magics_own():
    """%shmem start stays the magic's whichever comes first, the magics or the stage."""
    import shmem_notebook.magics.shmem_magics as magics
    from shmem_notebook.cells import stages

    class Start(HeapCheck):
        name = "start"

    with pytest.raises(TypeError, match=r"^Start.command would replace %shmem start, a subcommand of the magic's own"):
        register(Start)
    assert "start" not in STAGES and magics.subcommands().count("start") == 1

    class Plain(Stage):  # a stage without a command may share a subcommand's name (as "race" does)
        name = "status"

    register(Plain)
    STAGES.pop("status")

    register(HeapCheck)  # registered before the magic reserves its names: refused then
    try:
        with pytest.raises(TypeError, match=r"^HeapCheck.command would replace %shmem heapcheck"):
            stages.reserve_commands(("heapcheck",))
        assert "heapcheck" not in stages.RESERVED_COMMANDS
    finally:
        STAGES.pop("heapcheck")


def test_the_builtin_stages_keep_their_result_attributes_as_aliases():
    result = shmem_notebook.CellResult()
    assert result.races == [] and result.trace is None and result.stages == {}
    result.races = ["a race"]
    assert result.stages == {"race": ["a race"]} and result.races is result.stages["race"]
    assert [name for name, stage in STAGES.items() if stage.flag] == ["race", "stress", "trace"]
    assert STAGES["stress"].needs == ("race",)


def test_a_new_stage_runs_through_job_run(job, heapcheck):
    job.stage_state.pop("heapcheck", None)
    out = io.StringIO()
    result = job.run("x = 1", heapcheck=True, stdout=out)
    assert sorted(result.stages["heapcheck"]) == [0, 1]
    assert all(isinstance(usage, (int, dict, tuple, list)) for usage in result.stages["heapcheck"].values())
    assert "heapcheck: 2 PEs answered" in out.getvalue()
    assert job.stage_state["heapcheck"] == 1
    quiet(job, "x = 2")  # a cell without it: the stage does nothing
    assert job.last_result.stages == {} and job.stage_state["heapcheck"] == 1


def test_a_new_stage_runs_through_the_magic(job, heapcheck, capsys):
    shell = ipython_shell()
    job.stage_state.pop("heapcheck", None)
    shell.run_cell_magic("pxshmem", "--heapcheck --race", "shmem.barrier_all()\ny = me")
    out = capsys.readouterr().out
    assert "heapcheck: 2 PEs answered" in out and "no races found" in out, out
    result = job.last_result
    assert sorted(result.stages) == ["heapcheck", "race"] and result.races == []
    assert job.stage_state["heapcheck"] == 1


RACY = (
    "shmem.barrier_all()\nif me == 0:\n    shmem.put(box, np.array([me + 5]), 1)\n"
    "if me == 1:\n    seen[0] = box[0]\nshmem.barrier_all()\n"
)
FIXED = (
    "shmem.barrier_all()\nif me == 0:\n    shmem.put(box, np.array([me + 5]), 1)\n    shmem.quiet()\n"
    "shmem.barrier_all()\nif me == 1:\n    seen[0] = box[0]\nshmem.barrier_all()\n"
)


@pytest.mark.parametrize("code", [RACY, FIXED], ids=["racy", "fixed"])
def test_stress_reruns_are_not_the_users_cells(job, code):
    """The reruns go through the cell path, not job.run: one history record, one callback, and the
    job's last result is the cell's own."""
    seen = []
    job.cell_callbacks.append(lambda j, r: seen.append(r))
    before = len(job.history)
    out = io.StringIO()
    try:
        result = job.run(code, arrays=["box=int64[1]", "seen=int64[1]"], race=True, stress=7, stdout=out)
    finally:
        job.cell_callbacks.pop()
    text = out.getvalue()
    assert "stress: rerunning the cell 4 times (seeds 7-10)" in text and text.count("  seed ") == 4, text
    assert seen == [result] and job.last_result is result and len(job.history) == before + 1
    assert bool(result.races) == (code is RACY) and result.stages["race"] is result.races
    # the seeds' delays were switched off after each rerun: a plain cell runs at its normal pace
    assert quiet(job, "print(int(seen[0]) in (0, 5))").stdout == {0: "True\n", 1: "True\n"}
