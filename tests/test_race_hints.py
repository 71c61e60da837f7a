"""Race hints as edits (analysis/hints.py): where a fix goes in a cell, and the hints that were wrong."""

import pytest

import race_catalogue
from conftest import job_fixture
from race_fixes import check_each_fix, run_checked
from shmem_notebook.analysis.happens_before import find_races
from shmem_notebook.analysis.hints import Edit, Fix, apply_fix

CELL = """def show(a):
    print(a[0])
shmem.barrier_all()
for it in range(3):
    if me == 0:
        shmem.put(remote, lb, 1, ctx=c)
    while not ready():
        pass
    show(remote)
"""


def test_a_local_call_goes_right_after_the_line_on_the_pes_that_run_it():
    out = apply_fix(CELL, Fix((Edit((6,), "shmem.quiet()"),)))
    assert "        shmem.put(remote, lb, 1, ctx=c)\n        shmem.quiet()\n    while" in out


def test_a_collective_leaves_ifs_and_whiles_but_stays_in_the_loop():
    out = apply_fix(CELL, Fix((Edit((6,), "shmem.barrier_all()", every_pe=True),)))
    assert "        shmem.put(remote, lb, 1, ctx=c)\n    shmem.barrier_all()\n    while" in out
    out = apply_fix(CELL, Fix((Edit((8,), "shmem.barrier_all()", every_pe=True),)))
    assert "        pass\n    shmem.barrier_all()\n    show(remote)" in out


def test_a_collective_passes_over_a_line_inside_a_function():
    out = apply_fix(CELL, Fix((Edit((2, 6), "shmem.barrier_all()", every_pe=True),)))
    assert out.count("barrier_all") == 2 and "        shmem.put(remote, lb, 1, ctx=c)\n    shmem.barrier_all()\n" in out
    with pytest.raises(ValueError, match="inside functions"):
        apply_fix(CELL, Fix((Edit((2,), "shmem.barrier_all()", every_pe=True),)))


def test_move_copy_before_and_the_context_of_the_call():
    code = "a = 1\nif me:\n    b = 2\n    c = 3\n"
    assert apply_fix(code, Fix((Edit((4,), "shmem.fence()", move=1),))) == (
        "if me:\n    b = 2\n    c = 3\n    shmem.fence()\n    a = 1\n"
    )
    assert apply_fix(code, Fix((Edit((3,), copy=1, before=True), Edit((4,), copy=1)))) == (
        "a = 1\nif me:\n    a = 1\n    b = 2\n    c = 3\n    a = 1\n"
    )
    assert "        shmem.put(remote, lb, 1, ctx=c)\n        c.quiet()\n" in apply_fix(
        CELL, Fix((Edit((6,), "{ctx}.quiet()"),))
    )
    assert str(Edit((6,), "{ctx}.quiet()")) == "after line 6: ctx.quiet()"


NAMES = [["slot", "sym", 0, 16, 4, 0], ["flag", "sym", 16, 24, 8, 0], ["ack", "sym", 24, 32, 8, 0]]


def _put(line, pe, value):
    return ["rma", "put", line, pe, 0, 16, "<i4", "priv", 1000, 1016, 0, [value] * 4]


def _set(line, pe, lo, value):
    return ["rma", "atomic_set", line, pe, lo, lo + 8, "<i8", None, None, None, 0, [value]]


def _wait(line, lo, value):
    return ["wait", "wait_until", line, lo, lo + 8, "<i8", [value]]


def _races(events):
    return find_races({pe: {"events": evs, "names": NAMES, "ops": len(evs)} for pe, evs in events.items()}, 2)


