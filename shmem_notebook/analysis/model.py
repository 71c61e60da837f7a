"""The memory model the race analysis simulates: what completes, orders and satisfies what (client side).

One statement of OpenSHMEM 1.5's rules, read by the simulation (:mod:`.happens_before`), the folding of
repeated epochs (:mod:`.repeats`), the capped-trace cut (:mod:`.partial`) and the hints:

- **Completion.** A blocking ``get`` or a fetching atomic is complete when it returns
  (:data:`FETCHES`); a ``put``, a non-fetching atomic and every ``*_nbi`` call complete at the next
  completion point of their context: ``quiet``/``Ctx.quiet`` and ``Ctx.destroy`` (their context),
  ``barrier_all``, allocation and ``clear_lock`` (the default context).
- **Collective synchronisation** (:data:`COLLECTIVE_SYNCS`; :data:`COMPLETING` also complete the
  default context): everything before any member's call happens before everything after every
  member's call. ``sync_all`` and team syncs complete nothing.
- **Collectives** (broadcast, reductions, collect, fcollect, alltoall(s)) read their source and write
  their destination on each member. The destination may be written as soon as any member has entered
  (1.5: it must be ready on every PE before any PE calls), so that write starts at the *earliest*
  arrival: it is ordered after an access only if the access happens before every member's call.
- **The library's own writes.** Where a library zeroes an allocation after the barrier that ends it
  (:data:`shmem_notebook.deviations.LATE_ZEROING`: Open MPI's ``shmem_calloc``) and no shim repairs it
  (``shmem-race`` on a plain script), each PE's zeroing is its write of the block right after the
  allocation's synchronisation (op ``zeroing``): a peer's put after its own allocation races with it.
  Collectives that write a destination early are the collectives' rule above.
- **fence** orders the puts and atomics of one context to one PE (not gets); a ``put_signal``'s data
  is delivered before its signal word.
- **Waits** (``wait_until``, a ``test`` that succeeded, ``signal_wait_until``) are ordered after the
  writes their condition *requires* (:func:`requirement`): a wait the flag's value already satisfied
  (before the cell, or by writes ordered before the wait) requires none, and orders nothing; for a
  counter that only grows, ``>= v`` requires ``v - base`` increments: from each PE the ones the other
  PEs' increments cannot make up, ordered after that PE's increment that brings its count there; for a
  flag set to values, the write of the one PE whose values satisfy it (the first in its program order).
  Where the values are not known, the writes whose values the wait saw, else every write to the flag.
- **Locks**: accesses inside critical sections of one lock do not race each other; an operation on
  another context than the default is inside only if its context's ``quiet`` came before ``clear_lock``.

Pure data and arithmetic over events (:data:`shmem_notebook.operations.EVENT_FIELDS`).
"""

from __future__ import annotations

import operator
from typing import TYPE_CHECKING

from ..operations import CALLS, RECORDED_AS

if TYPE_CHECKING:
    from collections.abc import Callable, Iterable, Iterator
    from typing import Any, Protocol, TypeAlias

    class Event(Protocol):
        kind: str
        op: str
        line: int
        at: int | None

        def __getattr__(self, name: str) -> Any: ...

        def __iter__(self) -> Iterator[Any]: ...

    Effect: TypeAlias = tuple[str, Any]
    Required: TypeAlias = tuple[list[tuple[int, int]], set[tuple[int, int]]]

__all__ = [
    "COLLECTIVE_SYNCS",
    "COMPLETING",
    "FETCHES",
    "READS",
    "PUT_SIGNALS",
    "LOCAL_SYNCS",
    "CMPS",
    "done_on_return",
    "written",
    "condition",
    "holds",
    "increments_needed",
    "requirement",
]

#: collective synchronisations, by the op their events name (barrier_all, sync_all, alloc, free)
COLLECTIVE_SYNCS = frozenset(RECORDED_AS.get(n, n) for n, op in CALLS.items() if op.kind == "sync" and op.collective)
#: collective syncs that complete the default context's operations (barrier_all, alloc, free)
COMPLETING = frozenset(n for n in COLLECTIVE_SYNCS if CALLS[n].completes)
#: calls complete when they return (blocking gets, fetching atomics): never pending
FETCHES = frozenset(n for n, op in CALLS.items() if op.fetches)
#: RMA calls that read the remote side (get, iget, get_nbi)
READS = frozenset(n for n, op in CALLS.items() if op.kind == "rma" and not op.writes)
PUT_SIGNALS = ("put_signal", "put_signal_nbi")
#: syncs that order nothing across PEs
LOCAL_SYNCS = frozenset({"quiet", "fence", "ctx_destroy"})

