"""Repeated epochs of a race trace, folded away before :func:`~.happens_before.analyse` simulates them.

The rule. World collectives match by count, as in :mod:`.happens_before`. The m-th is a *boundary* when
on every PE it is a synchronisation (no collective accessing memory) after which the PE is
*clean* by the simulation's rules: nothing pending on any context (barriers and allocation
complete the default one, ``quiet``/``Ctx.destroy`` theirs, ``clear_lock`` the default one,
``sync_all`` none), no lock held, each team's collectives passed as often on each of its PEs.
An *epoch* runs from one boundary to the next; its signature is all PEs' events in it (lines,
ops, addresses, contexts, footprints; values written too when the trace has waits, which match
writes by value). Of ``2g + 1`` consecutive copies of a block of epochs, ``g`` go, on every PE,
boundaries included (``g``: :func:`_copies`).

Why the races are the same. At a boundary everything before happens before everything after,
nothing is in flight or locked: no race crosses it, each epoch starts from the same state. A
copy's waits match the same writes: earlier ones are complete, a later one exists whenever it
did (the last copy stays). A copy yields the racing pairs (lines, ops, bytes: the report keeps
one per kind) of the copy ``g`` before it, in the same order. The hints' look-ups outside an
epoch (nearest lock call or flag write before/after an access; does a line read and write) find
the same lines: a kept copy stands where a dropped one was. Collectives stay matched. Nothing up
to the first boundary (operations carried from earlier cells, the cell boundary) moves. Traces
whose PEs end after different numbers of world collectives, or inside a team's, stay whole: the
simulation forces such collectives through in an order that depends on their counts.

The work. Where every world collective of every PE is a boundary (:func:`_quick`: syncs, nothing
pending but on the default context, which each completes, no lock held, no team), each distinct
event's key is numbered once and an epoch is a stretch of a text with a character per event (its
key's number): no event is walked, epochs are compared as strings. Otherwise :func:`_walk` follows
each PE's state event by event. Once a run's ``g`` is known, the rest of the run is found by
comparing stretches of epochs and folded at once (:func:`_skip`), as one by one.
"""

from __future__ import annotations

from itertools import chain, compress, count
from math import gcd, lcm
from operator import itemgetter
from typing import TYPE_CHECKING, Any

from ..distinct import numbering
from ..operations import CALLS, FIELD, event
from .model import COLLECTIVE_SYNCS as _SYNCS, COMPLETING as _COMPLETING, FETCHES as _FETCHES

__all__ = ["fold_repeats"]

if TYPE_CHECKING:
    from collections.abc import Callable, Mapping, Sequence

    _Counts = dict[tuple[int, ...], int]
    _Same = Callable[[int, int, int], bool]
    _Quick = tuple[list[int], bool, Callable[[bool], str]]
    _Epochs = tuple[Sequence[int], list[Sequence[int]], Callable[[int], int], _Same]
_V, _CTX, _SCTX, _LOCK = FIELD["rma"]["values"], FIELD["rma"]["ctx"], FIELD["sync"]["ctx"], FIELD["lock"]["lock"]
_MEMBERS = {"sync": FIELD["sync"]["members"], "coll": FIELD["coll"]["members"]}
#: per ``values``, kind -> an event's fields as a tuple, an rma's written values only if ``values``
_FIELDS = {
    values: {
        kind: itemgetter(*(i for i in names.values() if values or kind != "rma" or i != _V))
        for kind, names in FIELD.items()
    }
    for values in (False, True)
}
_NONES = [None] * max(map(len, FIELD.values()))  # a PE may leave out an event's last fields: None


_WORLD, _TEAM, _PENDING, _COMPLETED, _LOCK_CALL, _WAIT = range(6)  # what an event does to _walk's state


