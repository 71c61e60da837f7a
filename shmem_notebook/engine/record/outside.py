"""Code outside the traced cell, recorded like the cell (PE side).

A Python function the cell calls that was defined elsewhere (an earlier cell, the user's own
module, also after ``importlib.reload``) is rewritten by the same
:class:`~.instrument.AccessTransformer` from its source (IPython keeps cells' sources in
:mod:`linecache`), compiled with its file name and lines, and run as a function with the
original's globals, defaults and closure; code given to ``exec`` as text is rewritten the
same way, and so is a code object given to ``exec`` whose text is known (``compile`` called by
recorded code, or a file or earlier cell compiled whole). Each code object (each ``exec``'d text)
is rewritten once. Library code (the standard library, site-packages, NumPy, shmem4py,
shmem_notebook) and functions whose source is not found are not: the hooks treat them as before.

Lines outside the cell are recorded as ``place * RACE_LINES + line``: a place's number is a
hash of what it is (the same on every PE) and :func:`places` says what each one is, for the
client to name them (:mod:`shmem_notebook.analysis.places`): ``["cell", sha1 of its code,
execution count]`` for an earlier cell, ``["file", path]`` for a module, ``["exec", line]`` for
code run by ``exec`` called at that (recorded) line.
"""

from __future__ import annotations

import ast
import copy
import hashlib
import linecache
import os
import site
import sys
import types
import zlib
from typing import TYPE_CHECKING, Any, cast

from ...protocol import RACE_LINES
from ..context import this_pe
from .instrument import AccessTransformer, renumber

if TYPE_CHECKING:
    from collections.abc import Sequence
    from typing import Literal, TypeAlias

    _Plan: TypeAlias = "tuple[types.CodeType, tuple[int, ...]] | Literal[True] | None"
    _Definition: TypeAlias = "ast.FunctionDef | ast.AsyncFunctionDef | ast.Lambda"

__all__ = ["code_text", "compiled", "exec_code", "places", "rewritten"]

# what this room keeps is this PE's (:class:`..context.RecordState`: outside_enabled, places, offsets,
# plans, made, executed, texts), bound here once: a rewritten function's call reads the plans
_record = this_pe.record
_places, _offsets, _plans, _made = _record.places, _record.offsets, _record.plans, _record.made
_exec, _texts = _record.executed, _record.texts
_EXEC_KEPT = 1000  # texts kept rewritten (a loop may exec a new text each time)
_transformer = AccessTransformer()
_MethodType = types.MethodType


def _library_roots() -> tuple[str, ...]:
    package = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    roots = {sys.prefix, sys.base_prefix, sys.exec_prefix, sys.base_exec_prefix, package, *site.getsitepackages()}
    roots.add(site.getusersitepackages())
    return tuple(os.path.join(os.path.realpath(r), "") for r in roots if r)


_LIBRARY = _library_roots()


def places() -> dict[int, list[Any]]:
    """``{number: place}`` of every place outside the cell whose lines were recorded so far."""
    return dict(_places)


def _number(key: tuple[str, str | int], place: list[Any]) -> int:
    number = zlib.crc32(repr(key).encode()) + 1
    _places[number] = place
    return number


def _file_place(filename: str) -> int:
    """The place number of a file: an earlier cell (by its code) or a module."""
    shell = this_pe.shell
    count = getattr(getattr(shell, "compile", None), "_filename_map", {}).get(filename)
    if count is not None:
        raw = getattr(getattr(shell, "history_manager", None), "input_hist_raw", ())
        code = raw[count] if 0 <= count < len(raw) else "".join(linecache.getlines(filename))
        sha = hashlib.sha1(code.strip().encode()).hexdigest()  # as the client hashes it (analysis/places.py)
        return _number(("cell", sha), ["cell", sha, count])
    return _number(("file", filename), ["file", filename])