#: comparison name (as shmem4py's ``_str_to_cmp``) -> its test
CMPS: dict[str, Callable[[Any, Any], bool]] = {
    "==": operator.eq,
    "!=": operator.ne,
    ">": operator.gt,
    ">=": operator.ge,
    "<": operator.lt,
    "<=": operator.le,
}
#: waits whose event carries one word's condition (``cmp``, ``value``)
_CONDITIONED = frozenset(
    {
        "wait_until",
        "test",
        "signal_wait_until",
        # one event per word they returned (the recording's); their whole-array events carry no cmp
        *(
            f"{name}_{how}{vector}"
            for name in ("wait_until", "test")
            for how in ("any", "some")
            for vector in ("", "_vector")
        ),
    }
)
#: atomics that add to the word: op -> the increment (None: the recorded value)
_ADDS: dict[str, int | None] = {
    "atomic_inc": 1,
    "atomic_fetch_inc": 1,
    "atomic_fetch_inc_nbi": 1,
    "atomic_add": None,
    "atomic_fetch_add": None,
    "atomic_fetch_add_nbi": None,
    "signal_add": None,
}
#: writes that set the word to their recorded value
_SETS = frozenset(
    {
        "put",
        "put_nbi",
        "put_signal",
        "put_signal_nbi",
        "iput",
        "atomic_set",
        "atomic_swap",
        "atomic_swap_nbi",
        "signal_set",
    }
)


def done_on_return(op: str) -> bool:
    """A blocking get or a fetching atomic is complete (both sides) when it returns."""
    return op in FETCHES


def written(e: Event) -> Effect | None:
    """What write event ``e`` does to the word a wait reads: ``("add", n)``, ``("set", v)`` or None
    (not known: a store of a value not recorded, a multi-element put, a compare-and-swap...)."""
    if e.kind == "mem":  # a store of the PE's own: its value when it was one integer element
        values = getattr(e, "values", None)
        return ("set", values[0]) if e.mode == "write" and values and len(values) == 1 else None
    if e.kind != "rma":
        return None
    if e.op in _ADDS:
        step = _ADDS[e.op]
        if step is None:
            step = e.values[0] if e.values and len(e.values) == 1 else None
        return ("add", step) if isinstance(step, int) and step > 0 else None
    if e.op in _SETS and e.values and len(e.values) == 1 and e.fp is None:
        return ("set", e.values[0])
    return None


def condition(e: Event) -> tuple[str, Any] | None:
    """``(cmp, value)`` of a wait event on one word, or None (vector waits, ``signal_fetch``, old traces)."""
    if e.op not in _CONDITIONED or getattr(e, "cmp", None) not in CMPS or e.value is None:
        return None
    return e.cmp, e.value


def holds(cmp: str, x: Any, value: Any) -> bool:
    return CMPS[cmp](x, value)


def increments_needed(cmp: str, value: int, base: int) -> int | None:
    """How much a counter that only grows must add to ``base`` to satisfy ``x cmp value`` (0: it does
    already); None for ``<`` and ``<=``, which it satisfies at once or never."""
    if cmp in (">=", "=="):
        return max(value - base, 0)
    if cmp == ">":
        return max(value + 1 - base, 0)
    if cmp == "!=":
        return 1
    return None


def requirement(cmp: str, value: Any, base: Any, open_writes: Iterable[tuple[int, int, Event]]) -> Required | None:
    """The writes a wait on ``x cmp value`` requires, from the word's ``base`` value and the writes
    ``open_writes`` (``(pe, index, event)`` in program order per PE) that may land before it:
    ``(after, delivered)``, the ``(pe, index)`` whose issue the wait comes after and those of them
    certainly delivered when it returns; None when the rule cannot tell (mixed or unknown writes,
    or no way to satisfy it: the caller falls back to the values the wait saw)."""
    effects: list[tuple[int, int, Any]] = [(pe, i, written(e)) for pe, i, e in open_writes]
    if not effects or any(x is None for _, _, x in effects):
        return None
    kinds = {x[0] for _, _, x in effects}
    if kinds == {"add"}:
        return _increments_required(cmp, value, base, [(pe, i, x[1]) for pe, i, x in effects])
    if kinds == {"set"}:
        satisfying = [(pe, i) for pe, i, x in effects if holds(cmp, x[1], value)]
        if not satisfying:
            return None
        writers = {pe for pe, _ in satisfying}
        if len(writers) > 1:
            return [], set()  # any of several PEs may have set it: no one write is required
        first = min(satisfying)
        return [first], {first} if len(satisfying) == 1 else set()
    return None


def _increments_required(cmp: str, value: int, base: int, adds: list[tuple[int, int, int]]) -> Required | None:
    """A growing counter: the increments ``adds`` (``(pe, index, n)``) a wait needs past ``base``."""
    need = increments_needed(cmp, value, base)
    if need is None:
        return None
    if not need:
        return [], set()
    total = sum(n for _, _, n in adds)
    if total < need:
        return None
    by_pe: dict[int, list[tuple[int, int]]] = {}
    for pe, i, n in adds:
        by_pe.setdefault(pe, []).append((i, n))
    edges: list[tuple[int, int]]
    delivered: set[tuple[int, int]]
    edges, delivered = [], set()
    for pe, own in by_pe.items():
        mine = sum(n for _, n in own)
        need_here = need - (total - mine)  # what the other PEs' increments cannot make up
        if need_here <= 0:
            continue
        count, got = 0, 0
        for n in sorted((n for _, n in own), reverse=True):  # fewest increments that can make it up
            count, got = count + 1, got + n
            if got >= need_here:
                break
        own.sort()
        edges.append((pe, own[count - 1][0]))  # at least `count` of them landed: the count-th was issued
        if count == len(own):  # every one of them is needed: all were delivered
            delivered.update((pe, i) for i, _ in own)
    return edges, delivered