def _step(e: Sequence[Any]) -> tuple[int, Any] | None:
    """What :func:`_walk` does at event ``e``: ``(what, argument)``, or None for nothing."""
    kind = e[0]
    if kind == "mem":
        return None
    op = e[1]
    if op in _SYNCS or kind == "coll":
        m = _MEMBERS[kind]
        if len(e) > m and e[m]:  # a team's
            return _TEAM, tuple(e[m])
        return _WORLD, (op in _COMPLETING, kind == "sync")
    if kind == "rma":  # a put, an *_nbi, a non-fetching atomic: pending on its context
        return None if op in _FETCHES else (_PENDING, e[_CTX] if len(e) > _CTX else None)
    if op == "quiet" or op == "ctx_destroy":
        return _COMPLETED, e[_SCTX] if len(e) > _SCTX else None
    if kind == "lock":
        return _LOCK_CALL, (op == "set_lock", e[_LOCK] if len(e) > _LOCK else None)
    return (_WAIT, None) if kind == "wait" else None


def _walk(evs: Sequence[Any]) -> tuple[Any, ...]:
    """Where each world collective of one PE ends (and its events), is the PE clean after it, its
    team counts then (a dict or None): three tuples; and does the PE wait? (Of an
    :class:`~shmem_notebook.distinct.Events` whose repeats are known, each distinct event is looked at once.)"""
    table, ids = numbering(evs) or (evs, range(len(evs)))
    steps = list(map(_step, table))
    pending: set[Any]
    held: set[Any]
    teams: _Counts
    found: list[tuple[int, bool, _Counts | None]]
    pending, held, teams, found, waits = set(), set(), {}, [], False
    for i, k in enumerate(ids):
        step = steps[k]
        if step is None:
            continue
        what, arg = step
        if what == _WORLD:
            completing, sync = arg
            if pending and completing:
                pending.discard(0)
            found.append((i + 1, not pending and not held and sync, dict(teams) if teams else None))
        elif what == _PENDING:
            pending.add(arg)
        elif what == _TEAM:
            teams[arg] = teams.get(arg, 0) + 1
        elif what == _COMPLETED:
            pending.discard(arg)
        elif what == _LOCK_CALL:
            setting, lock = arg
            if not setting:  # clear_lock completes the default context
                pending.discard(0)
            (held.add if setting else held.discard)(lock)
        else:
            waits = True
    return (*zip(*found, (len(evs), False, dict(teams) if teams else None)), waits)


def _balanced(counts: Sequence[_Counts | None]) -> bool:
    """Has each PE of each team passed as many of its collectives (``counts``: a dict or None per PE)?"""
    count: Callable[[int, tuple[int, ...]], int | None]
    count = lambda pe, team: (counts[pe] or {}).get(team, 0) if pe < len(counts) else None  # noqa: E731
    return not any(counts) or all(
        len({count(q, team) for q in {*team, pe}}) == 1 for pe, c in enumerate(counts) if c for team in c
    )


def _frozen(x: Any) -> Any:
    return tuple(map(_frozen, x)) if type(x) is list else x


def _rows(rows: Sequence[Any], get: Mapping[str, Callable[[Any], Any]], frozen: bool) -> list[Any]:
    """The keys of ``rows`` (each event's fields as ``get`` takes them; ``frozen``: lists made tuples)."""
    if frozen:
        rows = [[*map(_frozen, e), *_NONES] for e in rows]
    try:
        return [get[e[0]](e) for e in rows]
    except IndexError:  # events without their last fields
        return [get[e[0]]([*e, *_NONES]) for e in rows]


def _numbers(keys: Sequence[Any]) -> list[int]:
    """A number per key, the same for the same key, in order of first appearance (TypeError: unhashable)."""
    number: dict[Any, int] = {}
    return [number.setdefault(key, len(number)) for key in keys]


