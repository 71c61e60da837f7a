"""A spare PE's wait for a restart (PE side, before ``shmem_init``).

The client holds an exclusive lock on the spare set's lock file while the set is spare
(:mod:`shmem_notebook.job.spare`). Each spare PE, its imports done, waits for a shared lock on it:
blocked in the kernel, no CPU. A restart writes :data:`~shmem_notebook.protocol.SPARE_GO` into the
file and lets go of the lock: the PEs go on to ``shmem_init`` and register. A lock let go without
it (the client died, the job stopped) ends the PE.
"""

import fcntl
import os
import sys

from ..protocol import SPARE_GO

__all__ = ["wait"]


def wait(path: str) -> None:
    """Import what needs no ``shmem_init`` (NumPy, shmem4py's compiled module and the library it
    links), then block until the client lets go of ``path``'s lock; return if it said go, else exit."""
    import numpy  # noqa: F401
    import shmem4py.api  # noqa: F401  (loading the library does not initialise it)

    try:
        fd = os.open(path, os.O_RDONLY)
        ready = os.open(path + ".ready", os.O_WRONLY | os.O_APPEND)
    except OSError:
        sys.exit(0)  # the job removed it: this spare set is discarded
    try:
        os.write(ready, b".")  # one byte per PE that waits (Spares.waiting)
        os.close(ready)
        fcntl.flock(fd, fcntl.LOCK_SH)
        said = os.pread(fd, len(SPARE_GO), 0)
    finally:
        os.close(fd)
    if said != SPARE_GO:
        sys.exit(0)
