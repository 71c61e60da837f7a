"""Race hints as edits (analysis/hints.py): where a fix goes in a cell, and the hints that were wrong."""

import pytest

from shmem_notebook.analysis.hints import Edit, Fix, apply_fix
from shmem_notebook.analysis.races import find_races

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
        "if me:\n    b = 2\n    c = 3\n    shmem.fence()\n    a = 1\n")
    assert apply_fix(code, Fix((Edit((3,), copy=1, before=True), Edit((4,), copy=1)))) == (
        "a = 1\nif me:\n    a = 1\n    b = 2\n    c = 3\n    a = 1\n")
    assert "        shmem.put(remote, lb, 1, ctx=c)\n        c.quiet()\n" in apply_fix(CELL, Fix((Edit((6,), "{ctx}.quiet()"),)))
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
    (race,) = _races({0: producer + [["sync", "barrier_all", 11, 0, None]], 1: consumer + [["sync", "barrier_all", 11, 0, None]]})
    assert {a.line for a in race.accesses} == {3, 10}
    assert "acknowledges (line 9) before line 10's load" in race.hint and "fence" not in race.hint
    assert race.fix == Fix((Edit((10,), move=9),))


@pytest.mark.parametrize("members, said", [(None, "shmem.sync_all() completes nothing"),
                                           ([0, 1], "Team.sync() completes nothing")])
def test_completion_hint_names_the_synchronisation_the_cell_uses(members, said):
    """A put not completed before a sync: the hint names that sync (it proposed `sync_all` in cells that never
    call it)."""
    races = _races({0: [_put(2, 1, 1), ["sync", "sync_all", 3, 0, members], ["sync", "barrier_all", 5, 0, None]],
                    1: [["sync", "sync_all", 3, 0, members], ["mem", "load", 4, "read", "sym", 0, 16, "<i4"],
                        ["sync", "barrier_all", 5, 0, None]]})
    (race,) = races
    assert said in race.hint and race.hint.count("sync_all") == (members is None)
    assert race.fix == Fix((Edit((2,), "shmem.quiet()"),))


def test_no_fix_for_an_update_every_pe_makes():
    events = {}
    for pe in (0, 1):
        events[pe] = [["sync", "barrier_all", 1, 0, None],
                      ["rma", "get", 3, 0, 0, 4, "<i4", "priv", 1000, 1004, 0, None],
                      ["rma", "put", 5, 0, 0, 4, "<i4", "priv", 1000, 1004, 0, [pe]],
                      ["sync", "barrier_all", 6, 0, None]]
    races = _races(events)
    shared = [r for r in races if {a.line for a in r.accesses} == {3, 5} and r.accesses[0].pe != r.accesses[1].pe
              or len(r.accesses[0].pes + r.accesses[1].pes) > 2]
    assert shared and all(r.fix is None and "atomic" in r.hint for r in shared)
