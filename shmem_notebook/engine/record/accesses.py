"""The race recording: what one cell does to memory on this PE, as the events of
:data:`shmem_notebook.operations.EVENT_FIELDS` (PE side).

A consumer of the :mod:`.layer` (every shmem4py call) and of the load/store hooks of the
rewritten cell (:mod:`.hooks`). Repeated accesses from one line to adjacent memory are
merged into one event (a range), so loops stay small; a synchronisation ends merging.
:meth:`RaceRecording.data` is what the client's :func:`~shmem_notebook.analysis.happens_before.find_races`
reads: ``pe``, ``npes``, ``events``, ``names``, ``ops`` (calls and accesses seen, before
merging), ``truncated`` (None or the line where ``cap`` was hit), ``cap``, ``seconds``.

Longer than 420 lines once formatted: every kind of event (RMA, atomics, waits, collectives,
signals, loads and stores) is written by one class, in the one form the client reads.
"""

from __future__ import annotations

import array
import bisect
import time
from typing import TYPE_CHECKING, Any, cast

import numpy as np
from shmem4py import shmem

from ...analysis.footprint import extend
from ...distinct import Events
from ...operations import CALLS, FIELD, RECORDED_AS, SIGNAL_EVENTS
from .. import teams
from ..context import this_pe
from ..shims import late_zeroing, signals
from . import in_c
from .memory import AddressBook, assigned_to, numpy_owned

if TYPE_CHECKING:
    from collections.abc import Callable, Iterable, Sequence
    from typing import TypeAlias

    import numpy.typing as npt

    from ...analysis.footprint import Footprint
    from ...operations import Operation
    from .instrument import MarkTransformer
    from .memory import Info, Space

    Event: TypeAlias = "list[Any]"
    _After: TypeAlias = "Callable[[Operation, dict[str, Any], Any, int], None]"
    _Fast: TypeAlias = "Callable[[tuple[Any, ...], Any, int], None]"

__all__ = ["RaceRecording"]

_M, _R = FIELD["mem"], FIELD["rma"]
_RECORDED = {name: RECORDED_AS.get(name, name) for name in CALLS}  # call -> the op its events name
_M_LO, _M_HI, _M_FP = _M["lo"], _M["hi"], _M["fp"]
_R_LO, _R_HI, _R_FP, _R_LLO, _R_LHI, _R_LFP = (_R[k] for k in ("lo", "hi", "fp", "llo", "lhi", "lfp"))
_R_LSPACE, _R_VALUES = _R["lspace"], _R["values"]
#: where each range's footprint is, from the index of its lo (each hi follows its lo; fp is elsewhere)
_FP_OF = {_M_LO: _M_FP, _R_LO: _R_FP, _R_LLO: _R_LFP}
assert _M["hi"] == _M_LO + 1 and _R_HI == _R_LO + 1 and _R_LHI == _R_LLO + 1
#: atomics whose recorded value is an increment: merged events add them up (a counter's count matters)
_ADDING = frozenset(
    {
        "atomic_inc",
        "atomic_fetch_inc",
        "atomic_fetch_inc_nbi",
        "atomic_add",
        "atomic_fetch_add",
        "atomic_fetch_add_nbi",
        "signal_add",
    }
)
_PUT_SIGNALS = frozenset({"put_signal", "put_signal_nbi"})
_PICKING = ("_any", "_some", "_any_vector", "_some_vector")  # multi-word waits that return which words
_PLAIN_RMA = CALLS["put"].params  # put, get, put_nbi, get_nbi: their calls with three arguments have a short path
_INCREMENTS = {"atomic_inc": 1, "atomic_fetch_inc": 1, "atomic_fetch_inc_nbi": 1}
_CMP_NAMES = {
    int(getattr(shmem.CMP, name)): sym
    for name, sym in (("EQ", "=="), ("NE", "!="), ("GT", ">"), ("GE", ">="), ("LT", "<"), ("LE", "<="))
}
#: the snapshot of small symmetric allocations (flags, counters, signals) taken when a recording starts
_SNAPSHOT_LARGEST, _SNAPSHOT_TOTAL = 4096, 1 << 20


def _cmp_name(cmp: Any) -> str | None:
    """A wait's comparison as ``"=="``, ``">="``... (shmem4py takes names, strings or CMP values)."""
    if isinstance(cmp, str):
        if cmp in ("==", "!=", ">", ">=", "<", "<="):
            return cmp
        cmp = getattr(shmem.CMP, cmp.upper(), None)
    try:
        return _CMP_NAMES.get(int(cmp))
    except (TypeError, ValueError):
        return None


