"""Exceptions a user can meet; each message says what went wrong and what to do."""

from .folding import pe_ranges

__all__ = [
    "ShmemNotebookError",
    "InputError",
    "SpecError",
    "LaunchError",
    "NoJobError",
    "JobStateError",
    "PEDiedError",
    "CellStoppedError",
    "HeapFullError",
    "PEError",
]

START_HINT = "start one with `%shmem start -n 4` (or `shmem_notebook.start(4)`)"


class ShmemNotebookError(Exception):
    """Base class of shmem_notebook's errors; IPython shows them as one line, not our frames.

    Errors a cell ends in (:class:`PEError`, :class:`CellStoppedError`,
    :class:`PEDiedError`) carry that cell's ``CellResult`` as ``.result``.
    """

    result = None

    def _render_traceback_(self):
        return [f"{type(self).__name__}: {self}"]


class InputError(ShmemNotebookError, ValueError):
    """An argument the user gave is not valid."""


class SpecError(InputError):
    """A malformed array declaration or size."""


class LaunchError(ShmemNotebookError):
    """The job could not be launched (oshrun missing, bad hostfile, PEs never registered)."""


class NoJobError(ShmemNotebookError):
    """No OpenSHMEM job is running."""

    def __init__(self, what="this"):
        super().__init__(f"no OpenSHMEM job is running for {what}; {START_HINT}")


class JobStateError(ShmemNotebookError):
    """The job exists but cannot take work (dead, hung or already running)."""


class PEDiedError(JobStateError):
    """PEs died while the job ran; ``causes`` maps PE -> cause (signal or exit code)."""

    def __init__(self, message, causes):
        super().__init__(message)
        self.causes = dict(causes)


class CellStoppedError(JobStateError):
    """A cell was stopped by its timeout or an interrupt; ``where`` says where every PE was."""

    def __init__(self, message, where):
        super().__init__("\n".join([message, *where]))
        self.where = list(where)


class HeapFullError(ShmemNotebookError):
    """An allocation does not fit in the symmetric heap."""


class PEError(ShmemNotebookError):
    """A cell raised on some PEs. ``errors`` maps PE -> (ename, evalue, traceback)."""

    def __init__(self, errors, npes):
        self.errors = dict(errors)
        self.npes = npes
        kinds = {}
        for pe, (ename, evalue, _) in sorted(self.errors.items()):
            kinds.setdefault(f"{ename}: {evalue}", []).append(pe)
        summary = "; ".join(f"PE {pe_ranges(pes)}: {what}" for what, pes in kinds.items())
        super().__init__(f"the cell raised on {len(self.errors)} of {npes} PEs: {summary}")

    def _render_traceback_(self):
        """IPython shows this instead of our own frames: each distinct remote traceback once."""
        groups = {}
        for pe, (ename, evalue, tb) in sorted(self.errors.items()):
            groups.setdefault(tb or f"{ename}: {evalue}", []).append(pe)
        lines = []
        for tb, pes in groups.items():
            lines.append(f"[PE {pe_ranges(pes)}] raised:")
            lines.extend(tb.splitlines())
        lines.append(str(self))
        return lines
