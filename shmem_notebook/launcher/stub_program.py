"""The fork stub in C: what ``oshrun`` starts in each forked PE's place (``engine/fork_stub.c``).

A job with a fork server (:mod:`shmem_notebook.job.forks`) has ``oshrun`` start a stub per PE, which
stands for the PE the server forked. :mod:`shmem_notebook.engine.fork_stub` does it in Python: about
4 MiB of unique memory and 10-20 ms of CPU per PE, at every start and restart. The C program does the
same in 0.1 MiB. :func:`build` compiles it once per user into the user's cache (:mod:`..native_cache`);
where it cannot (no compiler, ``SHMEM_NOTEBOOK_NATIVE=0`` or ``=no-stub``) the Python stub stands in.
"""

from __future__ import annotations

import os
import pathlib

from ..native_cache import CachedProgram

__all__ = ["NAME", "PYTHON_STUB", "SOURCE", "build", "command", "is_stub"]

NAME = "fork_stub"
_ENGINE = pathlib.Path(__file__).resolve().parent.parent / "engine"
#: the Python stub (not imported: it is the PE's)
PYTHON_STUB = str(_ENGINE / "fork_stub.py")
#: the C stub's source
SOURCE = str(_ENGINE / "fork_stub.c")
_PROGRAM = CachedProgram(NAME, "stub", pathlib.Path(SOURCE).read_text())


def build() -> str | None:
    """The C stub's path, compiled first if missing (about 50 ms, once per user); None where it cannot be."""
    return _PROGRAM.build()


def command(python: str, address: str) -> list[str]:
    """What ``oshrun`` runs in a PE's place to reach the fork server at ``address``: the C stub if built,
    else the Python one under ``python``."""
    program = _PROGRAM.built()
    return [program, address] if program else [python, "-I", "-S", PYTHON_STUB, address]


def is_stub(cmdline: list[str]) -> bool:
    """Whether a process's command line is a fork stub's (either kind)."""
    return any(os.path.basename(word) in (NAME, f"{NAME}.py") for word in cmdline[:4])
