"""The job (client side): one OpenSHMEM job's processes and heap bookkeeping.

- :mod:`.job`: :class:`Job`, the lifecycle (controller, ``oshrun``, restart).
- :mod:`.arrays`: declared symmetric arrays and heap use.
- :mod:`.health`: dead PEs, crash causes, where hung PEs are.
- :mod:`.watchdog`: ends a job's processes (and batch jobs) when the kernel dies.
- :mod:`.options`: what is derived from the start options' one declaration (:class:`JobOptions`).
- :mod:`.batch`: a Slurm batch job's options and its progress line while it waits.
- :mod:`.pe_requests`: :meth:`Job.ask`, the one way to ask PEs, and the cell path's surface.
- :mod:`.processes`: small process and waiting helpers.

:func:`start` and :func:`current_job` keep the job the magics act on.
"""

from typing import TYPE_CHECKING, Unpack

from ..errors import JobStateError
from ..lazy_imports import lazy_names
from ..words import plural
from .options import JobOptions, StartOptions, signature

if TYPE_CHECKING:
    from .job import Job

__all__ = ["Job", "JobOptions", "StartOptions", "start", "current_job"]

#: :class:`Job` is imported on first use: importing this package (its options, or a light submodule such as
#: :mod:`.watchdog`) does not pull in ipyparallel's client side (the watchdog's process skips it altogether)
__getattr__ = lazy_names(__name__, {"Job": "job"})

_current: "Job | None" = None


def start(n: int = 4, **options: Unpack[StartOptions]) -> "Job":
    """Start an OpenSHMEM job of ``n`` PEs and make it the current job.

    Inside a Slurm allocation the PEs go on its nodes; ``slurm=True`` submits a
    batch job for them instead; ``library`` names the OpenSHMEM library (see :class:`Job`).
    The options are declared once (:mod:`shmem_notebook.launcher.start_options`; :class:`StartOptions` types them).
    """
    from .job import Job

    global _current
    if _current is not None and _current.state != "stopped":
        raise JobStateError(
            f"a job of {plural(_current.n, 'PE')} is already {_current.state}; use `%shmem restart` or `%shmem stop` "
            f"(job.restart() / job.stop()) first"
        )
    job = Job(n, **options)
    job.start()
    _current = job
    return job


start.__signature__ = signature()  # type: ignore[attr-defined]  # every option, from the declaration


def current_job() -> "Job | None":
    """The job started last by :func:`start` (``None`` if none)."""
    return _current
