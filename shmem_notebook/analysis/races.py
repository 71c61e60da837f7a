"""Races in one cell, found by happens-before over what the PEs recorded (client side).

:func:`find_races` takes each PE's trace (the plain data of
:func:`shmem_notebook.engine.record.race_stop`, events as in :data:`shmem_notebook.operations.EVENT_FIELDS`) and never looks at the values the
cell computed: two accesses race when they touch the same bytes of one PE's
memory, at least one writes, they are not both atomics of one datatype, no lock
covers both, and neither happens before the other. The order comes from vector
clocks over the OpenSHMEM 1.5 memory model:

- program order on each PE; a blocking ``get``/fetching atomic is complete when
  it returns; a blocking ``put`` reads its source before returning but writes the
  target only by the next completion point; ``*_nbi`` operations read and write
  until then; non-fetching atomics complete like puts;
- completion points: ``quiet`` (per context), ``barrier_all``, allocation and
  ``clear_lock`` (default context only), ``Ctx.destroy``;
- ``barrier_all``/``sync_all``/``Team.sync``/allocation/collectives: everything
  before any PE's call happens before everything after every PE's call
  (``sync_all`` completes nothing); collectives read their source and write their
  target on each PE within the call;
- ``wait_until``/``test``: an edge from the write that produced the awaited
  value (matched by value, else every write to the flag) to the waiter; a
  ``fence`` before that write (same context, same target PE) makes the earlier
  writes delivered too; ``fence`` also orders two writes to the same PE;
- locks: accesses inside critical sections of one lock (completed before its
  ``clear_lock``) do not race each other.

Pure Python over plain data: testable without OpenSHMEM.

Longer than 400 lines: the simulation, the accesses it yields and their folding into
reports are one algorithm over one set of events; the hints are in :mod:`.hints`.
"""

from collections import defaultdict
from dataclasses import dataclass, field

from ..folding import pe_ranges
from ..operations import CALLS, RECORDED_AS, RMA, SIGNAL_EVENTS, event
from .footprint import flat_ranges, format_indices, overlap, progressions
from .hints import advice as _advice

__all__ = ["Access", "Race", "find_races", "format_indices"]

_COLLECTIVE_SYNCS = {RECORDED_AS.get(n, n) for n, op in CALLS.items() if op.kind == "sync" and op.collective}
#: collective syncs that complete the default context's operations (barrier_all, alloc, free)
_COMPLETING = {n for n in _COLLECTIVE_SYNCS if CALLS[n].completes}
_READS = {n for n in RMA if not CALLS[n].writes}  # get, iget, get_nbi
_PUT_SIGNALS = ("put_signal", "put_signal_nbi")


def _done_on_return(op):
    """A blocking get or a fetching atomic is complete (both sides) when it returns."""
    return CALLS[op].fetches


@dataclass(frozen=True)
class Access:
    """One side of a race: PE ``pe`` (all of ``pes`` when folded) at cell ``line`` did ``op``.

    ``mode`` is ``"read"``, ``"write"`` or ``"atomic"``.
    """

    pe: int
    line: int
    op: str
    mode: str
    pes: tuple = ()

    def __str__(self):
        return f"PE {pe_ranges(self.pes or (self.pe,))} line {self.line} {self.op} ({self.mode})"


@dataclass(frozen=True)
class Race:
    """Two unordered accesses to the same memory, at least one a write.

    ``array`` is the name the cell uses for the memory, ``pe`` whose memory it is
    (``pes``: all of them, when the same race is seen on several PEs),
    ``indices`` the elements involved (a tuple of ``range``, flat in C order), ``accesses`` the two
    :class:`Access`, ``hint`` the synchronisation that would order them, ``shape`` the array's
    shape when it has several dimensions (the report names elements in it: ``board[4:7, 3]``),
    ``fix`` the hint as an edit of the cell (a :class:`~.hints.Fix`; ``None`` where it is not one).
    """

    array: str
    pe: int
    indices: tuple
    accesses: tuple
    hint: str
    pes: tuple = field(default=())
    shape: tuple = field(default=())
    fix: object = field(default=None, compare=False)

    def __str__(self):
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
    point: tuple = ()  # vector clock where it starts
    ends: list = field(default_factory=list)  # (pe, clock): it is complete once a PE passed one of these
    locks: frozenset = frozenset()
    ctx: int = 0
    remote: bool = False  # the remote side of an RMA operation
    target: int = None  # target PE of an RMA operation
    fp: tuple = None  # the strided bytes of [lo, hi) it touches (None: all), see .footprint


