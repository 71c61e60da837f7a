"""The fix a race report proposes (client side, for :mod:`.happens_before`).

:func:`advice` gives the prose (``Race.hint``) and, where the fix is an edit of the
cell, the same fix as data (``Race.fix``, a :class:`Fix`): statements to insert after
(or before) a cell line, or a statement to move. :func:`apply_fix` applies it to the
cell's source, so a test can check that the fixed cell has no race. A fix that is not
an edit (every PE updating one element without atomics, atomics of different
datatypes) is ``None`` and only the prose says what to do. A fix is offered only once
:mod:`.fixcheck` found it orders the race in the recorded trace, edited as the fix would
edit the cell; one that does not gives way to a barrier next to either line that does, or
to ``None`` and a hint saying what to change.
"""

from __future__ import annotations

import copy
import dataclasses
from typing import TYPE_CHECKING

from ..deviations import LATE_ZEROING, by_key
from ..protocol import RACE_LINES
from . import fixcheck
from .edits import Edit, Fix, apply_fix
from .lock_hints import lock_advice
from .model import LOCAL_SYNCS as _LOCAL_SYNCS  # syncs that order nothing across PEs
from .patterns import LOOKBACK as _LOOKBACK, patterns, touches

__all__ = ["Edit", "Fix", "advice", "apply_fix", "hint"]

if TYPE_CHECKING:
    from collections.abc import Iterator

    from .happens_before import _Access, _Simulation
    from .model import Event

_READ_OPS = {"get", "iget", "get_nbi", "atomic_fetch"}


def hint(a: _Access, b: _Access, sim: _Simulation) -> str:
    """The synchronisation that would order ``a`` before ``b`` (``a`` issued first if either was)."""
    return advice(a, b, sim)[0]


def advice(a: _Access, b: _Access, sim: _Simulation) -> tuple[str, Fix | None]:
    """``(hint, fix)`` for the race between accesses ``a`` and ``b``: the prose and a :class:`Fix` or ``None``.

    A fix is offered only if it orders ``a`` and ``b`` when added to the recorded trace
    (:func:`.fixcheck.orders`); else a barrier every PE passes next to one of the two lines, if
    one orders them; else ``None``, the prose saying what to change. Without the cell's source
    (synthetic traces, the command-line runner) the fix is the one the race's kind suggests."""
    own = _own_lines(a, b, sim)
    if own is not None:  # both in what one call of the cell ran: the fix goes in the function
        return _in_one_call(a, b, sim, *own)
    fix: Fix | None
    if getattr(sim, "source", None) is not None:
        for text, fix in patterns(a, b, sim):  # a common bug's own words, when its one edit checks
            if fixcheck.orders(fix, a, b, sim) is True:
                return text, fix
    text, fix = _advise(a, b, sim)
    alone = fix is None and a.pe != b.pe and a.line == b.line  # one line on two PEs: rounds of a loop?
    if (fix is None and not alone) or getattr(sim, "source", None) is None:
        return text, fix  # no source to check it on (synthetic traces, the command-line runner)
    verdict = fixcheck.orders(fix, a, b, sim) if fix is not None else False
    if verdict is None:  # the trace does not say where the PEs would pass it: the prose only
        return text, None
    if verdict:
        return text, fix
    for other_text, other in _barriers(a, b, sim, fix):
        if fixcheck.orders(other, a, b, sim) is True:
            return other_text, other
    return (text if alone else _what_to_change(a, b)), None


def _barriers(a: _Access, b: _Access, sim: _Simulation, tried: Fix | None) -> Iterator[tuple[str, Fix]]:
    """Other fixes to check: a barrier every PE passes after or before either line, the first to run first."""
    lines, _ = _first_to_run(a, b, sim)
    seen = {tried}
    for line, before in ((lines[0], False), (lines[1], True), (lines[1], False), (lines[0], True)):
        fix = _fix(Edit((line,), "shmem.barrier_all()", before=before, every_pe=True))
        if fix in seen:
            continue
        seen.add(fix)
        where = f"{'before' if before else 'after'} line {line}{' in the loop' if fixcheck.in_loop(sim, line) else ''}"
        if a.line == b.line and a.pe == b.pe:
            yield (
                (
                    f"PE {a.pe} runs line {a.line} on this memory in one round and again in the next: a "
                    f"shmem.barrier_all() {where}, where every PE passes, separates the rounds"
                ),
                fix,
            )
        elif a.line == b.line:
            yield (
                (
                    f"PEs {a.pe} and {b.pe} run line {a.line} on this memory in different rounds: "
                    f"a shmem.barrier_all() {where}, where every PE passes, separates the rounds"
                ),
                fix,
            )
        else:
            yield (
                (
                    f"a shmem.barrier_all() {where}, where every PE passes, orders them: line {a.line}'s {a.op} and "
                    f"line {b.line}'s {b.op} then fall on either side of it"
                ),
                fix,
            )


