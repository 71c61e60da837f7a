"""Rewrite a traced cell so its loads and stores on NumPy arrays are reported (PE side).

:class:`AccessTransformer` is an :class:`ast.NodeTransformer` the engine shell applies to
a cell's tree only while the cell is traced (after its own ``transform_ast``; see
:mod:`.hooks`), which keeps the last few rewrites for cells run again. It routes element reads
and writes, in-place operators, whole-array use in expressions and calls through small hooks that record the
memory touched *by address*, so views, ``np.frombuffer``, containers,
function arguments and helper functions defined in the cell all resolve to the
same memory. The hooks live in the cell's namespace under :data:`HOOKS` names.
Pure AST code: nothing here imports shmem4py.
"""

from __future__ import annotations

import ast
import codeop
from typing import TYPE_CHECKING, Any, cast

if TYPE_CHECKING:
    from collections.abc import Callable
    from typing import TypeAlias, TypeVar

    _Tree = TypeVar("_Tree", bound=ast.AST)
    _Outline: TypeAlias = "tuple[tuple[type[ast.stmt], int, int, int | None, int | None], ...]"

__all__ = ["AccessTransformer", "MarkTransformer", "HOOKS", "renumber", "compile_kept"]

#: namespace names of the hooks the rewritten cell calls (installed by record.hooks); one leading
#: underscore, as two would be mangled inside a class body (`_Cls__name`)
HOOKS = {
    "mark": "_shmem_race_mark",  # first statement: tells the recorder the cell's file name
    "get": "_shmem_race_get",  # get(x, index, line) -> x[index]
    "set": "_shmem_race_set",  # set(x, index, value, line): x[index] = value
    "slot": "_shmem_race_slot",  # slot(x, index, line).value = value: x[index] = value, in an unpacking
    "aug": "_shmem_race_aug",  # aug(x, index, op, value, line): x[index] op= value
    "read": "_shmem_race_read",  # read(value, line) -> value
    "rw": "_shmem_race_rw",  # rw(value, line): value is read and written in place
    "iter": "_shmem_race_iter",  # iter(value, line) -> value, iterated (a 1-D array's elements are read)
    "call": "_shmem_race_call",  # call(line, f, *args, **kwargs) -> f(*args, **kwargs)
    "top": "_shmem_race_top",  # top(line, f, *args, **kwargs): call, made by the cell's own top-level code
    "fn": "_shmem_race_fn",  # fn(f) -> f, marks a function defined in the cell
    "exec": "_shmem_race_exec",  # exec(line, exec, globals(), locals(), *args, **kwargs): exec, its code rewritten
    "ix": "_shmem_race_ix",  # ix[index] -> index: a subscript's index (slices, tuples of them) as a value
}
#: hooks whose recorded line is their first argument; the others' is their last
_LINE_FIRST = {HOOKS["call"], HOOKS["top"], HOOKS["exec"]}
_LINE_LAST = {HOOKS[h] for h in ("get", "set", "slot", "aug", "read", "rw", "iter")}

_AUG_OPS = {
    ast.Add: "+",
    ast.Sub: "-",
    ast.Mult: "*",
    ast.Div: "/",
    ast.FloorDiv: "//",
    ast.Mod: "%",
    ast.Pow: "**",
    ast.LShift: "<<",
    ast.RShift: ">>",
    ast.BitOr: "|",
    ast.BitXor: "^",
    ast.BitAnd: "&",
    ast.MatMult: "@",
}


def _name(hook: str) -> ast.Name:
    return ast.Name(id=HOOKS[hook], ctx=ast.Load())


def _call(hook: str, *args: ast.expr) -> ast.Call:
    return ast.Call(func=_name(hook), args=list(args), keywords=[])