class _Simulation:
    """Vector clocks for every event, completion points of the asynchronous ones."""

    def __init__(self, traces, npes):
        self.n = npes
        self.events = {pe: [event(e) for e in traces[pe]["events"]] if pe in traces else [] for pe in range(npes)}
        self.points = {pe: [None] * len(evs) for pe, evs in self.events.items()}
        self.ends = defaultdict(list)  # (pe, index) -> [(pe, clock)]
        self.locks_at = {}  # (pe, index) -> locks held
        self.fences = defaultdict(list)  # (pe, ctx) -> indices of fences
        self.waited = {}  # (pe, index) of a wait -> writes it was matched to
        self._candidates = self._wait_candidates()

    def _wait_candidates(self):
        """For every wait: the writes that may have produced the value it saw."""
        writes = defaultdict(list)  # target PE -> [(pe, index, lo, hi, values)]
        for pe, evs in self.events.items():
            for i, e in enumerate(evs):
                if e.kind == "rma" and CALLS[e.op].writes:
                    writes[e.pe].append((pe, i, e.lo, e.hi, e.values, e.fp))
        found = {}
        for pe, evs in self.events.items():
            for i, e in enumerate(evs):
                if e.kind != "wait":
                    continue
                lo, hi, seen = e.lo, e.hi, set(e.observed)
                overlapping = [w for w in writes[pe] if w[2] < hi and lo < w[3]
                               and (w[5] is None or overlap((w[2], w[3], w[5]), (lo, hi, None)))]
                matching = [w for w in overlapping if w[4] and seen.intersection(w[4])]
                unknown = [w for w in overlapping if not w[4]]
                found[(pe, i)] = [(w[0], w[1]) for w in (matching or unknown or overlapping)]
        return found

    def run(self):
        n = self.n
        clock = [[0] * n for _ in range(n)]
        pos = [0] * n
        ncoll = defaultdict(int)  # (pe, team) -> collectives of that team passed
        arrivals = defaultdict(dict)  # (team, number) -> {pe: index}
        pending = {pe: [] for pe in range(n)}  # issued, not complete: (index, ctx)
        held = {pe: set() for pe in range(n)}
        relaxed = set()  # waits whose unmatched candidates were dropped
        done = set()

        def tick(pe, index):
            clock[pe][pe] += 1
            self.points[pe][index] = tuple(clock[pe])
            self.locks_at[(pe, index)] = frozenset(held[pe])

        def complete(pe, ctx, at):
            keep = []
            for index, c in pending[pe]:
                if c == ctx:
                    self.ends[(pe, index)].append((pe, at))
                else:
                    keep.append((index, c))
            pending[pe] = keep

        def finish(k):
            """Every PE that arrived at collective ``k`` (team, number) leaves it."""
            joined = [max(clock[q][r] for q in arrivals[k]) for r in range(n)]
            for q, index in arrivals.pop(k).items():
                clock[q] = list(joined)
                tick(q, index)
                pos[q] += 1
                ncoll[(q, k[0])] += 1
                done.add((q, index))

        def step(pe):
            """Process PE ``pe``'s next event if it can; True if it did."""
            i = pos[pe]
            e = self.events[pe][i]
            kind, op = e.kind, e.op
            if kind == "coll" or (kind == "sync" and op in _COLLECTIVE_SYNCS):
                team = tuple(e.members) if e.members else None
                members = team or tuple(range(n))
                k = (team, ncoll[(pe, team)])
                if pe not in arrivals[k]:
                    clock[pe][pe] += 1
                    arrivals[k][pe] = i
                    if kind == "sync" and op in _COMPLETING:
                        complete(pe, 0, clock[pe][pe])
                if any(q not in arrivals[k] and pos[q] < len(self.events[q]) for q in members):
                    return False
                finish(k)
                return True
            if kind == "wait":
                cands = self._candidates[(pe, i)]
                if (pe, i) in relaxed:
                    cands = [c for c in cands if c in done]
                if any(c not in done for c in cands):
                    return False
                for q, j in cands:
                    point = self.points[q][j]
                    clock[pe] = [max(a, b) for a, b in zip(clock[pe], point)]
                tick(pe, i)
                self.waited[(pe, i)] = cands
                at = clock[pe][pe]
                for q, j in cands:
                    self.ends[(q, j)].append((pe, at))
                    self._fenced_before(q, j, (pe, at))
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

        while True:
            progress = False
            for pe in range(n):
                while pos[pe] < len(self.events[pe]) and step(pe):
                    progress = True
            if all(pos[pe] >= len(self.events[pe]) for pe in range(n)):
                break
            if progress:
                continue
            # stuck: waits on writes that come later (or never) give up those candidates first,
            # then a collective some PE never reaches goes ahead without it
            stuck = [(pe, pos[pe]) for pe in range(n) if pos[pe] < len(self.events[pe])]
            waits = [s for s in stuck if self.events[s[0]][s[1]].kind == "wait" and s not in relaxed]
            if waits:
                relaxed.update(waits)
                continue
            started = [k for k in arrivals if arrivals[k]]
            if not started:
                break
            finish(min(started, key=lambda k: k[1]))
        return self

    def _fenced_before(self, pe, index, end):
        """Writes of ``pe`` before a fence that precedes its write ``index`` (same ctx and
        target PE) are delivered by the time that write is seen: give them the same end. So is
        the data of a put_signal whose signal word ``index`` is."""
        e = self.events[pe][index]
        if e.op in SIGNAL_EVENTS and index:
            data = self.events[pe][index - 1]
            if data.op in _PUT_SIGNALS and data.line == e.line and data.pe == e.pe and data.ctx == e.ctx:
                self.ends[(pe, index - 1)].append(end)
        fences = [f for f in self.fences.get((pe, e.ctx), []) if f < index]
        if not fences:
            return
        last = fences[-1]
        for j in range(last):
            w = self.events[pe][j]
            if w.kind == "rma" and w.pe == e.pe and w.ctx == e.ctx and w.op not in _READS:
                self.ends[(pe, j)].append(end)


