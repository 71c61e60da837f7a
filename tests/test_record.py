"""The recording layer on real PEs: one wrapper, independent consumers (race, trace, stress)."""

import contextlib
import io

import pytest

from conftest import job_fixture, quiet
from shmem_notebook.errors import PEError
from shmem_notebook.operations import ATOMICS, CALLS, RECORDED_AS

RACY = """
A[:] = 0
shmem.barrier_all()
if me == 0:
    shmem.put(A, np.full(4, 7, dtype=A.dtype), 1)
if me == 1:
    print("saw", int(A[0]))
shmem.barrier_all()
"""

#: one cell calling a bit of everything the catalogue knows (atomics on int64 only: OSHMEM's pitfalls)
EVERYTHING = """
right = (me + 1) % npes
shmem.put(A, np.arange(4, dtype=A.dtype), right)
shmem.fence()
shmem.atomic_add(F, 1, right)
shmem.quiet()
shmem.barrier_all()
got = np.zeros(4, dtype=A.dtype)
shmem.get(got, A, right)
old = shmem.atomic_fetch(F, right)
shmem.sync_all()
shmem.sum_reduce(S, A)
shmem.wait_until(F, shmem.CMP.GE, 1)
lock = shmem.new_lock()  # collective
if me == 0:  # OSHMEM's clear_lock can hang under contention (see race_catalogue.py): one PE
    shmem.set_lock(lock)
    shmem.clear_lock(lock)
shmem.barrier_all()
"""


job = job_fixture(2, 4, heap="32M")


ARRAYS = "A=int64[4] F=int64[1] S=int64[4]"


@pytest.mark.parametrize("order", ["race first", "stress first"])
def test_stress_and_race_in_either_order_keep_the_race_data(job, order):
    options = {"race": True, "stress": 5} if order == "race first" else {"stress": 5, "race": True}
    result = quiet(job, RACY, arrays=ARRAYS, **options)
    assert [str(r).split(";")[0] for r in result.races] == [
        "RACE A[0] on PE 1: PE 0 line 4 put (write) / PE 1 line 6 load (read) are unordered"
    ], [str(r) for r in result.races]


def test_trace_records_a_sum_reduce(job):
    result = quiet(job, "S[:] = me\nshmem.sum_reduce(S, A)\n", arrays=ARRAYS, trace=True)
    reduces = [e for e in result.trace.events if e["op"] == "sum_reduce"]
    assert sorted(e["pe"] for e in reduces) == list(range(job.n)), result.trace.events
    assert all(e["array"] == "S" and e["line"] == 2 for e in reduces)


def test_the_trace_records_every_call_the_race_check_records(job):
    result = quiet(job, EVERYTHING, arrays=ARRAYS, race=True, trace=True)
    traced = {e["op"] for e in result.trace.events if e["pe"] == 0}
    recorded_as = {RECORDED_AS.get(op, op) for op in traced}
    expected = {
        "put",
        "fence",
        "atomic_add",
        "quiet",
        "barrier_all",
        "get",
        "atomic_fetch",
        "sync_all",
        "sum_reduce",
        "wait_until",
        "set_lock",
        "clear_lock",
    }
    assert expected <= recorded_as, expected - recorded_as
    assert not result.races, [str(r) for r in result.races]


FIXED = RACY.replace("\nif me == 1:", "\nshmem.barrier_all()\nif me == 1:")  # its twin: the load after a barrier


def test_a_cell_run_again_is_rewritten_once_and_an_edited_one_anew(job):
    """A traced cell run again reuses its rewrite (IPython tells the transformer the cell's text before
    parsing it); the cell edited (its fixed twin) is rewritten anew, and the verdicts follow the text run."""
    quiet(job, "from shmem_notebook.engine.record import instrument as _instrument\n_instrument._REWRITTEN.clear()")
    verdicts, kept = [], []
    for code in (RACY, RACY, FIXED, RACY, FIXED):
        verdicts.append(len(quiet(job, code, arrays=ARRAYS, race=True).races))
        out = io.StringIO()
        job.run("print(len(_instrument._REWRITTEN))", stdout=out)
        kept.append(set(out.getvalue().split("] ", 1)[1].splitlines()))
    assert verdicts == [1, 1, 0, 1, 0]
    assert kept == [{"1"}, {"1"}, {"2"}, {"2"}, {"2"}]


