"""Hints for the common pattern bugs, in the pattern's words (client side, for :mod:`.hints`).

:func:`patterns` yields, for two racing accesses, the hint and the one edit (:class:`~.edits.Fix`) of
each pattern they may be: a consumer that accesses the data before the wait that orders it (move the
access after the wait), a counted wait that needs fewer increments than the producers make (wait for
all of them: the count in the wait written anew), a collective's destination used in a loop (one
barrier after the round's last use of it), a buffer reused after a wait for an older acknowledgement
than the one its last reader sends after reading it (wait for that one: the wait's value written anew,
``r - 2`` -> ``r - 1`` for parity buffers). :func:`.hints.advice` offers the first whose edit
:func:`.fixcheck.orders` finds orders the race.
"""

from __future__ import annotations

import ast
import dataclasses
from typing import TYPE_CHECKING, Any

from ..folding import pe_ranges
from ..words import plural
from . import fixcheck, model
from .edits import Edit, Fix, recount
from .model import LOCAL_SYNCS

__all__ = ["patterns", "touches", "LOOKBACK"]

if TYPE_CHECKING:
    from collections.abc import Iterator

    from .happens_before import _Access, _Simulation
    from .model import Effect, Event

    _Advice = Iterator[tuple[str, Fix]]

#: how far a hint looks on one PE for the events around an access
LOOKBACK = 10_000


def patterns(a: _Access, b: _Access, sim: _Simulation) -> _Advice:
    """``(hint, fix)`` of each pattern bug ``a`` and ``b`` may be, to check in this order: an access before the
    wait that orders it, a counted wait that counts too few, a collective's destination reused by the next round,
    a buffer reused after a wait for an older acknowledgement."""
    for x, y in ((a, b), (b, a)):
        yield from _before_its_wait(x, y, sim)
        yield from _counts_too_few(x, y, sim)
    yield from _next_round(a, b, sim)
    for x, y in ((a, b), (b, a)):
        yield from _older_ack(x, y, sim)


def _after(x: _Access, sim: _Simulation) -> list[tuple[int, Event]]:
    """``[(index, event)]`` on PE ``x.pe`` after ``x`` up to its next collective synchronisation."""
    out: list[tuple[int, Event]]
    evs, out = sim.events[x.pe], []
    for i in range(x.index + 1, min(len(evs), x.index + 1 + LOOKBACK)):
        e = evs[i]
        if e.kind == "coll" or (e.kind == "sync" and e.op not in LOCAL_SYNCS):
            break
        out.append((i, e))
    return out


def _before_its_wait(x: _Access, y: _Access, sim: _Simulation) -> _Advice:
    """PE ``x.pe`` accesses before its wait that is ordered after PE ``y.pe``'s write following ``y``: move ``x``
    after the wait."""
    if x.pe == y.pe or x.cell or y.cell:
        return
    for i, e in _after(x, sim):
        if e.kind != "wait" or e.line <= x.line:  # a wait of the next round is not the one x missed
            continue
        if any(q == y.pe and j > y.index for q, j in sim.waited.get((x.pe, i), ())):
            verb = "writes" if x.writes else "reads"
            yield (
                (
                    f"PE {x.pe} {verb} at line {x.line} before its wait at line {e.line}, the wait that orders it "
                    f"after PE {y.pe}'s {y.op} at line {y.line}: move line {x.line} after the wait at line {e.line}"
                ),
                Fix((Edit((e.line,), move=x.line),)),
            )
            return


def _counts_too_few(x: _Access, y: _Access, sim: _Simulation) -> _Advice:
    """PE ``x.pe`` accesses after a counted wait (``>=`` a number of increments) that needs fewer increments than
    the PEs make, ``y``'s PE incrementing after ``y``: wait for all of them (the count in the wait rewritten)."""
    if x.pe == y.pe or x.cell or y.cell:
        return
    evs = sim.events[x.pe]
    for i in range(x.index - 1, max(-1, x.index - 1 - LOOKBACK), -1):
        w = evs[i]
        if w.kind == "coll" or (w.kind == "sync" and w.op not in LOCAL_SYNCS):
            return
        cond = model.condition(w) if w.kind == "wait" else None
        if cond is None or cond[0] not in (">=", ">"):
            continue
        if sum(e.kind == "wait" and e.line == w.line for e in evs) > 1:
            return  # a wait of every round (a counter of rounds): not a count of the cell's increments
        adds = _writes_to(x.pe, w, sim)
        if not adds or any(how is None or how[0] != "add" for *_, how in adds):
            return
        if not any(q == y.pe and j > y.index for q, j, *_ in adds):
            return
        total = sum(how[1] for *_, how in adds)  # type: ignore[index]  # every one adds
        needed: int = model.increments_needed(cond[0], cond[1], w.before or 0)  # type: ignore[assignment]  # >=, >
        if needed >= total:
            return
        old = _wait_count(sim.source, w.line)  # type: ignore[arg-type]  # checked with a source only
        if old is None:
            return
        new = recount(old, total - needed)
        adders = sorted({q for q, *_ in adds})
        lines = sorted({e.line for _, _, e, _ in adds})
        at = " and ".join(f"line {n}" for n in lines)
        yield (
            (
                f"the wait at line {w.line} counts {needed} of the {plural(total, 'increment')} PE "
                f"{pe_ranges(adders)} {'make' if len(adders) > 1 else 'makes'} at {at} ({old} is {cond[1]} here), so "
                f"it can return before the data of the last is in: wait for all of them: {new} instead of {old} at "
                f"line {w.line}"
            ),
            Fix((Edit((w.line,), replace=(old, new)),)),
        )
        return