def _accesses(sim):
    found = []
    for pe, evs in sim.events.items():
        for i, e in enumerate(evs):
            point = sim.points[pe][i]
            if point is None:
                continue
            here = [(pe, point[pe])]
            locks = sim.locks_at.get((pe, i), frozenset())
            kind = e.kind
            if kind == "mem":
                found.append(_Access(pe, e.space, e.lo, e.hi, e.mode, e.mode == "write", e.dtype, pe, i, e.line, e.op,
                                     point, here, locks, fp=e.fp))
            elif kind == "rma":
                op, target, ctx = e.op, e.pe, e.ctx
                atomic = CALLS[op].kind == "amo"
                asynchronous = CALLS[op].nbi
                ends = here if _done_on_return(op) else sim.ends[(pe, i)]
                if atomic:
                    mode, writes = "atomic", CALLS[op].writes
                elif op in _READS:
                    mode, writes = "read", False
                else:
                    mode, writes = "write", True
                held = locks if (ctx == 0 or ends is here) else frozenset()
                found.append(_Access(target, "sym", e.lo, e.hi, mode, writes, e.dtype, pe, i, e.line, op, point, ends, held,
                                     ctx, remote=True, target=target, fp=e.fp))
                if e.lspace is not None:
                    local_ends = sim.ends[(pe, i)] if asynchronous else here
                    lmode = "write" if op in _READS or atomic else "read"  # a non-blocking atomic's fetch
                    found.append(_Access(pe, e.lspace, e.llo, e.lhi, lmode, lmode == "write", e.dtype, pe, i, e.line, op,
                                         point, local_ends, locks if not asynchronous or ctx == 0 else frozenset(), ctx,
                                         fp=e.lfp))
            elif kind == "coll":
                op, root = e.op, e.root
                found.append(_Access(pe, e.tspace, e.tlo, e.thi, "write", True, e.dtype, pe, i, e.line, op, point, here,
                                     locks))
                if op != "broadcast" or root == pe:
                    found.append(_Access(pe, e.sspace, e.slo, e.shi, "read", False, e.dtype, pe, i, e.line, op, point,
                                         here, locks))
    return found


