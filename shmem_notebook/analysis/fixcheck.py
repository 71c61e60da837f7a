"""A race's fix, checked on the recorded trace before it is offered (client side, for :mod:`.hints`).

A :class:`~.hints.Fix` adds synchronisation next to a statement of the cell, moves a statement or
copies one. :func:`orders` adds the events the edited cell would record to the events this run
recorded, on the PEs that pass that place and as often as they pass it, simulates them again
(the run's own simulation, :meth:`rerun`), checks them as the analysis does (``racing``) and says
whether any pair of the two racing accesses' kinds (every round of a loop, not only the pair
reported) still races. Replays are cached by the edited cell: fixes that make the same cell cost one.

Where a PE passes a place is read from the cell's source: a PE passes a statement of a ``for``
loop's body once per iteration, whether or not the statement recorded anything on that PE (an
``if`` it skipped). A PE that recorded nothing in some iterations is placed both ways (its missing
passes first, then last); a placing in which a wait would come before the write it was matched to
is not one the PEs could run, and the fix must order the accesses in every other. A function's
body is placed where the cell calls it, if it calls it from one line.

None (not checked) for a run without its source (synthetic traces, the command-line runner), a
trace of more than :data:`CHECK_EVENTS` events, or code in functions called from several lines or
outside the cell: :func:`.hints.advice` then offers the prose alone.
"""

import ast
from typing import Any

from ..operations import event
from . import edits

__all__ = ["orders", "in_loop", "layout", "CHECK_EVENTS"]

#: a trace of more events (after folding repeats) is not simulated again: its fixes go unchecked
CHECK_EVENTS = 50_000

#: the code of an edit -> the event it records (``{ctx}``: the context of the call it follows)
_CODE = {
    "shmem.barrier_all()": ("barrier_all", False),
    "shmem.quiet()": ("quiet", False),
    "shmem.fence()": ("fence", False),
    "{ctx}.quiet()": ("quiet", True),
    "{ctx}.fence()": ("fence", True),
}


def orders(fix: edits.Fix, a: Any, b: Any, sim: Any) -> bool | None:
    """Does ``fix`` order accesses ``a`` and ``b`` of ``sim`` (True/False)? None when it cannot tell."""
    source = getattr(sim, "source", None)
    if source is None or any(e.code not in _CODE and e.code for e in fix.edits):
        return None
    if sum(len(evs) for evs in sim.events.values()) > CHECK_EVENTS:
        return None
    try:
        edited = edits.apply_fix(source, fix)  # fixes that make the same cell are one replay
        ast.parse(edited)  # (a statement moved out of an `if` it was all of leaves the `if` empty)
    except (ValueError, SyntaxError):
        return False
    cache = sim.__dict__.setdefault("_fixes", {})
    if edited not in cache:
        try:
            cache[edited] = _replays(fix, sim, _layout(sim))
        except Unplaceable:
            cache[edited] = None
    replays = cache[edited]
    if replays is None:
        return None
    if not replays:
        return False  # not a place the PEs can pass as the edit says (a move onto itself, unequal passes)
    pair = (_kind(a), _kind(b))
    return not any(pair in racing or pair[::-1] in racing for racing in replays)


def _kind(x: Any) -> tuple[object, ...]:
    """What an access is in any run of the cell: who, where in the cell, what (:meth:`.happens_before._Access.kind`
    without the locks, which a fix may add)."""
    return x.pe, x.line, x.op, x.mode, x.remote, x.target, x.owner, x.space


def in_loop(sim: Any, line: int) -> bool:
    """Is cell line ``line`` in a ``for`` loop that a barrier placed next to it stays in?"""
    try:
        anchor = _layout(sim).anchor(edits.Edit((line,), "shmem.barrier_all()", every_pe=True))
    except (ValueError, SyntaxError):
        return False
    return isinstance(_layout(sim).parents.get(anchor), (ast.For, ast.AsyncFor))


def layout(sim: Any) -> "_Layout | None":
    """The cell's statements as the checks see them (which line is in a function body, the parents of each
    statement); None without the cell's source or when it does not parse."""
    if getattr(sim, "source", None) is None:
        return None
    try:
        return _layout(sim)
    except SyntaxError:
        return None


