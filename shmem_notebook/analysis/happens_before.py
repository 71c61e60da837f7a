"""Races in one cell, found by happens-before over what the PEs recorded (client side).

:func:`find_races` takes each PE's trace (the plain data of
:func:`shmem_notebook.engine.record.race_stop`, events as in
:data:`shmem_notebook.operations.EVENT_FIELDS`) and never looks at the values the cell computed:
two accesses race when they touch the same bytes of one PE's memory, at least one writes, they are
not both atomics of one datatype through contexts of one team (:mod:`.domains`), no lock covers
both, and neither happens before the other. The order comes from vector clocks over the
OpenSHMEM 1.5 memory model as :mod:`.model` states it (completion, collective synchronisation,
collectives' destinations, fence, the writes a wait's condition requires, locks);
:class:`_Simulation` applies it to the events.

Near-linear in the events: the accesses are checked in the order the simulation started
them, against a shadow of each memory segment that keeps, per kind of access (PE, line, op,
mode...), only the latest one not ordered before a later access of the same kind.

Across cells (:func:`analyse` with a :class:`~.carry.Carry`): the operations a cell left
incomplete start the next cell's trace, followed by the cell boundary (a ``sync_all`` of
every PE: it orders everything, completes nothing). A capped trace is checked up to where
every PE's trace is complete (:mod:`.partial`).

Pure Python over plain data: testable without OpenSHMEM.

Longer than 400 lines: the simulation, the accesses it yields and their folding into
reports are one algorithm over one set of events; the hints are in :mod:`.hints`.
"""

from __future__ import annotations

import bisect
import gc
from collections import defaultdict
from dataclasses import dataclass, field
from itertools import accumulate
from typing import TYPE_CHECKING, Any, Literal

from ..distinct import prepended
from ..folding import pe_ranges
from ..operations import CALLS, SIGNAL_EVENTS, event
from . import domains, model
from .footprint import flat_ranges, format_indices, overlap, progressions
from .hints import advice as _advice
from .race_picture import Ordering
from .repeats import fold_repeats

__all__ = ["Access", "Race", "Analysis", "find_races", "analyse", "format_indices"]

if TYPE_CHECKING:
    from collections.abc import Callable, Collection, Mapping, Sequence
    from typing import TypeAlias

    from .carry import Carry
    from .edits import Fix
    from .footprint import Footprint
    from .model import Event, Required
    from .partial import Checked
    from .race_picture import Picture

    _Key: TypeAlias = tuple[int, int]
    _End: TypeAlias = tuple[int, int]
    _Team: TypeAlias = tuple[tuple[int, ...] | None, int]
    _Pair: TypeAlias = tuple["_Access", "_Access", int, int, list[tuple[int, int]]]
    _Wait: TypeAlias = tuple[list[_Key], Collection[_Key]] | Literal[False] | None

_COLLECTIVE_SYNCS, _COMPLETING, _READS, _PUT_SIGNALS = (
    model.COLLECTIVE_SYNCS,
    model.COMPLETING,
    model.READS,
    model.PUT_SIGNALS,
)
_done_on_return = model.done_on_return


@dataclass(frozen=True)
class Access:
    """One side of a race: PE ``pe`` (all of ``pes`` when folded) at cell ``line`` did ``op``.

    ``mode`` is ``"read"``, ``"write"`` or ``"atomic"``; ``cell`` names the cell (``"In [4]"``)
    when the race spans two cells, else None; ``place`` names a line outside the cell
    (``"In [3] line 4"``, ``"kernels.py:12"``: see :mod:`.places`), else None.

    An access made inside a function the cell called from its top level has ``line`` that call's
    line (where a fix goes) and its own place in ``own_file`` (the module's path; None: this cell)
    and ``own_line`` (a line of that file, or of this cell), in function ``function``
    (``"smooth"``, ``"Ring.send"``; None when not found): ``mykernels.py:7 (smooth), called at line 26``.
    """

    pe: int
    line: int
    op: str
    mode: str
    pes: tuple[int, ...] = ()
    cell: str | None = None
    place: str | None = None
    own_line: int | None = None
    own_file: str | None = None
    function: str | None = None

    def __str__(self) -> str:
        if self.own_line is not None:
            own = self.place or f"line {self.own_line}"
            where = f"{own}{f' ({self.function})' if self.function else ''}, called at line {self.line}"
        else:
            where = self.place or (f"{self.cell} line {self.line}" if self.cell else f"line {self.line}")
        return f"PE {pe_ranges(self.pes or (self.pe,))} {where} {self.op} ({self.mode})"


@dataclass(frozen=True)
class Race:
    """Two unordered accesses to the same memory, at least one a write.

    ``array`` is the name the cell uses for the memory, ``pe`` whose memory it is
    (``pes``: all of them, when the same race is seen on several PEs),
    ``indices`` the elements involved (a tuple of ``range``, flat in C order), ``accesses`` the two
    :class:`Access`, ``hint`` the synchronisation that would order them, ``shape`` the array's
    shape when it has several dimensions (the report names elements in it: ``board[4:7, 3]``),
    ``fix`` the hint as an edit of the cell (a :class:`~.hints.Fix`; ``None`` where it is not one);
    ``ordering`` the events it was found in and one racing pair (for :meth:`picture`; None when made by hand).
    """

    array: str
    pe: int
    indices: tuple[range, ...]
    accesses: tuple[Access, ...]
    hint: str
    pes: tuple[int, ...] = field(default=())
    shape: tuple[int, ...] = field(default=())
    fix: Fix | None = field(default=None, compare=False)
    ordering: tuple[Ordering, _Key, _Key] | None = field(default=None, compare=False, repr=False)

    def picture(self) -> Picture:
        """The race as a space-time diagram in data (lanes, marks, syncs, arrows, the fix's place):
        a :class:`~shmem_notebook.analysis.race_picture.Picture`."""
        from .race_picture import picture

        return picture(self)

    def figure(self) -> Any:
        """:meth:`picture` drawn with matplotlib: a ``Figure``."""
        from .race_drawing import draw

        return draw(self.picture())

    def show(self) -> Any:
        """Display :meth:`figure` in IPython (returns None there; elsewhere returns the Figure)."""
        from .race_drawing import show

        return show(self.picture())

    def __str__(self) -> str:
        first, second = self.accesses
        return (
            f"RACE {self.array}{format_indices(self.indices, self.shape)} on PE {pe_ranges(self.pes or (self.pe,))}: "
            f"{first} / {second} are unordered; {self.hint}"
        )


