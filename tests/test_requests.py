"""One way to ask the PEs: request names are checked on the client against protocol.REQUESTS (Op's
and the stages'), and a request asked on its own and one riding with a cell have the same form."""

import ast
import io
import pathlib

import pytest

import shmem_notebook
from conftest import job_fixture, quiet
from shmem_notebook.protocol import COLLECTIVE, REQUESTS, Op, encode
from shmem_notebook.stage_registry import DECLARED

job = job_fixture(2, heap="8M")

UNKNOWN = r"^no PE answers a request named 'no_such_request'; the requests are: alloc, free, "


def _handlers(module):
    """The keys of the ``HANDLERS`` table of ``module`` (a dotted name), read from its source."""
    source = pathlib.Path(shmem_notebook.__file__).parent.joinpath(*module.split(".")[1:])
    source = source / "__init__.py" if source.is_dir() else source.with_suffix(".py")
    table = next(
        n.value
        for n in ast.walk(ast.parse(source.read_text()))
        if isinstance(n, (ast.Assign, ast.AnnAssign))
        and getattr(n.target if isinstance(n, ast.AnnAssign) else n.targets[0], "id", None) == "HANDLERS"
    )
    return table.keys


def test_the_pe_side_answers_every_request_and_no_other():
    keys = _handlers("shmem_notebook.engine.requests")
    assert [key.attr for key in keys] == [op.name for op in Op]  # Op.X keys only, every one, in order
    # each stage's PE module answers exactly the requests the registry declares for it
    for name, stage in DECLARED.items():
        answered = {key.value for key in _handlers(stage.pe)}
        assert set(stage.requests) <= answered, (name, answered)
    answered = {key.value for stage in DECLARED.values() for key in _handlers(stage.pe)}
    assert answered == set(REQUESTS) - set(Op)
    assert len(REQUESTS) == len(set(REQUESTS))  # no stage's request shadows another's or Op's
    assert COLLECTIVE < set(REQUESTS)


def test_a_request_is_a_name_and_its_arguments():
    assert encode("alloc", ["A=int64[4]"]) == ("alloc", (["A=int64[4]"],))
    assert encode(Op.HEAP_USAGE) == ("heap_usage", ())
    assert type(encode(Op.INFO)[0]) is str  # plain data on the wire, not the enum
    with pytest.raises(ValueError, match=UNKNOWN):
        encode("no_such_request")


def test_an_unknown_request_is_refused_on_the_client_before_anything_starts():
    unstarted = shmem_notebook.Job(2)  # nothing runs: the name is refused before the job's state is looked at
    with pytest.raises(shmem_notebook.InputError, match=UNKNOWN):
        unstarted.ask("no_such_request")
    with pytest.raises(shmem_notebook.InputError, match=UNKNOWN):
        unstarted.send_cell("x = 1", after=["no_such_request"])


def test_an_unknown_request_reaches_no_pe_by_either_route(job):
    with pytest.raises(shmem_notebook.InputError, match=UNKNOWN):
        job.ask("no_such_request", pes=[1], partial=True)
    with pytest.raises(shmem_notebook.InputError, match=UNKNOWN):
        job.send_cell("sent = True", before=[("info", ())], after=[("no_such_request", ())])
    assert job.state == "running"
    assert quiet(job, "print('sent' in globals())").stdout == {0: "False\n", 1: "False\n"}


def test_both_routes_carry_the_same_request_and_get_the_same_answer(job):
    quiet(job, "kept = np.arange(3)")
    asked = job.ask(Op.PULL, "kept")
    cell = job.send_cell("pass", before=[(Op.PULL, ("kept",))], after=[(Op.PULL, ("kept",)), "heap_usage"])
    cell.wait(30)
    assert not cell.pending()
    riding = cell.answers(Op.PULL)
    assert sorted(riding) == sorted(asked) == [0, 1]
    for pe in asked:
        assert repr(riding[pe]) == repr(asked[pe])
    assert sorted(cell.answers("heap_usage")) == [0, 1]


def test_a_race_checked_cell_asks_race_start_and_race_stop(job):
    out = io.StringIO()
    result = job.run("shmem.barrier_all()", race=True, stdout=out)
    assert result.races == [] and "no races found (cell traced: 2 operations on 2 PEs" in out.getvalue()
    job.ask("race_start", {})
    quiet(job, "x = 1")
    assert all(isinstance(trace, dict) and "events" in trace for trace in job.ask("race_stop").values())