def rewritten(f: types.FunctionType | types.MethodType) -> types.FunctionType | types.MethodType | None:
    """``f`` (a function or a bound method) as a function running rewritten code; ``f`` itself when its
    code is rewritten already; None when it cannot be seen into (library code, no source)."""
    func = cast("types.FunctionType", f.__func__ if type(f) is _MethodType else f)
    code = func.__code__
    key = (code, code.co_filename in _record.cell_files)
    plan = _plans.get(key, False)
    if plan is False:
        try:
            plan = _plan(func, key[1])
        except Exception:  # never the user's error: the call is recorded as before
            plan = None
        _plans[key] = plan
    if plan is None or plan is True:
        return f if plan else None
    new, cells = plan
    closure = func.__closure__
    g = types.FunctionType(
        new,
        func.__globals__,
        func.__name__,
        func.__defaults__,
        tuple(closure[i] for i in cells) if cells else None,  # type: ignore[index]  # free: a closure
    )
    if func.__kwdefaults__:
        g.__kwdefaults__ = func.__kwdefaults__
    return _MethodType(g, cast("types.MethodType", f).__self__) if func is not f else g


def _plan(func: types.FunctionType, in_cell: bool) -> _Plan:
    code = func.__code__
    if code in _made or (in_cell and getattr(func, "__shmem_race_cell__", False)):
        return True
    filename = code.co_filename
    if filename.startswith("<") and not filename.startswith("<ipython-input"):
        return None
    if not filename.startswith("<") and os.path.join(os.path.realpath(os.path.dirname(filename)), "").startswith(
        _LIBRARY
    ):
        return None
    linecache.checkcache(filename)  # a module edited since (importlib.reload): its new text
    source = "".join(linecache.getlines(filename, func.__globals__))
    try:
        tree = ast.parse(source, filename)
    except (SyntaxError, ValueError):
        return None
    node = _definition(tree, code)
    if node is None:
        return None
    imports = _imports(tree)
    # the text must be the function's: a module edited and not reloaded runs its old code
    marked = getattr(func, "__shmem_race_cell__", False)  # rewritten when its (traced) cell ran
    same = _compile(copy.deepcopy(node), code, filename, 0, imports, rewrite=marked)
    if same is None or not _same(same, code):
        return None
    offset = 0 if in_cell else _file_place(filename) * RACE_LINES
    new = _compile(node, code, filename, offset, imports)
    if new is None or not set(new.co_freevars) <= set(code.co_freevars):
        return None
    _remember(new)
    if offset:
        _offsets[filename] = _record.outside[filename] = offset
    return new, tuple(code.co_freevars.index(name) for name in new.co_freevars)


def _imports(tree: ast.Module) -> list[ast.Import | ast.ImportFrom]:
    """The module-level imports of ``tree`` (also inside its ``if`` and ``try`` blocks), in order."""
    found: list[ast.Import | ast.ImportFrom]
    todo: list[ast.AST]
    found, todo = [], list(tree.body)
    while todo:
        node = todo.pop()
        if isinstance(node, (ast.Import, ast.ImportFrom)):
            found.append(node)
        elif not isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef, ast.Lambda)):
            todo.extend(ast.iter_child_nodes(node))
    return sorted(found, key=lambda n: n.lineno)


def _definition(tree: ast.Module, code: types.CodeType) -> _Definition | None:
    """The ``def`` (or ``lambda``) node of ``code`` in its file's tree, None when not found for sure."""
    name, first = code.co_name, code.co_firstlineno
    found: list[_Definition] = []
    for node in ast.walk(tree):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)) and node.name == name:
            start = node.decorator_list[0].lineno if node.decorator_list else node.lineno
            if start == first:
                found.append(node)
        elif isinstance(node, ast.Lambda) and name == "<lambda>" and node.lineno == first:
            found.append(node)
    return found[0] if len(found) == 1 else None


def _same(a: types.CodeType, b: types.CodeType) -> bool:
    """Do code objects ``a`` and ``b`` do the same (bytecode, names, constants)?"""
    if (a.co_code, a.co_names, a.co_varnames, a.co_freevars, len(a.co_consts)) != (
        b.co_code,
        b.co_names,
        b.co_varnames,
        b.co_freevars,
        len(b.co_consts),
    ):
        return False
    return all(
        _same(x, y)
        if isinstance(x, types.CodeType) and isinstance(y, types.CodeType)
        else type(x) is type(y) and x == y
        for x, y in zip(a.co_consts, b.co_consts)
    )