#: a user's variable named ``slice`` (the rewrite once called the name for ``x[a:b]``), and a 2-D index
#: with a slice in it; racy: PE 1 reads what PE 0 puts, unordered
SLICE_TAKEN = """
slice = A[0:2]
M = np.zeros((2, 4))
M[0, 1:3] = 1
A[:] = 0
shmem.barrier_all()
if me == 0:
    shmem.put(A[0:2], np.full(2, 7, dtype=A.dtype), 1)
{fix}if me == 1:
    print("saw", int(A[1:2][0]), len(slice), M[0, 1:3].sum())
shmem.barrier_all()
"""


@pytest.mark.parametrize("fix", ["", "shmem.barrier_all()\n"], ids=["racy", "fixed"])
def test_a_cell_may_name_a_variable_slice(job, fix):
    """The rewrite makes a subscript's index as the interpreter does (not by calling ``slice``)."""
    out = io.StringIO()
    result = job.run(SLICE_TAKEN.format(fix=fix), arrays=ARRAYS, race=True, stdout=out)
    assert len(result.races) == (0 if fix else 1), result.races
    assert "2 2.0" in out.getvalue(), out.getvalue()


def test_every_call_is_unwrapped_after_the_cell(job):
    quiet(job, RACY, arrays=ARRAYS, race=True, trace=True, stress=3)
    out = io.StringIO()
    job.run(
        "import inspect\nwrapped = sorted(n for n in dir(shmem) if hasattr(getattr(shmem, n), '__shmem_race_skip__'))\n"
        "print(wrapped, hasattr(shmem.Team.sync, '__wrapped__') and hasattr(shmem.Team.sync, '__shmem_race_skip__'))",
        stdout=out,
    )
    assert set(out.getvalue().split("] ", 1)[1].splitlines()) == {"[] False"}, out.getvalue()


#: what the collector is set to on each PE: the oldest generation's threshold, whether objects are frozen
COLLECTOR = "import gc as _gc\nprint(_gc.get_threshold()[2], _gc.get_freeze_count() > 0)"


@pytest.mark.parametrize("cell", ["ends", "raises"])
def test_the_collector_is_as_before_after_a_recorded_cell(job, cell):
    """While a cell is recorded, the collector leaves the oldest generation and the objects from before the
    cell alone (a fork server's PE had them frozen already: counting them cost 5-12 ms a cell); after the cell,
    ended or raised, it is set as it was, and what the fork server froze stays frozen."""

    def collector(raises=False, **options):
        with pytest.raises(PEError, match="on purpose") if raises else contextlib.nullcontext():
            quiet(job, COLLECTOR + ("\nraise ValueError('on purpose')" if raises else ""), **options)
        return sorted(tuple(text.split()) for text in job.last_result.stdout.values())

    before = collector()
    during = collector(race=True, raises=cell == "raises")
    assert len(during) == job.n, during
    assert all(int(oldest) >= 1 << 30 and frozen == "True" for oldest, frozen in during), during
    assert len(before) == job.n and all(int(oldest) < 1000 for oldest, _ in before), before
    assert collector() == before


def test_the_catalogue_names_every_atomic_once():
    assert len(ATOMICS) == len(set(ATOMICS)) == 16 + 9 + 2  # blocking, 1.5's non-blocking, the signal words
    assert not CALLS["atomic_fetch_nbi"].writes and CALLS["atomic_fetch_add_nbi"].local == "fetch"
    assert CALLS["atomic_fetch_add_nbi"].nbi and not CALLS["atomic_fetch_add_nbi"].fetches
    assert all(CALLS[name].kind == "amo" for name in ATOMICS)
    assert CALLS["atomic_fetch"].remote == "source" and not CALLS["atomic_fetch"].writes
    assert CALLS["get"].fetches and not CALLS["get_nbi"].fetches and CALLS["put_nbi"].nbi


#: one job per library, for what differs between them
each_library = job_fixture(2, heap="16M", sos=(2,), oshmpi=(2,))

#: the same put three times: by position (its first call, then a later one), then by keyword
PUT_THRICE = """
src = np.arange(4, dtype=A.dtype)
right = (me + 1) % npes
shmem.put(A, src, right)
shmem.quiet()
shmem.put(A, src, right)
shmem.quiet()
shmem.put(target=A, source=src, pe=right)
shmem.quiet()
"""

SLOTS = (
    "from shmem_notebook.engine.context import this_pe as _pe\n"
    "print(*(f'{n}:' + ('lazy' if _pe.record.slots[n][1][0].__name__ == 'resolve' else 'made')"
    " for n in ('put', 'get', 'barrier_all')))"
)