def _before(a, b, sim):
    """Does ``a`` happen before (complete before) ``b`` starts?"""
    for pe, at in a.ends:
        if b.point[pe] >= at:
            return True
    if a.pe == b.pe and a.remote and b.remote and a.index < b.index and a.target == b.target and a.ctx == b.ctx:
        if a.op not in _READS and a.writes and b.writes:  # fence orders puts and atomics to one PE, not gets
            return any(a.index < f < b.index for f in sim.fences.get((a.pe, a.ctx), []))
    return False


def _conflict(a, b):
    if not (a.writes or b.writes):
        return False
    if a.mode == "atomic" and b.mode == "atomic":
        return a.dtype != b.dtype
    return True


def _name_for(owner, space, lo, hi, traces):
    """(name, start, itemsize, layout) of the best-named memory holding ``[lo, hi)``; ``layout``:
    ``(origin, shape, strides)`` of an N-D or strided array, else None."""
    sources = [owner] if space == "priv" else [owner, *sorted(traces)]
    best = None
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


def find_races(traces, npes):
    """The races in one cell: ``traces`` maps PE -> the PE's recorded data. Returns a list of :class:`Race`."""
    sim = _Simulation(traces, npes).run()
    groups = defaultdict(list)
    for acc in _accesses(sim):
        if acc.hi > acc.lo:
            groups[(acc.owner, acc.space)].append(acc)
    raw = []
    for (owner, space), accs in groups.items():
        accs.sort(key=lambda a: a.lo)
        active = []
        for b in accs:
            active = [a for a in active if a.hi > b.lo]
            for a in active:
                if a.pe == b.pe and a.index == b.index:
                    continue
                if not _conflict(a, b) or (a.locks & b.locks):
                    continue
                if _before(a, b, sim) or _before(b, a, sim):
                    continue
                blocks = overlap((a.lo, a.hi, a.fp), (b.lo, b.hi, b.fp)) if (a.fp or b.fp) else None
                if blocks == []:
                    continue  # strided footprints that interleave without touching
                lo, hi = (blocks[0][0], blocks[-1][1]) if blocks else (max(a.lo, b.lo), min(a.hi, b.hi))
                raw.append((owner, space, lo, hi, a, b, blocks or [(lo, hi)]))
            active.append(b)
    folded, seen_pairs = {}, {}
    raw.sort(key=lambda r: (not r[4].writes, not r[5].writes))  # writes first: `+=` reports its store
    for owner, space, lo, hi, a, b, blocks in raw:
        if (a.line, a.pe) > (b.line, b.pe):
            a, b = b, a
        if b.point[a.pe] < a.point[a.pe] and a.point[b.pe] >= b.point[b.pe]:
            a, b = b, a  # name the one issued first first, when one was
        name, start, itemsize, layout = _name_for(owner, space, lo, hi, traces)
        origin, shape, strides = layout or (start, None, None)
        hint, fix = _advice(a, b, sim)
        key = (name, a.line, a.op, a.mode, b.line, b.op, b.mode, hint)
        pair = (name, a.line, b.line, frozenset((a.pe, b.pe)))
        if pair in seen_pairs and seen_pairs[pair] != key:
            continue  # one race per pair of lines (an in-place `A[i] += 1` both loads and stores)
        seen_pairs[pair] = key
        entry = folded.setdefault(key, {"owners": set(), "a": set(), "b": set(), "indices": [], "shape": (), "fix": fix})
        entry["owners"].add(owner)
        entry["a"].add(a.pe)
        entry["b"].add(b.pe)
        entry["indices"] += flat_ranges(blocks, origin, itemsize, shape, strides)
        if shape and len(shape) > 1:
            entry["shape"] = tuple(shape)
    races = []
    for (name, aline, aop, amode, bline, bop, bmode, hint), entry in folded.items():
        apes, bpes, owners = sorted(entry["a"]), sorted(entry["b"]), sorted(entry["owners"])
        races.append(
            Race(
                array=name,
                pe=owners[0],
                indices=progressions(entry["indices"]),
                accesses=(Access(apes[0], aline, aop, amode, tuple(apes)), Access(bpes[0], bline, bop, bmode, tuple(bpes))),
                hint=hint,
                pes=tuple(owners),
                shape=entry["shape"],
                fix=entry["fix"],
            )
        )
    races.sort(key=lambda r: (r.accesses[0].line, r.accesses[1].line, r.array))
    return races
