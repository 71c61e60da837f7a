"""A race's fix as an edit of the cell (client side, for :mod:`.hints` and :mod:`.fixcheck`).

An :class:`Edit` inserts a statement next to one of the cell, moves one or copies one; a
:class:`Fix` is the edits that order a race (``Race.fix``); :func:`apply_fix` applies one to
the cell's source, :func:`apply_fixes` several (``CellResult.fixed_code``), and :func:`anchor_of`
says which statement an edit goes next to. :func:`recount` writes a wait's count larger as the user
wrote it (``npes - 2`` -> ``npes - 1``), :func:`count_value` says what a count is at ``npes`` PEs and
:func:`count_delta` how much larger one count is than another (``r - 2`` -> ``r - 1``: 1).
"""

from __future__ import annotations

import ast
from dataclasses import dataclass
from typing import TYPE_CHECKING

__all__ = ["Edit", "Fix", "apply_fix", "apply_fixes", "anchor_of", "innermost", "recount", "count_value", "count_delta"]

if TYPE_CHECKING:
    from collections.abc import Callable, Mapping, Sequence


@dataclass(frozen=True)
class Edit:
    """One change to a cell, at the statement on cell line ``line[0]``.

    Inserts ``code`` after that statement (``before``: before it), then the statement on
    line ``move`` (moved there) or a copy of the one on line ``copy``. The new statements
    are indented like the statement they follow, so they run on the PEs that run it.
    ``every_pe`` (a collective): the place is hoisted out of any ``if``, ``while``,
    ``try`` or ``with`` around the line (``for`` loops are kept), and a line inside a
    ``def`` is passed over for the next of ``line`` (a function's body runs where it is
    called). ``{ctx}`` in ``code`` stands for the ``ctx=`` argument of the call on the line.
    """

    line: tuple[int, ...]
    code: str = ""
    move: int | None = None
    copy: int | None = None
    before: bool = False
    every_pe: bool = False
    replace: tuple[str, str] | None = None

    def __str__(self) -> str:
        where = " or ".join(f"line {n}" for n in self.line)
        what = [self.code.replace("{ctx}", "ctx")] if self.code else []
        if self.move is not None:
            what.append(f"the statement of line {self.move} (moved)")
        if self.copy is not None:
            what.append(f"a copy of line {self.copy}")
        if self.replace is not None:
            return f"at line {self.line[0]}: {self.replace[1]} instead of {self.replace[0]}"
        place = "before" if self.before else "after"
        everyone = " where every PE passes" if self.every_pe else ""
        return f"{place} {where}{everyone}: {', then '.join(what)}"


@dataclass(frozen=True)
class Fix:
    """The edits that order a race (``Race.fix``); apply with :func:`apply_fix`."""

    edits: tuple[Edit, ...]

    def __str__(self) -> str:
        return "; ".join(map(str, self.edits))


# -- applying a fix to a cell --------------------------------------------------------------
def apply_fix(code: str, fix: Fix) -> str:
    """The cell ``code`` with ``fix`` (a :class:`Fix`) applied; raises ``ValueError`` if a line is not a statement."""
    return apply_fixes(code, [fix])[0]


def apply_fixes(code: str, fixes: list[Fix]) -> tuple[str, list[Fix]]:
    """``(edited, applied)``: the cell ``code`` with every :class:`Fix` of ``fixes`` applied at once (their
    lines are the cell's as given), and the fixes that were. A statement a fix inserts where an earlier
    fix inserted the same one is not repeated (two races ordered by one barrier get one); a fix that
    moves a statement an earlier fix moved is left out. Raises ``ValueError`` if a line is not a statement."""
    tree = ast.parse(code)
    parents: dict[ast.AST, ast.AST] = {}
    for node in ast.walk(tree):
        for child in ast.iter_child_nodes(node):
            parents[child] = node
    statements = [n for n in ast.walk(tree) if isinstance(n, ast.stmt)]
    lines = code.splitlines()
    written = list(lines)  # the lines with the arguments the fixes replace
    inserts: dict[int, list[str]] = {}
    deleted: set[int] = set()
    applied: list[Fix] = []
    for fix in fixes:
        planned: list[tuple[int | None, list[str]]] = []
        moving: set[int] = set()
        for edit in fix.edits:
            anchor = anchor_of(edit, statements, parents)
            indent = " " * anchor.col_offset
            new: list[str] = []
            if edit.code:
                new.append(indent + edit.code.replace("{ctx}", _ctx_of(anchor, code)))
            for other in (edit.move, edit.copy):
                if other is not None:
                    stmt = innermost(other, statements)
                    new.extend(_reindent(lines[stmt.lineno - 1 : stmt.end_lineno], stmt.col_offset, indent))
                    if other == edit.move:
                        moving.update(range(stmt.lineno - 1, stmt.end_lineno))  # type: ignore[arg-type]  # ast sets it
            if edit.replace is not None:
                _replace(written, anchor, code, *edit.replace)
            planned.append((anchor.lineno - 1 if edit.before else anchor.end_lineno, new))
        if moving & deleted:
            continue  # another fix moved that statement already
        deleted |= moving
        applied.append(fix)
        for at, new in planned:
            there = inserts.setdefault(at, [])  # type: ignore[arg-type]  # ast sets end_lineno
            if len(fixes) == 1 or not _contains(there, new):
                there.extend(new)
    out: list[str] = []
    for i in range(len(lines) + 1):
        out.extend(inserts.get(i, []))
        if i < len(lines) and i not in deleted:
            out.append(written[i])
    return "\n".join(out) + "\n", applied


