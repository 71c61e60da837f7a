"""C modules the client compiles once per user into the user's cache and PEs load (shared).

A :class:`CachedModule` is built in a process of its own (``python -m`` its module, about 1 s
once) into ``$XDG_CACHE_HOME/shmem_notebook`` (or ``~/.cache``), in a directory named by its
source's digest and the Python it is for, so a changed source or another Python builds anew. Where
it cannot be built or loaded (no compiler, a read-only home, ``SHMEM_NOTEBOOK_NATIVE=0``, or
``=no-board``/``=no-record`` for one of them) ``load`` gives None and the PEs keep the Python it
stands for.
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

__all__ = ["CachedModule", "enabled"]


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
        cache = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
        digest = hashlib.sha256(self.digest_of.encode()).hexdigest()[:16]
        return os.path.join(cache, "shmem_notebook", f"{self.kind}-{sys.implementation.cache_tag}-{digest}")

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
        target = self.directory()
        os.makedirs(target, exist_ok=True)
        with tempfile.TemporaryDirectory(dir=target) as scratch:
            built = make(scratch)
            os.replace(built, os.path.join(target, os.path.basename(built)))
