"""Compiled bytecode for the PEs, kept warm.

Every PE imports shmem_notebook's own modules. Where no current ``.pyc`` exists (a source tree
edited since, or ``PYTHONDONTWRITEBYTECODE`` set, so nothing ever writes one) each PE compiled
each module again, at every start: about 0.1 s of CPU per PE measured on a 2-core machine, which
adds up PE by PE. :func:`warm` compiles the stale ones once, into their ``__pycache__``, before
``oshrun`` starts, as pip does at install (an installed package has nothing to compile).
"""

import compileall
import contextlib
import os

__all__ = ["warm"]

PACKAGE = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def warm(package: str = PACKAGE) -> bool:
    """Compile the modules of ``package`` (a directory) whose bytecode is missing or stale; a few ms
    when none is. False when some could not be compiled or written (the PEs then compile those)."""
    with contextlib.suppress(OSError):
        return bool(compileall.compile_dir(package, quiet=2))
    return False