# -- the accesses ----------------------------------------------------------------------------
@dataclass
class _Access:
    owner: int  # whose memory
    space: str
    lo: int
    hi: int
    mode: str  # read / write / atomic
    writes: bool
    dtype: str
    pe: int  # who accesses
    index: int  # event index on pe
    line: int
    op: str
    point: tuple[int, ...] = ()  # vector clock where it starts
    ends: list[_End] = field(default_factory=list)  # (pe, clock): it is complete once a PE passed one of these
    locks: frozenset[int] = frozenset()
    ctx: int = 0
    remote: bool = False  # the remote side of an RMA operation
    target: int | None = None  # target PE of an RMA operation
    fp: Footprint | None = None  # the strided bytes of [lo, hi) it touches (None: all), see .footprint
    cell: str | None = None  # the earlier cell it was issued in (carried), None: this cell
    seq: int = 0  # when the simulation started it (the order accesses are checked in)
    sig: tuple[object, ...] | None = None  # kind(), once computed
    exact: bool = True  # in the check's shadow, it touches every byte of the segments it is in
    domain: str | None = None  # an atomic's atomicity domain (its context's team, see .domains): None, the world's

    def kind(self) -> tuple[object, ...]:
        """What makes two accesses interchangeable in a report: the later supersedes the earlier."""
        return (
            self.pe,
            self.line,
            self.op,
            self.mode,
            self.writes,
            self.dtype,
            self.locks,
            self.ctx,
            self.remote,
            self.target,
            self.cell,
            self.domain,
        )