def _snapshot(heap_lo: int) -> list[tuple[int, bytes | int]]:
    """``[(offset, bytes)]`` of the small symmetric allocations and signal words, sorted: what a wait's
    flag held before the recording (a wait satisfied by it orders nothing). Memory allocated later
    starts at zero (shmem4py clears what it allocates); larger arrays are not known."""
    found: list[tuple[int, bytes | int]]
    found, total = [], 0
    ffi = shmem.ffi
    for addr, cdata in [*shmem._heap.items(), *signals.live(shmem)]:
        size = ffi.sizeof(cdata)
        small = size <= _SNAPSHOT_LARGEST and total + size <= _SNAPSHOT_TOTAL
        total += size if small else 0
        found.append((int(addr) - heap_lo, bytes(ffi.buffer(cdata)) if small else size))
    found.sort(key=lambda item: item[0])
    return found


def _join(last: Event, event: Event, at: int) -> tuple[int, int, Footprint | None] | None:
    """``(lo, hi, footprint)`` of the ranges at ``at`` (lo, then hi) of both events when their union
    is as exact (see :func:`~shmem_notebook.analysis.footprint.extend`), else None."""
    f = _FP_OF[at]
    lo, hi, fp, elo, ehi, efp = last[at], last[at + 1], last[f], event[at], event[at + 1], event[f]
    if fp is None and efp is None and elo <= hi and ehi >= lo:  # touching ranges: the usual case
        return (lo if lo < elo else elo), (hi if hi > ehi else ehi), None
    return extend(lo, hi, fp, elo, ehi, efp)


def _merge_values(last: Event, more: list[Any] | None) -> None:
    """The values of an RMA event merged into ``last``: increments add up, other values are kept (up to 16)."""
    values = last[_R_VALUES]
    if more is None:
        last[_R_VALUES] = None
    elif last[1] in _ADDING:  # increments merged: their sum
        if values is not None:
            values[0] += more[0]
    elif values is not None and len(values) < 16:
        for v in more:
            if v not in values:
                values.append(v)


def _ctx_key(ctx: Any) -> int:
    if ctx is None:
        return 0
    handle = ctx.ob_ctx
    if handle == shmem.CTX_DEFAULT.ob_ctx:
        return 0
    return int(shmem.ffi.cast("uintptr_t", handle))


def _team_of(ctx: Any) -> tuple[str | None, tuple[int, ...] | None]:
    """``(domain, pes)`` of a context: the atomicity domain of its AMOs (see
    :mod:`shmem_notebook.analysis.domains`), ``"slot:pe,pe..."``, and its team's world PEs (its calls
    number PEs in the team); ``(None, None)`` for the world team's contexts. Emulated teams (OpenSHMEM
    1.4) have contexts on the world team only (engine/teams.py refuses the others)."""
    if this_pe.teams.mode != "native" or ctx.ob_ctx == shmem.CTX_DEFAULT.ob_ctx:
        return None, None
    try:
        m = teams.members(ctx.get_team())
    except Exception:  # an invalid context or team: the call itself says so
        return None, None
    if m.slot == 0:  # TEAM_WORLD
        return None, None
    return f"{m.slot}:{','.join(map(str, m.pes))}", m.pes


def _members(team: Any) -> list[int] | None:
    """World PEs of ``team`` (None: every PE), for matching collectives of one team."""
    if team is None:
        return None
    try:
        pes = list(teams.members(team).pes)
    except Exception:  # not a member, or teams not set up: the call itself says so
        return None
    return None if len(pes) == shmem.n_pes() else pes


def _program_file(filename: str) -> bool:
    """Whether ``filename`` is the recorded cell's or code outside it that runs rewritten."""
    return filename in this_pe.record.cell_files or filename in this_pe.record.outside


def _integer(x: Any) -> int | None:
    """``x`` as a Python int, or None when it is not an integer (a wait's value, an increment)."""
    try:
        n = int(x)
    except (TypeError, ValueError):
        return None
    return n if n == x else None