def _keys(evs: Sequence[Any], lo: int, hi: int, get: Mapping[str, Callable[[Any], Any]], frozen: bool) -> list[Any]:
    """The keys of ``evs[lo:hi]`` (:func:`_rows`). Of an :class:`~shmem_notebook.distinct.Events` whose
    repeats are known, a number per distinct key: its distinct events are looked at, not every event."""
    known = numbering(evs)
    if known is None:
        return _rows(evs[lo:hi], get, frozen)
    return list(map(_numbers(_rows(known[0], get, frozen)).__getitem__, known[1][lo:hi]))


def _ids(  # type: ignore[return]  # the second pass returns or raises
    lists: Sequence[Sequence[Any]],
    cuts: Sequence[Sequence[int]],
    values: bool,
) -> list[int]:
    """An id per epoch, the same for the same signature: every PE's events in it, each as its fields
    (as its named tuple has them: missing ones None; written values left out unless ``values``)."""
    get = _FIELDS[values]
    for frozen in (False, True):  # a list is unhashable: if there is one, lists become tuples on the second pass
        per_pe: list[list[tuple[Any, ...]]]
        seen: dict[tuple[Any, ...], int]
        per_pe, seen = [], {}
        try:
            for evs, c in zip(lists, cuts):
                keys = _keys(evs, c[0], c[-1], get, frozen)
                per_pe.append([tuple(keys[a - c[0] : b - c[0]]) for a, b in zip(c, c[1:])])
            return [seen.setdefault(sig, len(seen)) for sig in zip(*per_pe)]
        except TypeError:
            if frozen:
                raise


def _copies(block: list[tuple[list[list[Any]], int]], npes: int) -> int:
    """``g`` for ``block`` (per epoch: per PE its events, its world collectives); 0: keep every copy.

    :meth:`~.happens_before._Simulation.run` visits the PEs in turn from the one that finished the last
    world collective: each kept copy must be visited as unfolded, and in every order dropped ones
    were. If PEs block at world collectives only, the last to arrive, the one before the previous
    finisher, finishes one: the order turns by a copy's collectives, back after ``g``. A wait for
    a flag the block writes with a value it saw blocks until the simulation is stuck, which
    restarts it at PE 0: copies after the first start alike. Else the order after a copy is a
    function of the one before: periodic after ``npes`` copies, its period dividing ``lcm(1..npes)``."""
    writes: dict[tuple[int, int, int], set[Any]]
    waits: list[tuple[tuple[int, int, int], Any]]
    writes, waits, turn, rotates = {}, [], 0, True
    for parts, worlds in block:
        turn += worlds
        for pe, evs in enumerate(parts):
            for e in map(event, evs):
                if e.kind == "wait":
                    waits.append(((pe, e.lo, e.hi), e.observed))
                    rotates = False
                elif e.kind == "rma" and e.fp is None and e.values and CALLS[e.op].writes:
                    writes.setdefault((e.pe, e.lo, e.hi), set()).update(e.values)
                elif e.kind in ("sync", "coll") and e.members:
                    rotates = False
    if any(writes.get(where, set()).intersection(seen) for where, seen in waits):
        return 1
    period = lcm(*range(1, npes + 1))  # g >= 2 * npes, a multiple of every period
    return npes // gcd(turn % npes, npes) if rotates else period * -(-2 * npes // period) if period <= 1000 else 0