def _what_to_change(a: _Access, b: _Access) -> str:
    """The prose when no edit of the cell checked on the trace orders ``a`` and ``b``."""
    both = f"line {a.line}'s {a.op} on PE {a.pe} and line {b.line}'s {b.op} on PE {b.pe}"
    if a.pe == b.pe:
        return (
            f"no barrier or quiet placed next to either line orders {both}: complete line {a.line}'s {a.op} "
            f"(shmem.quiet(), or its context's quiet) on every path before line {b.line} runs"
        )
    if a.writes and b.writes:
        return (
            f"no barrier or quiet placed next to either line orders {both}, which write the same memory: give each "
            "writer (or each round) its own elements, or make one wait for the other's signal before it writes"
        )
    writer, reader = (a, b) if a.writes else (b, a)
    return (
        f"no barrier or quiet placed next to either line orders {both}: give each round its own buffer (e.g. one "
        f"slot per step), or make PE {reader.pe} signal PE {writer.pe} after line {reader.line} and PE "
        f"{writer.pe} wait for that signal before line {writer.line}"
    )


def _late_zeroing(zeroing: _Access, other: _Access) -> tuple[str, Fix]:
    """The hint for a race with the library's own zeroing after an allocation's barrier (see
    :data:`shmem_notebook.deviations.LATE_ZEROING`), and its fix: a barrier after the allocation."""
    library = by_key(LATE_ZEROING).versions.split(" (")[0]
    return (
        f"line {zeroing.line}'s allocation (shmem.zeros, or shmem.alloc with clear=True) zeroes after its barrier "
        f"on {library}'s OSHMEM: line {other.line}'s {other.op} from PE {other.pe} can land before PE {zeroing.pe} "
        f"zeroes; add shmem.barrier_all() after line {zeroing.line}"
    ), _fix(Edit((zeroing.line,), "shmem.barrier_all()", every_pe=True))


def _advise(a: _Access, b: _Access, sim: _Simulation) -> tuple[str, Fix | None]:
    """The hint and fix the race's kind suggests (unchecked)."""
    if "zeroing" in (a.op, b.op):
        return _late_zeroing(*((a, b) if a.op == "zeroing" else (b, a)))
    issued_before = b.point[a.pe] >= a.point[a.pe]
    if a.mode == "atomic" and b.mode == "atomic":
        text = (
            f"atomics on one location must all use one datatype ({a.dtype} and {b.dtype} here); "
            "use the same dtype for every atomic on it"
        )
        if _interleaved(a, b, sim):
            return text, None
        lines, _ = _first_to_run(a, b, sim)
        return (
            f"{text}, or call shmem.barrier_all() after line {lines[0]} and before line {lines[1]}",
            _fix(Edit(lines, "shmem.barrier_all()", every_pe=True)),
        )
    if a.locks or b.locks:
        return lock_advice(a, b, sim)
    if issued_before:  # what is missing is completion
        if a.ctx:
            return (
                f"the {a.op} on a context is completed only by that context's quiet (shmem.quiet() and "
                f"shmem.barrier_all() complete the default context only): call ctx.quiet() after line {a.line}, "
                "before the synchronisation"
            ), _fix(Edit((a.line,), "{ctx}.quiet()"))
        if a.pe == b.pe:
            own = a.remote and a.writes and a.target == a.pe  # surprising: the call returned, the data is local
            why = f"a {a.op} to your own PE is complete only after quiet or a barrier, so it" if own else f"the {a.op}"
            return (
                f"{why} may still be in flight: call shmem.quiet() after line {a.line}",
                _fix(Edit((a.line,), "shmem.quiet()")),
            )
        flags = _flag_writes(a, b, sim)
        if flags:
            call = _ordering_call(a, sim.events[flags[0][0]][flags[0][1]])
            return (
                f"the {a.op} may arrive after the flag (line {_line(sim, flags[0])}): call {call} after line "
                f"{a.line}, between the data and the flag write"
            ), _fix(Edit((a.line,), call))
        return (
            f"the {a.op} is not complete when the other access runs{_why_not(a, b, sim)}: call shmem.quiet() after "
            f"line {a.line}, before the synchronisation"
        ), _fix(Edit((a.line,), "shmem.quiet()"))
    for first, second in ((a, b), (b, a)):
        flags = _flag_writes(first, second, sim, before=True)
        if flags:
            return _flag_first_advice(first, second, sim, max(flags, key=lambda f: f[1]))
    if a.pe != b.pe and a.line == b.line:
        return (
            f"PEs {a.pe} and {b.pe} both run line {a.line} on this memory at the same time, which no barrier "
            "orders: let one PE do it, give each PE its own elements, or use atomics"
        ), None
    if a.pe != b.pe and _shared_update(a, b, sim):
        return (
            f"lines {min(a.line, b.line)} and {max(a.line, b.line)} read, change and write back memory that "
            "other PEs update the same way at the same time: make the update one atomic (e.g. "
            "shmem.atomic_add), or hold a lock around it"
        ), None
    lines, known = _first_to_run(a, b, sim)
    barrier = _fix(Edit(lines, "shmem.barrier_all()", every_pe=True))
    where = (
        f"after line {lines[0]} and before line {lines[1]}" if known else f"between line {lines[0]} and line {lines[1]}"
    )
    if a.mode == "atomic" or b.mode == "atomic":
        plain = b if a.mode == "atomic" else a
        if _interleaved(a, b, sim):
            return (
                f"other PEs update this location with atomics while line {plain.line}'s {plain.op} "
                "accesses it plainly: use atomics for every access to it (on your own PE too, e.g. "
                "shmem.atomic_add(..., me)), or separate the phases with shmem.barrier_all()"
            ), None
        return (
            f"use atomics for every access to this location (e.g. shmem.atomic_fetch / atomic_set), "
            f"or call shmem.barrier_all() {where}"
        ), barrier
    return (f"a shmem.barrier_all() {where} (or put + quiet + a flag the reader waits on) orders them"), barrier


