"""Exceptions a user can meet; each message says what went wrong and what to do."""

import re
import sys
from collections.abc import Callable, Iterable, Mapping
from typing import Any

from .folding import pe_ranges
from .words import plural

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
    "CellSyntaxError",
    "notebook_count",
]

START_HINT = "start one with `%shmem start -n 4` (or `shmem_notebook.start(4)`)"


class ShmemNotebookError(Exception):
    """Base class of shmem_notebook's errors; IPython shows them as one line, not our frames.

    Errors a cell ends in (:class:`PEError`, :class:`CellStoppedError`,
    :class:`PEDiedError`) carry that cell's ``CellResult`` as ``.result``.
    """

    result: Any = None  # a cells.result.CellResult (this shared floor imports no client module)

    @property
    def _render_traceback_(self) -> Callable[[], list[str]]:
        # raised in a cell on a PE, the user's frames (which line) matter: IPython's own
        # traceback, whose frames inside the tool the notebook folds (see PEError)
        if "shmem_notebook.engine.runtime" in sys.modules:
            raise AttributeError("_render_traceback_")
        return lambda: [f"{type(self).__name__}: {self}"]


class InputError(ShmemNotebookError, ValueError):
    """An argument the user gave is not valid."""


class SpecError(InputError):
    """A malformed array declaration or size."""


class LaunchError(ShmemNotebookError):
    """The job could not be launched (oshrun missing, bad hostfile, PEs never registered)."""


class NoJobError(ShmemNotebookError):
    """No OpenSHMEM job is running."""

    def __init__(self, what: str = "this") -> None:
        super().__init__(f"no OpenSHMEM job is running for {what}; {START_HINT}")


class JobStateError(ShmemNotebookError):
    """The job exists but cannot take work (dead, hung or already running)."""


class PEDiedError(JobStateError):
    """PEs died while the job ran; ``causes`` maps PE -> cause (signal or exit code), ``dumps`` PE -> the
    Python stacks of every thread it wrote when a signal killed it (PEs on the client's host)."""

    def __init__(self, message: str, causes: Mapping[int, str], dumps: Mapping[int, str] | None = None) -> None:
        super().__init__(message)
        self.causes = dict(causes)
        self.dumps = dict(dumps or {})


class CellStoppedError(JobStateError):
    """A cell was stopped by its timeout or an interrupt; ``where`` says where every PE was."""

    def __init__(self, message: str, where: Iterable[str]) -> None:
        super().__init__("\n".join([message, *where]))
        self.where = list(where)


class CellSyntaxError(InputError):
    """A cell is not valid Python; caught in the notebook, so no PE ran any of it (not a
    ``SyntaxError`` subclass: IPython would print those with its own long traceback)."""


class HeapFullError(ShmemNotebookError):
    """An allocation does not fit in the symmetric heap."""


class PEError(ShmemNotebookError):
    """A cell raised on some PEs. ``errors`` maps PE -> (ename, evalue, traceback); ``message``
    replaces the summary (e.g. when other PEs waited for those that raised)."""

    def __init__(self, errors: Mapping[int, tuple[str, str, str]], npes: int, message: str | None = None) -> None:
        self.errors = dict(errors)
        self.npes = npes
        kinds: dict[str, list[int]] = {}
        for pe, (ename, evalue, _) in sorted(self.errors.items()):
            kinds.setdefault(f"{ename}: {evalue}{_EXPLAINED.get((ename, evalue), '')}", []).append(pe)
        summary = "; ".join(f"PE {pe_ranges(pes)}: {what}" for what, pes in kinds.items())
        super().__init__(message or f"the cell raised on {len(self.errors)} of {plural(npes, 'PE')}: {summary}")

    def _render_traceback_(self) -> list[str]:
        """IPython shows this instead of our own frames: each distinct remote traceback once,
        labelled by the PEs that raised it, without frames inside shmem4py or this tool."""
        groups: dict[str, list[int]] = {}
        for pe, (ename, evalue, tb) in sorted(self.errors.items()):
            groups.setdefault(_clean_traceback(tb) if tb else f"{ename}: {evalue}", []).append(pe)
        lines = []
        for tb, pes in groups.items():
            lines.append(f"[PE {pe_ranges(pes)}] raised:")
            lines.extend(tb.splitlines())
        lines.append(str(self))
        return lines


#: (ename, evalue) of errors the library raises in words only it understands -> what it means
_EXPLAINED = {
    ("MemoryError", "alloc() returned NULL"): (
        " (the symmetric heap has no room for it on this PE: free arrays, allocate less, or restart "
        "with a larger heap: `%shmem stop`, then `%shmem start -n N --heap SIZE`)"
    ),
}

_ANSI = re.compile(r"\x1b\[[0-9;]*m")
_ERROR_LINE = re.compile(r"[A-Za-z_][\w.]*(: |$)")  # "MemoryError: ..." (frame lines start with spaces, digits, -->)
#: frames of these files are the library's or the tool's, not the user's
_HIDDEN = ("/shmem4py/", "/shmem_notebook/engine/")


def _clean_traceback(tb: str) -> str:
    """A PE's rendered traceback without ipyparallel's ``[pe:execute]`` header, with the
    notebook's cell number instead of the engine's, and frames inside shmem4py or this tool
    folded into one line (as in ``Cell In[4], line 2`` then the error)."""
    lines = tb.splitlines()
    if lines and re.fullmatch(r"\[\d+:\w+\]", _ANSI.sub("", lines[0]).strip()):
        lines = lines[1:]
    count = notebook_count()
    out: list[str] = []
    hidden, skipping = 0, False
    for line in lines:
        plain = _ANSI.sub("", line)
        if plain.startswith(("File ", "Cell ")):
            skipping = plain.startswith("File ") and any(h in plain for h in _HIDDEN)
            hidden += skipping
            if plain.startswith("Cell ") and count is not None:
                line = re.sub(r"In\[\d+\]", f"In[{count}]", line, count=1)
        elif skipping and _ERROR_LINE.match(plain):
            skipping = False  # the error line after the last frame
        if not skipping:
            if hidden and (plain.startswith(("File ", "Cell ")) or _ERROR_LINE.match(plain)):
                out.append(f"({plural(hidden, 'frame')} inside shmem4py / shmem_notebook hidden)")
                hidden = 0
            out.append(line)
    while out and not out[-1].strip():
        out.pop()
    return "\n".join(out)


def notebook_count() -> int | None:
    """The notebook's number of the cell running now (IPython's), or None outside IPython."""
    try:
        from IPython import get_ipython
    except ImportError:
        return None
    shell = get_ipython()
    if shell is None:
        return None
    # the inputs stored so far end with the running cell's; execution_count is already the next
    # cell's number while a cell runs under IPython 9 (ipykernel 7), still this one's under IPython 8
    stored = getattr(getattr(shell, "history_manager", None), "input_hist_raw", None)
    count: Any = len(stored) - 1 if stored else getattr(shell, "execution_count", None)
    return int(count) if count else None  # 0: a shell that has run no cell (a script that made one)
