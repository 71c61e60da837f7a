"""A cell's syntax, checked in the notebook before it goes to the PEs (client side)."""

from __future__ import annotations

import ast
import functools

from ..errors import CellSyntaxError

__all__ = ["check_syntax", "as_numbered"]


def as_numbered(code: str) -> str:
    """``code`` without its leading blank lines, which IPython drops before it numbers a cell's lines
    (``inputtransformer2.leading_empty_lines``): the lines the PEs report (races, hangs, errors, traces)
    then name the lines of the text the client reads them in, and a fix lands on the line it names."""
    from IPython.core.inputtransformer2 import leading_empty_lines

    return "".join(leading_empty_lines(code.splitlines(keepends=True)))  # type: ignore[no-untyped-call]  # IPython


def check_syntax(code: str) -> None:
    """Raise :class:`CellSyntaxError` (one line: the cell's line and what is wrong) if ``code``
    is not valid IPython input; magics and shell escapes count as valid."""
    problem = _syntax_problem(code)
    if problem is not None:
        raise CellSyntaxError(problem)


@functools.lru_cache(maxsize=64)
def _syntax_problem(code: str) -> str | None:
    """What :func:`check_syntax` says of ``code``, or None; asked once per text (cells are run again)."""
    from IPython.core.inputtransformer2 import TransformerManager

    source = ""
    try:
        source = TransformerManager().transform_cell(code)  # type: ignore[no-untyped-call]  # IPython: untyped
        compile(source, "<cell>", "exec")
    except SyntaxError as exc:
        if source and _awaits_at_top_level(source):
            return (
                "a cell cannot await at its top level (the PEs run cells as ipyparallel engines, which run them "
                "to their end); nothing was sent to the PEs: put the awaits in an `async def` and run it with "
                "asyncio.run(...)"
            )
        lines = code.splitlines()
        n = exc.lineno or 0
        text = lines[n - 1].strip() if 0 < n <= len(lines) else (exc.text or "").strip()
        where = f"line {n} of the cell" + (f": {text}" if text else "")
        return (
            f"{type(exc).__name__}: {exc.msg} ({where}); nothing was sent to the PEs: "
            "fix the line and run the cell again"
        )
    return None


def _awaits_at_top_level(source: str) -> bool:
    """Whether ``source`` is valid Python once ``await`` at its top level is allowed (IPython allows it)."""
    try:
        compile(source, "<cell>", "exec", flags=ast.PyCF_ALLOW_TOP_LEVEL_AWAIT)
    except (SyntaxError, ValueError):
        return False
    return True
