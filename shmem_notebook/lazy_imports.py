"""What the PEs and the controller import of ipyparallel and jupyter_client; imports nothing else.

A PE is an ipyparallel engine, but the ``__init__`` of both packages imports their
client side (ipyparallel's Client, views and Cluster manager; jupyter_client's kernel
managers and provisioners), which an engine never uses, nor does the controller. On a
node with more PEs than cores that CPU adds up PE by PE, and the controller's start is on
the way of every job's start. :func:`install` makes the two packages lazy: their
submodules import as usual, and the first use of a name of the package itself runs
the package's real ``__init__``, so ``import ipyparallel as ipp; ipp.Client`` in a
cell still works. :func:`hold_back` keeps debugpy out of the engine's start (ipykernel
imports it for a debugger that PEs do not serve) until :func:`release`. :func:`lazy_names`
does the same for our own packages' public names (``shmem_notebook``, ``launcher``). :func:`preload`
imports modules in a thread: a PE's engine imports while ``shmem_init`` waits for the other PEs.
"""

import contextlib
import importlib
import importlib.machinery
import importlib.util
import sys
import threading
import types
from collections.abc import Callable, Iterable, Mapping
from typing import Any

__all__ = ["install", "hold_back", "release", "lazy_names", "preload", "LAZY"]

#: package -> {name: submodule defining it}: the names an engine or the controller takes from the package
LAZY: dict[str, dict[str, str]] = {
    "ipyparallel": {
        "__version__": "_version",
        "version_info": "_version",
        "dependent": "controller.dependency",
        "Dependency": "controller.dependency",
    },
    "jupyter_client": {
        "__version__": "_version",
        "version_info": "_version",
        "protocol_version": "_version",
        "protocol_version_info": "_version",
        "write_connection_file": "connect",
        "find_connection_file": "connect",
        "BlockingKernelClient": "blocking",  # ipykernel's ConnectionFileMixin.client_class
    },
}


def install(packages: Mapping[str, Mapping[str, str]] = LAZY) -> None:
    """Make each package of ``packages`` lazy, unless it is imported already."""
    for name, names in packages.items():
        if name not in sys.modules:
            spec = importlib.util.find_spec(name)
            if spec is not None and spec.submodule_search_locations is not None:
                sys.modules[name] = _lazy_package(spec, names)


def _lazy_package(spec: importlib.machinery.ModuleSpec, names: Mapping[str, str]) -> types.ModuleType:
    package = types.ModuleType(spec.name)
    package.__spec__, package.__loader__, package.__file__ = spec, spec.loader, spec.origin
    package.__path__, package.__package__ = list(spec.submodule_search_locations or ()), spec.name

    def __getattr__(attr: str) -> Any:
        if attr in names:
            value = getattr(importlib.import_module(f"{spec.name}.{names[attr]}"), attr)
        elif not attr.startswith("__") and importlib.util.find_spec(f"{spec.name}.{attr}") is not None:
            return importlib.import_module(f"{spec.name}.{attr}")  # `from package import submodule`
        else:  # anything else: the real package, once
            del package.__getattr__
            assert spec.loader is not None
            spec.loader.exec_module(package)
            return getattr(package, attr)
        setattr(package, attr, value)
        return value

    package.__getattr__ = __getattr__  # type: ignore[method-assign]
    return package


def lazy_names(package: str, names: Mapping[str, str]) -> Callable[[str], Any]:
    """A module ``__getattr__`` (PEP 562) for ``package`` that imports each of ``names``
    (``{name: submodule}``) from its submodule on first use."""
    module = sys.modules[package]

    def __getattr__(name: str) -> Any:
        if name not in names:
            raise AttributeError(f"module {package!r} has no attribute {name!r}")
        value = getattr(importlib.import_module(f"{package}.{names[name]}"), name)
        setattr(module, name, value)
        return value

    return __getattr__


def hold_back(name: str) -> None:
    """Until :func:`release`, ``import name`` fails as if ``name`` were not installed."""
    sys.modules.setdefault(name, None)  # type: ignore[arg-type]  # None in sys.modules blocks the import


def release(name: str) -> None:
    """Undo :func:`hold_back`."""
    if name in sys.modules and sys.modules[name] is None:
        del sys.modules[name]


def preload(modules: Iterable[str]) -> threading.Thread:
    """Import ``modules`` in a daemon thread started now; join it before relying on them. Worth it
    while this thread waits in C with the GIL released (``shmem_init``). A module that fails to import
    there is left out: its importer meets the error again, where it belongs."""

    def run() -> None:
        for name in modules:
            with contextlib.suppress(Exception):
                importlib.import_module(name)

    thread = threading.Thread(target=run, name="preload", daemon=True)
    thread.start()
    return thread
