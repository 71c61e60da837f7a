"""Modules talk through public names, and no two import each other, even lazily (no PEs; milliseconds).

What one module keeps for others is public (the PE side's shared state is
``engine/context.py``'s ``this_pe``); an import inside a function to dodge a cycle is still a cycle.
Imports under ``if TYPE_CHECKING:`` are for the type checker and do not count.
"""

import ast
import pathlib
import sys

import shmem_notebook

PACKAGE = pathlib.Path(shmem_notebook.__file__).parent


def _name(path):
    parts = list(path.relative_to(PACKAGE.parent).with_suffix("").parts)
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


MODULES = {_name(p): p for p in PACKAGE.rglob("*.py")}


def _private(name):
    return name.startswith("_") and not (name.startswith("__") and name.endswith("__"))


def _imports(path):
    """(node, module imported, names taken from it) of every import in ``path`` outside ``if TYPE_CHECKING:``."""
    tree = ast.parse(path.read_text())
    typing_only = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.If) and "TYPE_CHECKING" in ast.unparse(node.test):
            typing_only |= {id(n) for statement in node.body for n in ast.walk(statement)}
    here = _name(path) if path.name == "__init__.py" else _name(path).rpartition(".")[0]
    for node in ast.walk(tree):
        if id(node) in typing_only:
            continue
        if isinstance(node, ast.Import):
            for alias in node.names:
                yield node, alias.name, alias.asname or alias.name.split(".")[0], None
        elif isinstance(node, ast.ImportFrom):
            base = here.split(".")[: len(here.split(".")) - node.level + 1] if node.level else []
            source = ".".join(base + ([node.module] if node.module else []))
            for alias in node.names:
                yield node, source, alias.asname or alias.name, alias.name


def _module(dotted):
    """The package module ``dotted`` names or lies in (None outside the package)."""
    while dotted and dotted not in MODULES:
        dotted = dotted.rpartition(".")[0]
    return dotted or None


def private_reads():
    """``module: what`` for every private name a module takes from another module of the package."""
    found = []
    for me, path in sorted(MODULES.items()):
        aliases = {}  # local name -> the package module it is bound to
        for _, source, local, taken in _imports(path):
            if taken is None:  # import a.b.c [as x]
                target = _module(source) if local != source.split(".")[0] else _module(local)
            elif f"{source}.{taken}" in MODULES:  # from package import module
                target = f"{source}.{taken}"
            else:
                target = None
                if _private(taken) and _module(source) not in (None, me):
                    found.append(f"{me}: from {source} import {taken}")
            if target is not None:
                aliases[local] = target
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name) and _private(node.attr):
                target = aliases.get(node.value.id)
                if target is not None and target != me:
                    found.append(f"{me}:{node.lineno}: {node.value.id}.{node.attr}")
    return found


def import_cycles():
    """The groups of package modules that import one another, directly or round a loop (Tarjan)."""
    graph = {}
    for me, path in MODULES.items():
        graph[me] = set()
        for _, source, _, taken in _imports(path):
            target = _module(f"{source}.{taken}" if taken and f"{source}.{taken}" in MODULES else source)
            if target is not None and target != me:
                graph[me].add(target)
    index, low, stack, on_stack, groups = {}, {}, [], set(), []

    def visit(v):
        index[v] = low[v] = len(index)
        stack.append(v)
        on_stack.add(v)
        for w in graph[v]:
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            group = []
            while True:
                w = stack.pop()
                on_stack.discard(w)
                group.append(w)
                if w == v:
                    break
            if len(group) > 1:
                groups.append(sorted(group))

    for v in sorted(graph):
        if v not in index:
            visit(v)
    return groups


def test_no_module_reads_another_modules_private_names():
    assert private_reads() == []


def test_no_import_cycle():
    assert import_cycles() == []


def test_the_checks_see_what_they_look_for(tmp_path, monkeypatch):
    """A private read and a cycle written on purpose are found (two modules of a scratch package)."""
    package = tmp_path / "pkg"
    package.mkdir()
    (package / "__init__.py").write_text("")
    (package / "a.py").write_text("from . import b\n\n\ndef f():\n    return b._hidden\n")
    (package / "b.py").write_text("_hidden = 1\n\n\ndef g():\n    from .a import f\n\n    return f\n")
    monkeypatch.setattr(sys.modules[__name__], "PACKAGE", package)
    monkeypatch.setattr(sys.modules[__name__], "MODULES", {_name(p): p for p in package.rglob("*.py")})
    assert private_reads() == ["pkg.a:5: b._hidden"]
    assert import_cycles() == [["pkg.a", "pkg.b"]]