def _contains(block: list[str], new: list[str]) -> bool:
    """Whether the lines ``new`` are already among ``block``, in a row."""
    n = len(new)
    return any(block[i : i + n] == new for i in range(len(block) - n + 1))


def innermost(line: int, statements: Sequence[ast.stmt]) -> ast.stmt:
    """The innermost of ``statements`` (the cell's) on cell line ``line``."""
    found = [s for s in statements if s.lineno <= line <= s.end_lineno]  # type: ignore[operator]  # ast sets it
    if not found:
        raise ValueError(f"line {line} of the cell is not in a statement")
    return max(found, key=lambda s: (s.lineno, -s.end_lineno, s.col_offset))  # type: ignore[operator]  # ast sets it


def anchor_of(edit: Edit, statements: Sequence[ast.stmt], parents: Mapping[ast.AST, ast.AST]) -> ast.stmt:
    """The statement the edit goes next to."""
    for line in edit.line:
        stmt = innermost(line, statements)
        if not edit.every_pe:
            return stmt
        chain: list[ast.AST] = [stmt]
        while not isinstance(parents.get(chain[-1]), ast.Module):
            chain.append(parents[chain[-1]])
        if any(isinstance(s, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda)) for s in chain[1:]):
            continue  # runs where the function is called
        anchor = stmt
        for s in chain[1:]:
            if isinstance(s, ast.stmt) and not isinstance(s, (ast.For, ast.AsyncFor)):
                anchor = s
        return anchor
    raise ValueError(f"lines {edit.line} are all inside functions: no place every PE passes")


def _replace(lines: list[str], stmt: ast.stmt, code: str, old: str, new: str) -> None:
    """Write the argument ``old`` of a call in ``stmt`` (on one line) as ``new`` in ``lines``."""
    for node in ast.walk(stmt):
        if isinstance(node, ast.Call):
            for arg in [*node.args, *(kw.value for kw in node.keywords)]:
                if arg.lineno == arg.end_lineno and ast.get_source_segment(code, arg) == old:
                    row = lines[arg.lineno - 1]
                    lines[arg.lineno - 1] = row[: arg.col_offset] + new + row[arg.end_col_offset :]
                    return
    raise ValueError(f"no argument {old!r} in the statement at line {stmt.lineno}")


def _ctx_of(stmt: ast.stmt, code: str) -> str:
    for node in ast.walk(stmt):
        if isinstance(node, ast.Call):
            for kw in node.keywords:
                if kw.arg == "ctx":
                    return ast.get_source_segment(code, kw.value)  # type: ignore[return-value]  # parsed from code
    return "ctx"


def _reindent(block: list[str], col: int, indent: str) -> list[str]:
    return [indent + line[col:] if line[:col].strip() == "" else line for line in block]


# -- a count written anew (a wait's) -------------------------------------------------------
def recount(text: str, more: int) -> str:
    """``text`` (a count) made ``more`` larger, written as the user would: ``npes - 2`` -> ``npes - 1``."""
    node = ast.parse(text, mode="eval").body
    if isinstance(node, ast.Constant) and type(node.value) is int:
        return str(node.value + more)
    if isinstance(node, ast.BinOp) and isinstance(node.right, ast.Constant) and type(node.right.value) is int:
        left = ast.unparse(node.left)
        k = node.right.value + more if isinstance(node.op, ast.Add) else -node.right.value + more
        if isinstance(node.op, (ast.Add, ast.Sub)):
            return left if k == 0 else f"{left} + {k}" if k > 0 else f"{left} - {-k}"
    return f"{text} + {more}"


def count_value(text: str, npes: int) -> int | None:
    """The value of ``text``, an expression of integers and ``npes`` (None: not one)."""
    return _value(text, {"npes": npes})


def count_delta(old: str, new: str, npes: int) -> int | None:
    """How much larger count ``new`` is than ``old`` (expressions of integers, ``npes`` and other names, e.g.
    a loop's ``r``), whatever the other names hold; None when that is not one number (or not known)."""
    deltas: set[int] = set()
    for k in (0, 1, 2, 7, 12):
        names = {"npes": npes, "*": k}
        before, after = _value(old, names), _value(new, names)
        if before is None or after is None:
            return None
        deltas.add(after - before)
    return deltas.pop() if len(deltas) == 1 else None


_OPS: dict[type[ast.operator], Callable[[int, int], int]] = {
    ast.Add: int.__add__,
    ast.Sub: int.__sub__,
    ast.Mult: int.__mul__,
    ast.FloorDiv: int.__floordiv__,
    ast.Mod: int.__mod__,
}


def _value(text: str, names: Mapping[str, int | None]) -> int | None:
    """The value of ``text`` with ``names`` (``"*"``: the value of any other name; none: no other name)."""

    def value(node: ast.expr) -> int | None:
        if isinstance(node, ast.Constant) and type(node.value) is int:
            return node.value
        if isinstance(node, ast.Name):
            return names.get(node.id, names.get("*"))
        if isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.USub):
            inner = value(node.operand)
            return None if inner is None else -inner
        if isinstance(node, ast.BinOp) and type(node.op) in _OPS:
            left, right = value(node.left), value(node.right)
            return None if left is None or right is None else _OPS[type(node.op)](left, right)
        return None

    try:
        return value(ast.parse(text, mode="eval").body)
    except (SyntaxError, ZeroDivisionError):
        return None
