"""The memory model's wait rule on plain events (no PEs): which writes a wait's condition requires."""

from shmem_notebook.analysis import model
from shmem_notebook.operations import event


def inc(pe_target=0, n=None):
    return event(
        [
            "rma",
            "atomic_inc" if n is None else "atomic_add",
            1,
            pe_target,
            0,
            8,
            "<i8",
            None,
            None,
            None,
            0,
            [1 if n is None else n],
            None,
            None,
        ]
    )


def put(value):
    return event(["rma", "put", 1, 0, 0, 8, "<i8", "priv", 0, 8, 0, [value], None, None])


def wait(cmp, value, before=0):
    return event(["wait", "wait_until", 2, 0, 8, "<i8", [value], cmp, value, before])


def test_adds_and_sets_are_told_apart():
    assert model.written(inc()) == ("add", 1)
    assert model.written(inc(n=3)) == ("add", 3)
    assert model.written(inc(n=-1)) is None  # a counter that may shrink: not a counter
    assert model.written(put(5)) == ("set", 5)
    multi = event(["rma", "put", 1, 0, 0, 16, "<i8", "priv", 0, 16, 0, None, None, None])
    assert model.written(multi) is None


def test_condition_only_for_one_word_waits():
    assert model.condition(wait(">=", 2)) == (">=", 2)
    vector = event(["wait", "wait_until_all", 2, 0, 16, "<i8", [1, 1], None, None, None])
    assert model.condition(vector) is None
    old = event(["wait", "wait_until", 2, 0, 8, "<i8", [1]])  # a trace without conditions
    assert model.condition(old) is None


def test_a_counter_needs_what_the_others_cannot_make_up():
    # PE 1 increments twice, PE 2 once; >= 3 from 0 needs all of them
    writes = [(1, 4, inc()), (1, 9, inc()), (2, 3, inc())]
    after, delivered = model.requirement(">=", 3, 0, writes)
    assert sorted(after) == [(1, 9), (2, 3)]
    assert delivered == {(1, 4), (1, 9), (2, 3)}
    # >= 2: PE 1 must have given at least one (PE 2 alone makes 1): the wait follows PE 1's first
    after, delivered = model.requirement(">=", 2, 0, writes)
    assert after == [(1, 4)] and delivered == set()
    # >= 1: any one of them: nothing is required
    assert model.requirement(">=", 1, 0, writes) == ([], set())
    # > 1 is >= 2; == 2 on a growing counter too
    assert model.requirement(">", 1, 0, writes)[0] == [(1, 4)]
    assert model.requirement("==", 2, 0, writes)[0] == [(1, 4)]


def test_a_counter_from_a_base():
    writes = [(1, 0, inc()), (1, 1, inc())]
    assert model.requirement(">=", 3, 1, writes)[0] == [(1, 1)]  # from 1, two more
    assert model.requirement(">=", 5, 1, writes) is None  # cannot be reached: the rule does not tell


def test_sets_of_one_pe_and_of_several():
    one = [(1, 2, put(0)), (1, 5, put(1)), (1, 8, put(1))]
    assert model.requirement("==", 1, 0, one) == ([(1, 5)], set())  # the first that satisfies, not delivered
    assert model.requirement("==", 1, 0, one[:2]) == ([(1, 5)], {(1, 5)})
    several = [(1, 2, put(1)), (2, 2, put(1))]
    assert model.requirement("==", 1, 0, several) == ([], set())  # either may have set it
    assert model.requirement("==", 7, 0, several) is None


def test_mixed_or_unknown_writes_fall_back():
    assert model.requirement(">=", 1, 0, [(1, 0, inc()), (1, 1, put(1))]) is None
    assert model.requirement(">=", 1, 0, []) is None


def test_what_a_growing_counter_needs():
    assert model.increments_needed(">=", 5, 2) == 3
    assert model.increments_needed(">", 5, 2) == 4
    assert model.increments_needed("==", 5, 7) == 0  # passed it already: needs nothing more
    assert model.increments_needed("!=", 0, 0) == 1
    assert model.increments_needed("<", 5, 2) is None