class _Simulation:
    """Vector clocks for every event, completion points of the asynchronous ones."""

    events: dict[int, list[Event]]
    points: dict[int, list[tuple[int, ...]]]
    order: list[_Key]
    ends: defaultdict[_Key, list[_End]]
    locks_at: dict[_Key, frozenset[int]]
    quieted_in: dict[_Key, frozenset[int]]
    fences: defaultdict[tuple[int, int], list[int]]
    _fenced: dict[tuple[int, int, int, int], int]
    waited: dict[_Key, list[_Key]]
    stale: dict[_Key, Any]
    arrived: dict[_Key, tuple[int, ...]]
    entered: dict[_Key, tuple[int, ...]]
    _writes: dict[_Key, dict[int, list[int]]]
    _stores: set[_Key]
    _sums: dict[_Key, dict[int, list[int]]]
    _own: dict[_Key, int]
    _by_value: dict[_Key, dict[Any, list[_Key]]]
    _sets: set[_Key]
    _returns: defaultdict[int, set[int]]
    pos: list[int]
    source: str | None

    def __init__(
        self, events: Mapping[int, list[Event]], npes: int, progress: Callable[[int], object] | None = None
    ) -> None:
        self.n = npes
        self.events = {pe: events.get(pe, []) for pe in range(npes)}
        self.points = {pe: [None] * len(evs) for pe, evs in self.events.items()}  # type: ignore[list-item]  # run sets
        self.order = []  # (pe, index) in the order the simulation started them
        self.ends = defaultdict(list)  # (pe, index) -> [(pe, clock)]
        self.locks_at = {}  # (pe, index) -> locks held
        self.quieted_in = {}  # (pe, index) of an operation on a context -> locks held when its PE completed it
        self.fences = defaultdict(list)  # (pe, ctx) -> indices of fences
        self._fenced = {}  # (pe, ctx, target, waiter) -> writes before this index already given an end
        self.waited = {}  # (pe, index) of a wait -> writes it was matched to
        self.stale = {}  # (pe, index) of a wait the value before the cell satisfied -> that value
        self.arrived = {}  # (pe, index) of a collective -> the PE's clock when it entered
        self.entered = {}  # (pe, index) of a collective -> the earliest any member entered (a clock)
        self.progress = progress
        self._writes, self._stores, self._sums, self._own, self._by_value = (
            {},
            set(),
            {},
            {},
            {},
        )  # see _wait_candidates
        self._sets = set()  # waits whose word is written by sets of known values only
        self._returns = defaultdict(set)  # PE -> its writes complete when they return (fetching atomics, stores)
        self._candidates = self._wait_candidates()

    def _wait_candidates(self) -> dict[_Key, list[_Key]]:
        """For every wait: the writes that may have produced the value it saw (the fallback rule);
        for the condition's rule, the writes to its word by writer (``_writes``), their running sums
        when every one adds (``_sums``), and the waiting PE's last store to the word before the wait
        (``_own``; ``_stores`` when one of them wrote a value not recorded). Computed once per word;
        nothing without waits (only they read these)."""
        if not any(e.kind == "wait" for evs in self.events.values() for e in evs):
            return {}
        writes: defaultdict[int, list[tuple[int, int, int, int, Any, Footprint | None]]]
        writes = defaultdict(list)  # target PE -> [(lo, hi, pe, index, values, fp)], sorted by lo
        stores: defaultdict[int, list[tuple[int, int, int, bool]]]
        stores = defaultdict(list)  # PE -> [(index, lo, hi, value known)] of its stores to its symmetric memory
        for pe, evs in self.events.items():
            for i, e in enumerate(evs):
                if e.kind == "rma" and CALLS[e.op].writes:
                    if _done_on_return(e.op):
                        self._returns[pe].add(i)
                    effect = model.written(e)
                    writes[e.pe].append((e.lo, e.hi, pe, i, None if effect and effect[0] == "add" else e.values, e.fp))
                elif e.kind == "mem" and e.mode == "write" and e.space == "sym":
                    stores[pe].append((i, e.lo, e.hi, model.written(e) is not None))
                    self._returns[pe].add(i)
        starts: dict[int, list[int]]
        longest: dict[int, int]
        starts, longest = {}, {}
        for target, ws in writes.items():
            ws.sort(key=lambda w: w[0])
            starts[target] = [w[0] for w in ws]
            longest[target] = max(w[1] - w[0] for w in ws)
        words: dict[tuple[int, int, int], Any]
        found: dict[_Key, list[_Key]]
        words, found = {}, {}
        for pe, evs in self.events.items():
            for i, e in enumerate(evs):
                if e.kind != "wait":
                    continue
                lo, hi = e.lo, e.hi
                word = words.get((pe, lo, hi))
                if word is None:
                    word = words[(pe, lo, hi)] = self._word(pe, lo, hi, writes, starts, longest, stores)
                overlapping, by_value, unknown, by_writer, sums, own, sets = word
                if sets:
                    self._sets.add((pe, i))
                k = bisect.bisect_left(own, (i,)) - 1  # the PE's stores to the word before the wait
                if k >= 0:
                    if not all(known for _, known in own[: k + 1]):
                        self._stores.add((pe, i))  # the PE stored to the word itself: a value not recorded
                    self._own[(pe, i)] = own[k][0]
                self._writes[(pe, i)], self._by_value[(pe, i)] = by_writer, by_value
                if sums is not None and k < 0:
                    self._sums[(pe, i)] = sums
                matching = sorted({w for v in set(e.observed) for w in by_value.get(v, ())})
                found[(pe, i)] = matching or unknown or overlapping
        return found

    def _word(
        self,
        pe: int,
        lo: int,
        hi: int,
        writes: Mapping[int, list[tuple[int, int, int, int, Any, Footprint | None]]],
        starts: Mapping[int, list[int]],
        longest: Mapping[int, int],
        stores: Mapping[int, list[tuple[int, int, int, bool]]],
    ) -> tuple[
        list[_Key],
        dict[Any, list[_Key]],
        list[_Key],
        dict[int, list[int]],
        dict[int, list[int]] | None,
        list[tuple[int, bool]],
        bool,
    ]:
        """The writes to PE ``pe``'s bytes ``[lo, hi)`` a wait may read: all of them, by value written,
        those of no known value, by writer, the increments' running sums (None unless all add), the
        PE's own stores to them (``(index, value known)``), whether all set values known."""
        ws = writes.get(pe, ())
        if ws:  # writes starting in [lo - longest, hi) are the only ones that may overlap
            first = bisect.bisect_left(starts[pe], lo - longest[pe])
            ws = ws[first : bisect.bisect_left(starts[pe], hi)]
        found = sorted(
            (w[2], w[3], w[4])
            for w in ws
            if w[0] < hi and lo < w[1] and (w[5] is None or overlap((w[0], w[1], w[5]), (lo, hi, None)))
        )
        overlapping = [(q, j) for q, j, _ in found]
        by_value: defaultdict[Any, list[_Key]]
        unknown: list[_Key]
        by_writer: defaultdict[int, list[int]]
        by_value, unknown, by_writer = defaultdict(list), [], defaultdict(list)
        for q, j, values in found:
            for v in values or ():
                by_value[v].append((q, j))
            if not values:
                unknown.append((q, j))
            by_writer[q].append(j)
        effects = [model.written(self.events[q][j]) for q, j in overlapping]
        sums: dict[int, list[int]] | None = None
        if all(x is not None and x[0] == "add" for x in effects):
            steps: defaultdict[int, list[int]] = defaultdict(list)
            for (q, _), x in zip(overlapping, effects):
                steps[q].append(x[1])  # type: ignore[index]  # every one adds
            sums = {q: list(accumulate(xs, initial=0)) for q, xs in steps.items()}
        own = [(j, known) for j, slo, shi, known in stores.get(pe, ()) if slo < hi and lo < shi]
        sets = all(x is not None and x[0] == "set" for x in effects)
        return overlapping, dict(by_value), unknown, dict(by_writer), sums, own, sets

    def rerun(self, events: Mapping[int, list[Event]]) -> _Simulation:
        """``events`` (these PEs', edited by a fix: :mod:`.fixcheck`) simulated as this run was."""
        return _Simulation(events, self.n).run()

    def racing(self) -> list[_Pair]:
        """The racing pairs of this simulation's accesses, as :func:`find_races` finds them."""
        return _check(self, _accesses(self))

    def run(self) -> _Simulation:
        n = self.n
        clock: list[list[int]] = [[0] * n for _ in range(n)]
        pos = self.pos = [0] * n
        ncoll: defaultdict[tuple[int, tuple[int, ...] | None], int]
        ncoll = defaultdict(int)  # (pe, team) -> collectives of that team passed
        arrivals: defaultdict[_Team, dict[int, int]] = defaultdict(dict)  # (team, number) -> {pe: index}
        pending: dict[int, list[tuple[int, int]]] = {pe: [] for pe in range(n)}  # issued, not complete: (index, ctx)
        held: dict[int, set[int]] = {pe: set() for pe in range(n)}
        relaxed: set[_Key] = set()  # waits whose unmatched candidates were dropped
        done: set[_Key] = set()

        def tick(pe: int, index: int) -> None:
            clock[pe][pe] += 1
            self.points[pe][index] = tuple(clock[pe])
            self.order.append((pe, index))
            self.locks_at[(pe, index)] = frozenset(held[pe])

        def complete(pe: int, ctx: int, at: int) -> None:
            keep: list[tuple[int, int]] = []
            for index, c in pending[pe]:
                if c == ctx:
                    self.ends[(pe, index)].append((pe, at))
                    if ctx != 0:  # a context's quiet inside a lock completes it inside (clear_lock: ctx 0 only)
                        self.quieted_in[(pe, index)] = frozenset(held[pe])
                else:
                    keep.append((index, c))
            pending[pe] = keep

        def finish(k: _Team) -> None:
            """Every PE that arrived at collective ``k`` (team, number) leaves it."""
            clocks = [clock[q] for q in arrivals[k]]  # each position's latest, then earliest arrival
            joined = list(map(max, *clocks)) if len(clocks) > 1 else list(clocks[0])
            starts = [self.arrived[(q, index)] for q, index in arrivals[k].items()]
            entered = tuple(map(min, *starts)) if len(starts) > 1 else tuple(starts[0])
            for q, index in arrivals.pop(k).items():
                self.entered[(q, index)] = entered
                clock[q] = list(joined)
                tick(q, index)
                pos[q] += 1
                ncoll[(q, k[0])] += 1
                done.add((q, index))

        def step(pe: int) -> bool:
            """Process PE ``pe``'s next event if it can; True if it did."""
            i = pos[pe]
            e = self.events[pe][i]
            kind, op = e.kind, e.op
            if kind == "coll" or (kind == "sync" and op in _COLLECTIVE_SYNCS):
                team = tuple(e.members) if e.members else None
                members = team or tuple(range(n))
                k = (team, ncoll[(pe, team)])
                arrived = arrivals[k]
                if pe not in arrived:
                    clock[pe][pe] += 1
                    arrived[pe] = i
                    self.arrived[(pe, i)] = tuple(clock[pe])
                    if kind == "sync" and op in _COMPLETING:
                        complete(pe, 0, clock[pe][pe])
                for q in members:
                    if q not in arrived and pos[q] < len(self.events[q]):
                        return False
                finish(k)
                return True
            if kind == "wait":
                required = self._required(pe, i, e, clock[pe], (pe, i) in relaxed, done)
                if required is False:
                    return False
                if required is None:  # the condition does not tell: the writes it saw, else every write
                    cands = self._candidates[(pe, i)]
                    if (pe, i) in relaxed:
                        cands = [c for c in cands if c in done]
                    if any(c not in done for c in cands):
                        return False
                    delivered: Collection[_Key] = cands
                else:
                    cands, delivered = required
                for q, j in cands:
                    point = self.points[q][j]
                    clock[pe] = [max(a, b) for a, b in zip(clock[pe], point)]
                tick(pe, i)
                self.waited[(pe, i)] = cands
                at = clock[pe][pe]
                for q, j in cands:
                    landed = (q, j) in delivered
                    if landed:
                        self.ends[(q, j)].append((pe, at))
                    self._fenced_before(q, j, (pe, at), landed)
            else:
                tick(pe, i)
                if kind == "rma":
                    if not _done_on_return(op):
                        pending[pe].append((i, e.ctx))
                elif kind == "sync":
                    if op == "quiet" or op == "ctx_destroy":
                        complete(pe, e.ctx, clock[pe][pe])
                    elif op == "fence":
                        self.fences[(pe, e.ctx)].append(i)
                elif kind == "lock":
                    if op == "set_lock":
                        held[pe].add(e.lock)
                    else:
                        complete(pe, 0, clock[pe][pe])
                        held[pe].discard(e.lock)
            pos[pe] += 1
            done.add((pe, i))
            return True

        report = self.progress or (lambda done: None)
        while True:
            progress = False
            for pe in range(n):
                while pos[pe] < len(self.events[pe]) and step(pe):
                    progress = True
                    if not len(self.order) & 0x3FFF:
                        report(len(self.order))
            if all(pos[pe] >= len(self.events[pe]) for pe in range(n)):
                break
            if progress:
                continue
            # stuck: waits on writes that come later (or never) give up those candidates first,
            # then a collective some PE never reaches goes ahead without it
            stuck = [(pe, pos[pe]) for pe in range(n) if pos[pe] < len(self.events[pe])]
            waits = [s for s in stuck if self.events[s[0]][s[1]].kind == "wait" and s not in relaxed]
            if waits:  # first those whose condition the writes so far can satisfy (the others' may be later)
                ready = [s for s in waits if self._required(*s, self.events[s[0]][s[1]], clock[s[0]], True, done)]
                relaxed.update(ready or waits)
                continue
            started = [k for k in arrivals if arrivals[k]]
            if not started:
                break
            finish(min(started, key=lambda k: k[1]))
        return self

    def _required(self, pe: int, i: int, e: Event, now: Sequence[int], relaxed: bool, done: Collection[_Key]) -> _Wait:
        """The writes wait ``(pe, i)`` must come after, by its condition (see :func:`.model.requirement`):
        ``(edges, delivered)``; False while writes it may need are still to come; None when the
        condition cannot tell (the caller matches the values the wait saw).

        Each writer's writes to the word are done in program order (a prefix); those up to its last
        one complete before the wait have landed (they and the PE's own last store give the flag's
        value), the others may land before the wait. A single writer's writes not done yet come
        after its done ones: the rule takes them all and waits only for the one it requires. With
        several writers the wait waits until every write is done, or the simulation is stuck."""
        cond = model.condition(e)
        if cond is None or (pe, i) in self._stores:
            return None
        writes, sums, own = self._writes.get((pe, i), {}), self._sums.get((pe, i)), self._own.get((pe, i))
        last: dict[int, int]
        pending: list[_Key]
        later: list[_Key]
        last, added, pending, later = {}, 0, [], []  # last landed per writer; done, not landed; not done
        for q, js in writes.items():
            ndone = bisect.bisect_left(js, self.pos[q])
            k, ends, returns = ndone - 1, self.ends, self._returns
            while k >= 0 and not (
                (js[k] in returns.get(q, ()) or (q, js[k]) in ends) and self._complete_before(q, js[k], now)
            ):
                k -= 1  # only writes with an end (or complete on return) can have landed
            if k >= 0:
                last[q] = js[k]
                added += sums[q][k + 1] if sums else 0
            pending += [(q, j) for j in js[k + 1 : ndone]]
            later += [(q, j) for j in js[ndone:]]
        if own is not None:  # the PE's own store to the word, before the wait
            last[pe] = max(last.get(pe, own), own)
        if not last:
            base = e.before
        elif sums:  # a counter: its old value and the increments landed
            base = None if e.before is None else e.before + added
        else:
            base = self._latest(last)
        if base is None:
            return None
        cmp, value = cond
        if model.holds(cmp, base, value):
            if not last and writes:
                self.stale[(pe, i)] = base
            return [], ()
        if later and len(writes) == 1 and not relaxed:  # one writer: a counter's later increments may be
            # the ones needed (program order says which); a flag's value comes from a write done already
            required = (
                self._one_writer(pe, i, cmp, value, base, pending + later if sums else pending, sums)
                if sums or pending
                else None
            )
            if not required or not required[0] or any(j >= self.pos[q] for q, j in required[0]):
                return False  # what it needs is not written yet
            return sorted(set(required[0]) | required[1]), required[1]
        if later and not relaxed:
            return False  # another writer's writes may be needed: wait until they are in, or all are stuck
        required = model.requirement(cmp, value, base, [(q, j, self.events[q][j]) for q, j in pending])
        if required is None:
            return None
        edges, delivered = required
        return sorted(set(edges) | delivered), delivered

    def _one_writer(
        self, pe: int, i: int, cmp: str, value: Any, base: Any, writes: list[_Key], sums: dict[int, list[int]] | None
    ) -> Required | None:
        """:func:`.model.requirement` for ``writes``, of one writer, in program order (all of its writes
        from the first not landed on), without going through them all where an index says: a flag set
        to the value an ``==`` waits for, a counter of equal increments."""
        q = writes[0][0]
        if cmp == "==" and sums is None and (pe, i) in self._sets:
            satisfying = [w for w in self._by_value[(pe, i)].get(value, ()) if writes[0] <= w <= writes[-1]]
            if satisfying:
                return [satisfying[0]], {satisfying[0]} if len(satisfying) == 1 else set()
        if sums is not None and cmp in (">=", ">", "=="):
            k = len(sums[q]) - 1 - len(writes)  # increments landed before these
            steps = {b - a for a, b in zip(sums[q][k:], sums[q][k + 1 :])}
            if len(steps) == 1:
                step = steps.pop()
                count = -(-model.increments_needed(cmp, value, base) // step)  # type: ignore[operator]  # >=, >, ==
                if not 0 < count <= len(writes):
                    return None
                return [writes[count - 1]], set(writes) if count == len(writes) else set()
        return model.requirement(cmp, value, base, [(w[0], w[1], self.events[w[0]][w[1]]) for w in writes])

    def _latest(self, last: dict[int, int]) -> Any:
        """The value of the write of ``last`` (writer -> its last landed write) that landed after
        all the others, if it is a set; None when that is not known."""
        latest = [
            (q, j)
            for q, j in last.items()
            if all(r == q or self._complete_before(r, k, self.points[q][j]) for r, k in last.items())
        ]
        if len(latest) != 1:
            return None
        found = model.written(self.events[latest[0][0]][latest[0][1]])
        return found[1] if found is not None and found[0] == "set" else None

    def _complete_before(self, q: int, j: int, now: Sequence[int]) -> bool:
        """Is write ``(q, j)`` complete before a PE whose clock is ``now``?"""
        if self.events[q][j].kind == "mem" or _done_on_return(self.events[q][j].op):
            return self.points[q][j][q] <= now[q]
        return any(now[r] >= at for r, at in self.ends.get((q, j), ()))

    def _fenced_before(self, pe: int, index: int, end: tuple[int, int], landed: bool = True) -> None:
        """Writes of ``pe`` before a fence that precedes its write ``index`` (same ctx and
        target PE) are delivered by the time that write is seen: give them the same end. So is
        the data of a put_signal whose signal word ``index`` is.

        A waiter's ends only grow later, so writes already given one by that waiter are skipped."""
        e = self.events[pe][index]
        if landed and e.op in SIGNAL_EVENTS and index:
            data = self.events[pe][index - 1]
            if data.op in _PUT_SIGNALS and data.line == e.line and data.pe == e.pe and data.ctx == e.ctx:
                self.ends[(pe, index - 1)].append(end)
        fences = self.fences.get((pe, e.ctx), [])
        k = bisect.bisect_left(fences, index)
        if not k:
            return
        last = fences[k - 1]
        key = (pe, e.ctx, e.pe, end[0])
        start = self._fenced.get(key, 0)
        evs = self.events[pe]
        for j in range(start, last):
            w = evs[j]
            if w.kind == "rma" and w.pe == e.pe and w.ctx == e.ctx and w.op not in _READS:
                self.ends[(pe, j)].append(end)
        self._fenced[key] = max(start, last)


def _rma_mode(op: str) -> tuple[bool, bool, str, bool, str]:
    """(nbi, done on return, mode, writes the remote side, the local side's mode) of an RMA or atomic op."""
    atomic = CALLS[op].kind == "amo"
    if atomic:
        mode, writes = "atomic", CALLS[op].writes
    elif op in _READS:
        mode, writes = "read", False
    else:
        mode, writes = "write", True
    lmode = "write" if op in _READS or atomic else "read"  # a non-blocking atomic's fetch
    return CALLS[op].nbi, _done_on_return(op), mode, writes, lmode


_RMA_MODES = {name: _rma_mode(name) for name, op in CALLS.items() if op.kind in ("rma", "amo")}


def _accesses(sim: _Simulation, labels: Mapping[_Key, str | None] | None = None) -> list[_Access]:
    """Every access the events make, in the order the simulation started them."""
    found: list[_Access] = []
    labels = labels or {}
    for seq, (pe, i) in enumerate(sim.order):
        e = sim.events[pe][i]
        first = len(found)
        point = sim.points[pe][i]
        here = [(pe, point[pe])]
        locks = sim.locks_at.get((pe, i), frozenset())
        kind = e.kind
        if kind == "mem":  # a space that is a PE's number: that PE's symmetric memory (a shmem.ptr view)
            owner, space = (e.space, "sym") if type(e.space) is int else (pe, e.space)
            found.append(
                _Access(
                    owner,
                    space,
                    e.lo,
                    e.hi,
                    e.mode,
                    e.mode == "write",
                    e.dtype,
                    pe,
                    i,
                    e.line,
                    e.op,
                    point,
                    here,
                    locks,
                    fp=e.fp,
                )
            )
        elif kind == "rma":
            op, target, ctx = e.op, e.pe, e.ctx
            asynchronous, returned, mode, writes, lmode = _RMA_MODES[op]
            ends = here if returned else sim.ends[(pe, i)]
            held = locks if (ctx == 0 or ends is here) else locks & sim.quieted_in.get((pe, i), frozenset())
            found.append(
                _Access(
                    target,
                    "sym",
                    e.lo,
                    e.hi,
                    mode,
                    writes,
                    e.dtype,
                    pe,
                    i,
                    e.line,
                    op,
                    point,
                    ends,
                    held,
                    ctx,
                    remote=True,
                    target=target,
                    fp=e.fp,
                    domain=e.domain,
                )
            )
            if e.lspace is not None:
                local_ends = sim.ends[(pe, i)] if asynchronous else here
                # a local buffer that is a shmem.ptr view: the viewed PE's symmetric memory, as for a load
                lowner, lspace = (e.lspace, "sym") if type(e.lspace) is int else (pe, e.lspace)
                found.append(
                    _Access(
                        lowner,
                        lspace,
                        e.llo,
                        e.lhi,
                        lmode,
                        lmode == "write",
                        e.dtype,
                        pe,
                        i,
                        e.line,
                        op,
                        point,
                        local_ends,
                        locks if not asynchronous or ctx == 0 else locks & sim.quieted_in.get((pe, i), frozenset()),
                        ctx,
                        fp=e.lfp,
                    )
                )
        elif kind == "coll":
            op, root = e.op, e.root
            start = sim.entered.get((pe, i), point)  # the dest may be written once any member entered
            found.append(
                _Access(pe, e.tspace, e.tlo, e.thi, "write", True, e.dtype, pe, i, e.line, op, start, here, locks)
            )
            if op != "broadcast" or root == pe:
                found.append(
                    _Access(pe, e.sspace, e.slo, e.shi, "read", False, e.dtype, pe, i, e.line, op, point, here, locks)
                )
        cell = labels.get((pe, i)) if labels else None
        for k in range(first, len(found)):
            acc = found[k]
            acc.seq, acc.cell = seq, cell
    return found


def _before(a: _Access, b: _Access, sim: _Simulation) -> bool:
    """Does ``a`` happen before (complete before) ``b`` starts?"""
    for pe, at in a.ends:
        if b.point[pe] >= at:
            return True
    if a.pe == b.pe and a.remote and b.remote and a.index < b.index and a.target == b.target and a.ctx == b.ctx:
        if a.op not in _READS and a.writes and b.writes:  # fence orders puts and atomics to one PE, not gets
            return any(a.index < f < b.index for f in sim.fences.get((a.pe, a.ctx), []))
    return False


def _conflict(a: _Access, b: _Access) -> bool:
    if not (a.writes or b.writes):
        return False
    if a.mode == "atomic" and b.mode == "atomic":  # atomic with respect to each other: one datatype, one domain
        return a.dtype != b.dtype or domains.differ(a, b)
    return True


def _name_for(
    owner: int, space: str, lo: int, hi: int, traces: Mapping[int, dict[str, Any]]
) -> tuple[str, int, int, Any]:
    """(name, start, itemsize, layout) of the best-named memory holding ``[lo, hi)``; ``layout``:
    ``(origin, shape, strides)`` of an N-D or strided array, else None."""
    sources = [owner] if space == "priv" else [owner, *sorted(traces)]
    best: tuple[tuple[Any, int], str, int, int, Any] | None = None
    for pe in sources:
        for entry in traces.get(pe, {}).get("names", []):
            name, nspace, nlo, nhi, itemsize, priority = entry[:6]
            if nspace == space and nlo <= lo and hi <= nhi:
                key = (priority, -(nhi - nlo))
                if best is None or key < best[0]:
                    best = (key, name, nlo, itemsize, entry[6] if len(entry) > 6 else None)
        if best is not None:
            break
    if best is None:
        return ("symmetric memory" if space == "sym" else "a private buffer"), lo, 1, None
    return best[1:]


#: a segment's shadow keeps at most this many unordered accesses of one kind (the oldest and the latest)
_SAME = 4
#: a strided access of at most this many blocks is placed on its blocks, a longer one on its hull
_BLOCKS = 4096


def _pieces(acc: _Access) -> tuple[tuple[tuple[int, int], ...], bool]:
    """``(ranges, exact)``: where ``acc`` goes in the shadow, and whether it touches all of it."""
    if acc.fp is None:
        return ((acc.lo, acc.hi),), True
    count = 1
    for n, _ in acc.fp[1]:
        count *= n
    if count > _BLOCKS:
        return ((acc.lo, acc.hi),), False
    return tuple(overlap((acc.lo, acc.hi, acc.fp), (acc.lo, acc.hi, None))), True


def _check(sim: _Simulation, accesses: list[_Access], progress: Callable[[int], object] | None = None) -> list[_Pair]:
    """The unordered conflicting pairs ``(a, b, lo, hi, blocks)``, ``a`` started first; ``accesses`` in start order.

    Each (owner, space) is cut into segments at the bounds of every access's blocks; a segment
    keeps the accesses a later one may race with: a new access drops those of its own
    :meth:`_Access.kind` ordered before it where it touches every byte (whatever races them races
    it, with the same lines and ops). Unordered ones of one kind (a loop of puts to one element,
    no quiet) race each other, which is reported; only the oldest and the latest of them
    (:data:`_SAME` in all) are kept, so a later access is checked against those (it could only
    miss a race that a wait matched to a later put of the same line ordered for that put and not
    for the earlier ones)."""
    bounds: defaultdict[tuple[int, str], set[int]]
    placed: list[tuple[tuple[int, int], ...] | None]
    pieces: tuple[tuple[int, int], ...] | None
    bounds, placed = defaultdict(set), []
    for acc in accesses:
        if acc.hi <= acc.lo:
            placed.append(None)
        elif acc.fp is None:
            placed.append(None)
            bounds[(acc.owner, acc.space)].update((acc.lo, acc.hi))
        else:
            pieces, acc.exact = _pieces(acc)
            placed.append(pieces)
            bounds[(acc.owner, acc.space)].update(x for piece in pieces for x in piece)
    edges = {key: sorted(bs) for key, bs in bounds.items()}
    segment = {key: {b: i for i, b in enumerate(es)} for key, es in edges.items()}
    shadows: defaultdict[tuple[int, str], dict[int, list[_Access]]]
    shadows = defaultdict(dict)  # (owner, space) -> segment -> live accesses
    pairs: dict[tuple[object, ...], _Pair] = {}
    spans: range | list[int]
    for count, b in enumerate(accesses):
        if progress is not None and not count & 0x3FFF:
            progress(count)
        if b.hi <= b.lo:
            continue
        key = (b.owner, b.space)
        where, shadow = segment[key], shadows[key]
        kind = b.sig = b.kind()
        pieces, whole, point = placed[count], b.exact, b.point
        if pieces is None:
            spans = range(where[b.lo], where[b.hi])
        else:
            spans = [s for lo, hi in pieces for s in range(where[lo], where[hi])]
        ordered: dict[int, bool] = {}  # id(a) -> a happens before b (one answer per pair, however many segments)
        shared: dict[int, tuple[_Access, list[int]]]
        shared = {}  # id(a) -> (a, segments both touch all of): a racing b, both placed on their blocks
        for s in spans:
            live = shadow.get(s)
            if live is None:
                shadow[s] = [b]
                continue
            keep: list[_Access] = []
            for a in live:
                ia = id(a)
                before = ordered.get(ia)
                if before is None:
                    for pe, at in a.ends:  # _before's first test, inline: it answers most pairs
                        if point[pe] >= at:
                            before = True
                            break
                    else:
                        before = _before(a, b, sim) or _before(b, a, sim)
                    ordered[ia] = before
                    if (
                        not before
                        and (a.pe != b.pe or a.index != b.index)
                        and _conflict(a, b)
                        and not (a.locks & b.locks)
                        and not (a.cell and b.cell)
                    ):  # carried pairs: checked before
                        if (a.fp or b.fp) and whole and a.exact:
                            shared[ia] = (a, [])  # the bytes both touch: the segments they share
                        else:
                            _pair(
                                pairs,
                                a,
                                b,
                                key,
                                overlap((a.lo, a.hi, a.fp), (b.lo, b.hi, b.fp)) if (a.fp or b.fp) else None,
                            )
                if ia in shared:
                    shared[ia][1].append(s)
                if not (
                    before
                    and a.sig == kind  # b covers a's bytes here: all of them, or the same footprint
                    and (whole or (a.fp == b.fp and a.lo == b.lo and a.hi == b.hi))
                ):
                    keep.append(a)
            keep.append(b)
            if (
                whole and len(keep) > _SAME
            ):  # unordered accesses of one kind pile up (puts without a quiet): keep the latest
                same = [a for a in keep if a.sig == kind and a.exact]
                if len(same) > _SAME:  # the oldest stays too: the first of a loop names the fix for the loop
                    dropped = {id(a) for a in same[1 : 1 - _SAME]}
                    keep = [a for a in keep if id(a) not in dropped]
            shadow[s] = keep
        for a, segs in shared.values():
            blocks: list[tuple[int, int]]
            es, blocks = edges[key], []
            for s in sorted(segs):
                if blocks and blocks[-1][1] == es[s]:
                    blocks[-1] = (blocks[-1][0], es[s + 1])
                else:
                    blocks.append((es[s], es[s + 1]))
            _pair(pairs, a, b, key, blocks)
    return list(pairs.values())


def _pair(
    pairs: dict[tuple[object, ...], _Pair],
    a: _Access,
    b: _Access,
    key: tuple[int, str],
    blocks: list[tuple[int, int]] | None,
) -> None:
    """Note the race of ``a`` and ``b`` on ``blocks`` (None: their ranges' overlap; []: none at all,
    strided footprints that interleave without touching): one pair per kinds and bytes, which
    reports the same lines, ops and elements."""
    if blocks == []:
        return
    lo, hi = (blocks[0][0], blocks[-1][1]) if blocks else (max(a.lo, b.lo), min(a.hi, b.hi))
    pairs.setdefault((a.sig, b.sig, lo, hi, key, a.fp, b.fp), (a, b, lo, hi, blocks or [(lo, hi)]))


def _fold(pairs: list[_Pair], sim: _Simulation, traces: Mapping[int, dict[str, Any]], cell: str | None) -> list[Race]:
    """The :class:`Race` reports of the racing pairs: one per pair of lines, folded over PEs."""
    raw = [(a.owner, a.space, lo, hi, a, b, blocks) for a, b, lo, hi, blocks in pairs]
    raw.sort(
        key=lambda r: (not r[4].writes, not r[5].writes, r[4].seq, r[5].seq)
    )  # writes first: `+=` reports its store
    folded: dict[tuple[Any, ...], dict[str, Any]]
    seen_pairs: dict[tuple[Any, ...], tuple[Any, ...]]
    names: dict[tuple[int, str, int, int], tuple[str, int, int, Any]]
    hints: dict[tuple[object, ...], tuple[str, Fix | None]]
    folded, seen_pairs, names, hints = {}, {}, {}, {}
    for owner, space, lo, hi, a, b, blocks in raw:
        if (a.cell is None, a.line, a.pe) > (b.cell is None, b.line, b.pe):
            a, b = b, a
        if b.point[a.pe] < a.point[a.pe] and a.point[b.pe] >= b.point[b.pe]:
            a, b = b, a  # name the one issued first first, when one was
        if (owner, space, lo, hi) not in names:
            names[(owner, space, lo, hi)] = _name_for(owner, space, lo, hi, traces)
        name, start, itemsize, layout = names[(owner, space, lo, hi)]
        origin, shape, strides = layout or (start, None, None)
        across = a.cell != b.cell
        cells = (a.cell or cell, b.cell or cell) if across else (None, None)
        memo = (a.sig, b.sig, b.point[a.pe] >= a.point[a.pe])
        if memo not in hints:
            if across:
                hints[memo] = (_across_hint(a, cells), None)
            elif a.mode == b.mode == "atomic" and a.dtype == b.dtype and domains.differ(a, b):
                hints[memo] = (domains.hint(a, b), None)  # racing only as AMOs of two teams' contexts
            else:
                hints[memo] = _advice(a, b, sim)
            stale = not across and _stale_note((b, a), sim, traces)
            if stale:  # a wait that ordered nothing: the fix is resetting its flag, not another sync
                text, fix = hints[memo]  # (or counting what it waits for: a count written anew, checked)
                recount = fix is not None and all(e.replace is not None for e in fix.edits)
                hints[memo] = (f"{stale}; {text}", fix if recount else None)
        hint, fix = hints[memo]
        ats = (_own_line(a, sim), _own_line(b, sim))  # the lines in functions the call lines led to
        key = (name, a.line, a.op, a.mode, b.line, b.op, b.mode, hint, cells, ats)
        pair = (name, a.line, b.line, frozenset((a.pe, b.pe)), cells, ats)
        if pair in seen_pairs and seen_pairs[pair] != key:
            continue  # one race per pair of lines (an in-place `A[i] += 1` both loads and stores)
        seen_pairs[pair] = key
        entry = folded.setdefault(
            key,
            {"owners": set(), "a": set(), "b": set(), "indices": [], "shape": (), "fix": fix, "pair": (a, b)},
        )
        entry["owners"].add(owner)
        entry["a"].add(a.pe)
        entry["b"].add(b.pe)
        entry["indices"] += flat_ranges(blocks, origin, itemsize, shape, strides)
        if shape and len(shape) > 1:
            entry["shape"] = tuple(shape)
    races: list[Race] = []
    ordering = Ordering(sim.events, sim.order, sim.waited)  # what the races' pictures read
    for (name, aline, aop, amode, bline, bop, bmode, hint, (acell, bcell), (aat, bat)), entry in folded.items():
        apes, bpes, owners = sorted(entry["a"]), sorted(entry["b"]), sorted(entry["owners"])
        races.append(
            Race(
                array=name,
                pe=owners[0],
                indices=progressions(list(dict.fromkeys(entry["indices"]))),  # pairs of one key may repeat ranges
                accesses=(
                    Access(apes[0], aline, aop, amode, tuple(apes), acell, own_line=aat),
                    Access(bpes[0], bline, bop, bmode, tuple(bpes), bcell, own_line=bat),
                ),
                hint=hint,
                pes=tuple(owners),
                shape=entry["shape"],
                fix=entry["fix"],
                ordering=(
                    ordering,
                    (entry["pair"][0].pe, entry["pair"][0].index),
                    (entry["pair"][1].pe, entry["pair"][1].index),
                ),
            )
        )
    races.sort(key=lambda r: (r.accesses[0].cell is None, r.accesses[0].line, r.accesses[1].line, r.array))
    return races


def _own_line(x: _Access, sim: _Simulation) -> int | None:
    """The access's own line (the event's ``at``) when its line is the cell's call that led to it, else None."""
    if x.cell is not None:
        return None
    return getattr(sim.events[x.pe][x.index], "at", None)


def _stale_note(accesses: Sequence[_Access], sim: _Simulation, traces: Mapping[int, dict[str, Any]]) -> str | None:
    """Why a wait before one of ``accesses`` (on its PE) ordered nothing: the value its flag held
    before the cell already satisfied it. None when no such wait precedes them."""
    for acc in accesses:
        stale = [(i, base) for (pe, i), base in sim.stale.items() if pe == acc.pe and i < acc.index]
        if not stale:
            continue
        i, base = max(stale)
        e = sim.events[acc.pe][i]
        name, start, itemsize, _ = _name_for(acc.pe, "sym", e.lo, e.hi, traces)
        if e.op.startswith("signal"):
            flag = "the signal"
        else:
            flag = f"{name}[{(e.lo - start) // itemsize}]" if name != "symmetric memory" else "the flag"
        cmp, value = model.condition(e)  # type: ignore[misc]  # a stale wait has its condition
        if base == 0:  # nothing left over: the condition holds before any write
            return (
                f"the wait at line {e.line} was satisfied at once ({flag} was 0 and 0 {cmp} {value}), so it orders "
                f"nothing: its condition must need the write it waits for"
            )
        return (
            f"the wait at line {e.line} was satisfied by the value {flag} held before the cell ({base}), so it "
            f"orders nothing: reset {flag} first (to its starting value, then shmem.barrier_all(), before any PE "
            f"writes it)"
        )
    return None


def _across_hint(a: _Access, cells: tuple[str | None, str | None]) -> str:
    """The fix for an operation of an earlier cell still in flight when a later cell ran."""
    then, now = cells
    complete = "ctx.quiet()" if a.ctx else "shmem.quiet()"
    return (
        f"the {a.op} of {then} is not complete when {now} runs (a cell boundary completes nothing): "
        f"call {complete} at the end of {then}, or shmem.barrier_all() there"
    )


@dataclass
class Analysis:
    """What :func:`analyse` found: ``races``; ``carry``, the operations still in flight at the end
    (for the next cell); ``checked``, what a capped trace let it check (None: everything)."""

    races: list[Race]
    carry: Carry
    checked: Checked | None = None


def analyse(
    traces: dict[int, dict[str, Any]],
    npes: int,
    carry: Carry | None = None,
    cell: str | None = None,
    progress: Callable[[int, int], object] | None = None,
    source: str | None = None,
) -> Analysis:
    """The races in one cell, after the operations ``carry`` (a :class:`~.carry.Carry`) left in
    flight by earlier cells; ``cell`` labels this cell (``"In [5]"``); ``progress(done, total)``
    is called now and then; ``source``: the cell's code, to check fixes on (:mod:`.fixcheck`).
    Returns an :class:`Analysis`."""
    enabled = gc.isenabled()
    gc.disable()  # the analysis makes many small objects and frees none: collecting them is quadratic
    try:
        return _analyse(traces, npes, carry, cell, progress, source)
    finally:
        if enabled:
            gc.enable()


def _analyse(
    traces: dict[int, dict[str, Any]],
    npes: int,
    carry: Carry | None,
    cell: str | None,
    progress: Callable[[int, int], object] | None,
    source: str | None = None,
) -> Analysis:
    from .carry import Carry
    from .partial import cut

    traces, checked = cut(traces)
    events: dict[int, list[Any]]
    labels: dict[_Key, str | None]
    events, labels = {}, {}
    for pe in range(npes):
        evs = traces[pe]["events"] if pe in traces else []
        if carry and pe in traces:  # every PE crosses the boundary, whether it left operations or not
            before = carry.ops.get(pe, ())
            labels.update(((pe, i), label) for i, (_, label) in enumerate(before))
            evs = prepended([e for e, _ in before] + [["sync", "sync_all", 0, 0, None]], evs)
        events[pe] = evs
    events = fold_repeats(events, npes)  # repeated epochs between clean barriers: the same races
    events = {pe: list(map(event, evs)) for pe, evs in events.items()}
    total = 2 * sum(len(evs) for evs in events.values()) or 1
    sim = _Simulation(events, npes, progress and (lambda done: progress(done, total))).run()
    sim.source = source  # the hints check their fixes on it (.fixcheck)
    accesses = _accesses(sim, labels)
    offset = len(sim.order)
    pairs = _check(
        sim, accesses, progress and (lambda done: progress(offset + done * offset // max(len(accesses), 1), total))
    )
    races = _fold(pairs, sim, traces, cell)
    left = Carry()
    for pe, evs in events.items():
        for i, e in enumerate(evs):
            if (
                e.kind == "rma"
                and not _done_on_return(e.op)
                and sim.points[pe][i] is not None
                and not sim.ends[(pe, i)]
            ):
                raw = list(e)
                left.ops.setdefault(pe, []).append((raw, labels.get((pe, i), cell)))
    return Analysis(races, left, checked)


def find_races(traces: dict[int, dict[str, Any]], npes: int) -> list[Race]:
    """The races in one cell: ``traces`` maps PE -> the PE's recorded data. Returns a list of :class:`Race`."""
    return analyse(traces, npes).races