def _index(node: ast.expr) -> ast.expr:
    """A subscript's slice as an expression that can be passed to a function: ``1:2`` -> ``ix[1:2]``, which
    the interpreter makes as it makes ``x[1:2]``'s (not ``slice(1, 2)``: a name the cell may have taken)."""
    if isinstance(node, ast.Slice) or (
        isinstance(node, ast.Tuple) and any(isinstance(e, ast.Slice) for e in node.elts)
    ):
        return ast.Subscript(value=_name("ix"), slice=node, ctx=ast.Load())
    return node


#: builtins that read the frame they are called from: called through a hook they would see the hook's
#: frame (``super()`` would fail, ``locals()`` would give the hook's variables)
_FRAME_BUILTINS = frozenset({"super", "locals", "vars", "globals", "dir", "eval", "exec"})


def _is_shmem_call(func: ast.expr) -> bool:
    """``shmem.put(...)`` and the like: recorded by the shmem4py wrappers, not here."""
    return isinstance(func, ast.Attribute) and isinstance(func.value, ast.Name) and func.value.id == "shmem"


#: the last few cells rewritten, by transformer, text and outline: a cell run again is not rewritten again
_REWRITTEN: dict[tuple[type[MarkTransformer], str, _Outline], ast.Module] = {}
_KEEP = 16


def _outline(tree: ast.Module) -> _Outline:
    """Where a module's statements are: with the cell's text, what a rewritten tree is kept by."""
    return tuple((type(s), s.lineno, s.col_offset, s.end_lineno, s.end_col_offset) for s in tree.body)


#: the attribute of a kept rewrite's statement holding its code, by how it was compiled (see compile_kept)
_COMPILED = "_shmem_race_compiled"


def compile_kept(compiler: Any) -> None:
    """Have IPython's ``compiler`` (the shell's ``compile``, which IPython calls on each statement of a cell
    in turn) compile a kept rewrite's statement once per file name, mode and flags: a rewritten cell's
    statements took longer to compile than the plain cell's (0.39 ms against 0.23 for the stencil), at
    every run. Any other code compiles as before."""
    cls = type(compiler)
    if getattr(cls, "keeps_rewrites", False):
        return

    class KeptCompiler(cls):  # type: ignore[valid-type,misc]  # the shell's own class, known at run time
        keeps_rewrites = True

        def __call__(self, source: Any, filename: str, symbol: str, **kwargs: Any) -> Any:
            body = getattr(source, "body", None)
            kept = getattr(body[0], _COMPILED, None) if type(body) is list and len(body) == 1 else None
            if kept is None or kwargs:
                return super().__call__(source, filename, symbol, **kwargs)
            key = (type(source), filename, symbol, self.flags)
            code = kept.get(key)
            if code is None:
                if len(kept) >= 4:  # a shell naming each run's file anew (the race runner's) keeps the last few
                    kept.clear()
                code = kept[key] = super().__call__(source, filename, symbol)
            else:  # what compiling it would have noted: the __future__ features the code uses
                for feature in codeop._features:  # type: ignore[attr-defined]  # codeop's list of them
                    if code.co_flags & feature.compiler_flag:
                        self.flags |= feature.compiler_flag
            return code

    compiler.__class__ = KeptCompiler


class MarkTransformer(ast.NodeTransformer):
    """Only add the first statement telling the recorder the cell's code file name."""

    #: the text of the cell IPython parses next (see :meth:`expect`), or None
    source: str | None = None
    #: the shell's ``transform_ast`` that calls this transformer while it rewrites cells, or None
    installed: Callable[[ast.Module], Any] | None = None

    def expect(self, info: Any) -> None:
        """IPython's ``pre_run_cell`` event: the next module this transformer gets is ``info.raw_cell``
        parsed, whose rewrite is kept and given again when the same cell runs again."""
        self.source = info.raw_cell

    def visit_Module(self, node: ast.Module) -> ast.Module:
        source, self.source = self.source, None
        key = None if source is None else (type(self), source, _outline(node))
        if key in _REWRITTEN:
            return _REWRITTEN[key]
        self.generic_visit(node)
        mark = ast.Expr(_call("mark"))
        mark.lineno = mark.end_lineno = 1
        mark.col_offset = mark.end_col_offset = 0
        node.body.insert(0, mark)
        node = ast.fix_missing_locations(node)
        if key is not None:
            while len(_REWRITTEN) >= _KEEP:
                del _REWRITTEN[next(iter(_REWRITTEN))]
            _REWRITTEN[key] = node
            for statement in node.body:  # and compiled once (compile_kept)
                setattr(statement, _COMPILED, {})
        return node

    def generic_visit(self, node: ast.AST) -> ast.AST:
        if type(self) is MarkTransformer:
            return node
        return super().generic_visit(node)