def _compile(
    node: ast.stmt | ast.Lambda,
    code: types.CodeType,
    filename: str,
    offset: int,
    imports: Sequence[ast.stmt] = (),
    rewrite: bool = True,
) -> types.CodeType | None:
    """``node`` (``rewrite``: rewritten) compiled as the one function of a module, after the file's
    ``imports`` (the compiler calls methods of imported modules its own way), in a class of its
    class's name for a method (private names are mangled by it); its code object. Free variables
    are local variables of an enclosing function, so the new code has them free too."""
    if isinstance(node, ast.Lambda):
        node = ast.Assign(
            targets=[ast.Name(id="_shmem_race_lambda", ctx=ast.Store())], value=node, lineno=node.lineno, col_offset=0
        )
    if rewrite:
        node = cast("ast.stmt", _transformer.visit(node))
    body: list[ast.stmt] = [node]
    owner = code.co_qualname.split(".")[-2:-1]
    if owner and owner[0] != "<locals>":
        body = [
            ast.copy_location(ast.ClassDef(name=owner[0], bases=[], keywords=[], body=body, decorator_list=[]), node)
        ]
    if code.co_freevars:
        binds: list[ast.stmt] = [
            ast.copy_location(ast.Assign(targets=[ast.Name(id=v, ctx=ast.Store())], value=ast.Constant(None)), node)
            for v in code.co_freevars
        ]
        outer = ast.FunctionDef(
            name="_shmem_race_outer",
            args=ast.arguments(posonlyargs=[], args=[], kwonlyargs=[], kw_defaults=[], defaults=[]),
            body=binds + body,
            decorator_list=[],
        )
        body = [ast.copy_location(outer, node)]
    tree = ast.Module(body=[*imports, *body], type_ignores=[])
    if offset:
        renumber(tree, offset)
    compiled = compile(ast.fix_missing_locations(tree), filename, "exec", dont_inherit=True)
    return _find(compiled, code.co_name)


def _find(compiled: types.CodeType, name: str) -> types.CodeType | None:
    """The code named ``name`` in ``compiled``, the outermost first."""
    codes = [c for c in compiled.co_consts if isinstance(c, types.CodeType)]
    for c in codes:
        if c.co_name == name:
            return c
    for c in codes:
        found = _find(c, name)
        if found is not None:
            return found
    return None


def _remember(code: types.CodeType) -> None:
    _made.add(code)
    for const in code.co_consts:
        if isinstance(const, types.CodeType):
            _remember(const)


def compiled(code: object, text: object) -> None:
    """Note that ``compile`` made ``code`` from ``text`` in recorded code: ``exec`` of that code object
    then runs the text rewritten (see :func:`code_text`)."""
    if isinstance(code, types.CodeType) and isinstance(text, (str, bytes)):
        _texts[code] = text


def code_text(code: types.CodeType) -> str | bytes | None:
    """The text the code object ``code`` given to ``exec`` was compiled from, or None if not known: noted
    by :func:`compiled`, or its file's lines (a file compiled whole, an earlier cell) when compiling
    them again gives the same code."""
    text = _texts.get(code)
    if text is None:
        lines = linecache.getlines(code.co_filename) if code.co_name == "<module>" else None
        text = "".join(lines) if lines else False
        try:
            if text and not _same(compile(text, code.co_filename, "exec", dont_inherit=True), code):
                text = False
        except Exception:  # the file changed since and does not compile: its code is run as it is
            text = False
        _texts[code] = text
    return text or None


def exec_code(source: str | bytes, line: int) -> types.CodeType | None:
    """The code of ``exec(source)`` called at (recorded) ``line``, rewritten; None if it does not compile."""
    key = (source, line)
    found = _exec.get(key)
    if found is None:
        if len(_exec) >= _EXEC_KEPT:
            for _, old in _exec.values():
                for kept in (_offsets, _record.outside, linecache.cache):
                    kept.pop(old, None)
            _exec.clear()
        text = source.decode() if isinstance(source, bytes) else source
        number = _number(("exec", line), ["exec", line])  # one place per line calling exec
        filename = f"<exec'd code {number}:{hashlib.sha1(text.encode()).hexdigest()[:12]}>"
        try:
            tree = _transformer.generic_visit(ast.parse(text, filename))  # no mark statement: not the cell's lines
            code = compile(
                ast.fix_missing_locations(renumber(cast("ast.Module", tree), number * RACE_LINES)),
                filename,
                "exec",
                dont_inherit=True,
            )
        except Exception:  # a syntax error: exec raises it itself
            return None
        _remember(code)
        linecache.cache[filename] = (len(text), None, text.splitlines(True), filename)  # for tracebacks
        _offsets[filename] = _record.outside[filename] = number * RACE_LINES
        found = _exec[key] = (code, filename)
    return found[0]