def _collapse(n: int, sid: Callable[[int], int], same: _Same, copies: Callable[[list[int]], int]) -> list[int]:
    """The positions of ``n`` epochs kept (``sid(t)``: epoch ``t``'s signature id; ``same(a, b, k)``: do the
    ``k`` epochs from ``a`` and from ``b`` match?): ``2g + 1`` consecutive copies of a block lose ``g`` of
    them, ``g = copies(block)`` (positions; 0: none). The rest of a run whose ``g`` is known is taken at
    once (:func:`_skip`)."""
    out: list[int]
    last: dict[int, int]
    g: int | None
    out, last, period, match, g, t = [], {}, 0, 0, None, 0
    while t < n:
        if period and g is not None:  # the run's copies after its first 2 * period: as one step-by-step
            k = _run(same, t, period, n)
            if k:
                match = _skip(out, range(t, t + k), period, match, g)
                for i in range(len(out) - period, len(out)):
                    last[sid(out[i])] = i
                t += k
                continue
        s = sid(t)
        if period and sid(out[-period]) == s:
            match += 1
        else:  # a new run: the period is the distance to the signature's last copy
            period = len(out) - last[s] if s in last else 0
            match, g = (1 if period else 0), None
        last[s] = len(out)
        out.append(t)
        if period and match == 2 * period and g is None:
            g = copies(out[-period:])
        if g and match == 2 * g * period:
            del out[-(g + 1) * period : -period]
            for i in range(len(out) - period, len(out)):
                last[sid(out[i])] = i
            match = g * period
        t += 1
    return out


def _run(same: _Same, t: int, period: int, n: int) -> int:
    """How many epochs from ``t`` on repeat the ones ``period`` before them: longer stretches compared
    while they match, then halves of the one that does not (the epochs compared once or twice)."""
    k, step = 0, 1
    while step <= n - t - k and same(t + k, t + k - period, step):
        k, step = k + step, 2 * step
    while step > 1:  # the first mismatch (or the end) is within step epochs from t + k
        step //= 2
        if step <= n - t - k and same(t + k, t + k - period, step):
            k += step
    return k


def _skip(out: list[int], new: range, period: int, match: int, g: int) -> int:
    """Append ``new`` (more copies of the run that ends ``out``, ``match`` long) to ``out`` as
    :func:`_collapse` would one by one; returns the run's new ``match``. Its first ``g`` periods
    stay, each deletion drops the ``g`` periods before the last one: after the last deletion
    the run is those and its latest entries."""
    total, gp = match + len(new), g * period
    if not g or total < 2 * gp:
        out += new
        return total
    run = out[len(out) - period - match :] + list(new)
    match = gp + (total - 2 * gp) % gp
    del out[len(out) - period - (total - len(new)) :]
    out += run[:gp] + run[len(run) - (period + match - gp) :]
    return match


def _numbered(rows: Sequence[Any], values: bool) -> list[int]:
    """:func:`_numbers` of the keys of ``rows`` as :func:`_ids` takes them (lists made tuples if need be)."""
    try:
        return _numbers(_rows(rows, _FIELDS[values], False))
    except TypeError:
        return _numbers(_rows(rows, _FIELDS[values], True))


def _quick(evs: Sequence[Any]) -> _Quick | None:
    """``(ends, waits, text)`` of a PE whose world collectives are all boundaries: syncs, no team's
    collective, no lock set, nothing pending but on the default context, which each one completes (or
    nothing pending). ``ends`` as :func:`_walk`'s; ``text(values)``: a character per event, the number
    of its key (as :func:`_ids` takes it). None for other PEs. Looks at each distinct key once."""
    table, ids = numbering(evs) or (evs, range(len(evs)))
    if len(table) >= 0x110000:
        return None
    try:
        numbers = _numbered(table, False)
    except (TypeError, KeyError):  # keys unhashable or of no known kind: as the walk finds them
        return None
    first = dict(zip(reversed(numbers), reversed(table)))  # key -> its first row
    worlds, waiting, pending, completing = set(), set(), False, True
    what: int | None
    arg: Any
    for k, row in first.items():
        what, arg = _step(row) or (None, None)
        if what == _WORLD:
            worlds.add(k)
            completing = completing and arg[0]
            if not arg[1]:
                return None
        elif what == _TEAM or (what == _PENDING and arg != 0) or (what == _LOCK_CALL and arg[0]):
            return None
        pending = pending or what == _PENDING
        if what == _WAIT:
            waiting.add(k)
    if pending and not completing:
        return None
    ends = list(compress(count(1), map(list(map(worlds.__contains__, numbers)).__getitem__, ids)))
    waits = bool(waiting) and any(map(list(map(waiting.__contains__, numbers)).__getitem__, ids))

    def text(values: bool) -> str:
        return "".join(map(list(map(chr, _numbered(table, True) if values else numbers)).__getitem__, ids))

    return [*ends, len(evs)], waits, text


