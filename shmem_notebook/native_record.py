"""The race recording's hot path in C (shared: the client builds, PEs load).

A race-checked cell pays Python for every shmem4py call it makes, every slice it takes and every
name it reads (:mod:`shmem_notebook.engine.record`): a wrapper and a handler per call, a hook and
an address lookup per slice, 1-1.5 us each. ``native_record.c`` does the common cases in C, each
in place of one Python function that stays the reference and takes every other case:

- ``Recorded``: :func:`~shmem_notebook.engine.record.layer`'s wrapper of a function of the shmem
  module (the call's cell line, its handlers, the depth that hides inner calls);
- ``PlainRMA``: ``RaceRecording._plain_rma``, a put or get of whole arrays merged into the last
  event of its line or made one;
- ``get`` and ``read``: the hooks of ``x[a:b]`` (a view noted by the address book's slice cache)
  and of a name read whole (nothing to note unless it is an array).

:func:`build` compiles it once per user, source, NumPy and Python (the C compiler and headers that
shmem4py's own build needed, and NumPy's) into the user's cache (:mod:`.native_cache`), before
``oshrun`` starts; :func:`load` imports it on a PE. Where it cannot (``SHMEM_NOTEBOOK_NATIVE=0``,
no compiler) the recording is the Python one, event for event the same
(``tests/test_native_record.py``).
"""

from __future__ import annotations

import os
import pathlib
import shlex
import subprocess
import sysconfig
from typing import TYPE_CHECKING

from .native_cache import CachedModule

if TYPE_CHECKING:
    from types import ModuleType

__all__ = ["SOURCE", "build", "load"]

NAME = "_shmem_notebook_record"
#: the C source, beside this file
SOURCE = pathlib.Path(__file__).with_name("native_record.c")


def _numpy_version() -> str:
    """NumPy's version without importing it (the watchdog and the client's start stay light)."""
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version("numpy")
    except PackageNotFoundError:
        return "none"


def _module() -> CachedModule:
    try:
        text = SOURCE.read_text()
    except OSError:
        text = ""
    return CachedModule(NAME, "record", f"{text}\nnumpy {_numpy_version()}", __name__)


def build() -> str | None:
    """The path of the built module, compiled first if missing (in a process of its own, about 2 s
    once); None where it cannot be built. A stat when it is there."""
    return _module().build()


def load() -> ModuleType | None:
    """The built module on a PE, or None (not built, or switched off)."""
    return _module().load()


def _compile() -> None:
    import numpy

    def make(scratch: str) -> str:
        out = os.path.join(scratch, NAME + sysconfig.get_config_var("EXT_SUFFIX"))
        cc = shlex.split(sysconfig.get_config_var("CC") or "cc")
        includes = [f"-I{sysconfig.get_paths()['include']}", f"-I{numpy.get_include()}"]
        subprocess.run([*cc, "-O2", "-Wall", "-fPIC", "-shared", *includes, str(SOURCE), "-o", out], check=True)
        return out

    _module().compile_into(make)


if __name__ == "__main__":
    _compile()