# -- the cell's statements ----------------------------------------------------------------------
class _Layout:
    """The cell's statements: which one a line is in, the loops around it, the lines of function bodies."""

    def __init__(self, source: str) -> None:
        self.tree = ast.parse(source)
        self.parents = {}
        for node in ast.walk(self.tree):
            for child in ast.iter_child_nodes(node):
                self.parents[child] = node
        self.statements = [n for n in ast.walk(self.tree) if isinstance(n, ast.stmt)]
        self.lines = len(source.splitlines())
        self._simple: dict[ast.AST, bool] = {}
        self.in_def = {}  # line of a function body -> the line of its one call in the cell (None: not one)
        names = {}  # a function's name, and names bound to it (f = bump) -> the function
        for n in self.statements:
            if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef)):
                names[n.name] = n
        for n in self.statements:
            if isinstance(n, ast.Assign) and isinstance(n.value, ast.Name) and n.value.id in names:
                names.update((t.id, names[n.value.id]) for t in n.targets if isinstance(t, ast.Name))
        calls: dict[ast.FunctionDef | ast.AsyncFunctionDef, list[int]] = {}
        for n in ast.walk(self.tree):  # type: ignore[assignment]  # any node: narrowed below
            if isinstance(n, ast.Call) and isinstance(n.func, ast.Name) and n.func.id in names:
                calls.setdefault(names[n.func.id], []).append(n.lineno)
        self._callees: dict[ast.AST, set[int]]
        self._names, self._callees = names, {}
        for n in set(names.values()):
            sites = calls.get(n, [])
            for line in range(n.body[0].lineno, n.end_lineno + 1):  # type: ignore[operator]  # ast sets it
                self.in_def[line] = sites[0] if len(sites) == 1 else None

    def simple(self, stmt: ast.AST) -> bool:
        """Does ``stmt`` run its body once each time it runs (no loop inside)?"""
        if stmt not in self._simple:
            self._simple[stmt] = not any(isinstance(n, (ast.For, ast.AsyncFor, ast.While)) for n in ast.walk(stmt))
        return self._simple[stmt]

    def caller(self, line: int) -> int:
        """The cell line whose place an event of ``line`` takes: its own, or the call of the function it is
        in (followed out of nested functions); raises :class:`Unplaceable` for a function called from
        several places or none, or code outside the cell."""
        seen = set()
        while line in self.in_def:
            site = self.in_def[line]
            if site is None or site in seen:
                raise Unplaceable(f"line {line} runs where a function is called, and it is not one place")
            seen.add(site)
            line = site
        if not 1 <= line <= self.lines:
            raise Unplaceable(f"line {line} is outside the cell")
        return line

    def callees(self, stmt: ast.AST) -> set[int]:
        """The lines of the cell's functions that ``stmt`` calls, directly or through them."""
        if stmt not in self._callees:
            lines, todo, seen = set(), [stmt], set()  # type: ignore[var-annotated]  # no room: 420-line limit
            while todo:
                node = todo.pop()
                for n in ast.walk(node):
                    if isinstance(n, ast.Call) and isinstance(n.func, ast.Name) and n.func.id in self._names:
                        f = self._names[n.func.id]
                        if f not in seen:
                            seen.add(f)
                            lines.update(range(f.body[0].lineno, f.end_lineno + 1))  # type: ignore[operator]  # parsed
                            todo.extend(f.body)
            self._callees[stmt] = lines
        return self._callees[stmt]

    def elsewhere(self, line: int) -> bool:
        """Is ``line`` run from where a call is: a function body, or code outside the cell (another place)?"""
        return line in self.in_def or not 1 <= line <= self.lines

    def anchor(self, edit: edits.Edit) -> ast.stmt:
        return edits.anchor_of(edit, self.statements, self.parents)

    def statement(self, line: int) -> ast.stmt:
        return edits.innermost(line, self.statements)


class Unplaceable(ValueError):
    """The events do not say where a PE passed a place (code in a function called from several places)."""


def _layout(sim: Any) -> _Layout:
    if getattr(sim, "_layout", None) is None:
        sim._layout = _Layout(sim.source)
    return sim._layout  # type: ignore[no-any-return]  # sim: Any, its type not imported (line limit)


def _start(evs: list[Any]) -> int:
    """Where this cell's events begin: after the operations earlier cells left in flight and the boundary."""
    for i, e in enumerate(evs):
        if e.kind == "sync" and e.op == "sync_all" and e.line == 0:
            return i + 1
    return 0