def test_acknowledging_before_reading_is_not_a_flag_before_data():
    """A consumer that acknowledges an item before reading it: the fix is to read first (was: 'data, then
    fence, then flag', which the producer already did)."""
    producer, consumer = [["sync", "barrier_all", 1, 0, None]], [["sync", "barrier_all", 1, 0, None]]
    for k in (1, 2):
        producer += [_put(3, 1, k), ["sync", "fence", 4, 0, None], _set(5, 1, 16, k), _wait(6, 24, k)]
        consumer += [_wait(8, 16, k), _set(9, 0, 24, k), ["mem", "load", 10, "read", "sym", 0, 16, "<i4"]]
    (race,) = _races(
        {0: producer + [["sync", "barrier_all", 11, 0, None]], 1: consumer + [["sync", "barrier_all", 11, 0, None]]}
    )
    assert {a.line for a in race.accesses} == {3, 10}
    assert "acknowledges (line 9) before line 10's load" in race.hint and "fence" not in race.hint
    assert race.fix == Fix((Edit((10,), move=9),))


@pytest.mark.parametrize(
    "members, said", [(None, "shmem.sync_all() completes nothing"), ([0, 1], "Team.sync() completes nothing")]
)
def test_completion_hint_names_the_synchronisation_the_cell_uses(members, said):
    """A put not completed before a sync: the hint names that sync (it proposed `sync_all` in cells that never
    call it)."""
    races = _races(
        {
            0: [_put(2, 1, 1), ["sync", "sync_all", 3, 0, members], ["sync", "barrier_all", 5, 0, None]],
            1: [
                ["sync", "sync_all", 3, 0, members],
                ["mem", "load", 4, "read", "sym", 0, 16, "<i4"],
                ["sync", "barrier_all", 5, 0, None],
            ],
        }
    )
    (race,) = races
    assert said in race.hint and race.hint.count("sync_all") == (members is None)
    assert race.fix == Fix((Edit((2,), "shmem.quiet()"),))


def test_a_put_to_your_own_pe_says_why_it_is_a_race():
    """A blocking put to one's own PE, read before the barrier: a race by the specification, and the hint says
    why in one clause (issue 45 item 10)."""
    barrier = ["sync", "barrier_all", 4, 0, None]
    (race,) = _races({0: [_put(2, 0, 5), ["mem", "load", 3, "read", "sym", 0, 16, "<i4"], barrier], 1: [barrier]})
    assert race.hint.startswith("a put to your own PE is complete only after quiet or a barrier")
    assert "call shmem.quiet() after line 2" in race.hint
    assert race.fix == Fix((Edit((2,), "shmem.quiet()"),))
    (race,) = _races(  # a put to another PE: not the own-PE clause
        {
            0: [_put(2, 1, 5), ["sync", "quiet", 3, 0, None], barrier],
            1: [["mem", "load", 3, "read", "sym", 0, 16, "<i4"], barrier],
        }
    )
    assert "your own PE" not in race.hint


def test_no_fix_for_an_update_every_pe_makes():
    events = {}
    for pe in (0, 1):
        events[pe] = [
            ["sync", "barrier_all", 1, 0, None],
            ["rma", "get", 3, 0, 0, 4, "<i4", "priv", 1000, 1004, 0, None],
            ["rma", "put", 5, 0, 0, 4, "<i4", "priv", 1000, 1004, 0, [pe]],
            ["sync", "barrier_all", 6, 0, None],
        ]
    races = _races(events)
    shared = [
        r
        for r in races
        if {a.line for a in r.accesses} == {3, 5}
        and r.accesses[0].pe != r.accesses[1].pe
        or len(r.accesses[0].pes + r.accesses[1].pes) > 2
    ]
    assert shared and all(r.fix is None and "atomic" in r.hint for r in shared)


