"""The job (client side): one OpenSHMEM job's processes and heap bookkeeping.

- :mod:`.job`: :class:`Job`, the lifecycle (controller, ``oshrun``, restart).
- :mod:`.arrays`: declared symmetric arrays and heap use.
- :mod:`.health`: dead PEs, crash causes, where hung PEs are.
- :mod:`.watchdog`: ends a job's processes when the kernel dies.
- :mod:`.processes`: small process and waiting helpers.

:func:`start` and :func:`current_job` keep the job the magics act on.
"""

from ..cells import CellResult
from ..errors import JobStateError
from .job import Job

__all__ = ["Job", "CellResult", "start", "current_job"]

_current = None


def start(n=4, heap=None, oversubscribe=None, hostfile=None, timeout=None, ip=None):
    """Start an OpenSHMEM job of ``n`` PEs and make it the current job."""
    global _current
    if _current is not None and _current.state != "stopped":
        raise JobStateError(
            f"a job of {_current.n} PEs is already {_current.state}; use `%shmem restart` or `%shmem stop` "
            f"(job.restart() / job.stop()) first"
        )
    job = Job(n, heap=heap, oversubscribe=oversubscribe, hostfile=hostfile, timeout=timeout, ip=ip)
    job.start()
    _current = job
    return job


def current_job():
    """The job started last by :func:`start` (``None`` if none)."""
    return _current