def test_a_calls_handlers_are_made_at_its_first_call_which_is_recorded_as_the_later_ones(each_library):
    """Starting a recording makes no call's handlers (that was most of its start); a call's first call
    makes them and is recorded as its later calls are, by position or by keyword, in C or in Python."""
    job = each_library
    job.ask("race_start", {})
    try:
        before = quiet(job, SLOTS, arrays=ARRAYS)
        quiet(job, PUT_THRICE, arrays=ARRAYS)
        after = quiet(job, SLOTS, arrays=ARRAYS)
        events = job.run(
            "from shmem_notebook.engine.record import layer as _layer\n"
            "print([e[:2] + e[3:] for e in _layer.attached('race').events if e[1] == 'put'])"
        )
    finally:
        job.ask("race_stop")
    assert set(before.stdout.values()) == {"put:lazy get:lazy barrier_all:lazy\n"}, before.stdout
    assert set(after.stdout.values()) == {"put:made get:lazy barrier_all:lazy\n"}, after.stdout
    for pe, text in events.stdout.items():
        puts = eval(text)  # the events' plain data: lists of numbers, strings and None
        assert len(puts) == 3 and puts[0] == puts[1] == puts[2], (pe, puts)


def test_the_heap_is_looked_up_once_where_it_cannot_move(each_library):
    """The heap's mapping is read from /proc/self/maps once per PE, except OSHMPI's anonymous heap (the
    kernel may merge it with its neighbours): there at every recording's start. Either way it is the
    mapping a fresh read finds."""
    job = each_library
    quiet(job, PUT_THRICE, arrays=ARRAYS, race=True)
    got = job.run(
        "from shmem_notebook.engine.record import memory as _m\n"
        "from shmem_notebook.engine.context import this_pe as _pe\n"
        "_kept, _now = _pe.record.heap_mapping[0], _m.heap_range()\n"
        "_pe.record.heap_mapping[0] = None\n"
        "print(_kept is not None, _now == _m.heap_range() != (0, 0), _m.anonymous_heap())"
    )
    anonymous = job.library.name == "oshmpi"
    assert set(got.stdout.values()) == {f"{not anonymous} True {anonymous}\n"}, got.stdout


#: count the statements IPython compiles (codeop's compile is the builtin, looked up in its module)
COUNT_COMPILES = """import codeop as _codeop
_compiled = []
def _counting(source, *args, **kwargs):
    _compiled.append(type(source).__name__)
    return compile(source, *args, **kwargs)
_codeop.compile = _counting
"""


def test_a_race_checked_cell_run_again_is_not_compiled_again(job):
    """The rewrite of a race-checked cell is kept for its next run, and so is its code (0.4 ms a PE for
    the stencil); a plain cell, or one whose text changed, is compiled anew; what ``from __future__`` a
    kept cell imports holds after it as it did before."""

    def compiles(code, **options):
        quiet(job, "_compiled.clear()")
        quiet(job, code, **options)
        counted = quiet(job, "print(sum(kind in ('Module', 'Interactive') for kind in _compiled))")
        (count,) = set(counted.stdout.values())
        return int(count) - 1  # the counting cell's own statement

    quiet(job, COUNT_COMPILES)
    try:
        cell = "x = 1\ny = x + 1\nprint(y)\n"
        assert compiles(cell, race=True) == 4  # the mark the rewrite adds, then the cell's 3 statements
        assert compiles(cell, race=True) == 0  # run again: not compiled again
        assert compiles(cell) == 3 and compiles(cell) == 3  # plain cells: compiled at every run
        assert compiles(cell + "z = 2\n", race=True) == 5  # another text: compiled
        future = "from __future__ import annotations\ndef f(x: undefined_name) -> None: ...\nprint(f.__annotations__)\n"
        for run in range(2):
            quiet(job, "get_ipython().compile.reset_compiler_flags()")
            shown = quiet(job, future, race=True)
            assert set(shown.stdout.values()) == {"{'x': 'undefined_name', 'return': 'None'}\n"}, (run, shown.stdout)
            after = quiet(job, "def g(y: another_undefined) -> None: ...\nprint(g.__annotations__)\n")
            assert set(after.stdout.values()) == {"{'y': 'another_undefined', 'return': 'None'}\n"}, (run, after.stdout)
    finally:
        quiet(job, "del _codeop.compile")
