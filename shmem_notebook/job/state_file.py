"""The job's state file, for the instructor's view (``python -m shmem_notebook.jobs_view``; client side).

Around every cell the job notes its state (the words of :mod:`.states`: ``busy`` while the cell
runs, then ``idle``, ``hung`` or ``dead``),
its size, library and kernel in ``<profile>/log/shmem_notebook-state-<cluster id>.json``:
written by its user only, readable by them and root (mode 0600). It goes with the job's other
profile files (named by its cluster id) when the job stops or its watchdog cleans up.
"""

from __future__ import annotations

import contextlib
import json
import os
import time
from typing import TYPE_CHECKING, Any

from .states import job_state

if TYPE_CHECKING:
    from .job import Job

__all__ = ["PREFIX", "state_path", "note_state", "read_state"]

PREFIX = "shmem_notebook-state-"
#: bytes of a note on disk (its few fields take about 120)
SIZE = 512


def state_path(profile_dir: str, cluster_id: str) -> str:
    """Where the job of ``cluster_id`` notes its state."""
    return os.path.join(profile_dir, "log", f"{PREFIX}{cluster_id}.json")


def note_state(job: Job, state: str | None = None) -> None:
    """Note ``state`` (default: the job's own, :func:`.states.job_state`); never fails a cell."""
    cluster = getattr(job, "_cluster", None)  # None: not started (or a stand-in job of a test)
    if cluster is None:
        return
    path = state_path(cluster.profile_dir, cluster.cluster_id)
    note = {
        "state": state or job_state(job.state),
        "since": time.time(),
        "n": job.n,
        "library": job.library.name,
        "kernel": os.getpid(),
    }
    # written in place, padded to one size (JSON ignores the spaces): twice per cell, this must
    # cost microseconds (a new file renamed over the old took 0.2-3 ms, a share of a no-op cell)
    data = json.dumps(note).encode().ljust(SIZE)
    with contextlib.suppress(OSError):
        fd = os.open(path, os.O_WRONLY | os.O_CREAT, 0o600)
        try:
            os.pwrite(fd, data, 0)
        finally:
            os.close(fd)


def read_state(profile_dir: str, cluster_id: str) -> dict[str, Any] | None:
    """The job's last note (a dict), or None when it noted nothing yet."""
    for _ in range(3):  # a read that met a note being written sees half of it: read again
        try:
            with open(state_path(profile_dir, cluster_id)) as fh:
                note: dict[str, Any] = json.load(fh)
                return note
        except OSError:
            return None
        except ValueError:
            time.sleep(0.001)
    return None
