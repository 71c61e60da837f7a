"""The ``race`` stage: ``job.run(code, race=True)`` / ``%%pxshmem --race`` (client side).

Every PE starts its race recording (:mod:`shmem_notebook.engine.record`) right before the
cell and sends its trace back with the cell's outcome (the requests ride with the cell), and
:func:`shmem_notebook.analysis.happens_before.analyse` sets ``result.races``. The
report (:mod:`shmem_notebook.analysis.report`, shared with the command-line runner) prints one
line per race and the verdict. A cell that raised, was stopped or whose PE sent no trace still
reports the races traced up to there, and its verdict says what was checked.

Race-checked cells in sequence are checked as one program: the operations a cell left in
flight (:class:`~shmem_notebook.analysis.carry.Carry`, the stage's state on the job) start the
next race-checked cell's analysis, if it comes right after on the same PEs. :meth:`RaceStage.reset`
(``%shmem race reset``, ``job.race_reset()``) forgets them. The analysis shows a progress line when it
takes more than a second; an interrupt stops it with one line, and the job stays usable. In a notebook
the first ``rc.race_pictures`` races are drawn under the report (:mod:`shmem_notebook.analysis.race_picture`).
"""

from __future__ import annotations

import time
from typing import TYPE_CHECKING, Any, cast

from ..analysis.happens_before import analyse
from ..analysis.places import name_places, namer, notes
from ..analysis.report import report_lines, stops_of
from ..errors import notebook_count
from ..operations import CAP
from ..rc import rc
from ..stage_registry import DECLARED
from ..words import plural
from . import ctrl_c
from .stages import Stage, register
from .stranded import raised_line

if TYPE_CHECKING:
    from collections.abc import Callable

    from ..analysis.carry import Carry
    from .path import Cell
    from .result import CellResult
    from .surface import JobSurface, SentCell

__all__ = ["RaceStage", "CAP", "cell_label", "in_notebook"]

#: its requests (:mod:`shmem_notebook.stage_registry`)
RACE_START, RACE_STOP = DECLARED["race"].requests

#: seconds of analysis before the progress line appears
PROGRESS_AFTER = 1.0


def _place(job: JobSurface) -> tuple[int, tuple[int | None, ...]]:
    """Where the next cell stands: its place in the job's history and the PEs' pids."""
    return len(job.history), tuple(info.get("pid") for _, info in sorted(job.pes.items()))


def _carry(job: JobSurface) -> Carry | None:
    """What earlier race-checked cells left in flight, if the next cell comes right after them."""
    carry: Carry | None = RaceStage.state(job)
    if carry is not None and carry.after != _place(job):
        return None  # another cell ran in between, or the PEs were restarted
    return carry


def cell_label(job: JobSurface) -> str:
    """``In [5]`` (``In [5].2`` for a second ``job.run`` in it) in a notebook, else ``cell 3``."""
    count = notebook_count()
    if count is None:
        return f"cell {len(job.history) + 1}"
    last = job.history[-1] if job.history else None
    part = last.part + 1 if last is not None and last.count == count else 1
    return f"In [{count}]" + (f".{part}" if part > 1 else "")


class _Progress:
    """Writes ``race check: analysing ... 40%`` (rewritten in place) once the analysis has taken
    :data:`PROGRESS_AFTER` seconds; ``close()`` ends the line."""

    def __init__(self, write: Callable[[str], object], what: str) -> None:
        self.write, self.what, self.started, self.shown, self.last = write, what, time.perf_counter(), False, 0.0

    def __call__(self, done: int, total: int) -> None:
        ctrl_c.check()  # the analysis stops at a Ctrl-C that a finalizer dropped, too
        now = time.perf_counter()
        if now - self.started < PROGRESS_AFTER or now - self.last < 0.5:
            return
        self.last, self.shown = now, True
        self.write(f"\rrace check: analysing {self.what}... {100 * done // total}%")

    def close(self) -> None:
        if self.shown:
            self.write(f"\rrace check: analysed {self.what} in {time.perf_counter() - self.started:.1f} s\n")


