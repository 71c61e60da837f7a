"""A job's spare set of PEs, which the next restart takes (client side; ``spare=True``).

A restart spends most of its time starting the new PEs: Python, its imports (most of a PE's
CPU before it registers), ``shmem_init``, registering. A job started with ``spare=True`` keeps
one more ``oshrun`` with N PEs that have done the first two and wait before ``shmem_init``,
blocked on the lock of a file in the profile's private folder (no CPU; about 50 MiB of memory
each, no symmetric heap). A restart writes "go" into the file and lets go of the lock
(:meth:`Spares.take`): those PEs initialise and register as the job's PEs, and a new spare set
is launched once they have. Stopping lets go of the lock without "go": the spare PEs exit by
themselves (:mod:`shmem_notebook.engine.spare_wait`). Jobs whose PEs run on this host only.
"""

from __future__ import annotations

import contextlib
import fcntl
import os
import uuid
from typing import TYPE_CHECKING, cast

from ..errors import InputError
from ..protocol import SPARE_GO
from .processes import alive
from .watchdog import owned_by

if TYPE_CHECKING:
    from .job import Job

__all__ = ["Spares"]


class Spares:
    """The spare set of ``job`` (a :class:`~shmem_notebook.Job`), if ``wanted``."""

    set_id: str | None
    _fd: int | None
    _path: str | None
    _taken: list[str]

    def __init__(self, job: Job, wanted: bool) -> None:
        if wanted and (job.slurm or job.hostfile):
            raise InputError("spare PEs wait on this host only: start without --spare, or without --hostfile/--slurm")
        self.job, self.wanted = job, bool(wanted)
        self.set_id = None  # the engine set waiting as the spare
        self._fd = self._path = None  # its lock file, locked
        self._taken = []  # lock files of taken sets, removed once their PEs registered

    def keep(self) -> None:
        """Launch a spare set unless one waits; where it cannot be launched, restarts start PEs as usual."""
        self._remove_taken()
        job = self.job
        if not self.wanted or self.set_id is not None or job._cluster is None:
            return
        security = os.path.join(job._cluster.profile_dir, "security")
        path = os.path.join(security, f"spare-{job._cluster.cluster_id}-{uuid.uuid4().hex[:8]}.lock")
        fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_EXCL, 0o600)
        fcntl.flock(fd, fcntl.LOCK_EX)  # before any spare PE can ask for it
        os.close(os.open(path + ".ready", os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600))
        self._fd, self._path = fd, path
        try:
            with owned_by(job._token):
                self.set_id = job._cluster.start_engines_sync(job.n, spare=path, **job._set_options())
        except Exception:
            self._let_go()
            self._remove_taken()

    def waiting(self) -> int:
        """How many PEs of the spare set wait for a restart (0 while they import, or without one)."""
        try:
            return os.path.getsize(self._path + ".ready") if self.set_id is not None and self._path else 0
        except OSError:
            return 0

    def take(self) -> str | None:
        """The spare set's engine set id, its PEs told to go on; None when there is none, or it died."""
        set_id = self.set_id
        engines = self.job._cluster.engines.get(set_id) if set_id is not None and self.job._cluster else None
        if engines is None or not alive(engines.process):
            self.discard()
            return None
        os.pwrite(cast(int, self._fd), SPARE_GO, 0)
        self._let_go()
        self.set_id = None
        return set_id

    def discard(self) -> None:
        """End the spare set (its PEs exit by themselves once the lock is gone) and wait for it."""
        set_id, self.set_id = self.set_id, None
        if self._fd is not None:
            os.ftruncate(self._fd, 0)
            self._let_go()
        if set_id is not None and self.job._cluster is not None:
            self.job._reap(set_id)
        self._remove_taken()

    def _let_go(self) -> None:
        """Release the lock (the PEs read the file now); the file goes once no PE needs it."""
        fcntl.flock(cast(int, self._fd), fcntl.LOCK_UN)
        os.close(cast(int, self._fd))
        self._taken.append(cast(str, self._path))
        self._fd = self._path = None

    def _remove_taken(self) -> None:
        for path in self._taken:
            for name in (path, path + ".ready"):
                with contextlib.suppress(OSError):
                    os.unlink(name)
        self._taken = []