# -- fixes checked on the trace before they are offered (analysis/fixcheck.py) ----------------------
#: a binomial tree of two reductions that reuses one inbox slot (a flag per level, so a late set never
#: hides a newer one and hangs the tree): a barrier after the loop orders
#: nothing; one inside it (every PE passes it, once per step) does
TREE_ONE_SLOT = """levels = max((npes - 1).bit_length(), 1)
val = np.zeros(1, dtype=np.int64)
shmem.barrier_all()
for step in range(2 * levels):
    level = step % levels
    if level == 0:
        val[0] = me + 1
    mask = 1 << level
    if me % (2 * mask) == mask:
        shmem.put(inbox, val, me - mask)
        shmem.fence()
        shmem.atomic_set(inflags[level:level + 1], step + 1, me - mask)
    elif me % (2 * mask) == 0 and me + mask < npes:
        shmem.wait_until(inflags[level:level + 1], shmem.CMP.GE, step + 1)
        val[0] += inbox[0]
shmem.barrier_all()
"""

#: the same tree with one inbox slot and one flag per step: nothing is reused
TREE_SLOT_PER_STEP = """levels = max((npes - 1).bit_length(), 1)
val = np.zeros(1, dtype=np.int64)
shmem.barrier_all()
for step in range(2 * levels):
    level = step % levels
    if level == 0:
        val[0] = me + 1
    mask = 1 << level
    if me % (2 * mask) == mask:
        shmem.put(inboxes[step:step + 1], val, me - mask)
        shmem.fence()
        shmem.atomic_set(inflags[step:step + 1], 1, me - mask)
    elif me % (2 * mask) == 0 and me + mask < npes:
        shmem.wait_until(inflags[step:step + 1], shmem.CMP.EQ, 1)
        val[0] += inboxes[step]
shmem.barrier_all()
"""

#: a tree whose senders leave the loop (break): no barrier can go inside it, so no fix is an edit
TREE_BREAK = """val = np.array([me + 1], dtype=np.int64)
shmem.barrier_all()
mask = 1
while mask < npes:
    if me & mask:
        shmem.put(inbox, val, me - mask)
        shmem.fence()
        shmem.atomic_inc(inflag, me - mask)
        break
    if me + mask < npes:
        shmem.wait_until(inflag, shmem.CMP.GE, mask.bit_length())
        val[0] += inbox[0]
    mask *= 2
shmem.barrier_all()
"""

#: a halo exchange through one ghost cell per PE, announced by put_signal: the next step's put
#: may land before the neighbour read the last one (the signal it waits on is not the missing one)
HALO_ONE_GHOST = """sig = shmem.new_signal()
left = (me - 1) % npes
edge = np.zeros(1)
acc = 0.0
shmem.barrier_all()
for it in range(1, 6):
    edge[0] = me * 10 + it
    shmem.put_signal(ghost, edge, left, sig, it, shmem.SIGNAL_SET)
    shmem.signal_wait_until(sig, shmem.CMP.GE, it)
    acc += ghost[0]
shmem.barrier_all()
shmem.del_signal(sig)
"""

#: the same halo where the reader acknowledges: the writer waits for it before its next put
HALO_ACKNOWLEDGED = """sig = shmem.new_signal()
left, right = (me - 1) % npes, (me + 1) % npes
edge = np.zeros(1)
acc = 0.0
shmem.barrier_all()
for it in range(1, 6):
    edge[0] = me * 10 + it
    if it > 1:
        shmem.wait_until(acked, shmem.CMP.GE, it - 1)
    shmem.put_signal(ghost, edge, left, sig, it, shmem.SIGNAL_SET)
    shmem.signal_wait_until(sig, shmem.CMP.GE, it)
    acc += ghost[0]
    shmem.atomic_set(acked, it, right)
shmem.barrier_all()
shmem.del_signal(sig)
"""

FIX_ARRAYS = [
    "inbox=int64[1]",
    "inflag=int64[1]",
    "inboxes=int64[8]",
    "inflags=int64[8]",
    "ghost=float64[1]",
    "acked=int64[1]",
]
FIX_RESET = "".join(f"{a.split('=')[0]}[...] = 0\n" for a in FIX_ARRAYS) + "shmem.barrier_all()\n"

