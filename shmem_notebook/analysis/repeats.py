"""Repeated epochs of a race trace, folded away before :func:`~.races.analyse` simulates them.

The rule. World collectives match by count, as in :mod:`.races`. The m-th is a *boundary* when
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
"""

from math import gcd, lcm

from ..operations import CALLS, FIELD, RECORDED_AS

__all__ = ["fold_repeats"]

_SYNCS = {RECORDED_AS.get(n, n) for n, op in CALLS.items() if op.kind == "sync" and op.collective}
_COMPLETING = {n for n in _SYNCS if CALLS[n].completes}  # barrier_all, alloc, free: the default context
_V = FIELD["rma"]["values"]
_LIST = {kind: i for kind, fields in FIELD.items() if kind != "rma"  # kind -> its field that may be a list
         for name, i in fields.items() if name in ("members", "observed", "fp")}


def _walk(evs):
    """``[(index, clean, team counts or None)]`` at each world collective of one PE, and at its end."""
    pending, held, teams, found = set(), set(), {}, []
    for i, e in enumerate(evs):
        kind, op = e.kind, e.op
        if kind == "coll" or (kind == "sync" and op in _SYNCS):
            if e.members:
                teams[tuple(e.members)] = teams.get(tuple(e.members), 0) + 1
                continue
            if op in _COMPLETING:
                pending.discard(0)
            found.append((i, kind == "sync" and not pending and not held, dict(teams) if teams else None))
        elif kind == "rma":
            if not CALLS[op].fetches:  # a put, an *_nbi, a non-fetching atomic: pending on its context
                pending.add(e.ctx)
        elif kind == "sync" and op in ("quiet", "ctx_destroy"):
            pending.discard(e.ctx)
        elif kind == "lock":
            if op != "set_lock":  # clear_lock completes the default context
                pending.discard(0)
            (held.add if op == "set_lock" else held.discard)(e.lock)
    return found + [(len(evs), False, dict(teams) if teams else None)]


def _balanced(counts):
    """Has each PE of each team passed as many of its collectives (``counts``: a dict or None per PE)?"""
    count = lambda pe, team: (counts[pe] or {}).get(team, 0) if pe < len(counts) else None  # noqa: E731
    return all(len({count(q, team) for q in {*team, pe}}) == 1 for pe, c in enumerate(counts) if c for team in c)


def _frozen(x):
    return tuple(map(_frozen, x)) if type(x) is list else x


def _key(e, values):
    """A hashable form of event ``e``, its written values left out unless ``values``."""
    if e[0] == "rma":
        return e[:_V] + (_frozen(e[_V]) if values else None,) + tuple(map(_frozen, e[_V + 1:]))  # fp, lfp
    i = _LIST.get(e[0])
    return e if i is None or type(e[i]) is not list else tuple(map(_frozen, e))


def _copies(block, npes):
    """``g`` for ``block`` (per epoch: per PE its events, its world collectives); 0: keep every copy.

    :meth:`~.races._Simulation.run` visits the PEs in turn from the one that finished the last
    world collective: each kept copy must be visited as unfolded, and in every order dropped ones
    were. If PEs block at world collectives only, the last to arrive, the one before the previous
    finisher, finishes one: the order turns by a copy's collectives, back after ``g``. A wait for
    a flag the block writes with a value it saw blocks until the simulation is stuck, which
    restarts it at PE 0: copies after the first start alike. Else the order after a copy is a
    function of the one before: periodic after ``npes`` copies, its period dividing ``lcm(1..npes)``."""
    writes, waits, turn, rotates = {}, [], 0, True
    for parts, worlds in block:
        turn += worlds
        for pe, evs in enumerate(parts):
            for e in evs:
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


def _collapse(ids, copies):
    """The positions of ``ids`` (epoch signatures) kept: ``2g + 1`` consecutive copies of a block
    lose ``g`` of them, ``g = copies(block)`` (positions; 0: none)."""
    out, last, period, match, g = [], {}, 0, 0, None
    for t, sid in enumerate(ids):
        if period and ids[out[-period]] == sid:
            match += 1
        else:  # a new run: the period is the distance to the signature's last copy
            period = len(out) - last[sid] if sid in last else 0
            match, g = (1 if period else 0), None
        last[sid] = len(out)
        out.append(t)
        if period and match == 2 * period and g is None:
            g = copies(out[-period:])
        if g and match == 2 * g * period:
            del out[-(g + 1) * period:-period]
            for k in range(len(out) - period, len(out)):
                last[ids[out[k]]] = k
            match = g * period
    return out


def fold_repeats(events, npes):
    """``events`` (PE -> its events, as :func:`~.races.analyse` builds them) without the repeated
    epochs the module describes; the same object when none repeats."""
    lists = [events.get(pe, []) for pe in range(npes)]
    walks = [_walk(evs) for evs in lists]
    if len(set(map(len, walks))) > 1 or not _balanced([w[-1][2] for w in walks]):
        return events  # a PE stopped early or inside a collective: the simulation forces them through
    usable = [m for m in range(min(map(len, walks), default=0))
              if all(w[m][1] for w in walks) and _balanced([w[m][2] for w in walks])]
    cuts = [[walks[pe][m][0] + 1 for m in usable] for pe in range(npes)]  # epoch t: cuts[pe][t]:cuts[pe][t + 1]
    parts = lambda t: [lists[pe][cuts[pe][t]:cuts[pe][t + 1]] for pe in range(npes)]  # noqa: E731
    values = any(e.kind == "wait" for evs in lists for e in evs)
    keys = [[_key(e, values) if e[0] == "rma" or type(e[_LIST.get(e[0], 0)]) is list else e for e in evs] for evs in lists]
    ids, seen = [], {}
    for t in range(len(usable) - 1):
        ids.append(seen.setdefault(tuple(tuple(keys[pe][cuts[pe][t]:cuts[pe][t + 1]]) for pe in range(npes)), len(seen)))
    kept = _collapse(ids, lambda block: _copies([(parts(t), usable[t + 1] - usable[t]) for t in block], npes))
    if len(kept) == len(ids):
        return events
    return {pe: lists[pe][:cuts[pe][0]] + [e for t in kept for e in lists[pe][cuts[pe][t]:cuts[pe][t + 1]]]
            + lists[pe][cuts[pe][-1]:] for pe in range(npes)}