def fold_repeats(events: dict[int, list[Any]], npes: int) -> dict[int, list[Any]]:
    """``events`` (PE -> its events: lists as the PEs send them, or their named tuples) without the
    repeated epochs the module describes; the same object when none repeats."""
    lists = [events.get(pe, []) for pe in range(npes)]
    quick = [q for q in map(_quick, lists) if q is not None]
    epochs = _by_text(quick) if lists and len(quick) == len(lists) else _by_walk(lists)
    if epochs is None or len(epochs[0]) < 2:
        return events
    usable, cuts, sid, same = epochs
    parts: Callable[[int], list[list[Any]]]
    parts = lambda t: [evs[c[t] : c[t + 1]] for evs, c in zip(lists, cuts)]  # noqa: E731
    n = len(usable) - 1
    kept = _collapse(n, sid, same, lambda block: _copies([(parts(t), usable[t + 1] - usable[t]) for t in block], npes))
    if len(kept) == n:
        return events
    return {
        pe: [*evs[: c[0]], *chain.from_iterable(evs[c[t] : c[t + 1]] for t in kept), *evs[c[-1] :]]
        for pe, (evs, c) in enumerate(zip(lists, cuts))
    }


def _by_text(quick: list[_Quick]) -> _Epochs | None:
    """``(usable, cuts, sid, same)`` of PEs all :func:`_quick` (every world collective a boundary): the
    world collectives, their ends per PE, and :func:`_collapse`'s look at the epochs, compared as texts;
    None when the PEs passed different numbers of world collectives."""
    ends = [q[0] for q in quick]
    if len(set(map(len, ends))) > 1 or len(ends[0]) < 3:  # fewer than two boundaries
        return None
    cuts: list[Sequence[int]] = [e[:-1] for e in ends]
    values = any(q[1] for q in quick)
    return (range(len(ends[0]) - 1), cuts, *_texts([q[2](values) for q in quick], cuts))


def _by_walk(lists: list[list[Any]]) -> _Epochs | None:
    """:func:`_by_text`'s answer for any PEs, from :func:`_walk`; None when no epoch may fold."""
    ends, clean, counts, waits = zip(*map(_walk, lists)) if lists else ((),) * 4  # each per PE
    if len(set(map(len, ends))) > 1 or not _balanced([c[-1] for c in counts]):
        return None  # a PE stopped early or inside a collective: the simulation forces them through
    usable = [m for m, (ok, c) in enumerate(zip(map(all, zip(*clean)), zip(*counts))) if ok and _balanced(c)]
    if len(usable) < 2:
        return None
    cuts = list(map(itemgetter(*usable), ends))  # per PE: epoch t is its events cuts[pe][t]:cuts[pe][t + 1]
    ids = _ids(lists, cuts, any(waits))
    return usable, cuts, ids.__getitem__, lambda a, b, k: ids[a : a + k] == ids[b : b + k]


def _texts(texts: list[str], cuts: list[Sequence[int]]) -> tuple[Callable[[int], int], _Same]:
    """``(sid, same)`` of :func:`_collapse` for epochs cut from each PE's ``texts`` at ``cuts``, the
    ends of its world collectives (:func:`_quick`): where two stretches of text match, so do their cuts."""
    seen: dict[tuple[str, ...], int] = {}

    def sid(t: int) -> int:
        return seen.setdefault(tuple(s[c[t] : c[t + 1]] for s, c in zip(texts, cuts)), len(seen))

    def same(a: int, b: int, k: int) -> bool:
        return all(s[c[a] : c[a + k]] == s[c[b] : c[b + k]] for s, c in zip(texts, cuts))

    return sid, same