class AccessTransformer(MarkTransformer):
    """Route a cell's array accesses through the recorder's hooks (see :data:`HOOKS`). A call the cell
    makes outside any ``def``, ``lambda`` or ``class`` goes through ``top``: what the callee records is
    then also placed at that call's line (see :mod:`.callsites`)."""

    _depth = 1  # enclosing defs, lambdas and classes; 0 only at a cell's own top level

    def visit_Module(self, node: ast.Module) -> ast.Module:
        self._depth = 0
        try:
            return super().visit_Module(node)
        finally:
            self._depth = 1

    def _nested(self, node: ast.AST) -> ast.AST:
        self._depth += 1
        try:
            return self.generic_visit(node)
        finally:
            self._depth -= 1

    def visit_ClassDef(self, node: ast.ClassDef) -> ast.AST:
        return self._nested(node)

    # -- reads -----------------------------------------------------------------
    def visit_Subscript(self, node: ast.Subscript) -> ast.expr:
        self.generic_visit(node)
        if isinstance(node.ctx, ast.Load):
            new = _call("get", node.value, _index(node.slice), ast.Constant(node.lineno))
            return ast.copy_location(new, node)
        return node

    def _read(self, node: ast.expr) -> ast.expr:
        if node is None or isinstance(node, (ast.Constant, ast.Starred)):
            return node
        return ast.copy_location(_call("read", node, ast.Constant(node.lineno)), node)

    def visit_BinOp(self, node: ast.BinOp) -> ast.BinOp:
        self.generic_visit(node)
        node.left, node.right = self._read(node.left), self._read(node.right)
        return node

    def visit_UnaryOp(self, node: ast.UnaryOp) -> ast.UnaryOp:
        self.generic_visit(node)
        node.operand = self._read(node.operand)
        return node

    def visit_Compare(self, node: ast.Compare) -> ast.Compare:
        self.generic_visit(node)
        if all(isinstance(op, (ast.Is, ast.IsNot)) for op in node.ops):
            return node  # `x is None` reads no element
        node.left = self._read(node.left)
        node.comparators = [self._read(c) for c in node.comparators]
        return node

    def visit_FormattedValue(self, node: ast.FormattedValue) -> ast.FormattedValue:
        self.generic_visit(node)
        node.value = self._read(node.value)
        return node

    def _iter(self, node: ast.expr) -> ast.expr:
        if isinstance(node, (ast.Constant, ast.Starred)):
            return node
        return ast.copy_location(_call("iter", node, ast.Constant(node.lineno)), node)

    def visit_For(self, node: ast.For | ast.AsyncFor) -> ast.For | ast.AsyncFor:
        self.generic_visit(node)
        node.iter = self._iter(node.iter)
        return node

    visit_AsyncFor = visit_For

    def visit_comprehension(self, node: ast.comprehension) -> ast.comprehension:
        self.generic_visit(node)
        node.iter = self._iter(node.iter)
        return node

    def visit_Call(self, node: ast.Call) -> ast.Call:
        self.generic_visit(node)
        if isinstance(node.func, ast.Name) and node.func.id == "exec":  # the caller's namespaces, as exec takes them
            scopes = [
                ast.Call(func=ast.Name(id=n, ctx=ast.Load()), args=[], keywords=[]) for n in ("globals", "locals")
            ]
            new = ast.Call(
                func=_name("exec"),
                args=[ast.Constant(node.lineno), node.func, *scopes, *node.args],
                keywords=node.keywords,
            )
            return ast.copy_location(new, node)
        if _is_shmem_call(node.func) or (isinstance(node.func, ast.Name) and node.func.id in _FRAME_BUILTINS):
            return node
        hook = "top" if self._depth == 0 else "call"
        new = ast.Call(
            func=_name(hook), args=[ast.Constant(node.lineno), node.func, *node.args], keywords=node.keywords
        )
        return ast.copy_location(new, node)

    # -- writes ----------------------------------------------------------------
    def visit_Assign(self, node: ast.Assign) -> ast.stmt | list[ast.stmt]:
        self.generic_visit(node)
        target: ast.expr
        if len(node.targets) == 1 and isinstance(node.targets[0], ast.Subscript):
            target = node.targets[0]
            new = ast.Expr(_call("set", target.value, _index(target.slice), node.value, ast.Constant(node.lineno)))
            return ast.copy_location(new, node)
        # unpacking (`a[i], b[j] = v, w`) and chained (`a[i] = b[j] = v`): each subscript stores through
        # the set hook when Python assigns it, in its order
        node.targets = [_slots(target, node.lineno) for target in node.targets]
        return node

    def visit_AugAssign(self, node: ast.AugAssign) -> ast.stmt | list[ast.stmt]:
        self.generic_visit(node)
        line = ast.Constant(node.lineno)
        op = ast.Constant(_AUG_OPS[type(node.op)])
        if isinstance(node.target, ast.Subscript):
            t = node.target
            return ast.copy_location(ast.Expr(_call("aug", t.value, _index(t.slice), op, node.value, line)), node)
        node.value = self._read(node.value)
        touch = ast.copy_location(ast.Expr(_call("rw", _load(node.target), line)), node)
        return [touch, node]

    # -- functions defined in the cell ---------------------------------------------
    def visit_FunctionDef(self, node: ast.FunctionDef | ast.AsyncFunctionDef) -> ast.FunctionDef | ast.AsyncFunctionDef:
        self._nested(node)
        node.decorator_list.append(_name("fn"))
        return node

    visit_AsyncFunctionDef = visit_FunctionDef

    def visit_Lambda(self, node: ast.Lambda) -> ast.Call:
        self._nested(node)
        return ast.copy_location(_call("fn", node), node)


