"""Repeated epochs folded before the race analysis (analysis/repeats.py), no PEs: the races reported
(their text, fixes and order) and the operations carried to the next cell are those of the
unfolded trace, and folding removes events where it may."""

import os
import sys

import pytest

from shmem_notebook.analysis import happens_before as races
from shmem_notebook.analysis.carry import Carry
from shmem_notebook.analysis.happens_before import analyse
from shmem_notebook.analysis.repeats import fold_repeats
from shmem_notebook.distinct import Events
from shmem_notebook.operations import event

sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "bench"))
import race_traces

NAMES = [
    ["A", "sym", 0, 64, 8, 0],
    ["flag", "sym", 64, 72, 8, 1],
    ["ack", "sym", 72, 80, 8, 1],
    ["buf", "priv", 1000, 1080, 8, 1],
]
ALLOC, BARRIER, SYNC_ALL = (
    ["sync", "alloc", 1, 0, None],
    ["sync", "barrier_all", 9, 0, None],
    ["sync", "sync_all", 9, 0, None],
)
FLAG, ACK = 64, 72
TEAM = ["sync", "sync_all", 4, 0, [0, 1]]  # shmem.sync(team) of PEs 0 and 1


def _rma(op, line, pe, lo, hi, ctx=0, values=None):
    """``op`` of PE ``pe``'s symmetric bytes [lo, hi) from/into the private buffer at the same offset."""
    return ["rma", op, line, pe, lo, hi, "<i8", "priv", 1000 + lo, 1000 + hi, ctx, values]


def _mem(line, mode, lo, hi, space="sym"):
    return ["mem", "load" if mode == "read" else "store", line, mode, space, lo, hi, "<i8"]


def _traces(per_pe):
    return {
        pe: {"events": evs, "names": NAMES, "ops": len(evs), "truncated": None, "cap": None}
        for pe, evs in enumerate(per_pe)
    }


def _loop(iterations, body, npes=2, first=(), last=()):
    """Every PE: ``first[pe]``, alloc, ``body(it, pe)`` for each iteration, ``last[pe]``, free."""
    return _traces(
        [
            [*(first[pe] if first else ()), ALLOC]
            + [e for it in range(iterations) for e in body(it, pe)]
            + [*(last[pe] if last else ()), ["sync", "free", 20, 0, None]]
            for pe in range(npes)
        ]
    )


def _both(traces, npes, monkeypatch, carry=None):
    """``(folded, plain, (events, events kept))``: the analysis with folding and without."""
    sizes = []

    def spy(events, n):
        out = fold_repeats(events, n)
        sizes.append((sum(map(len, events.values())), sum(map(len, out.values()))))
        return out

    with monkeypatch.context() as m:
        m.setattr(races, "fold_repeats", spy)
        folded = analyse(traces, npes, carry=carry, cell="In [5]")
        m.setattr(races, "fold_repeats", lambda events, n: events)
        plain = analyse(traces, npes, carry=carry, cell="In [5]")
    return folded, plain, sizes[0]


def distinct(events):
    """The C module's ``distinct`` written another way: events are the same if their reprs are."""
    table, ids, seen = [], [], {}
    for e in events:
        if repr(e) not in seen:
            seen[repr(e)] = len(table)
            table.append(e)
        ids.append(seen[repr(e)])
    return table, ids


def _numbered(traces):
    """``traces`` as the PEs send them where the C module is loaded: each PE's repeated events known."""
    return {pe: dict(t, events=Events.numbered(t["events"], distinct)) for pe, t in traces.items()}


def _same(traces, npes, monkeypatch, carry=None, folds=True):
    """The reports with and without folding are the same; folding removed events iff ``folds``; the
    same again (and as many events kept) where each PE's repeated events are known. Returns the reports' text."""
    folded, plain, (before, after) = _both(traces, npes, monkeypatch, carry)
    assert [str(r) for r in folded.races] == [str(r) for r in plain.races]
    assert [r.fix for r in folded.races] == [r.fix for r in plain.races]
    assert folded.carry.ops == plain.carry.ops
    assert (after < before) == folds, (before, after)
    numbered, _, sizes = _both(_numbered(traces), npes, monkeypatch, carry)
    assert [str(r) for r in numbered.races] == [str(r) for r in plain.races]
    assert [r.fix for r in numbered.races] == [r.fix for r in plain.races]
    assert numbered.carry.ops == plain.carry.ops and sizes == (before, after)
    return [str(r) for r in folded.races]