class _Ranges:
    """Sorted, disjoint byte ranges (one bisection per lookup): the private bytes that a
    non-blocking call of this cell, or one an earlier cell left in flight, may still be using.
    ``starts`` is empty when there are none (tested on every access: a list, not a method)."""

    def __init__(self, ranges: Iterable[Sequence[int]] = ()) -> None:
        self.starts: list[int]
        self.stops: list[int]
        self.starts, self.stops = [], []
        for lo, hi in ranges:
            self.add(lo, hi)

    def add(self, lo: int, hi: int) -> None:
        starts, stops = self.starts, self.stops
        k = bisect.bisect_right(starts, hi)  # ranges starting at or before hi
        j = k
        while j and stops[j - 1] >= lo:  # those reaching lo: merged into one
            j -= 1
        if j < k:
            lo, hi = min(lo, starts[j]), max(hi, stops[k - 1])
        starts[j:k], stops[j:k] = [lo], [hi]

    def overlaps(self, lo: int, hi: int) -> bool:
        k = bisect.bisect_right(self.starts, hi - 1)  # the last range starting before hi
        return bool(k) and self.stops[k - 1] > lo


def _count(i: int, doc: str) -> Any:
    """An attribute kept in ``counts[i]``, where the C recorder counts in place (``native_record.c``)."""
    return property(lambda self: self.counts[i], lambda self, value: self.counts.__setitem__(i, value), doc=doc)


_NOT_TRUNCATED = -(2**63)  # counts[3] while truncated is None


