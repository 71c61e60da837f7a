"""A race as a space-time diagram, in data (client side; pure Python over the analysis's events).

:func:`picture` turns a :class:`~.happens_before.Race` into a :class:`Picture`: one lane per PE
involved (the two accessing PEs and the PE whose memory it is), the program's order along the lanes
(the order the analysis simulated the events in, which respects happens-before; not wall time), the
two conflicting accesses (:class:`Mark`), the synchronisation around them (:class:`Sync`: a world or
team barrier across the lanes it joins; :class:`Arrow`: a write a wait was ordered after, from the
writer to the waiter) and where the fix goes (``fix_x``: right after the earlier access, before the
later one). :mod:`.race_drawing` draws it with matplotlib; tests read the data.

The window: from the last collective synchronisation before the earlier access to the first after the
later one, at most :data:`AROUND` synchronisations before the accesses (barriers and waits), :data:`AROUND`
barriers after them and :data:`BETWEEN` between them (the nearest ones).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from ..folding import pe_ranges
from .footprint import format_indices
from .model import COLLECTIVE_SYNCS

__all__ = ["Ordering", "Mark", "Sync", "Arrow", "Picture", "picture", "AROUND", "BETWEEN"]

#: synchronisations shown before the earlier access and after the later one, at most
AROUND = 2
#: synchronisations shown between the two accesses, at most (the nearest to each)
BETWEEN = 8
#: how far (events of the whole job) the window looks for the barriers around the accesses
_REACH = 4000
#: arrows drawn to one wait, at most
_WRITERS = 4


class Ordering:
    """What the analysis ordered one cell's events by, kept for its races' pictures: ``events``
    (``{pe: [event]}``, as simulated), ``order`` (``(pe, index)`` in the order simulated) and
    ``waited`` (``{(pe, index) of a wait: [(pe, index) of the writes it was ordered after]}``)."""

    def __init__(self, events: dict[int, list[Any]], order: list[tuple[int, int]], waited: dict[Any, Any]) -> None:
        self.events, self.order, self.waited = events, order, waited
        self._rank: dict[tuple[int, int], int] | None = None

    def rank(self, where: tuple[int, int]) -> int | None:
        """Where event ``(pe, index)`` is in the simulated order (None: the simulation never reached it)."""
        if self._rank is None:
            self._rank = {at: r for r, at in enumerate(self.order)}
        return self._rank.get(where)


@dataclass(frozen=True)
class Mark:
    """One of the race's two accesses: on lane ``pe`` at ``x``, the ``line`` and ``op`` its PE recorded;
    ``text`` names it as the report does (``line 3 put (write)``)."""

    pe: int
    x: int
    line: int
    op: str
    mode: str
    text: str


@dataclass(frozen=True)
class Sync:
    """A collective synchronisation (``barrier_all``, ``sync_all``, a team's sync, alloc, free; ``cell
    boundary`` between race-checked cells) at ``x`` across the lanes ``pes`` it joins."""

    op: str
    x: int
    pes: tuple[int, ...]
    line: int


@dataclass(frozen=True)
class Arrow:
    """A write (``op`` at line ``line`` on lane ``src`` at ``src_x``) that the wait ``wait`` at
    ``wait_line`` on lane ``dst`` (at ``dst_x``) is ordered after: a signal or a flag."""

    op: str
    src: int
    src_x: int
    line: int
    wait: str
    dst: int
    dst_x: int
    wait_line: int


@dataclass(frozen=True)
class Picture:
    """A race's space-time diagram: ``title`` (``a[2] on PE 1``), ``lanes`` (PEs, top to bottom),
    ``marks`` (the two accesses, the first named first), ``syncs``, ``arrows``, ``fix_x`` (the dashed
    line, between the marks), ``fix`` (what goes there: the fix's code, else that the hint says how) and
    ``width`` (x runs over ``range(width)``)."""

    title: str
    lanes: tuple[int, ...]
    marks: tuple[Mark, Mark]
    syncs: tuple[Sync, ...] = ()
    arrows: tuple[Arrow, ...] = ()
    fix_x: float = 0.0
    fix: str = ""
    width: int = 0


def _collective(e: Any) -> bool:
    return bool(e.kind == "sync" and e.op in COLLECTIVE_SYNCS)


def _same(e: Any, other: Any) -> bool:
    """Whether ``e`` may be another member's event of the collective ``other`` (the simulation ends one
    collective's members one after the other)."""
    return _collective(e) and e.op == other.op


def _fix_text(race: Any) -> str:
    fix = getattr(race, "fix", None)
    if fix is not None:
        codes = [edit.code.replace("{ctx}", "ctx") for edit in fix.edits if edit.code]
        moves = [f"line {edit.move} moved here" for edit in fix.edits if edit.move is not None]
        return "; ".join(codes + moves) or str(fix)
    return "order them here (the hint says how)"


def picture(race: Any) -> Picture:
    """The :class:`Picture` of ``race`` (a :class:`~.happens_before.Race` the analysis found; it keeps
    the events it was found in). Raises ``ValueError`` for a race made by hand, which has none."""
    kept = getattr(race, "ordering", None)
    if kept is None:
        raise ValueError(
            "this race has no recorded events to draw: draw a race that a race-checked cell or "
            "shmem-race found (result.races)"
        )
    ordering, first, second = kept
    events = ordering.events
    lanes = tuple(sorted({first[0], second[0], *(race.pes or (race.pe,))} & set(events)))
    on_lanes = set(lanes)
    ra, rb = ordering.rank(first), ordering.rank(second)
    lo, hi = min(ra, rb), max(ra, rb)
    order = ordering.order

    def event(at: tuple[int, int]) -> Any:
        return events[at[0]][at[1]]

    # the window: from the last collective before the earlier access to the first after the later one
    start = lo
    while start > 0 and lo - start < _REACH:
        start -= 1
        if order[start][0] in on_lanes and _collective(event(order[start])):
            while start > 0 and _same(event(order[start - 1]), event(order[start])):
                start -= 1  # the collective's other members
            break
    end = hi
    while end < len(order) - 1 and end - hi < _REACH:
        end += 1
        if order[end][0] in on_lanes and _collective(event(order[end])):
            while end < len(order) - 1 and _same(event(order[end + 1]), event(order[end])):
                end += 1
            break
    shown = [
        r
        for r in range(start, end + 1)
        if order[r][0] in on_lanes
        and r not in (ra, rb)
        and (_collective(event(order[r])) or event(order[r]).kind == "wait")
    ]
    before = [r for r in shown if r < lo]
    between = [r for r in shown if lo < r < hi]
    after = [r for r in shown if r > hi and _collective(event(order[r]))]  # what ends the window, not later waits
    if len(between) > BETWEEN:
        between = between[: BETWEEN // 2] + between[-(BETWEEN // 2) :]
    items = (
        _groups(before, order, event)[-AROUND:] + _groups(between, order, event) + _groups(after, order, event)[:AROUND]
    )
    items = [g for g in items if g]
    # the writes the shown waits were ordered after, on the lanes
    writers: dict[int, list[tuple[int, int]]] = {}
    for group in items:
        for r in group:
            at = order[r]
            if event(at).kind == "wait":
                found = [
                    w
                    for w in ordering.waited.get(at) or ()
                    if w[0] in on_lanes and w[0] != at[0] and ordering.rank(w) is not None
                ]
                writers[r] = found[:_WRITERS]
    written = {ordering.rank(w) for ws in writers.values() for w in ws} - {r for g in items for r in g}
    # x along the lanes: the simulated order; a collective's members share one x; the fix after the earlier mark
    keys = sorted([(g[0], "sync", tuple(g)) for g in items] + [(r, "write", (r,)) for r in written])
    keys += [(ra, "a", (ra,)), (rb, "b", (rb,))]
    keys.sort(key=lambda k: (k[0], k[1] == "b"))
    edges = [
        ((w_rank, "write"), (next(g[0] for g in items if r in g), "sync"))
        for r, ws in writers.items()
        for w_rank in (ordering.rank(w) for w in ws)
    ]
    edges.append(((ra, "a"), (rb, "b")))  # the first-named access left of the other: the fix goes between
    x_of = _layout(keys, edges, lambda r: order[r][0])
    ranks = {what: r for r, what, _ in keys if what in ("a", "b")}
    # the two accesses, named as the race names them
    accesses = race.accesses
    marks = []
    for what, at, access in (("a", first, accesses[0]), ("b", second, accesses[1])):
        text = str(access).split(" ", 2)[2]  # "PE 0 line 3 put (write)" without its PEs
        recorded = event(at)  # its line as the PE recorded it (the race's line, which the tests check)
        marks.append(Mark(at[0], x_of[(what, ranks[what])], recorded.line, recorded.op, access.mode, text))
    syncs, arrows = [], []
    for r, what, members in keys:
        if what != "sync":
            continue
        e = event(order[r])
        if _collective(e):
            op = "cell boundary" if e.line == 0 and e.op == "sync_all" else e.op  # what .carry puts between cells
            syncs.append(Sync(op, x_of[(what, r)], tuple(sorted(order[m][0] for m in members)), e.line))
    for r, ws in writers.items():
        at = order[r]
        wait = event(at)
        group_x = next(x_of[("sync", g[0])] for g in items if r in g)
        for w in ws:
            rw = ordering.rank(w)
            src_x = x_of.get(("write", rw))
            if src_x is None:  # the write is a shown collective (never: a collective writes no flag)
                continue
            e = event(w)
            arrows.append(Arrow(e.op, w[0], src_x, e.line, wait.op, at[0], group_x, wait.line))
    earlier = min(marks, key=lambda m: m.x)
    title = f"{race.array}{format_indices(race.indices, race.shape)} on PE {pe_ranges(race.pes or (race.pe,))}"
    return Picture(
        title=title,
        lanes=lanes,
        marks=(marks[0], marks[1]),
        syncs=tuple(syncs),
        arrows=tuple(arrows),
        fix_x=earlier.x + 1.0,
        fix=_fix_text(race),
        width=max(x_of.values()) + 1,
    )


def _layout(keys: list[Any], edges: list[Any], lane: Any) -> dict[tuple[str, int], int]:
    """``{(what, rank): x}``: the longest path to each item over its lanes' program order (``keys`` in
    simulated order, ``(rank, what, members)``; ``lane(rank)`` the PE of a member) and ``edges``
    (``((rank, what), (rank, what))``: a write before the wait ordered after it, the first mark before
    the second); even x, so that ``x + 1`` is free. The simulated order where the edges would make a cycle."""
    node = {(what, r): i for i, (r, what, _) in enumerate(keys)}
    after: list[set[int]] = [set() for _ in keys]
    last: dict[int, int] = {}
    for i, (_, _, members) in enumerate(keys):  # keys are in simulated order: a lane's items in program order
        for m in members:
            pe = lane(m)
            if pe in last and last[pe] != i:
                after[last[pe]].add(i)
            last[pe] = i
    for (ra, wa), (rb, wb) in edges:
        if (wa, ra) in node and (wb, rb) in node and node[(wa, ra)] != node[(wb, rb)]:
            after[node[(wa, ra)]].add(node[(wb, rb)])
    needs = [0] * len(keys)
    for targets in after:
        for j in targets:
            needs[j] += 1
    ready = [i for i, n in enumerate(needs) if not n]
    level = [0] * len(keys)
    done = 0
    while ready:
        i = ready.pop()
        done += 1
        for j in after[i]:
            level[j] = max(level[j], level[i] + 1)
            needs[j] -= 1
            if not needs[j]:
                ready.append(j)
    if done < len(keys):  # a cycle (not expected: the edges are happens-before's): the simulated order
        level = list(range(len(keys)))
    return {(what, r): 2 * level[i] for i, (r, what, _) in enumerate(keys)}


def _groups(ranks: list[int], order: list[tuple[int, int]], event: Any) -> list[list[int]]:
    """The shown ranks grouped: the members of one collective (consecutive in the order, nothing else
    between them) together, every other event alone."""
    groups: list[list[int]] = []
    for r in ranks:
        e = event(order[r])
        last = groups[-1] if groups else None
        if (
            last is not None
            and _collective(e)
            and _collective(event(order[last[0]]))
            and event(order[last[0]]).op == e.op
            and order[r][0] not in {order[m][0] for m in last}
            and all(_collective(event(order[m])) and event(order[m]).op == e.op for m in range(last[-1] + 1, r))
        ):
            last.append(r)
        else:
            groups.append([r])
    return groups