def _count(traces, npes):
    events = {pe: [event(e) for e in traces[pe]["events"]] for pe in range(npes)}
    return sum(map(len, events.values())), sum(map(len, fold_repeats(events, npes).values()))


def test_the_stencil_folds_to_a_few_iterations_whatever_their_number():
    total, kept = _count(race_traces.stencil(200), 4)
    assert total == 7216 and kept <= 304  # at most 8 of its 200 sweeps
    numbered = _numbered(race_traces.stencil(200))
    assert all(len(t["events"].table) < 20 for t in numbered.values())
    events = {pe: t["events"] for pe, t in numbered.items()}
    assert fold_repeats(events, 4) == fold_repeats({pe: list(evs) for pe, evs in events.items()}, 4)
    assert _count(race_traces.stencil(50), 4)[1] == _count(race_traces.stencil(198), 4)[1] < 300
    assert analyse(race_traces.stencil(200), 4).races == []


def _stencil_race(iterations=30, at=7):
    """PE 1 also loads the halo before the sweep's first barrier (line 16) in sweep ``at`` only."""
    traces = race_traces.stencil(iterations)
    u = 2 << 40
    traces[1]["events"].insert(3 + 9 * at + 2, ["mem", "load", 16, "read", "sym", u, u + 8 * 1002, "<f8"])
    return traces


def test_a_race_in_one_sweep_is_reported_as_without_folding(monkeypatch):
    reports = _same(_stencil_race(), 4, monkeypatch)
    assert len(reports) == 2 and all("PE 1 line 16 load (read)" in r for r in reports)
    assert _count(_stencil_race(200), 4)[1] < 700  # the sweeps before and after it fold


def test_the_order_the_simulation_visits_pes_in_turns_with_each_barrier(monkeypatch):
    """Two races on one pair of lines are reported in the order the simulation met them, which
    turns with the barriers (4 PEs: unfolded, 3 sweeps report them one way, 4 the other): kept
    copies must go through every order the dropped ones did."""

    def body(it, pe):
        own = {0: [_rma("put", 7, 3, 16, 40)], 3: [_rma("get_nbi", 5, 3, 8, 56), _mem(7, "write", 32, 48)]}
        return own.get(pe, []) + [BARRIER]

    assert _same(_loop(3, body, 4), 4, monkeypatch, folds=False) != _same(
        _loop(4, body, 4), 4, monkeypatch, folds=False
    )
    for iterations in (9, 10, 12, 13, 30):
        _same(_loop(iterations, body, 4), 4, monkeypatch)


def _puts_and_load(it, pe):  # PE 0 puts A[0] to PE 1 while PE 1 loads it: a race every iteration
    return [PUT if pe == 0 else LOAD, BARRIER]


def _stopped(traces, pe, events):
    traces[pe]["events"] = traces[pe]["events"][:-events]
    return traces