def renumber(tree: _Tree, offset: int) -> _Tree:
    """Add ``offset`` to the line every hook call of the rewritten ``tree`` records (code outside a cell:
    ``place * RACE_LINES + line``)."""
    for node in ast.walk(tree):
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.args:
            name = node.func.id
            where = 0 if name in _LINE_FIRST else -1 if name in _LINE_LAST else None
            if (
                where is not None
                and isinstance(node.args[where], ast.Constant)
                and type(cast("ast.Constant", node.args[where]).value) is int
            ):
                node.args[where] = ast.copy_location(
                    ast.Constant(cast(int, cast("ast.Constant", node.args[where]).value) + offset), node.args[where]
                )
    return tree


def _slots(target: ast.expr, line: int) -> ast.expr:
    """``target`` with each subscript in it (``x[i]``) made ``slot(x, i, line).value``."""
    if isinstance(target, ast.Subscript):
        slot = _call("slot", target.value, _index(target.slice), ast.Constant(line))
        return ast.copy_location(ast.Attribute(value=slot, attr="value", ctx=ast.Store()), target)
    if isinstance(target, (ast.Tuple, ast.List)):
        target.elts = [_slots(e, line) for e in target.elts]
    elif isinstance(target, ast.Starred):
        target.value = _slots(target.value, line)
    return target


def _load(node: ast.expr) -> ast.expr:
    """A copy of a store-context target as a load expression."""
    node = ast.parse(ast.unparse(node), mode="eval").body
    return node