def _runs(evs: list[Any], stmt: ast.stmt, layout: _Layout) -> list[tuple[int, int]]:
    """``[(i, j)]``: the events ``[i, j)`` of each time the PE ran ``stmt`` (events of functions it calls join)."""
    lo, hi, simple, called = stmt.lineno, stmt.end_lineno, layout.simple(stmt), layout.callees(stmt)
    runs, first, last = [], None, 0  # type: ignore[var-annotated]  # no room: 420-line limit
    for i in range(_start(evs), len(evs)):
        e = evs[i]
        inside = lo <= e.line <= hi
        if not inside and e.line in layout.in_def:  # a function called from this statement alone
            try:
                inside = lo <= layout.caller(e.line) <= hi  # type: ignore[operator]  # ast sets end_lineno
            except Unplaceable:
                pass
        if not inside and (e.line in called or not 1 <= e.line <= layout.lines):
            if runs and runs[-1][1] == i:
                runs[-1] = (runs[-1][0], i + 1)
            continue
        if not inside:
            continue
        key = (e.kind, e.op, e.line)
        if runs and runs[-1][1] == i and not (simple and (key == first or e.line < last)):
            runs[-1] = (runs[-1][0], i + 1)
        else:  # a new run: after other events, or the statement begun again (a loop of it)
            runs.append((i, i + 1))
            first = key
        last = e.line
    return runs


def _passes(evs: list[Any], anchor: ast.stmt, before: bool, layout: _Layout) -> tuple[list[int], Any, Any]:
    """``(points, entry, exit)``: the indices before which the PE passes the place next to ``anchor``
    (a statement of the module or of a ``for`` body), and where it enters and leaves that loop."""
    loop = layout.parents.get(anchor)
    body = loop.body  # type: ignore[union-attr]  # a statement's parent has a body
    at = body.index(anchor)
    spans = [(s.lineno, s.end_lineno) for s in body]

    def position(line: int) -> int | None:
        for k, (lo, hi) in enumerate(spans):
            if lo <= line <= hi:
                return k
        return None

    points, entry, exit_ = [], None, None
    last: int
    prev = first = last = None  # type: ignore[assignment]  # set with prev, read only then
    passed, module = False, isinstance(loop, ast.Module)
    for i in range(_start(evs), len(evs)):
        e = evs[i]
        line = layout.caller(e.line)  # a function's body runs where it is called
        q = position(line)
        if q is None and module:
            continue
        if q is None:
            if prev is not None:  # left the loop: the iteration ends here
                if not passed:
                    points.append(i)
                exit_, prev = i, None
            continue
        if entry is None:
            entry = i
        key = (e.kind, e.op, e.line)
        again = (
            not module
            and prev is not None
            and (q < prev or (q == prev and layout.simple(body[q]) and (key == first or line < last)))
        )
        if again:  # a new iteration
            if not passed:
                points.append(i)
            passed = False
        if prev is None or q != prev or again:
            first = key
        if not passed and (q >= at if before else q > at):
            points.append(i)
            passed = True
        prev, last = q, line
    if prev is not None:
        if not passed:
            points.append(len(evs))
        exit_ = len(evs)
    if entry is None:  # never in the loop: where it would have been
        after = [
            i
            for i in range(_start(evs), len(evs))
            if evs[i].line > getattr(loop, "end_lineno", 0) and not layout.elsewhere(evs[i].line)
        ]
        entry = exit_ = after[0] if after else len(evs)
    if module:
        points = points[:1] or [len(evs)]
    return points, entry, exit_


# -- the edited trace -------------------------------------------------------------------------
def _replays(fix: edits.Fix, sim: Any, layout: _Layout) -> list[set[tuple[Any, Any]]]:
    """The racing pairs of kinds (:func:`_kind`) of each replay of the edited events (two replays when
    some PE's passes are ambiguous); ``[]`` when the edit cannot be placed so."""
    try:
        plans = _plans(fix, sim, layout)
    except Unplaceable:
        raise
    except ValueError:
        return []
    out, source = [], _recounted(fix, sim)
    for inserts, removed in plans:
        events, where = {}, {}
        for pe, evs in source.items():
            new, index = [], {}  # type: ignore[var-annotated]  # no room: 420-line limit
            at = inserts.get(pe, {})
            for i in range(len(evs) + 1):
                for raw, old in at.get(i, ()):
                    if old is not None:
                        index[old] = len(new)
                    new.append(raw)
                if i < len(evs) and (pe, i) not in removed:
                    index[i] = len(new)
                    new.append(evs[i])
            events[pe], where[pe] = new, index
        replay = sim.rerun(events)
        if _consistent(replay, where, sim):  # every pair of kinds still racing, as the analysis finds them
            out.append({(_kind(a), _kind(b)) for a, b, *_ in replay.racing()})
    return out