#: (racy, fixed twin or None, fewest PEs it races at, OpenSHMEM 1.5)
PROGRAMS = {
    "tree-one-slot": (TREE_ONE_SLOT, TREE_SLOT_PER_STEP, 2, False),
    "tree-break": (TREE_BREAK, None, 4, False),
    "halo-one-ghost": (HALO_ONE_GHOST, HALO_ACKNOWLEDGED, 2, True),
}

fix_job = job_fixture(2, 4, heap="32M", sos=(2, 4))


@pytest.mark.parametrize("program", PROGRAMS)
def test_each_fix_removes_its_race_in_a_rerun(fix_job, program):
    """The racy program: every race's fix, applied alone, removes it in a rerun (or there is none and the
    hint says what to change); the fixed twin has no race."""
    racy, fixed, fewest, needs_15 = PROGRAMS[program]
    if needs_15 and fix_job.library.name != "sos":
        pytest.skip("put_signal is OpenSHMEM 1.5: Sandia OpenSHMEM only")
    races, problems = check_each_fix(fix_job, racy, FIX_ARRAYS, FIX_RESET)
    assert problems == [], "\n".join(problems)
    assert bool(races) == (fix_job.n >= fewest), races
    if fixed is not None:
        assert run_checked(fix_job, fixed, FIX_ARRAYS, FIX_RESET).races == []


def _halo_events(me, steps=3):
    """HALO_ONE_GHOST's events on PE ``me`` of 2 (the ghost is ``slot``, the signal ``flag``)."""
    other = 1 - me
    evs = [["sync", "barrier_all", 5, 0, None]]
    for it in range(1, steps + 1):
        evs += [
            ["rma", "put_signal", 8, other, 0, 8, "<f8", "priv", 1000, 1008, 0, [float(it)]],
            ["rma", "signal_set", 8, other, 16, 24, "<u8", None, None, None, 0, [it]],
            ["wait", "signal_wait_until", 9, 16, 24, "<u8", [it], ">=", it, 0],
            ["mem", "load", 10, "read", "sym", 0, 8, "<f8"],
        ]
    return evs + [["sync", "barrier_all", 11, 0, None], ["sync", "free", 12, 0, None]]


def _analyse(events, npes, source):
    from shmem_notebook.analysis.happens_before import analyse

    traces = {pe: {"events": evs, "names": NAMES, "ops": len(evs)} for pe, evs in events.items()}
    return analyse(traces, npes, source=source).races


def test_a_fix_that_orders_nothing_gives_way_to_one_checked_on_the_trace():
    """The single-buffered put_signal halo: the old hint moved line 8 after itself ('the flag before the data',
    naming the signal the reader did wait on); checked on the trace, a barrier in the loop after the read is offered."""
    races = _analyse({pe: _halo_events(pe) for pe in (0, 1)}, 2, HALO_ONE_GHOST)
    (race,) = [r for r in races if {a.line for a in r.accesses} == {8, 10}]
    assert race.fix == Fix((Edit((10,), "shmem.barrier_all()", every_pe=True),))
    assert "a shmem.barrier_all() after line 10 in the loop, where every PE passes, orders them" in race.hint
    assert "    acc += ghost[0]\n    shmem.barrier_all()\nshmem.barrier_all()\n" in apply_fix(HALO_ONE_GHOST, race.fix)
    unchecked = _races({pe: _halo_events(pe) for pe in (0, 1)})  # no source: the fix as the race's kind suggests
    (guess,) = [r.fix for r in unchecked if {a.line for a in r.accesses} == {8, 10}]
    assert guess is not None and guess != race.fix  # a guess about data and flag (a fence), which orders nothing here


WHILE_SLOT = """shmem.barrier_all()
k = 0
while k < 2:
    if me == 0:
        shmem.put(slot, lb, 1)
        shmem.fence()
        shmem.atomic_set(flag, k + 1, 1)
    else:
        shmem.wait_until(flag, shmem.CMP.GE, k + 1)
        x = slot[0]
    k += 1
shmem.barrier_all()
"""