def _older_ack(x: _Access, y: _Access, sim: _Simulation) -> _Advice:
    """PE ``x.pe`` writes memory after a wait (``>=``, ``>``) on a word that PE ``y.pe`` sets, after its access
    ``y`` of that memory, to a value the wait does not need: the wait lets ``x`` reuse the memory before that
    acknowledgement; wait for it (the wait's value written anew, as much larger as the acknowledgement is)."""
    if x.pe == y.pe or x.cell or y.cell or not x.writes:
        return
    w: Any
    evs, w = sim.events[x.pe], None
    for i in range(x.index - 1, max(-1, x.index - 1 - LOOKBACK), -1):
        e = evs[i]
        if e.kind == "coll" or (e.kind == "sync" and e.op not in LOCAL_SYNCS):
            return
        if e.kind == "wait":
            w = e
            break
    cond = model.condition(w) if w is not None else None
    if cond is None or cond[0] not in (">=", ">"):
        return
    ack: Any
    ack = next((e for _, e in _after(y, sim) if e.kind == "rma" and e.pe == x.pe and e.lo < w.hi and w.lo < e.hi), None)
    how = model.written(ack) if ack is not None else None
    if how is None or how[0] != "set":
        return
    more = how[1] - (cond[0] == ">") - cond[1]
    old = _wait_count(sim.source, w.line) if more > 0 else None  # type: ignore[arg-type]  # as above
    if old is None:
        return
    new = recount(old, more)
    least = "at least" if cond[0] == ">=" else "more than"
    yield (
        (
            f"the wait at line {w.line} lets PE {x.pe}'s {x.op} at line {x.line} reuse the memory once the "
            f"acknowledgement is {least} {old} ({cond[1]} here), but PE {y.pe} acknowledges its {y.op} of it at "
            f"line {y.line} only with the {how[1]} it writes at line {ack.line}: wait for that acknowledgement: "
            f"{new} instead of {old} at line {w.line}"
        ),
        Fix((Edit((w.line,), replace=(old, new)),)),
    )


def _writes_to(pe: int, w: Event, sim: _Simulation) -> list[tuple[int, int, Event, Effect | None]]:
    """``[(pe, index, event, model.written(event))]``: the RMA writes to the word PE ``pe``'s wait ``w`` reads
    (once per simulation and wait)."""
    cache: dict[tuple[int, int, int], list[tuple[int, int, Event, Effect | None]]]
    cache = sim.__dict__.setdefault("_writes_to", {})
    key = (pe, w.lo, w.hi)
    if key not in cache:
        cache[key] = [
            (q, j, e, model.written(e))
            for q, qevs in sim.events.items()
            for j, e in enumerate(qevs)
            if e.kind == "rma" and e.pe == pe and e.lo < w.hi and w.lo < e.hi
        ]
    return cache[key]


def _wait_count(source: str, line: int) -> str | None:
    """The text of the value argument of the wait called at cell ``line`` (None: not found)."""
    try:
        tree = ast.parse(source)
    except SyntaxError:
        return None
    for node in ast.walk(tree):
        if isinstance(node, ast.Call) and node.lineno == line and getattr(node.func, "attr", "").endswith("wait_until"):
            values = node.args[2:3] or [k.value for k in node.keywords if k.arg in ("value", "cmp_value")]
            if values and values[0].lineno == values[0].end_lineno:
                return ast.get_source_segment(source, values[0])
    return None


def _next_round(a: _Access, b: _Access, sim: _Simulation) -> _Advice:
    """A collective's destination used in a loop: the next round's collective may write it while this round's
    still does, or before this round's last use of it; one barrier after that use separates the rounds."""
    if a.pe != b.pe or a.cell or b.cell or a.index == b.index:
        return
    evs = sim.events[a.pe]
    ea, eb = evs[a.index], evs[b.index]
    if ea.kind != "coll" and eb.kind != "coll":
        return
    coll = ea if ea.kind == "coll" else eb
    first, second = (a, b) if a.index < b.index else (b, a)
    lo, hi = max(a.lo, b.lo), min(a.hi, b.hi)
    last = first
    for i, e in _after(first, sim):  # the last use of the memory in the round
        if i >= second.index:
            break
        if touches(first.pe, e, first.owner, first.space, lo, hi):
            last = dataclasses.replace(first, line=e.line, index=i)
    if evs[second.index].kind != "coll" or last.line == second.line:
        return
    if not fixcheck.in_loop(sim, last.line):
        return
    use = ", after the round's last use of it" if last is not first else ""
    barrier = (
        f"a shmem.barrier_all() after line {last.line} in the loop{use}, where every PE passes, separates the rounds"
    )
    why = (
        f"(a {coll.op} may write every PE's destination as soon as any PE has entered it, and a PE that has left "
        "this round's can enter the next)"
    )
    if first.line == second.line:
        text = (
            f"line {first.line}'s {coll.op} writes its destination in one round and again in the next, and the "
            f"next round's may begin before this round's is done {why}: {barrier}"
        )
    else:
        text = (
            f"the next round's {coll.op} at line {second.line} may write its destination while line {first.line} "
            f"still {'writes' if first.writes else 'reads'} this round's result {why}: {barrier}"
        )
    yield text, Fix((Edit((last.line,), "shmem.barrier_all()", every_pe=True),))


def touches(pe: int, e: Event, owner: int, space: str, lo: int, hi: int) -> bool:
    """Does event ``e`` of PE ``pe`` access bytes ``[lo, hi)`` of ``owner``'s memory ``space``?"""
    if e.kind == "mem":
        return pe == owner and e.space == space and e.lo < hi and lo < e.hi
    return e.kind == "rma" and space == "sym" and e.pe == owner and e.lo < hi and lo < e.hi