def _recounted(fix: edits.Fix, sim: Any) -> dict[int, list[Any]]:
    """``sim``'s events with the waits at the line whose count ``fix`` rewrites (``Edit.replace``) waiting
    for the new count; raises :class:`Unplaceable` when the new count is not the old one plus a number
    (counts of integers, ``npes`` and the loop's variables, e.g. ``r - 2`` -> ``r - 1``)."""
    events: dict[int, list[Any]] = sim.events
    for edit in fix.edits:
        if edit.replace is None:
            continue
        more = edits.count_delta(*edit.replace, sim.n)
        if more is None:
            raise Unplaceable(f"{edit.replace[1]!r} is not {edit.replace[0]!r} plus a number")
        line = edit.line[0]
        events = {
            pe: [e._replace(value=e.value + more) if _counted(e, line) else e for e in evs]
            for pe, evs in events.items()
        }
    return events


def _counted(e: Any, line: int) -> bool:
    return e.kind == "wait" and e.line == line and e.value is not None


def _consistent(replay: Any, where: dict[int, dict[int, int]], sim: Any) -> bool:
    """Could the PEs have run as placed? Every wait still comes after the writes it was matched to."""
    for (pe, i), writes in sim.waited.items():
        at = replay.points[pe][where[pe][i]]
        for q, j in writes:
            point = replay.points[q][where[q][j]] if j in where[q] else None
            if at is None or point is None or point[pe] >= at[pe]:
                return False
    return True


def _plans(fix: edits.Fix, sim: Any, layout: _Layout) -> list[tuple[dict[int, Any], set[tuple[int, int]]]]:
    """``[(inserts, removed)]``: ``inserts[pe][i]``, the ``(event, old index or None)`` placed before
    event ``i``; ``removed``, the moved ``(pe, i)``. Raises ValueError when the edit cannot be placed."""
    anchor: Any
    late, early, removed, ambiguous = {}, {}, set(), False  # type: ignore[var-annotated]  # no room: 420-line limit
    for edit in fix.edits:
        anchor = layout.anchor(edit)
        moved = layout.statement(edit.move) if edit.move is not None else None
        copied = layout.statement(edit.copy) if edit.copy is not None else None
        if moved is not None and moved.lineno <= anchor.end_lineno and anchor.lineno <= moved.end_lineno:
            raise ValueError("a statement moved next to itself")
        template = _template(copied, sim, layout) if copied is not None else []
        passes = {}
        for pe, evs in sim.events.items():
            if edit.every_pe:
                passes[pe] = _passes(evs, anchor, edit.before, layout)
            else:
                runs = _runs(evs, anchor, layout)
                points = [i if edit.before else j for i, j in runs]
                passes[pe] = (points, None, None)
        if edit.every_pe:
            most = max(len(p[0]) for p in passes.values())
            ambiguous |= any(len(p[0]) < most for p in passes.values())
        for pe, (points, entry, exit_) in passes.items():
            evs = sim.events[pe]
            moves = _runs(evs, moved, layout) if moved is not None else []
            if moves and len(moves) != len(points):  # (a PE that never ran it records nothing where it goes)
                raise ValueError("the moved statement runs a different number of times")
            for which, extra in (
                (late, [exit_] * (most - len(points)) if edit.every_pe else []),
                (early, [entry] * (most - len(points)) if edit.every_pe else []),
            ):
                ordered = sorted(points + extra)
                for k, point in enumerate(ordered):
                    new = _code_events(edit, evs, point, anchor)
                    if moves and k < len(moves):
                        i, j = moves[k]
                        new += [(evs[m], m) for m in range(i, j)]
                    new += [(e, None) for e in template]
                    which.setdefault(pe, {}).setdefault(point, []).extend(new)
            for i, j in moves:
                removed.update((pe, m) for m in range(i, j))
    return [(late, removed), (early, removed)] if ambiguous else [(late, removed)]


def _code_events(edit: edits.Edit, evs: list[Any], point: int, anchor: ast.stmt) -> list[tuple[Any, int | None]]:
    if not edit.code:
        return []
    op, own_ctx = _CODE[edit.code]
    ctx = 0
    if own_ctx:  # the context of the last call of the statement before this point
        ctx = next(
            (
                evs[i].ctx
                for i in range(point - 1, -1, -1)
                if evs[i].kind == "rma" and anchor.lineno <= evs[i].line <= anchor.end_lineno
            ),
            0,
        )
    return [(event(["sync", op, anchor.end_lineno, ctx, None]), None)]


def _template(stmt: ast.stmt, sim: Any, layout: _Layout) -> list[Any]:
    """The events of the first run of ``stmt`` on any PE (what a copy of it records)."""
    for evs in sim.events.values():
        runs = _runs(evs, stmt, layout)
        if runs:
            i, j = runs[0]
            return list(evs[i:j])
    raise ValueError("the copied statement ran nowhere")
