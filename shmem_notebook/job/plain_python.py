"""A ``%%pxshmem`` cell's code as plain Python, for :mod:`.script_export` (client side).

IPython syntax (magics, shell escapes, ``get_ipython()``) becomes plain Python where one
exists, else ``pass`` with a comment saying why; a cell's last expression, which the notebook
shows as ``Out[PE k]``, can be printed; and the names a cell binds at its top level are found.
"""

from __future__ import annotations

import ast
from typing import TYPE_CHECKING, Any, cast

if TYPE_CHECKING:
    from collections.abc import Iterable, Iterator

__all__ = ["plain_cell", "show_last", "stored", "used"]


def _ipython_call(line: str) -> tuple[str, list[Any], str | None] | None:
    """``(method, args, targets)`` of a line IPython's transformer wrote (``get_ipython().system('ls')``)."""
    try:
        tree = ast.parse(line.strip())
    except SyntaxError:
        return None
    if len(tree.body) != 1:
        return None
    stmt = tree.body[0]
    call = stmt.value if isinstance(stmt, (ast.Expr, ast.Assign)) else None
    if not (
        isinstance(call, ast.Call)
        and isinstance(call.func, ast.Attribute)
        and isinstance(call.func.value, ast.Call)
        and getattr(call.func.value.func, "id", None) == "get_ipython"
    ):
        return None
    try:
        args = [ast.literal_eval(a) for a in call.args]
    except ValueError:
        return None
    targets = " = ".join(ast.unparse(t) for t in stmt.targets) if isinstance(stmt, ast.Assign) else None
    return call.func.attr, args, targets


def _left_out(indent: str, original: str, why: str) -> str:
    return f"{indent}pass  # left out: {original.strip()}  ({why})"


def _plain_line(original: str, transformed: str, needs: set[str]) -> str:
    """One line IPython's transformer changed, as plain Python (or ``pass`` with why)."""
    indent = transformed[: len(transformed) - len(transformed.lstrip())]
    found = _ipython_call(transformed)
    if found is None:
        return _left_out(indent, original, "IPython syntax")
    method, args, targets = found
    assign = f"{targets} = " if targets else ""
    if method == "run_line_magic":
        name, rest = (args + ["", ""])[:2]
        if name == "time" and rest:
            return f"{indent}{assign}{rest}  # %time: the timing is the notebook's"
        if name == "matplotlib":
            return _left_out(indent, original, "figures are not shown by a program: save them with plt.savefig")
        if name in ("pinfo", "pinfo2", "psearch"):
            return _left_out(indent, original, "IPython's help")
        return _left_out(indent, original, f"IPython magic %{name}: no plain-Python equivalent")
    if method in ("system", "getoutput") and args:
        command = args[0]
        if "{" in command or "$" in command:
            return _left_out(indent, original, "a shell escape with IPython's variable expansion")
        needs.add("subprocess")
        if method == "system":
            return f"{indent}{assign}subprocess.run({command!r}, shell=True)  # {original.strip()}"
        return (
            f"{indent}{assign}subprocess.run({command!r}, shell=True, capture_output=True, text=True)"
            f".stdout.splitlines()  # {original.strip()}"
        )
    return _left_out(indent, original, "IPython syntax")


def plain_cell(code: str, needs: set[str] | None = None) -> str:
    """``code`` (a ``%%pxshmem`` cell's body) as plain Python: IPython's magics and shell escapes
    become plain Python where one exists (``%time stmt`` -> ``stmt``, ``!cmd`` -> ``subprocess.run``),
    else ``pass`` with a comment saying why; lines calling ``get_ipython()`` likewise. ``needs``
    (a set) gets the modules the result imports (``subprocess``)."""
    from IPython.core.inputtransformer2 import TransformerManager

    needs = set() if needs is None else needs
    original = code.rstrip("\n").splitlines()
    transformed = TransformerManager().transform_cell(code).rstrip("\n").splitlines()  # type: ignore[no-untyped-call, unused-ignore]  # IPython: untyped
    if transformed == original:
        lines = list(original)
    elif len(transformed) == len(original):
        lines = [o if o == t else _plain_line(o, t, needs) for o, t in zip(original, transformed)]
    else:
        found = _ipython_call(transformed[0]) if len(transformed) == 1 else None
        if found and found[0] == "run_cell_magic" and found[1][:1] == ["time"]:
            lines = [f"# {original[0].strip()}: the timing is the notebook's"] + original[1:]
        elif found and found[0] == "run_cell_magic":
            why = f"cell magic %%{found[1][0]}: no plain-Python equivalent"
            return "\n".join(["pass  # left out, " + why] + [f"# {line}" for line in original])
        else:
            return "\n".join(
                ["pass  # left out: IPython syntax spanning several lines"] + [f"# {line}" for line in original]
            )
    return "\n".join(_without_get_ipython(lines))


