"""The cells a job ran, in order (client side): what ``job.export`` writes out as a program.

:class:`History` is ``job.history``, a list of :class:`CellRecord`. ``Job.run`` notes each
cell's code and options while it runs (:meth:`History.running`); the job's cell callback
(:meth:`History.record`, one of ``job.cell_callbacks``) appends the record once the PEs
finished, with the arrays declared at that point, the outcome, what each PE printed and the
notebook's ``In[k]``. Cells run *by* another cell's stage (the ``stress`` reruns) are not
recorded: they repeat the cell they belong to.
"""

from __future__ import annotations

import contextlib
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from ..errors import notebook_count
from ..specs import as_specs
from .state_file import note_state

if TYPE_CHECKING:
    from collections.abc import Iterator

    from ..cells.result import CellResult
    from .job import Job

__all__ = ["CellRecord", "History"]


@dataclass
class CellRecord:
    """One cell the job ran."""

    code: str
    arrays: dict[str, str]  # name -> declaration text (``"right=int64[4]"``), every array declared when it ran
    options: dict[str, Any]  # what it ran with: the line's declarations (``declared``), timeout, race, stress, trace
    count: int | None = None  # the notebook's In[k] (None outside IPython)
    part: int = 1  # several job.run calls in one notebook cell: the 2nd is part 2 of In[k]
    number: int = 0  # its place in the job's history, from 1
    outcome: str = "ok"  # as CellResult.outcome: ok, error, timeout, interrupted, died, stranded
    stdout: dict[int, str] = field(default_factory=dict)  # PE -> what it printed
    results: dict[int, str] = field(default_factory=dict)  # PE -> text/plain of its last expression
    npes: int = 0
    pids: tuple[int | None, ...] = ()  # the PEs' pids: a change between two cells means the job was restarted

    @property
    def label(self) -> str:
        """``In[4]`` in a notebook (``In[4].2`` for a second ``job.run`` in it), ``cell 3`` (its place
        in the history) otherwise."""
        if self.count is None:
            return f"cell {self.number}"
        return f"In[{self.count}]" + (f".{self.part}" if self.part > 1 else "")


class History(list[CellRecord]):
    """``job.history``: the :class:`CellRecord` of every cell the job ran, in order."""

    _running: list[tuple[str, dict[str, Any]]]

    def __init__(self, job: Job) -> None:
        super().__init__()
        self._running = []  # (code, options) of the cells running now; more than one: a stage's rerun
        self._job = job
        job.cell_callbacks.append(self.record)

    @contextlib.contextmanager
    def running(self, code: str, arrays: Any, options: dict[str, Any]) -> Iterator[None]:
        """While ``Job.run`` runs ``code``: what the cell callback records with its result."""
        self._running.append((code, dict(options, declared=arrays) if arrays else dict(options)))
        note_state(self._job, "busy")  # for the instructor's view (.state_file)
        try:
            yield
        finally:
            self._running.pop()
            note_state(self._job)

    def record(self, job: Job, result: CellResult) -> None:
        """The cell callback: append the cell that just finished (not a stage's rerun of it)."""
        if len(self._running) != 1:
            return
        code, options = self._running[0]
        count = notebook_count()
        part = self[-1].part + 1 if count is not None and self and self[-1].count == count else 1
        if "declared" in options:  # as the notebook wrote them: "right=int64[4]"
            options = dict(options, declared=[str(spec) for spec in as_specs(options["declared"])])
        self.append(
            CellRecord(
                code=code,
                arrays={name: str(spec) for name, spec in job.specs.items()},
                options={k: v for k, v in options.items() if v not in (None, False)},
                count=count,
                part=part,
                number=len(self) + 1,
                outcome=result.outcome,
                stdout=dict(result.stdout),
                results=dict(result.results),
                npes=job.n,
                pids=tuple(info.get("pid") for _, info in sorted(job.pes.items())),
            )
        )
