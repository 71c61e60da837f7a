"""shmem_notebook: interactive OpenSHMEM in Jupyter.

``%load_ext shmem_notebook`` adds the ``%shmem`` and ``%%pxshmem`` magics;
:func:`start` gives the same from Python. Client and PE sides live in separate
packages: only :mod:`shmem_notebook.engine` (run by ``oshrun`` on the PEs)
imports shmem4py; everything else imports cleanly with no OpenSHMEM at all.
"""

from typing import TYPE_CHECKING

from .errors import (
    CellStoppedError,
    CellSyntaxError,
    HeapFullError,
    InputError,
    JobStateError,
    LaunchError,
    NoJobError,
    PEDiedError,
    PEError,
    ShmemNotebookError,
    SpecError,
)
from .lazy_imports import lazy_names
from .rc import rc

if TYPE_CHECKING:  # for the type checker only: importing them runs the client side
    from IPython.core.interactiveshell import InteractiveShell

    from .analysis.happens_before import Access, Race
    from .cells.result import CellResult
    from .inspector.replay import replay
    from .inspector.widget import inspect
    from .job import Job, current_job, start
    from .specs import ArraySpec

__version__ = "0.1.0"

__all__ = [
    "start",
    "current_job",
    "Job",
    "CellResult",
    "Race",
    "Access",
    "ArraySpec",
    "rc",
    "ShmemNotebookError",
    "InputError",
    "LaunchError",
    "NoJobError",
    "JobStateError",
    "HeapFullError",
    "PEError",
    "PEDiedError",
    "CellStoppedError",
    "CellSyntaxError",
    "SpecError",
    "inspect",
    "replay",
    "load_ipython_extension",
    "unload_ipython_extension",
]


#: public names imported on first use: a PE (``python -m shmem_notebook.engine``) and the
#: watchdog import this package too, and must not pay for the client side's imports
_LAZY = {
    "start": "job",
    "current_job": "job",
    "Job": "job",
    "CellResult": "cells.result",
    "ArraySpec": "specs",
    "Race": "analysis.happens_before",
    "Access": "analysis.happens_before",
    "inspect": "inspector.widget",  # the inspector's widgets over a job and a traced cell
    "replay": "inspector.replay",
}

__getattr__ = lazy_names(__name__, _LAZY)


def load_ipython_extension(ipython: "InteractiveShell") -> None:
    """``%load_ext shmem_notebook``: register ``%shmem`` and ``%%pxshmem``, and their tab completion."""
    from .magics import ShmemMagics, completion

    ipython.register_magics(ShmemMagics)
    completion.register(ipython)


def unload_ipython_extension(ipython: "InteractiveShell") -> None:
    """Stop the current job when the extension is unloaded; remove the tab completion."""
    from .job import current_job
    from .magics import completion

    completion.unregister(ipython)

    job = current_job()
    if job is not None:
        job.stop()