class RaceRecording:
    """One cell's events on this PE. ``private``: ``(lo, hi)`` of private buffers that operations
    of earlier cells, still in flight, use (see :meth:`access`)."""

    ops = _count(0, "operations seen, recorded or merged")
    n_local = _count(1, "local accesses so far (RMA events do not merge across them)")
    n_async = _count(2, "async RMA events so far (local accesses do not merge across them)")
    cap = _count(4, "the most events recorded")

    @property
    def truncated(self) -> int | None:
        """The line where the recording reached its cap, or None."""
        at = self.counts[3]
        return None if at == _NOT_TRUNCATED else at

    @truncated.setter
    def truncated(self, line: int | None) -> None:
        self.counts[3] = _NOT_TRUNCATED if line is None else line

    transformer: MarkTransformer
    froze: bool
    thresholds: tuple[int, int, int]
    compiled: set[int]
    calls: array.array[int]
    call_line: int | None

    def __init__(self, cap: int, private: Iterable[Sequence[int]] = (), library_writes: bool = False) -> None:
        # ops, n_local, n_async, truncated, cap: one array that the C recorder counts in, never resized
        self.counts = array.array("q", [0, 0, 0, _NOT_TRUNCATED, cap])
        self.private = _Ranges(private)
        self.me = shmem.my_pe()
        self.events: list[Event] = []
        self.memory = AddressBook()
        self.merge: dict[tuple[Any, ...], Event] = {}  # merge key -> event (reset at every synchronisation)
        self.fetched: dict[int, Any] = {}  # signal word -> what signal_fetch saw last
        self.teams: dict[int, tuple[str | None, tuple[int, ...] | None]]
        self.teams = {}  # context key -> its AMOs' atomicity domain and its team's PEs (see _team_of)
        self.snapshot = _snapshot(self.memory.heap[0])
        self.signals_made = cast(int, signals.made())  # signals made after this start at zero
        self.fresh = _Ranges()  # symmetric memory allocated since the recording began (zeroed)
        self.filled = _Ranges()  # ... and not zeroed (shmem.full, ones, array, empty): its first value not known
        # the library zeroes after its barrier: repaired by a shim, but a plain program's run meets it
        self.late_zeroing = library_writes and late_zeroing.applies(shmem)
        self.started = time.perf_counter()
        native = in_c.module()
        if native is not None:  # the usual loads and stores in C, the others given to the method
            self.access = native.Access(  # type: ignore[method-assign]  # the C handler in its place
                self, RaceRecording.access.__get__(self), _M
            )

    # -- events ----------------------------------------------------------------------
    def _add(self, event: Event, key: tuple[Any, ...] | None = None) -> None:
        self.ops += 1
        if self.truncated is not None:
            return  # past the cap nothing is recorded, not even into earlier events: the check says where it stopped
        if key is not None:
            last = self.merge.get(key)
            if last is not None and self._extend(last, event):
                return
        if len(self.events) >= self.cap:
            if self.truncated is None:
                self.truncated = event[2]
            return
        self.events.append(event)
        if key is not None:
            self.merge[key] = event

    @staticmethod
    def _extend(last: Event, event: Event) -> bool:
        """Merge ``event`` into ``last`` (same key) when the union is as exact: touching ranges, or
        one more step of a strided progression (see :func:`~shmem_notebook.analysis.footprint.extend`)."""
        if last[0] == "mem":
            both = _join(last, event, _M_LO)
            if both is None:
                return False
            last[_M_LO], last[_M_HI], last[_M_FP] = both
            return True
        remote = _join(last, event, _R_LO)
        if remote is None:
            return False
        if last[_R_LSPACE] is not None:
            local = _join(last, event, _R_LLO)
            if local is None:
                return False
            last[_R_LLO], last[_R_LHI], last[_R_LFP] = local
        last[_R_LO], last[_R_HI], last[_R_FP] = remote
        _merge_values(last, event[_R_VALUES])
        return True

    def access(
        self,
        a: npt.NDArray[Any],
        op: str,
        mode: str,
        line: int,
        lo: int | None = None,
        hi: int | None = None,
        fp: Footprint | None = None,
        info: Info | None = None,
        value: Any = None,
    ) -> None:
        """A load/store of ``a`` (or of bytes ``[lo, hi)`` of it, footprint ``fp``) by the cell; ``info``:
        ``a``'s :meth:`~.memory.AddressBook.info` when known; ``value``: what a store writes, kept
        when it is one integer element of symmetric memory (a flag or counter reset: waits read it).

        Private memory is recorded only where a non-blocking call may still use it (issued earlier
        in this cell, or carried from an earlier one): no other PE reaches it, and this PE's own
        calls are ordered with an access before them (program order) or complete when they return.
        Temporaries and private work arrays cost a look at their base, then nothing."""
        if info is None:
            if not self.private.starts and numpy_owned(a):
                self.ops += 1
                return
            info = self.memory.info(a)
        _, space, _, alo, ahi, _, dtype, _, _, afp = info
        if lo is None:
            lo, hi, fp = alo, ahi, afp
        if space == "priv" and not self.private.overlaps(lo, hi):  # type: ignore[arg-type]  # given with lo
            self.ops += 1
            return
        self.n_local += 1
        if (
            value is not None
            and space == "sym"
            and dtype[1] in "iu"
            and hi - lo == info[5]  # type: ignore[operator]  # given with lo
            and fp is None
            and ahi - alo <= 16 * info[5]
        ):  # flags and counters: arrays of a few elements
            value = _integer(value)
            if value is not None:  # not merged: the value belongs to this element
                self._add(["mem", op, line, mode, space, lo, hi, dtype, fp, [value]])
                return
        key = ("mem", op, line, mode, space, dtype, self.n_async)
        last = self.merge.get(key)
        if (
            last is not None
            and self.truncated is None
            and fp is None
            and last[_M_FP] is None
            and lo <= last[_M_HI]
            and hi >= last[_M_LO]
        ):  # touching the last access of this line: :meth:`_add` would merge it so, without the event
            self.ops += 1
            if lo < last[_M_LO]:
                last[_M_LO] = lo
            if hi > last[_M_HI]:
                last[_M_HI] = hi
            return
        self._add(["mem", op, line, mode, space, lo, hi, dtype, fp], key)

    def _rma_event(
        self,
        op: str,
        line: int,
        target: Any,
        pe: int,
        count: int,
        local: npt.NDArray[Any] | None,
        ctx: Any,
        values: list[Any] | None,
        asynchronous: bool,
        stride: int = 1,
        lstride: int = 1,
        domain: str | None = None,
    ) -> None:
        space, lo, hi, dtype, fp = self.memory.sym(target, count, stride)
        lspace: Space | None
        llo: int | None
        lhi: int | None
        lfp: Footprint | None
        key: tuple[Any, ...] | None
        if local is not None:
            lspace, llo, lhi, _, lfp = self.memory.sym(local, count, lstride)
            if asynchronous and lspace == "priv":
                self.private.add(llo, lhi)
        else:
            lspace = llo = lhi = lfp = None
        if ctx is None:
            ctx = 0
        else:
            pe, ctx = self._world_pe(ctx, pe), _ctx_key(ctx)
        if asynchronous or pe == self.me:
            self.n_async += 1
            key = ("rma", op, line, pe, dtype, lspace, ctx, self.n_local)
        else:
            key = ("rma", op, line, pe, dtype, lspace, ctx)
        if op in _PUT_SIGNALS:
            key = None  # each put_signal's data is paired with its own signal word (the event after it)
        event = ["rma", op, line, pe, lo, hi, dtype, lspace, llo, lhi, ctx, values, fp, lfp]
        if domain is not None:  # an AMO through a context of a team other than the world
            event.append(domain)
        self._add(event, key)

    def _sync_event(self, event: Event) -> None:
        self.merge.clear()
        self._add(event)

    # -- the layer's consumer: one handler per kind of call ---------------------------------
    before_calls = frozenset({"Ctx.destroy"})

    def before(self, op: Operation, args: dict[str, Any], line: int) -> None:
        """Note a context's key before ``Ctx.destroy`` resets its handle (it completes that context)."""
        if op.name == "Ctx.destroy":
            args["ctx_key"] = _ctx_key(args.get("ctx"))
            self.teams.pop(args["ctx_key"], None)  # a context made later may get its handle

    def after(self, op: Operation, args: dict[str, Any], result: Any, line: int) -> None:
        self._handlers[op.kind](self, op, args, result, line)

    def after_for(self, op: Operation) -> _After:
        """The handler of ``op``'s calls (see :mod:`.layer`): plain puts and gets, and the world's
        synchronisations, have their own short paths (a recorded put costs most of a traced loop)."""
        if op.kind == "rma" and op.params == _PLAIN_RMA:
            return self._on_plain_rma
        if op.kind == "sync" and not op.params:
            native, python = in_c.module(), self._world_sync(_RECORDED[op.name])
            return python if native is None else native.WorldSync(self, _RECORDED[op.name], python)
        return cast("_After", self._handlers[op.kind].__get__(self))

    def fast_for(self, op: Operation) -> _Fast | None:
        """The handler of ``op``'s calls made without keywords, given their arguments as they came (see
        :mod:`.layer`): plain puts and gets, and the world's synchronisations; None for the others."""
        if op.kind == "sync" and not op.params:  # no parameter: called with no argument, or it raised
            handler = self.after_for(op)  # C's WorldSync takes the fast form too
            return (
                cast("_Fast", handler)
                if in_c.module() is not None
                else lambda args, result, line: handler(op, {}, result, line)
            )
        if op.kind == "rma" and op.params == _PLAIN_RMA:
            plain, on_rma, params = self._plain_rma, self._on_rma, op.params

            def fast_rma(args: tuple[Any, ...], result: Any, line: int) -> None:
                if len(args) == 3:
                    plain(op, args[0], args[1], args[2], line)
                else:
                    on_rma(op, dict(zip(params, args)), result, line)

            native = in_c.module()  # the same in C, handing it what is not two arrays and a PE
            return fast_rma if native is None else native.PlainRMA(self, op, fast_rma, _R)
        return None

    def _world_sync(self, recorded: str) -> _After:
        """The handler of ``barrier_all``, ``sync_all``, ``quiet`` or ``fence`` (named ``recorded``)
        called with no argument: :meth:`_on_sync`'s first case."""
        events, merge = self.events, self.merge

        def on_world_sync(op: Operation, args: dict[str, Any], result: Any, line: int) -> None:
            if args:
                return self._on_sync(op, args, result, line)
            merge.clear()
            self.ops += 1
            if self.truncated is None:
                if len(events) >= self.cap:
                    self.truncated = line
                else:
                    events.append(["sync", recorded, line, 0, None])

        return on_world_sync

    def _on_plain_rma(self, op: Operation, args: dict[str, Any], result: Any, line: int) -> None:
        """``put``/``get``/``put_nbi``/``get_nbi`` of whole arrays on the default context: what
        :meth:`_on_rma` records, with a repeated put merged without building its event."""
        if len(args) != 3:
            return self._on_rma(op, args, result, line)
        self._plain_rma(op, args["target"], args["source"], args["pe"], line)

    def _plain_rma(self, op: Operation, target: npt.NDArray[Any], source: npt.NDArray[Any], pe: int, line: int) -> None:
        """:meth:`_on_plain_rma` of the call's three arguments."""
        writes, cache = op.writes, self.memory.cache
        remote, local = (target, source) if writes else (source, target)
        count = min(target.size, source.size)
        ri, li = cache.get(id(remote)), cache.get(id(local))  # AddressBook.info, its lookup inline
        if ri is None or ri[0]() is not remote:
            ri = self.memory.info(remote)
        if li is None or li[0]() is not local:
            li = self.memory.info(local)
        dtype, lspace = ri[6], li[1]
        if ri[7] == ri[5] or remote.flags.contiguous:  # 1-D of unit stride: no flags object needed
            lo, hi, fp = ri[2], ri[2] + count * ri[5], None
        else:
            lo, hi, fp = ri[3], ri[4], ri[9]
        if li[7] == li[5] or local.flags.contiguous:
            llo, lhi, lfp = li[2], li[2] + count * li[5], None
        else:
            llo, lhi, lfp = li[3], li[4], li[9]
        values = (
            [source.item(0)] if count == 1 and writes and isinstance(source, np.ndarray) and source.size == 1 else None
        )
        key: tuple[Any, ...]
        if op.nbi:
            if lspace == "priv":
                self.private.add(llo, lhi)
            self.n_async += 1
            key = ("rma", op.name, line, pe, dtype, lspace, 0, self.n_local)
        elif pe == self.me:
            self.n_async += 1
            key = ("rma", op.name, line, pe, dtype, lspace, 0, self.n_local)
        else:
            key = ("rma", op.name, line, pe, dtype, lspace, 0)
        self.ops += 1
        if self.truncated is not None:
            return
        last = self.merge.get(key)
        if last is not None:
            if (
                fp is None
                and lfp is None
                and last[_R_FP] is None
                and last[_R_LFP] is None
                and lo <= last[_R_HI]
                and hi >= last[_R_LO]
                and llo <= last[_R_LHI]
                and lhi >= last[_R_LLO]
            ):  # touching ranges on both sides, the usual repeated put: :meth:`_extend`'s first case
                if lo < last[_R_LO]:
                    last[_R_LO] = lo
                if hi > last[_R_HI]:
                    last[_R_HI] = hi
                if llo < last[_R_LLO]:
                    last[_R_LLO] = llo
                if lhi > last[_R_LHI]:
                    last[_R_LHI] = lhi
                _merge_values(last, values)
                return
            event = ["rma", op.name, line, pe, lo, hi, dtype, lspace, llo, lhi, 0, values, fp, lfp]
            if self._extend(last, event):
                return
        else:
            event = ["rma", op.name, line, pe, lo, hi, dtype, lspace, llo, lhi, 0, values, fp, lfp]
        if len(self.events) >= self.cap:
            self.truncated = line
            return
        self.events.append(event)
        self.merge[key] = event

    def _on_rma(self, op: Operation, args: dict[str, Any], result: Any, line: int) -> None:
        target, source = args["target"], args["source"]
        get = args.get
        count = get("size")
        if "tst" in args:  # iput / iget: every tst-th element of the target, every sst-th of the source
            tst, sst = get("tst", 1) or 1, get("sst", 1) or 1
            if count is None:
                count = min(-(-target.size // tst), -(-source.size // sst))
        else:
            tst = sst = 1
            if count is None:
                count = min(target.size, source.size)
        values = (
            [source.item(0)]
            if count == 1 and op.writes and isinstance(source, np.ndarray) and source.size == 1
            else None
        )  # the value a 1-element put writes (a wait may be matched to it)
        if op.writes:
            self._rma_event(op.name, line, target, args["pe"], count, source, get("ctx"), values, op.nbi, tst, sst)
        else:
            self._rma_event(op.name, line, source, args["pe"], count, target, get("ctx"), values, op.nbi, sst, tst)
        if "signal" in args:  # put_signal: then the signal word, an atomic delivered after the data
            self._signal_event(args, line)

    def _signal_event(self, args: dict[str, Any], line: int) -> None:
        """The signal word of a put_signal, right after its data event (the analysis pairs them)."""
        lo = self._signal_offset(args["signal"])
        adds = int(args.get("sigop", 0)) == int(shmem.SIGNAL_ADD)
        value = [int(args["value"])]  # an add's increment, a set's value
        ctx, pe = args.get("ctx"), int(args["pe"])
        if ctx is not None:
            pe = self._world_pe(ctx, pe)
        ctx = _ctx_key(ctx)
        self.n_async += 1
        self._add(
            [
                "rma",
                SIGNAL_EVENTS[adds],
                line,
                pe,
                lo,
                lo + 8,
                "<u8",
                None,
                None,
                None,
                ctx,
                value,
                None,
                None,
            ]
        )

    def _signal_offset(self, signal: Any) -> int:
        """A signal word (shmem4py's ``uint64_t *``) as a heap offset."""
        return self.memory.offset(int(shmem.ffi.cast("uintptr_t", signal)))

    def _on_amo(self, op: Operation, args: dict[str, Any], result: Any, line: int) -> None:
        values = None
        if op.name in ("atomic_set", "atomic_swap", "atomic_compare_swap"):
            values = [args.get("value")]
        elif op.name in _INCREMENTS:
            values = [1]
        elif op.name in _ADDING:
            values = [_integer(args.get("value"))]
        elif op.name == "atomic_op" and str(args.get("op")).lower().endswith("set"):
            values = [args.get("value")]
        name = op.name if op.writes or op.nbi else "atomic_fetch"
        local = args.get("fetch") if op.nbi else None  # written when the operation completes
        ctx = args.get("ctx")
        domain = None if ctx is None else self._team_of(ctx)[0]
        self._rma_event(
            name, line, args.get(op.remote), args["pe"], 1, local, ctx, values, not op.fetches, 1, 1, domain
        )

    def _team_of(self, ctx: Any) -> tuple[str | None, tuple[int, ...] | None]:
        """:func:`_team_of` ``ctx``, asked once per context (a context keeps its team; forgotten when destroyed)."""
        key = _ctx_key(ctx)
        if key not in self.teams:
            self.teams[key] = _team_of(ctx)
        return self.teams[key]

    def _world_pe(self, ctx: Any, pe: int) -> int:
        """The world PE of ``pe`` as a call through ``ctx`` numbers it (a team's context: in its team)."""
        pes = self._team_of(ctx)[1]
        return pes[pe] if pes is not None and 0 <= pe < len(pes) else pe

    def _on_sync(self, op: Operation, args: dict[str, Any], result: Any, line: int) -> None:
        lo: int | None
        hi: int
        zeroed: tuple[int, int] | None
        zeroed = None  # what the library zeroes after the allocation's barrier: written after the sync event
        if op.name == "alloc" and result is not None:
            try:
                lo = int(shmem.ffi.cast("uintptr_t", shmem.ffi.from_buffer(result))) - self.memory.heap[0]
                hi = lo + len(result.cast("B"))
            except (TypeError, ValueError):
                lo = hi = None  # type: ignore[assignment]  # hi is read when lo is set
            clear = args.get("clear", True)
            if lo is not None:  # what a wait on it sees before any write: zero, or (full, ones, array, empty) not known
                (self.fresh if clear else self.filled).add(lo, hi)
                self.memory.allocated(assigned_to(_program_file), lo, hi, args.get("size"))
                zeroed = (lo, hi) if clear and self.late_zeroing and hi > lo else None
        if not args:  # barrier_all, sync_all, quiet, fence: the world's, on the default context
            self._sync_event(["sync", _RECORDED[op.name], line, 0, None])
            return
        team = args.get("team") if op.team else None
        ctx = args["ctx_key"] if "ctx_key" in args else _ctx_key(args.get("ctx"))
        self._sync_event(["sync", _RECORDED[op.name], line, ctx, _members(team)])
        if zeroed is not None and self.truncated is None and len(self.events) < self.cap:
            # the library's memset, a write no peer is ordered with (not an op counted); [0]: every word it
            # covers is set to 0, which a wait on it reads
            self.events.append(["mem", "zeroing", line, "write", "sym", *zeroed, "|u1", None, [0]])

    def _on_coll(self, op: Operation, args: dict[str, Any], result: Any, line: int) -> None:
        info = self.memory.info
        _, tspace, _, tlo, thi, _, dtype = info(args["target"])[:7]
        _, sspace, _, slo, shi = info(args["source"])[:5]
        self._sync_event(
            [
                "coll",
                op.name,
                line,
                tspace,
                tlo,
                thi,
                sspace,
                slo,
                shi,
                dtype,
                args.get("root"),
                _members(args.get("team")),
            ]
        )

    def _on_wait(self, op: Operation, args: dict[str, Any], result: Any, line: int) -> None:
        if op.name.startswith("test") and (result is None or result is False or result == []):
            return  # a test that failed orders nothing
        if "signal" in args:  # signal_wait_until returns the value it saw; signal_fetch counts when it changed
            lo = self._signal_offset(args["signal"])
            if op.name == "signal_fetch":
                if not result or self.fetched.get(lo) == result:
                    return  # a poll that saw no signal, or nothing new, orders nothing
                self.fetched[lo] = result
            cmp, value = (_cmp_name(args.get("cmp")), _integer(args.get("value"))) if "cmp" in args else (None, None)
            self._sync_event(
                ["wait", op.name, line, lo, lo + 8, "<u8", [int(result)], cmp, value, self._before(lo, lo + 8, "<u8")]
            )
            return
        ivar: Any = args.get("ivar", args.get("ivars"))
        space, lo, hi, dtype, fp = self.memory.sym(ivar)
        if op.name.endswith(_PICKING) and fp is None:  # *_any/*_some: ordered after the words they return only
            self._picked(op, args, result, line, ivar, lo, dtype)
            return
        one = hi - lo == np.dtype(dtype).itemsize and "value" in args
        cmp, value = (_cmp_name(args.get("cmp")), _integer(args.get("value"))) if one else (None, None)
        self._sync_event(
            [
                "wait",
                op.name,
                line,
                lo,
                hi,
                dtype,
                np.asarray(ivar).reshape(-1)[:64].tolist(),
                cmp,
                value,
                self._before(lo, hi, dtype) if one else None,
            ]
        )

    def _picked(
        self, op: Operation, args: dict[str, Any], result: Any, line: int, ivar: Any, lo: int, dtype: str
    ) -> None:
        """One wait per word a ``wait_until_any/some`` (or ``test_any/some``) returned, on that word with
        its own condition: the other words' writers are not ordered before what follows."""
        size = np.dtype(dtype).itemsize
        cmp = _cmp_name(args.get("cmp"))
        values = args.get("values")
        flat = np.asarray(ivar).reshape(-1)
        for k in [result] if isinstance(result, (int, np.integer)) else list(result or ()):
            k = int(k)
            value = _integer(values[k] if values is not None else args.get("value"))
            wlo = lo + k * size
            self._sync_event(
                [
                    "wait",
                    op.name,
                    line,
                    wlo,
                    wlo + size,
                    dtype,
                    [flat[k].item()],
                    cmp,
                    value,
                    self._before(wlo, wlo + size, dtype),
                ]
            )

    def _before(self, lo: int, hi: int, dtype: str) -> int | None:
        """The value bytes ``[lo, hi)`` of the heap held when the recording began, None if not known."""
        if self.fresh.overlaps(lo, hi):
            return 0  # allocated during the recording, cleared
        if self.filled.overlaps(lo, hi):
            return None  # allocated during the recording and filled (shmem.full...) before the recording saw it
        made = signals.made(self.memory.heap[0] + lo)
        if made is not None and made > self.signals_made:
            return 0
        snapshot = self.snapshot
        k = bisect.bisect_right(snapshot, lo, key=lambda item: item[0]) - 1
        start, data = snapshot[k] if k >= 0 else (0, 0)
        size = data if isinstance(data, int) else len(data)
        if k < 0 or lo >= start + size:
            return 0  # allocated since the recording began: shmem4py clears what it allocates
        if isinstance(data, int) or hi > start + size:
            return None  # a large array's word: its old value is not kept
        return _integer(np.frombuffer(data[lo - start : hi - start], dtype=dtype)[0])

    def _on_lock(self, op: Operation, args: dict[str, Any], result: Any, line: int) -> None:
        if op.name == "test_lock" and result:
            return  # the lock was taken by someone else: nothing acquired
        word = args["lock"]  # a lock handle, or a symmetric int64[1] (engine/shims/locks.py)
        if isinstance(word, np.ndarray):
            address = word.__array_interface__["data"][0]
        else:
            address = shmem.ffi.cast("uintptr_t", word)
        lock = self.memory.offset(int(address))
        self._sync_event(["lock", "clear_lock" if op.name == "clear_lock" else "set_lock", line, lock])

    _handlers = {"rma": _on_rma, "amo": _on_amo, "sync": _on_sync, "coll": _on_coll, "wait": _on_wait, "lock": _on_lock}

    def release(self) -> None:
        """Drop the C handler of accesses, which holds this recording: a cycle the collector would
        free late, and with it the events (the recording has stopped)."""
        vars(self).pop("access", None)

    # -- the plain data -----------------------------------------------------------------
    def data(self) -> dict[str, Any]:
        """What the client analyses (see the module docstring); the events an :class:`~shmem_notebook.distinct.Events`
        that knows its repeated events where the C module is loaded."""
        native = in_c.module()
        return {
            "pe": self.me,
            "npes": shmem.n_pes(),
            "events": self.events if native is None else Events.numbered(self.events, native.distinct),
            "names": self.memory.names(),
            "ops": self.ops,
            "truncated": self.truncated,
            "cap": self.cap,
            "seconds": time.perf_counter() - self.started,
        }
