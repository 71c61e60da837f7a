"""C the client compiles once per user into the user's cache: modules PEs load, and programs (shared).

A :class:`CachedModule` is built in a process of its own (``python -m`` its module, about 1 s
once) into ``$XDG_CACHE_HOME/shmem_notebook`` (or ``~/.cache``), in a directory named by its
source's digest and the Python it is for, so a changed source or another Python builds anew. A
:class:`CachedProgram` (the fork stub) is compiled there by the C compiler alone, in about 50 ms. Where
either cannot be built or loaded (no compiler, a read-only home, ``SHMEM_NOTEBOOK_NATIVE=0``, or
``=no-board``/``=no-record``/``=no-stub`` for one of them) the Python it stands for is used.
"""

from __future__ import annotations

import glob
import hashlib
import importlib.util
import os
import subprocess
import sys
import tempfile
from typing import TYPE_CHECKING, cast

if TYPE_CHECKING:
    from collections.abc import Callable
    from importlib.abc import Loader
    from importlib.machinery import ModuleSpec
    from types import ModuleType

__all__ = ["CachedModule", "CachedProgram", "enabled"]


def enabled(kind: str) -> bool:
    """False when ``SHMEM_NOTEBOOK_NATIVE=0`` switches every C module off, or names this one's
    ``kind`` as ``no-KIND`` (``SHMEM_NOTEBOOK_NATIVE=no-record``: the recording in Python)."""
    value = os.environ.get("SHMEM_NOTEBOOK_NATIVE", "").strip()
    return value != "0" and f"no-{kind}" not in value.replace(" ", "").split(",")


class CachedModule:
    """The extension module ``name`` (``kind``: the directory's prefix) whose build depends on
    ``digest_of`` (text), compiled by running ``python -m builder``, which calls :meth:`compile_into`."""

    def __init__(self, name: str, kind: str, digest_of: str, builder: str) -> None:
        self.name, self.kind, self.digest_of, self.builder = name, kind, digest_of, builder

    def directory(self) -> str:
        """Where this source's build for this Python lives (in the user's cache)."""
        return _directory(f"{self.kind}-{sys.implementation.cache_tag}", self.digest_of)

    def built(self) -> str | None:
        """The built module's path, or None."""
        found = glob.glob(os.path.join(glob.escape(self.directory()), f"{self.name}.*.so"))
        return found[0] if found else None

    def build(self) -> str | None:
        """The path of the built module, compiled first if missing; None where it cannot be built.
        A stat when it is there."""
        if not enabled(self.kind):
            return None
        path = self.built()
        if path is None:
            try:
                subprocess.run([sys.executable, "-m", self.builder], capture_output=True, timeout=120, check=False)
            except (OSError, subprocess.SubprocessError):
                return None
            path = self.built()
        return path

    def load(self) -> ModuleType | None:
        """The built module, or None (not built, or switched off)."""
        path = self.built() if enabled(self.kind) else None
        if path is None:
            return None
        try:
            spec = cast("ModuleSpec", importlib.util.spec_from_file_location(self.name, path))
            module = importlib.util.module_from_spec(spec)
            cast("Loader", spec.loader).exec_module(module)
        except (ImportError, OSError):
            return None
        return module

    def compile_into(self, make: Callable[[str], str]) -> None:
        """``make(scratch)`` writes the module into a scratch directory beside the final one and
        returns its path; it is then moved in (two jobs of one user may start at once)."""
        _install(self.directory(), make)


class CachedProgram:
    """The C program ``name``, compiled from ``source`` (text) by ``$CC`` or ``cc``; ``kind``: its directory prefix."""

    def __init__(self, name: str, kind: str, source: str) -> None:
        self.name, self.kind, self.source = name, kind, source

    def built(self) -> str | None:
        """The program's path, or None (not built, or switched off)."""
        path = os.path.join(_directory(self.kind, self.source), self.name)
        return path if enabled(self.kind) and os.access(path, os.X_OK) else None

    def build(self) -> str | None:
        """The program's path, compiled first if missing; None where it cannot be. A stat when it is there."""
        path = self.built()
        if path is not None or not enabled(self.kind):
            return path

        def make(scratch: str) -> str:
            source, program = os.path.join(scratch, f"{self.name}.c"), os.path.join(scratch, self.name)
            with open(source, "w") as f:
                f.write(self.source)
            compiler = os.environ.get("CC") or "cc"
            subprocess.run([compiler, "-O2", "-o", program, source], capture_output=True, timeout=120, check=True)
            return program

        try:
            _install(_directory(self.kind, self.source), make)
        except (OSError, subprocess.SubprocessError):
            return None
        return self.built()


def _directory(prefix: str, source: str) -> str:
    """The cache directory of a build of ``source`` (text): named by ``prefix`` and the source's digest."""
    cache = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    digest = hashlib.sha256(source.encode()).hexdigest()[:16]
    return os.path.join(cache, "shmem_notebook", f"{prefix}-{digest}")


def _install(target: str, make: Callable[[str], str]) -> None:
    """``make(scratch)`` writes a build into a scratch directory beside ``target`` and returns its path;
    it is then moved into ``target`` (two jobs of one user may start at once)."""
    os.makedirs(target, exist_ok=True)
    with tempfile.TemporaryDirectory(dir=target) as scratch:
        built = make(scratch)
        os.replace(built, os.path.join(target, os.path.basename(built)))