@register
class RaceStage(Stage):
    """Record every PE's shmem calls and loads/stores, then report the races between them."""

    name = "race"
    export_note = (
        "--race: the race check is the notebook's; run this program under `python -m shmem_notebook.race -- "
        "oshrun ...` for it"
    )
    flag = {"action": "store_true", "help": "report put/get races after the cell"}
    traces: dict[int, Any]  # PE -> the trace it sent
    missing: list[int]
    checked: Any
    interrupted: float | bool
    carried: list[str]
    overhead: float

    def requests(self, cell: Cell) -> tuple[list[tuple[str, tuple[Any, ...]]], list[tuple[str, tuple[Any, ...]]]]:
        carry = _carry(cell.job)
        private = carry.private(cell.job.n) if carry else None  # where earlier cells' operations still are
        return [(RACE_START, ({"cap": CAP, "private": private},))], [(RACE_STOP, ())]

    def after(self, cell: Cell, result: CellResult) -> None:
        started = time.perf_counter()
        job = cell.job
        self.traces, self.missing, self.checked, self.interrupted, self.carried = {}, [], None, False, []
        if result.outcome != "died":  # a PE that cannot answer: report what the others sent
            answers = cast("SentCell", cell.request).answers(RACE_STOP)
            self.traces = {pe: data for pe, data in answers.items() if data is not None and pe not in result.pending}
        self.missing = [pe for pe in range(job.n) if pe not in self.traces]
        carry = _carry(job)
        label = cell_label(job)
        result.stages[self.name] = []
        result.code = getattr(cell, "code", None)  # result.fixed_code applies the races' fixes to it
        self.reset(job)
        if self.traces:
            events = sum(len(data["events"]) for data in self.traces.values())
            progress = _Progress(cell.write_out, f"{plural(events, 'event')} on {plural(len(self.traces), 'PE')}")
            try:
                found = analyse(
                    self.traces, job.n, carry=carry, cell=label, progress=progress, source=getattr(cell, "code", None)
                )
            except KeyboardInterrupt:
                self.interrupted = time.perf_counter() - started
                progress.shown = False
            else:
                progress.close()
                result.stages[self.name] = name_places(found.races, self.traces, job.history)
                if result.trace is not None:  # the Perfetto export draws them (the trace stage's after may come first)
                    result.trace.races = result.races
                self.checked = found.checked
                self.carried = cast("list[str]", carry.cells()) if carry else []
                if not self.missing and result.outcome != "died":
                    found.carry.after = (len(job.history) + 1, _place(job)[1])
                    self.keep(job, found.carry)
        self.overhead = time.perf_counter() - started

    def report(self, cell: Cell, result: CellResult, write: Callable[[str], object]) -> None:
        if self.interrupted is not False:
            write(
                f"\rrace check: interrupted after {self.interrupted:.1f} s of analysis; the cell ran, its races "
                "were not checked and earlier cells' operations in flight are forgotten\n"
            )
            return
        after = f", after what {', '.join(self.carried)} left in flight" if self.carried else ""
        stops = stops_of(result, cell.timeout, raised_line)
        name = namer(self.traces, cell.job.history)  # lines outside the cell: "In [3] line 4", "kernels.py:12"
        for line in report_lines(
            result.races,
            self.traces,
            cell.job.n,
            checked=self.checked,
            stops=stops,
            notes=notes(self.traces, name=name),
            where=name,
            after=after,
            cost=f", +{self.overhead:.2f} s",
        ):
            write(f"{line}\n")
        drawn = in_notebook() and result.races[: rc.race_pictures]
        for race in drawn or ():
            race.show()  # a space-time diagram under the report (rc.race_pictures of them)


def in_notebook() -> bool:
    """Whether a Jupyter kernel runs this code (the race pictures are drawn under its report)."""
    try:
        from IPython import get_ipython
    except ImportError:
        return False
    return getattr(get_ipython(), "kernel", None) is not None
