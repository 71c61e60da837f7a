"""The tree's two sides: client packages never import the PE side, the PE side imports only shared definitions."""

import ast
import pathlib
import pkgutil
import subprocess
import sys

import shmem_notebook
from shmem_notebook.stage_registry import DECLARED

PACKAGE = pathlib.Path(shmem_notebook.__file__).parent
#: the PE side: engine/, and the stages' PE modules that live in their stage's folder (trace/recording.py)
STAGE_PE_MODULES = {stage.pe for stage in DECLARED.values() if not stage.pe.startswith("shmem_notebook.engine")}
#: plain definitions both sides may import
SHARED = {
    "stage_registry",
    "errors",
    "specs",
    "folding",
    "distinct",
    "protocol",
    "arguments",
    "rc",
    "lazy_imports",
    "operations",
    "deviations",
    "words",
    "native_board",
    "native_cache",
    "native_record",
}
#: plain modules of a client package the PEs import too (each imports nothing at all)
SHARED_MODULES = {"analysis.footprint"}


def _pe_side(name):
    """Whether the module ``name`` runs on the PEs (``engine/`` or a stage's PE module)."""
    return name.startswith("shmem_notebook.engine") or name in STAGE_PE_MODULES


def _pe_paths():
    """The files of the PE side."""
    return [
        *(PACKAGE / "engine").rglob("*.py"),
        *(PACKAGE / (n.split(".", 1)[1].replace(".", "/") + ".py") for n in STAGE_PE_MODULES),
    ]


def _modules(side):
    """Dotted names of the package's modules on ``side`` ('client' or 'engine': the PE side)."""
    names = [m.name for m in pkgutil.walk_packages([str(PACKAGE)], "shmem_notebook.")]
    engine = [n for n in names if _pe_side(n)]
    return engine if side == "engine" else [n for n in names if n not in engine]


def _imports(path):
    """(absolute module name, at module level?) for every import in the file at ``path``."""
    package = ".".join(["shmem_notebook", *path.parent.relative_to(PACKAGE).parts])
    tree = ast.parse(path.read_text())
    top = set(map(id, tree.body))
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            found += [(a.name, id(node) in top) for a in node.names]
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package.split(".")[: len(package.split(".")) - node.level + 1]
                name = ".".join(base + ([node.module] if node.module else []))
            else:
                name = node.module
            names = [f"{name}.{a.name}" for a in node.names] if not node.module else [name]
            found += [(n, id(node) in top) for n in names]
    return found


def _import_without_shmem4py(names, then="print('ok')"):
    """Import ``names`` in a fresh Python where importing shmem4py fails, then run ``then``; its stdout."""
    code = (
        "import sys, importlib; sys.modules['shmem4py'] = None\n"
        f"for name in {names!r}:\n"
        "    importlib.import_module(name)\n"
        f"{then}\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    return out.stdout.strip()


def test_client_modules_import_neither_shmem4py_nor_the_engine():
    imported = (
        "print('imported:', sorted(m for m in sys.modules "
        f"if (m.startswith(('shmem_notebook.engine', 'shmem4py')) or m in {sorted(STAGE_PE_MODULES)!r}) "
        "and sys.modules[m]))"
    )
    assert _import_without_shmem4py(_modules("client"), imported) == "imported: []"


def test_engine_helpers_import_without_initialising_openshmem():
    """Importing shmem4py calls shmem_init: only the modules a running PE loads may do it at import.
    The rest (pure helpers such as teams.decide) are imported by tests in the client's process,
    where an init would start a singleton orted and segfault at exit (ompi#11604)."""
    pe_only = {"runtime", "recorder", "heap_summary", "requests", "__main__"}
    helpers = [
        n
        for n in _modules("engine")
        if n.rsplit(".", 1)[-1] not in pe_only
        and not n.startswith("shmem_notebook.engine.record")
        and n not in STAGE_PE_MODULES
    ]
    assert "shmem_notebook.engine.teams" in helpers
    assert _import_without_shmem4py(helpers) == "ok"


def test_engine_imports_only_shared_definitions():
    offenders = []
    for path in _pe_paths():
        for name, _ in _imports(path):
            if name.startswith("shmem_notebook.") and not _pe_side(name) and not _pe_side(name.rpartition(".")[0]):
                if name.split(".")[1] not in SHARED and ".".join(name.split(".")[1:3]) not in SHARED_MODULES:
                    offenders.append(f"{path.name}: {name}")
    assert offenders == []


def test_shared_modules_of_client_packages_import_nothing():
    """The footprints are computed on the PEs and intersected by the client: one plain module."""
    for name in SHARED_MODULES:
        path = PACKAGE / (name.replace(".", "/") + ".py")
        assert _imports(path) == [], f"{name} imports {_imports(path)}"
        assert not (path.parent / "__init__.py").read_text().count("import"), "its package imports on load"


def test_client_sends_pes_only_requests_by_name():
    """Every apply to the PEs sends protocol.answer with an encoded request: plain data, no client functions."""
    calls = []
    for path in set(PACKAGE.rglob("*.py")) - set(_pe_paths()):
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.Call) and getattr(node.func, "attr", "") in ("apply", "apply_async", "apply_sync"):
                first = node.args[0] if node.args else None
                calls.append(
                    (path.name, getattr(first, "id", None), type(node.args[1]).__name__ if len(node.args) > 1 else None)
                )
    assert calls, "the client talks to the PEs somewhere"
    assert all(func == "answer" for _, func, _ in calls), calls