def test_no_fix_when_no_barrier_in_the_cell_orders_the_race():
    """One slot reused by the rounds of a ``while`` loop: a barrier cannot go inside it (the loop is hoisted over),
    one after it orders nothing, so there is no fix and the hint says what to change."""
    producer, consumer = [["sync", "barrier_all", 1, 0, None]], [["sync", "barrier_all", 1, 0, None]]
    for k in (1, 2):
        producer += [_put(5, 1, k), ["sync", "fence", 6, 0, None], _set(7, 1, 16, k)]
        consumer += [
            ["wait", "wait_until", 9, 16, 24, "<i8", [k], ">=", k, 0],
            ["mem", "load", 10, "read", "sym", 0, 16, "<i4"],
        ]
    end = [["sync", "barrier_all", 12, 0, None]]
    races = _analyse({0: producer + end, 1: consumer + end}, 2, WHILE_SLOT)
    (race,) = [r for r in races if {a.line for a in r.accesses} == {5, 10}]
    assert race.fix is None
    assert race.hint.startswith(
        "no barrier or quiet placed next to either line orders line 5's put on PE 0 and line "
        "10's load on PE 1: give each round its own buffer"
    )
    # the guess it replaces: write the flag after the data, which the producer already does
    guessed = [r for r in _races({0: producer + end, 1: consumer + end}) if {a.line for a in r.accesses} == {5, 10}]
    assert [r.fix for r in guessed] == [Fix((Edit((5,), "shmem.fence()", move=7),))]


HELPER = """lb = np.array([1], dtype=np.int32)
shmem.barrier_all()
def show(a):
    print(a[0])
if me == 0:
    shmem.put(slot, lb, 1)
if me == 1:
    show(slot)
shmem.barrier_all()
"""


def _helper_events(extra_call=False):
    end = [["sync", "barrier_all", 9, 0, None]]
    later = [["mem", "load", 4, "read", "sym", 0, 4, "<i4"]] if extra_call else []
    return {
        0: [["sync", "barrier_all", 2, 0, None], _put(6, 1, 1)] + end + later,
        1: [["sync", "barrier_all", 2, 0, None], ["mem", "load", 4, "read", "sym", 0, 4, "<i4"]] + end + later,
    }


def test_a_function_body_is_placed_at_its_call():
    """The load in ``show`` runs at line 8: a barrier before line 5 (where the body's line number would put it)
    orders nothing, one between the two ifs does."""
    (race,) = _analyse(_helper_events(), 2, HELPER)
    assert race.fix is not None
    assert "    shmem.put(slot, lb, 1)\nshmem.barrier_all()\nif me == 1:\n" in apply_fix(HELPER, race.fix)


def test_no_fix_where_the_trace_cannot_place_a_function_body():
    """``show`` called from two lines: its load could be at either, so no fix is offered; the hint still says
    where the barrier goes."""
    code = HELPER + "show(slot)\n"
    races = _analyse(_helper_events(extra_call=True), 2, code)
    (race,) = [r for r in races if {a.line for a in r.accesses} == {4, 6}]
    assert race.fix is None and "shmem.barrier_all()" in race.hint