def _own_lines(a: _Access, b: _Access, sim: _Simulation) -> tuple[int, int] | None:
    """``(own line of a, own line of b)`` when both were made inside the one call the cell made at their line
    (their own lines differ), else None."""
    own = tuple(getattr(sim.events[x.pe][x.index], "at", None) for x in (a, b))
    if a.line != b.line or None in own or own[0] == own[1]:
        return None
    return own  # type: ignore[return-value]  # no None in it


def _in_one_call(a: _Access, b: _Access, sim: _Simulation, first: int, second: int) -> tuple[str, Fix | None]:
    """The hint and fix for ``a`` and ``b`` made inside what the cell's line runs, at their own lines ``first`` and
    ``second``: the advice at those lines, an edit of the function when it is the cell's (checked, as any fix),
    else the prose (the function is a module's: ``fix`` None)."""
    inner = _at_own_lines(sim)
    a, b = dataclasses.replace(a, line=first), dataclasses.replace(b, line=second)
    said = f"both are in what the cell's line {sim.events[a.pe][a.index].line} calls: make the change in the function: "
    if first < RACE_LINES and second < RACE_LINES:
        text, fix = advice(a, b, inner)
        if fix is not None or text != _what_to_change(a, b):
            return said + text, fix
    return said + _advise(a, b, inner)[0], None  # not an edit of the cell: the change its kind suggests


def _at_own_lines(sim: _Simulation) -> _Simulation:
    """``sim`` with each event made in a function the cell called at its own line (once per simulation)."""
    inner: _Simulation | None = sim.__dict__.get("_own_lines")
    if inner is None:
        inner = copy.copy(sim)
        inner.events = {
            pe: [e if getattr(e, "at", None) is None else e._replace(line=e.at) for e in evs]
            for pe, evs in sim.events.items()
        }
        inner.__dict__.pop("_fixes", None)  # replays with the call lines are not these
        inner.__dict__.pop("_own_lines", None)
        inner.__dict__.pop("_writes_to", None)
        sim.__dict__["_own_lines"] = inner
    return inner


def _fix(*edits: Edit) -> Fix:
    return Fix(tuple(edits))


def _line(sim: _Simulation, where: tuple[int, int]) -> int:
    pe, index = where
    return sim.events[pe][index].line


def _ordering_call(data: _Access, flag: Event) -> str:
    """What orders the access ``data`` before the flag write ``flag`` on the same PE."""
    same_target = data.remote and data.writes and data.target == flag.pe and data.ctx == flag.ctx
    return "shmem.fence()" if same_target else "shmem.quiet()"


