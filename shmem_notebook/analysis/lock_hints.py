"""The hint and fix for a race one side of which holds a lock (client side, for :mod:`.hints`).

:func:`lock_advice` says, for two racing accesses of which one holds a lock the other does not:

- a put through a context made holding the lock but not completed inside it (``clear_lock`` completes
  the default context only): ``ctx.quiet()`` after the put, before the lock is released;
- an access outside the lock its PE takes before or after it: the access moved into the locked region
  (when the lock is taken by a ``with`` whose ``__enter__``/``__exit__`` the cell defines, into the
  ``with`` block, next to the region's first or last statement; a statement that is the only one in its
  ``if`` moves with its ``if``);
- an access on a PE that never takes the lock: the other side's ``set_lock``/``clear_lock`` copied
  around it.

The fix is unchecked here: :func:`.hints.advice` checks it on the trace (:mod:`.fixcheck`).
"""

from __future__ import annotations

import ast
from typing import TYPE_CHECKING

from . import fixcheck
from .edits import Edit, Fix

__all__ = ["lock_advice"]

if TYPE_CHECKING:
    from .fixcheck import _Layout
    from .happens_before import _Access, _Simulation
    from .model import Event


def lock_advice(a: _Access, b: _Access, sim: _Simulation) -> tuple[str, Fix | None]:
    """``(hint, fix)`` for the race of ``a`` and ``b``, one holding a lock the other does not."""
    locked, other = (a, b) if a.locks - b.locks else (b, a)
    lock = min(locked.locks - other.locks)
    text = f"hold the lock of line {locked.line} around line {other.line} too (shmem.set_lock / shmem.clear_lock)"
    evs = sim.events[other.pe]
    if other.ctx and lock in sim.locks_at.get((other.pe, other.index), ()):
        return (
            f"PE {other.pe}'s {other.op} at line {other.line} goes through a context while it holds the lock, but "
            f"releasing the lock completes the default context only, so the {other.op} may land after PE "
            f"{locked.pe} took the lock for line {locked.line}'s {locked.op}: call ctx.quiet() after line "
            f"{other.line}, before the lock is released"
        ), Fix((Edit((other.line,), "{ctx}.quiet()"),))
    sets = [i for i, e in enumerate(evs) if e.kind == "lock" and e.lock == lock and e.op == "set_lock"]
    clears = [i for i, e in enumerate(evs) if e.kind == "lock" and e.lock == lock and e.op == "clear_lock"]
    later = [i for i in sets if i > other.index]
    earlier = [i for i in clears if i < other.index]
    if earlier:  # the critical section ended before the access: move the access into it
        end = earlier[-1]
        start = max((i for i in sets if i < end), default=-1)
        return _into_region(other, locked, sim, evs, start, end, last=True, text=text)
    if later:
        start = later[0]
        end = min((i for i in clears if i > start), default=len(evs))
        return _into_region(other, locked, sim, evs, start, end, last=False, text=text)
    mine = sim.events[locked.pe]
    taken = [i for i, e in enumerate(mine) if e.kind == "lock" and e.lock == lock and i < locked.index]
    freed = [
        i
        for i, e in enumerate(mine)
        if e.kind == "lock" and e.lock == lock and e.op == "clear_lock" and i > locked.index
    ]
    if not (taken and freed):
        return text, None
    return text, Fix(
        (Edit((other.line,), copy=mine[taken[-1]].line, before=True), Edit((other.line,), copy=mine[freed[0]].line))
    )


def _into_region(
    other: _Access,
    locked: _Access,
    sim: _Simulation,
    evs: list[Event],
    start: int,
    end: int,
    last: bool,
    text: str,
) -> tuple[str, Fix | None]:
    """Move ``other``'s statement into its PE's locked region ``evs[start + 1:end]``: after its last
    statement (``last``) or before its first. Where the lock calls are the cell's own lines, next to
    them; where they are inside functions (a ``with``'s ``__enter__``/``__exit__``), next to the
    region's statements in the cell, in the ``with`` block."""
    edge = evs[end] if last else evs[start]
    layout = fixcheck.layout(sim)
    if layout is None or not layout.elsewhere(edge.line):
        return text, Fix((Edit((edge.line,), move=_movable(other.line, layout, edge.line), before=last),))
    lines = [e.line for e in evs[start + 1 : end] if not layout.elsewhere(e.line)]
    if not lines:
        return text, None
    try:
        anchor, block = _in_block(lines[-1] if last else lines[0], other.line, layout)
        moved = _movable(other.line, layout, anchor.lineno)
        stmt = layout.statement(moved)
    except ValueError:  # a line that is no statement of the cell
        return text, None
    what = f"line {moved}" if stmt.end_lineno == moved else f"lines {moved}-{stmt.end_lineno}"
    into = f"the with block at line {block.lineno}" if block is not None else "the locked region"
    place = f"after line {anchor.end_lineno}" if last else f"before line {anchor.lineno}"
    return (
        f"PE {other.pe}'s {other.op} at line {other.line} is outside the lock that PE {locked.pe} holds for line "
        f"{locked.line}'s {locked.op}: move {what} into {into}, {place}"
    ), Fix((Edit((anchor.lineno,), move=moved, before=not last),))


def _in_block(line: int, away: int, layout: _Layout) -> tuple[ast.stmt, ast.With | ast.AsyncWith | None]:
    """``(statement, with)``: the statement of the locked region at cell ``line``, widened to its place in
    the nearest ``with`` block around it that does not hold line ``away`` (None: no such ``with``)."""
    chain: ast.AST
    stmt = chain = layout.statement(line)
    while not isinstance(layout.parents.get(chain), ast.Module) and chain in layout.parents:
        parent = layout.parents[chain]
        if isinstance(parent, (ast.With, ast.AsyncWith)) and not parent.lineno <= away <= parent.end_lineno:  # type: ignore[operator]  # parsed
            return chain, parent  # type: ignore[return-value]  # in the with's body: a statement
        chain = parent
    return stmt, None


def _movable(line: int, layout: _Layout | None, anchor: int) -> int:
    """The first line of the statement to move for cell ``line``: its own, or the ``if`` it is the only
    statement of (no ``else``), out to the one that does not hold line ``anchor``."""
    if layout is None:
        return line
    try:
        stmt = layout.statement(line)
    except ValueError:
        return line
    while True:
        parent = layout.parents.get(stmt)
        if (
            isinstance(parent, ast.If)
            and parent.body == [stmt]
            and not parent.orelse
            and not parent.lineno <= anchor <= parent.end_lineno  # type: ignore[operator]  # ast sets it
        ):
            stmt = parent
        else:
            return stmt.lineno