PUT, LOAD = _rma("put", 2, 1, 0, 8, values=[1]), _mem(1, "read", 0, 8)
CASES = {
    # the synthetic traces of test_race_analysis.py: one barrier, nothing repeats
    "scattered puts": (race_traces.scattered_puts(3000), 2, False),
    "scattered puts, a race": (race_traces.scattered_puts(3000, race_at=0), 2, False),
    "a loop of puts to one element": (
        _traces(
            [
                [_rma("put", 3, 1, 0, 8, values=[i]) for i in range(200)] + [BARRIER],
                [_mem(2, "read", 0, 8)] * 200 + [BARRIER],
            ]
        ),
        2,
        False,
    ),
    # ... and the same races in a loop of barriers: each iteration like the others
    "put / load, every iteration": (_loop(20, _puts_and_load), 2, True),
    "puts to one element, every iteration": (
        _loop(
            20,
            lambda it, pe: [
                *([_rma("put", 3, 1, 0, 8, values=[it])] * 5 if pe == 0 else [_mem(2, "read", 0, 8)] * 5),
                BARRIER,
            ],
        ),
        2,
        True,
    ),
    "strided stores, every iteration": (
        _loop(
            20,
            lambda it, pe: [
                ["mem", "store", 3, "write", "sym", 0, 56, "<i8", (8, ((4, 16),))]
                if pe == 0
                else _rma("put", 5, 0, 0, 8),
                BARRIER,
            ],
        ),
        2,
        True,
    ),
    # put_nbi, its source reused before the barrier, which completes it: clean after it
    "put_nbi, no quiet": (
        _loop(
            20,
            lambda it, pe: [
                *([_rma("put_nbi", 4, 1, 0, 16), _mem(5, "write", 0, 8, "priv")] if pe == 0 else []),
                BARRIER,
            ],
        ),
        2,
        True,
    ),
    # a put on a context no barrier completes: never clean, every barrier is needed
    "put on a context, no ctx.quiet": (
        _loop(
            20, lambda it, pe: [*([_rma("put", 4, 1, 0, 8, ctx=1)] if pe == 0 else [_mem(5, "read", 0, 8)]), BARRIER]
        ),
        2,
        False,
    ),
    # ... quieted every iteration: clean again
    "put on a context, quieted": (
        _loop(
            20,
            lambda it, pe: [
                *(
                    [_rma("put", 4, 1, 0, 8, ctx=1), ["sync", "quiet", 5, 1, None]]
                    if pe == 0
                    else [_mem(6, "read", 8, 16)]
                ),
                BARRIER,
            ],
        ),
        2,
        True,
    ),
    # PE 0 holds a lock across every barrier of the loop
    "a lock held across the barriers": (
        _loop(
            20,
            lambda it, pe: [_mem(4, "write", 0, 8) if pe == 0 else _rma("put", 5, 0, 0, 8), BARRIER],
            first=[[["lock", "set_lock", 2, 80]], []],
            last=[[["lock", "clear_lock", 21, 80]], []],
        ),
        2,
        False,
    ),
    # ... taken and released in every iteration
    "a lock in every iteration": (
        _loop(
            20,
            lambda it, pe: (
                [["lock", "set_lock", 3, 80], _mem(4, "write", 0, 8), ["lock", "clear_lock", 5, 80], BARRIER]
                if pe == 0
                else [_rma("put", 6, 0, 0, 8), BARRIER]
            ),
        ),
        2,
        True,
    ),
    # sync_all completes nothing: the puts stay pending, the loads after it race with them
    "sync_all without quiet": (_loop(20, lambda it, pe: [PUT if pe == 0 else LOAD, SYNC_ALL]), 2, False),
    # a team's sync in every iteration: the order the simulation visits the PEs in is not worked out
    # then, only runs long enough to go through every order it can take fold (3 PEs: 13 copies)
    "a team sync in every iteration": (
        _loop(
            20,
            lambda it, pe: [*([_rma("put", 3, 1 - pe, 8, 16), TEAM] if pe < 2 else [_mem(5, "read", 0, 8)]), BARRIER],
            3,
        ),
        3,
        True,
    ),
    "... for too few iterations": (
        _loop(
            12,
            lambda it, pe: [*([_rma("put", 3, 1 - pe, 8, 16), TEAM] if pe < 2 else [_mem(5, "read", 0, 8)]), BARRIER],
            3,
        ),
        3,
        False,
    ),
    # PE 0 passes two syncs of a team in every iteration, PE 1 one: not matched at the barriers
    "a team's syncs unmatched at the barriers": (
        _loop(
            20,
            lambda it, pe: [*([TEAM] * (2 - pe) if pe < 2 else []), _mem(4, "write", 8 * pe, 8 * pe + 8), BARRIER],
            3,
        ),
        3,
        False,
    ),
    # PE 1's trace stops 2 iterations before the end (an error): the simulation lets PE 0 through alone
    "a PE stopped early": (_stopped(_loop(20, _puts_and_load), 1, 5), 2, False),
    # PE 0 syncs the team before the barrier, PE 1 after it: matched across the barriers
    "a team's sync across the barriers": (
        _loop(
            20,
            lambda it, pe: [
                *([TEAM] if pe == 0 else []),
                _mem(4, "write", 8 * pe, 8 * pe + 8),
                BARRIER,
                *([TEAM] if pe == 1 else []),
            ],
            3,
        ),
        3,
        False,
    ),
    # a world reduction (it accesses memory) is no boundary
    "a reduction in every iteration": (
        _loop(
            20,
            lambda it, pe: [
                _mem(4, "write", 0, 8),
                ["coll", "sum_reduce", 5, "sym", 8, 16, "sym", 0, 8, "<i8", None, None],
            ],
        ),
        2,
        False,
    ),
}