def test_the_shared_modules_import_no_side():
    """Not even inside a function: a PE hands protocol its request handler (protocol.serve) at start."""
    for name in SHARED:
        for imported, _ in _imports(PACKAGE / f"{name}.py"):
            if imported.startswith("shmem_notebook."):
                assert imported.split(".")[1] in SHARED, f"{name}.py imports {imported}"


#: the floors of the client side, lowest first: a module imports only from its own floor or below
#: (the PEs' side, engine/, stands beside them and imports only SHARED, tested above)
FLOORS = [
    SHARED,
    {"launcher", "analysis"},
    {"cells", "trace"},
    {"job"},
    {"inspector"},
    # race: the command-line race runner, a front end like the magics (race_report: what it makes of a recording);
    {"magics", "__init__", "race", "race_report", "jobs_view", "hub"},
    # jobs_view: the instructor's view of every job on the server, a front end too; hub: a class's server
]
#: imports allowed upward, each lazy (inside the one function that needs it) and with its reason
UPWARD: set[tuple[str, str]] = set()  # none: traces and jobs are data, the inspector draws them


def _floor(part):
    return next((i for i, floor in enumerate(FLOORS) if part in floor), None)


def test_no_module_imports_from_a_higher_floor():
    offenders = []
    for path in set(PACKAGE.rglob("*.py")) - set(_pe_paths()):
        rel = path.relative_to(PACKAGE).parts
        here = rel[0][:-3] if len(rel) == 1 else rel[0]
        for name, top_level in _imports(path):
            parts = name.split(".")
            if parts[0] != "shmem_notebook" or len(parts) < 2:
                continue
            there = parts[1]
            if there == here or ((here, there) in UPWARD and not top_level):
                continue
            if _pe_side(name) or _pe_side(name.rpartition(".")[0]) or (_floor(there) or 0) > (_floor(here) or 0):
                offenders.append(f"{'/'.join(rel)} imports {name}")
            elif (here, there) in UPWARD and top_level:
                offenders.append(f"{'/'.join(rel)} imports {name} at import time (allowed only inside a function)")
    assert offenders == []


def test_no_module_is_long_without_saying_why():
    """About 400 lines is the most a module of one concern needs; longer ones say why in their docstring."""
    long = []
    for path in PACKAGE.rglob("*.py"):
        text = path.read_text()
        doc = ast.get_docstring(ast.parse(text)) or ""
        if text.count("\n") > 420 and "Longer than" not in doc:
            long.append(f"{path.relative_to(PACKAGE)}: {text.count(chr(10))} lines")
    assert long == []


def test_no_two_modules_share_a_name():
    """A module's name says what it holds: two modules of one name in different rooms (a
    ``races.py`` of the PE's recording and one of the client's analysis) read as one."""
    root = pathlib.Path(shmem_notebook.__file__).parent
    names: dict[str, list[str]] = {}
    for path in root.rglob("*.py"):
        if path.stem not in ("__init__", "__main__"):
            names.setdefault(path.stem, []).append(str(path.relative_to(root)))
    assert {n: p for n, p in names.items() if len(p) > 1} == {}


_CONTAINERS = {"dict", "list", "set", "defaultdict", "OrderedDict", "deque", "WeakKeyDictionary", "WeakValueDictionary"}


def _mutable_value(node):
    """Whether ``node`` makes a fresh mutable container (a literal, a comprehension or a constructor call)."""
    if isinstance(node, (ast.Dict, ast.List, ast.Set, ast.DictComp, ast.ListComp, ast.SetComp)):
        return True
    func = node.func if isinstance(node, ast.Call) else None
    name = func.attr if isinstance(func, ast.Attribute) else func.id if isinstance(func, ast.Name) else None
    return name in _CONTAINERS


def test_the_pe_side_keeps_its_state_in_its_context():
    """No ``global`` statement and no module-level mutable container in ``engine/``: a PE's state lives in
    ``engine.context.this_pe`` (constant tables, named in capitals, and ``__all__`` are not state)."""
    found = []
    for path in sorted((PACKAGE / "engine").rglob("*.py")):
        tree = ast.parse(path.read_text())
        where = path.relative_to(PACKAGE)
        found += [f"{where}:{n.lineno} global" for n in ast.walk(tree) if isinstance(n, ast.Global)]
        for node in tree.body:
            if isinstance(node, (ast.Assign, ast.AnnAssign)) and node.value is not None:
                targets = node.targets if isinstance(node, ast.Assign) else [node.target]
                names = [t.id for t in targets if isinstance(t, ast.Name)]
                state = [n for n in names if not n.isupper() and n != "__all__" and not n.lstrip("_").isupper()]
                if state and _mutable_value(node.value):
                    found.append(f"{where}:{node.lineno} {', '.join(state)}")
    assert found == [], "PE state outside the context (engine/context.py):\n" + "\n".join(found)