def _without_get_ipython(lines: list[str]) -> list[str]:
    """Lines that call ``get_ipython()`` themselves need IPython's shell: left out, saying so."""
    try:
        tree = ast.parse("\n".join(lines))
    except SyntaxError:
        return lines
    for node in ast.walk(tree):
        if (
            isinstance(node, ast.stmt)
            and not isinstance(
                node,
                (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef, ast.If, ast.For, ast.While, ast.With, ast.Try),
            )
            and node.lineno == node.end_lineno
            and "get_ipython" in lines[node.lineno - 1]
            and any(isinstance(n, ast.Name) and n.id == "get_ipython" for n in ast.walk(node))
        ):
            line = lines[node.lineno - 1]
            indent = line[: len(line) - len(line.lstrip())]
            if line.strip() == ast.get_source_segment("\n".join(lines), node):
                lines[node.lineno - 1] = _left_out(indent, line, "needs the notebook's IPython shell (get_ipython)")
    return lines


def show_last(text: str) -> str | None:
    """The cell's last expression printed as the notebook shows it (``Out[PE k]``), or None when
    it cannot be rewritten alone on its lines."""
    try:
        tree = ast.parse(text)
    except SyntaxError:
        return None
    if not tree.body or not isinstance(tree.body[-1], ast.Expr):
        return None
    last, lines = tree.body[-1], text.splitlines()
    before = tree.body[-2] if len(tree.body) > 1 else None
    if last.col_offset != 0 or (before is not None and cast(int, before.end_lineno) >= last.lineno):
        return None
    if lines[cast(int, last.end_lineno) - 1].rstrip().endswith(";"):  # IPython shows nothing after a ';'
        return None
    segment = ast.get_source_segment(text, last.value)
    rest = lines[last.end_lineno :]
    return "\n".join(
        lines[: last.lineno - 1] + [f"_show({segment})  # the last expression: Out[PE k] in the notebook"] + rest
    )


def _module_level(tree: ast.Module) -> Iterator[ast.AST]:
    """Nodes outside function and class bodies (what runs at the cell's top level)."""
    todo: list[ast.AST] = list(tree.body)
    while todo:
        node = todo.pop()
        yield node
        if not isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef, ast.Lambda)):
            todo.extend(ast.iter_child_nodes(node))


def stored(text: str) -> set[str]:
    """Names a cell binds at its top level (and ``global`` names of its functions)."""
    try:
        tree = ast.parse(text)
    except SyntaxError:
        return set()
    names: set[str] = set()
    for node in _module_level(tree):
        if isinstance(node, ast.Name) and isinstance(node.ctx, (ast.Store, ast.Del)):
            names.add(node.id)
        elif isinstance(node, (ast.Import, ast.ImportFrom)):
            names.update((a.asname or a.name).split(".")[0] for a in node.names)
        elif isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            names.add(node.name)
    for node in ast.walk(tree):
        if isinstance(node, ast.Global):
            names.update(node.names)
    return names


def used(texts: Iterable[str]) -> set[str]:
    """Every name the cells read."""
    names: set[str] = set()
    for text in texts:
        try:
            names.update(n.id for n in ast.walk(ast.parse(text)) if isinstance(n, ast.Name))
        except SyntaxError:
            pass
    return names