@pytest.mark.parametrize("name", CASES)
def test_same_races_with_and_without_folding(name, monkeypatch):
    traces, npes, folds = CASES[name]
    _same(traces, npes, monkeypatch, folds=folds)


def _handshake(value, written=None):
    """PE 1 puts data, fences, sets the flag on PE 0 (to ``written(it)``, by default what the waits
    see) and waits for its ack, then reuses the data; PE 0 waits for the flag, loads the data,
    acks; a barrier ends the iteration."""

    def body(it, pe):
        v = value(it)
        if pe == 1:
            flag = _rma("put", 5, 0, FLAG, FLAG + 8, values=[(written or value)(it)])
            return [
                _rma("put", 3, 0, 0, 32),
                ["sync", "fence", 4, 0, None],
                flag,
                ["wait", "wait_until", 6, ACK, ACK + 8, "<i8", [v]],
                _mem(7, "write", 0, 32, "priv"),
                BARRIER,
            ]
        return [
            ["wait", "wait_until", 10, FLAG, FLAG + 8, "<i8", [v]],
            _mem(11, "read", 0, 32),
            _rma("put", 12, 1, ACK, ACK + 8, values=[v]),
            BARRIER,
        ]

    return body


def test_waits_matched_by_value(monkeypatch):
    """The same flag value every iteration: each wait may see the next iteration's write too
    (it waits until the simulation is stuck), so 3 iterations already fold; a new value every
    iteration does not repeat (the values are in the signature)."""
    assert _same(_loop(6, _handshake(lambda it: 1)), 2, monkeypatch) == []
    assert _same(_loop(20, _handshake(lambda it: it)), 2, monkeypatch, folds=False) == []

    def racy(it, pe):  # PE 1 puts into PE 0's A again before the ack: PE 0 may still be loading it
        events = _handshake(lambda it: 1)(it, pe)
        return events[:3] + [_rma("put", 8, 0, 0, 8)] + events[3:] if pe == 1 else events

    (race,) = _same(_loop(20, racy), 2, monkeypatch)
    assert "PE 1 line 8 put (write)" in race and "PE 0 line 11 load (read)" in race
    # the waits see 1 every time, but the flag is written 2 in iteration 7: there nothing tells PE 0
    # that the data arrived; only the values written set that iteration apart
    (race,) = _same(_loop(20, _handshake(lambda it: 1, lambda it: 2 if it == 7 else 1)), 2, monkeypatch)
    assert "PE 1 line 3 put (write)" in race and "PE 0 line 11 load (read)" in race


def test_operations_carried_from_an_earlier_cell(monkeypatch):
    """The carried operations and the cell boundary start the trace: they stay where they are
    (their labels name the earlier cell), the loop after them folds."""
    carry = Carry(
        ops={0: [(_rma("put", 3, 1, 0, 8, values=[1]), "In [4]")], 1: [(_rma("put_nbi", 4, 0, 8, 16), "In [4]")]}
    )
    traces = _loop(20, _puts_and_load, first=[[], [_mem(2, "read", 0, 8)]])
    reports = _same(traces, 2, monkeypatch, carry=carry)
    assert any("PE 0 In [4] line 3 put (write) / PE 1 In [5] line 2 load (read)" in r for r in reports)
    assert any("line 2 put (write)" in r and "line 1 load" in r and "In [" not in r for r in reports)
    # carried on a context: still in flight after the loop, and carried on
    carry = Carry(ops={0: [(_rma("put", 3, 1, 0, 8, ctx=1), "In [4]")]})
    folded, plain, (before, after) = _both(traces, 2, monkeypatch, carry)
    assert after == before and folded.carry.ops == plain.carry.ops and len(folded.carry) == 1