def _why_not(a: _Access, b: _Access, sim: _Simulation) -> str:
    """Why the synchronisation between ``a`` and ``b`` did not complete ``a``: the calls on the way."""
    evs, limit = sim.events[a.pe], b.point[a.pe]
    said: list[str] = []
    for i in range(a.index + 1, min(len(evs), a.index + 1 + _LOOKBACK)):
        point, e = sim.points[a.pe][i], evs[i]
        collective = e.kind == "sync" and e.op == "sync_all"  # the others left it one tick before this PE did
        if point is None or point[a.pe] - collective > limit:
            break
        if collective:
            name = "Team.sync()" if e.members else "shmem.sync_all()"
            if name + " completes nothing" not in said:
                said.append(name + " completes nothing")
    if not said:
        return " (a wait sees only the flag it waited on)" if sim.waited else ""
    return f" ({'; '.join(said)})"


def _flag_writes(a: _Access, b: _Access, sim: _Simulation, before: bool = False) -> list[tuple[int, int]]:
    """Writes by ``a``'s PE after ``a`` (``before``: before it) that a wait ordering ``b`` saw: ``[(pe, index)]``.

    With ``before``, a wait that happened before ``a`` does not count: the flag was consumed
    before ``a`` (the next item of a pipeline, not a flag written too early)."""
    found: list[tuple[int, int]] = []
    for (wpe, wi), cands in sim.waited.items():
        point = sim.points[wpe][wi]
        if point is None or b.point[wpe] < point[wpe] or (before and a.point[wpe] >= point[wpe]):
            continue
        found.extend((q, j) for q, j in cands if q == a.pe and (j < a.index if before else j > a.index))
    return found


def _flag_first_advice(first: _Access, second: _Access, sim: _Simulation, flag: tuple[int, int]) -> tuple[str, Fix]:
    """``first``'s PE wrote the flag ``second`` waited on before ``first`` happened."""
    flag_line = _line(sim, flag)
    if first.writes:
        call = _ordering_call(first, sim.events[flag[0]][flag[1]]) if first.remote else ""
        then = f", then {call}" if call else ""
        return (
            f"PE {first.pe} writes the flag (line {flag_line}) before line {first.line}'s {first.op}: "
            f"do the {first.op} first{then}, then the flag"
        ), _fix(Edit((first.line,), call, move=flag_line))
    call = "shmem.quiet()" if first.op == "get_nbi" else ""
    then = f", then {call}" if call else ""
    return (
        f"PE {first.pe} acknowledges (line {flag_line}) before line {first.line}'s {first.op} has read the data, "
        f"so PE {second.pe} may overwrite it first: do the {first.op} first{then}, then the acknowledgement"
    ), _fix(Edit((first.line,), call, move=flag_line))


def _shared_update(a: _Access, b: _Access, sim: _Simulation) -> bool:
    """Do both PEs read and write the racing memory at the racing lines (a read-modify-write each does)?"""
    lines, lo, hi = {a.line, b.line}, max(a.lo, b.lo), min(a.hi, b.hi)
    for pe in (a.pe, b.pe):
        modes: set[str] = set()
        for e in sim.events[pe]:
            if e.line in lines and touches(pe, e, a.owner, a.space, lo, hi):
                modes.add(e.mode if e.kind == "mem" else "read" if e.op in _READ_OPS else "write")
        if modes != {"read", "write"}:
            return False
    return True


def _interleaved(a: _Access, b: _Access, sim: _Simulation) -> bool:
    """Did either line run again since its PE's last collective synchronisation (a loop with none)?"""
    return a.line in _ran_since_sync(a, sim) or b.line in _ran_since_sync(b, sim)


def _ran_since_sync(x: _Access, sim: _Simulation) -> set[int]:
    """The lines PE ``x.pe`` ran after its last collective synchronisation before ``x``."""
    lines: set[int]
    evs, lines = sim.events[x.pe], set()
    for i in range(x.index - 1, max(-1, x.index - 1 - _LOOKBACK), -1):
        e = evs[i]
        if e.kind == "coll" or (e.kind == "sync" and e.op not in _LOCAL_SYNCS):
            break
        lines.add(e.line)
    return lines


def _first_to_run(a: _Access, b: _Access, sim: _Simulation) -> tuple[tuple[int, ...], bool]:
    """``(lines, known)``: the two lines, the one that runs first since the last barrier first
    (in a loop, a line at the end of one iteration runs before one at the start of the next);
    ``known`` False when only the order in the cell's text says so."""
    b_first = b.line in _ran_since_sync(a, sim)
    a_first = a.line in _ran_since_sync(b, sim)
    if b_first and not a_first:
        return (b.line, a.line), True
    if a_first and not b_first:
        return (a.line, b.line), True
    return tuple(sorted((a.line, b.line))), False