#: issue 48 item 5, the pattern hints the held-out set lacked, on the catalogue's twins (race_shapes): the racy
#: twin -> (its fixed twin, the one edit, the words). A read after a with block that takes the lock: moved into
#: it; a context's put in the block: its quiet before the lock is released; a slot reused after the acknowledgement
#: of one item too early: the wait's count written anew
PATTERN_TWINS = {
    "lock-with-read-after-the-block": (
        "lock-with-read-inside",
        Fix((Edit((14,), move=15),)),
        "PE 1's get at line 16 is outside the lock that PE 0 holds for line 14's put: move lines 15-16 into the with "
        "block at line 11, after line 14",
    ),
    "lock-contextmanager-ctx-not-quieted": (
        "lock-contextmanager-ctx-quieted",
        Fix((Edit((13,), "{ctx}.quiet()"),)),
        "PE 0's put at line 13 goes through a context while it holds the lock, but releasing the lock completes the "
        "default context only, so the put may land after PE 1 took the lock for line 17's load: call ctx.quiet() "
        "after line 13, before the lock is released",
    ),
    "two-slots-ack-one-item-early": (
        "two-slots-acked",
        Fix((Edit((8,), replace=("k - 3", "k - 2")),)),
        "the wait at line 8 lets PE 0's put at line 9 reuse the memory once the acknowledgement is more than k - 3 ",
    ),
}
_CASES = {case.name: case for case in race_catalogue.CASES}


@pytest.mark.parametrize("racy", PATTERN_TWINS)
def test_a_pattern_bug_gets_its_one_edit_and_the_edited_cell_is_its_twin(fix_job, racy):
    """The racy twin's one race says the pattern in its words, with the one edit that fixes it (before: no fix, and
    'give each round its own buffer'); ``fixed_code`` is the fixed twin, which runs without a race."""
    fixed, fix, words = PATTERN_TWINS[racy]
    case, twin = _CASES[racy], _CASES[fixed]
    if not case.runs_at(fix_job.n):
        pytest.skip("a lock case: 2 PEs (race_catalogue's docstring)")
    result = run_checked(fix_job, case.code, race_catalogue.ARRAYS, race_catalogue.RESET, timeout=30)
    (race,) = result.races
    assert {a.line for a in race.accesses} == set(case.lines)
    assert race.fix == fix and words in race.hint, race
    assert result.fixed_code == twin.code
    assert run_checked(fix_job, twin.code, race_catalogue.ARRAYS, race_catalogue.RESET, timeout=30).races == []


@pytest.mark.parametrize(
    "old, new, more", [("r - 2", "r - 1", 1), ("npes - 2", "npes - 1", 1), ("k", "k + 3", 3), ("r", "2 * r", None)]
)
def test_a_count_of_a_loop_variable_is_checked_by_how_much_larger_it_is(old, new, more):
    """A wait's count rewritten (the fix's ``replace``) is replayed as the old count plus a number, whatever
    the loop's variables hold; a count that is not (``2 * r`` for ``r``) is not checked, so not offered."""
    from shmem_notebook.analysis.edits import count_delta

    assert count_delta(old, new, 4) == more


LEADING = (
    "x = shmem.zeros(1, dtype=np.int64)\nshmem.barrier_all()\nif me == 0:\n"
    "    shmem.put(x, np.ones(1, dtype=np.int64), 1)\nv = int(x[0])\nshmem.barrier_all()\nshmem.free(x)\n"
)


def test_a_cell_that_starts_with_blank_lines_gets_the_same_report_and_fix(fix_job):
    """IPython drops a cell's leading blank lines before it numbers its lines (``job.run('''\\n...''')``,
    a blank first line under %%pxshmem): the report, its lines and its checked fix are those of the same
    cell without them (the fix was lost, checked against the lines of the text with them), and so is a
    syntax error's line and text."""
    import io

    from shmem_notebook.errors import CellSyntaxError

    got = []
    for lead in ("", "\n", "\n\n  \n"):  # one blank line lost the fix: it was checked a line off
        result = fix_job.run(lead + LEADING, race=True, stdout=io.StringIO())
        got.append(([str(race) for race in result.races], [str(race.fix) for race in result.races]))
    assert got[0] == got[1] == got[2] and got[0][0] and "None" not in got[0][1], got
    with pytest.raises(CellSyntaxError, match=r"\(line 2 of the cell: x = \(\)"):
        fix_job.run("\n\ny = 1\nx = (\n")
