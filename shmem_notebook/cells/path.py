"""The cell path: prepare -> dispatch -> stream -> collect -> report.

:func:`run_cell` is what ``job.run`` and ``%%pxshmem`` do. Optional stages
(:mod:`.stages`) plug in before dispatch, after collection and at report time; a stage
that runs the cell again uses :func:`rerun`.
Collective on the PEs: the cell goes to every PE at once.

The path uses only the job's public surface: ``prepare_cell``, ``send_cell``, ``dead_pes``,
``locate``, ``blocked_calls``, ``write_word``, ``waiting_since``, ``interrupt``, ``pause``,
``mark_dead``, ``restart`` and ``ask`` (see :mod:`shmem_notebook.job.pe_requests`), and its attributes
``n``, ``pes``, ``timeout``, ``state``, ``last_result``, ``cell_callbacks``, ``specs``, ``crash``,
``restart_on_hang`` and ``RESTART_HINT``: :class:`~.surface.JobSurface` declares them.
"""

import contextlib
import os
import sys
import time
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any, TextIO

from ..analysis.postmortem import cell_error, where_report
from ..arguments import check_timeout
from ..errors import CellStoppedError, PEDiedError, PEError, ShmemNotebookError
from ..folding import pe_ranges
from . import ctrl_c, deadlock, display, stranded, unblock
from .output import OutputMerger, busy_hold
from .result import CellResult
from .stages import Stage, stages_for
from .surface import JobSurface, SentCell

__all__ = ["Cell", "run_cell", "rerun"]


@dataclass
class Cell:
    """One cell on its way through the path (``write_out`` and ``write_err``: keywords, always given)."""

    job: JobSurface
    code: str
    timeout: float | None = None
    stages: list[Stage] = field(default_factory=list)
    write_out: Callable[[str], object] = field(kw_only=True)
    write_err: Callable[[str], object] = field(kw_only=True)
    request: SentCell | None = None  # once dispatched: ChannelCell or ExecuteCell (see .channel)
    #: [(op, args)] the PEs answer right before the cell
    before_requests: list[tuple[str, Sequence[Any]]] = field(default_factory=list)
    after_requests: list[Any] = field(default_factory=list)  # [(op, args)] (or op names) the PEs answer right after it
    waiting: dict[int, Any] | None = (
        None  # PE -> (line, call) of PEs stranded by others' errors (.stranded) or deadlocked (.deadlock)
    )


def run_cell(
    job: JobSurface,
    code: str,
    arrays: Any = None,
    timeout: float | None = None,
    stdout: TextIO | None = None,
    stderr: TextIO | None = None,
    **options: Any,
) -> CellResult:
    """Run ``code`` on every PE of ``job``; see :meth:`shmem_notebook.Job.run`. Collective."""
    cell = _prepare(job, code, arrays, timeout, stdout, stderr, options)
    with ctrl_c.watching():  # a Ctrl-C that a finalizer dropped still stops the cell and its reruns
        result, where, pending = _run(cell)
        for stage in cell.stages:
            stage.after(cell, result)
    job.last_result = result
    for callback in list(job.cell_callbacks):
        callback(job, result)
    _report(cell, result, where)
    if not pending:
        assert cell.request is not None  # sent by _run
        cell.request.forget()
    return result


def rerun(
    cell: Cell,
    before: Iterable[tuple[str, Sequence[Any]]] = (),
    after: Iterable[Any] = (),
    write: Callable[[str], object] | None = None,
) -> tuple[Cell, CellResult, ShmemNotebookError | None]:
    """Run ``cell``'s code on every PE again, for a stage (``stress``), through the same path
    (dispatch, stream, collect) with the requests ``before`` and ``after`` riding with it and its
    output going to ``write``. No stage runs and nothing is recorded (``job.last_result``, the cell
    callbacks, the history). Returns ``(sent, result, error)``: the cell as sent (``sent.request.answers``),
    its :class:`CellResult` and the error it ended in (None: it ran without one). Collective."""
    job = cell.job
    job.prepare_cell()
    write = write or cell.write_out
    again = Cell(
        job,
        cell.code,
        timeout=cell.timeout,
        write_out=write,
        write_err=write,
        before_requests=list(before),
        after_requests=list(after),
    )
    result, where, pending = _run(again)
    display.show(result, write)
    error = _error(again, result, where)
    if error is not None:
        error.result = result
    elif not pending:
        assert again.request is not None  # sent by _run
        again.request.forget()
    return again, result, error


def _run(cell: Cell) -> tuple[CellResult, dict[int, Any], list[int]]:
    """Dispatch, stream and collect ``cell``: ``(CellResult, where the stopped PEs were, PEs still running)``."""
    job = cell.job
    started = time.monotonic()
    request = cell.request = job.send_cell(cell.code, cell.before_requests, cell.after_requests)
    try:
        outcome, pending = _stream(cell, started)
    except KeyboardInterrupt:
        outcome, pending = "interrupted", request.pending()
    with ctrl_c.held() if outcome != "ok" else contextlib.nullcontext():
        where, pending = _stop(cell, outcome, pending)  # pressed again meanwhile: it goes on all the same
    result = _collect(request.metadata, time.monotonic() - started, pending, outcome)
    if outcome in ("stranded", "deadlock"):  # the waiting PEs' KeyboardInterrupt is the tool's, not theirs
        result.errors = {pe: e for pe, e in result.errors.items() if pe not in where}
        result.waiting = where
    result.errors = {pe: cell_error(e, cell.code) for pe, e in result.errors.items()}  # no temp file names
    return result, where, pending


#: seconds the PEs still running a cell after its interrupt are given to end it, while some of them are
#: seen anywhere but in a call that waits for other PEs: a PE handling the interrupt may still be
#: unwinding (under load the first traceback takes seconds), or left a barrier the others then join
SETTLE = 10.0


def _stop(cell: Cell, outcome: str, pending: list[int]) -> tuple[dict[int, Any], list[int]]:
    """After ``outcome``, the PEs of ``pending`` stopped, released or paused: ``(where they were, PEs
    still running)``."""
    job, request = cell.job, cell.request
    assert request is not None  # sent by _run
    where = job.locate(pending) if outcome in ("timeout", "interrupted") else {}
    if outcome in ("timeout", "interrupted"):  # as the stop button: PEs that can stop raise KeyboardInterrupt
        pending = job.interrupt(request, pending)
        blocked = _settled(job, request, pending)
        pending = sorted(blocked)
        if pending and all(isinstance(w, tuple) and w[1] in stranded.BLOCKING for w in blocked.values()):
            pending = unblock.release(job, request, blocked)  # released where they can be, else paused
        elif pending:  # blocked in OpenSHMEM for good: paused, so that they burn no CPU until the restart
            job.pause(pending)
    if outcome in ("stranded", "deadlock"):  # PEs wait in OpenSHMEM for PEs that ended the cell, or for each other
        where = cell.waiting or {}  # set by _stream with these outcomes
        pending = stranded.release(job, request, where)
    return where, pending


def _settled(job: JobSurface, request: SentCell, pending: list[int]) -> dict[int, Any]:
    """``{pe: where}`` for the PEs of ``pending`` still running ``request`` once things settled after the
    interrupt: every one of them seen twice at the same place in a call that waits for other PEs
    (:data:`stranded.BLOCKING`), or :data:`SETTLE` seconds passed. Where they were *before* the
    interrupt is no guide: a PE seen computing then may have raised since, leaving the others in a
    barrier, and a PE seen outside the cell's code may still be handling the interrupt."""
    deadline, last = time.monotonic() + SETTLE, None
    while pending := request.pending():
        seen = job.locate(pending)
        waits = all(isinstance(w, tuple) and w[1] in stranded.BLOCKING for w in seen.values())
        if (waits and seen == last) or time.monotonic() > deadline:
            return seen
        last = seen
        request.wait(0.3 if waits else 0.5)
    return {}


def _prepare(
    job: JobSurface,
    code: str,
    arrays: Any,
    timeout: float | None,
    stdout: TextIO | None,
    stderr: TextIO | None,
    options: dict[str, Any],
) -> Cell:
    """Check the job and the arguments, allocate the cell's arrays, run the stages' ``before``."""
    stages = stages_for(options)
    job.prepare_cell(arrays)
    cell = Cell(
        job,
        code,
        timeout=job.timeout if timeout is None else check_timeout(timeout),
        stages=stages,
        write_out=(stdout or sys.stdout).write,
        write_err=(stderr or sys.stderr).write,
    )
    for stage in stages:
        stage.before(cell)
        before, after = stage.requests(cell)
        cell.before_requests += before
        cell.after_requests += after
    return cell


def _stream(cell: Cell, started: float) -> tuple[str, list[int]]:
    """Show output as it arrives; return (outcome, PEs still running) once every PE
    finished ('ok'), the timeout passed ('timeout') or PEs died ('died')."""
    job, request, timeout = cell.job, cell.request, cell.timeout
    assert request is not None  # sent by _run
    own = {pe: {"pid": info.get("pid")} for pe, info in job.pes.items()}  # lines differing by pid fold
    hold = busy_hold()  # the load, read once for both streams
    out, err = (OutputMerger(range(job.n), w, hold=hold, own=own) for w in (cell.write_out, cell.write_err))
    seen: dict[tuple[int, str], int] = {}

    def feed() -> list[int]:
        pending = request.pending()
        for pe, md in enumerate(request.metadata):
            for key, merger in (("stdout", out), ("stderr", err)):
                text = md.get(key, "")
                if len(text) > seen.get((pe, key), 0):
                    merger.feed(pe, text[seen.get((pe, key), 0) :])
                    seen[(pe, key)] = len(text)
            if pe not in pending:
                out.finish(pe)
                err.finish(pe)
        out.flush()
        err.flush()
        return pending

    outcome: str | None = None
    stranded_check: float | None = None
    next_check, first_ended = time.monotonic() + 0.25, 0.0  # first_ended: read once stranded_check is set
    watch = deadlock.Watch(job, cell.code)
    try:
        while outcome is None:
            # wakes when every PE finished; shows output every 50 ms meanwhile
            request.wait(0.05)
            ctrl_c.check()
            pending = feed()
            now = time.monotonic()
            if not pending:
                outcome = "ok"
            elif timeout is not None and now - started > timeout:
                outcome = "timeout"
            elif now > next_check:  # a dead PE never answers: look every 0.25 s
                next_check = now + 0.25
                if job.dead_pes():
                    time.sleep(0.3)  # the survivors' last output is on its way
                    outcome = "died"
            if outcome is None and stranded_check is None and len(pending) < job.n:
                stranded_check, first_ended = now + stranded.GRACE, now
            if outcome is None and stranded_check is not None and now > stranded_check:
                # the others may still be on their way: look again (less often once a PE computes long)
                stranded_check = now + (0.3 if now - first_ended < 3 else 1.0)
                looked = stranded.waiting(job, pending, cell.code)
                if looked and looked == cell.waiting:  # twice at the same place: they wait for good
                    outcome = "stranded"
                cell.waiting = looked
            if outcome is None and len(pending) == job.n and (stuck := watch.look(now)):
                outcome, cell.waiting = "deadlock", stuck  # every PE waits for another
            if outcome is None and len(pending) == job.n and (lingering := watch.lingering()) is not None:
                err.flush()
                cell.write_err(deadlock.lingering_message(lingering, cell.code, job.n))
        return outcome, feed()
    finally:
        out.close()
        err.close()


def _collect(metadata: list[dict[str, Any]], seconds: float, pending: Iterable[int], outcome: str) -> CellResult:
    result = CellResult(seconds=seconds, pending=list(pending), outcome=outcome)
    for pe, md in enumerate(metadata):
        result.stdout[pe], result.stderr[pe] = md.get("stdout", ""), md.get("stderr", "")
        data = (md.get("execute_result") or {}).get("data", {})
        if "text/plain" in data:
            result.results[pe] = data["text/plain"]
        error = md.get("error") if md.get("status") == "error" else None
        if error is not None and pe not in pending and outcome != "died":
            result.errors[pe] = (error.ename, error.evalue, "\n".join(error.render_traceback()))
    if outcome in ("ok", "stranded") and result.errors and not (outcome == "stranded" and pending):
        result.outcome = "error"
    display.collect(result, metadata)
    return result


def _report(cell: Cell, result: CellResult, where: dict[int, Any]) -> None:
    """Show the last expressions and the stages' findings, then raise for whatever went wrong."""
    write_out = cell.write_out
    display.show(result, write_out)  # displays, then the last expressions
    for stage in cell.stages:
        stage.report(cell, result, write_out)
    error = _error(cell, result, where)
    if error is not None:
        error.result = result  # the cell's CellResult travels with its error
        raise error


def _launcher(job: JobSurface) -> str:
    """What started the PEs, as the user would type it: ``oshrun``, or ``mpirun.openmpi`` for OSHMPI."""
    return os.path.basename(getattr(getattr(job, "library", None), "oshrun", "") or "oshrun")


def _error(cell: Cell, result: CellResult, where: dict[int, Any]) -> ShmemNotebookError | None:
    """The error the cell ends in, or None."""
    job = cell.job
    if result.outcome == "died":
        return PEDiedError(
            f"{job.mark_dead()} while the cell ran; OpenSHMEM has no fault tolerance, so {_launcher(job)} ended "
            f"the job (the other PEs' output is above); {job.RESTART_HINT}",
            job.crash,
            job.crash_dumps,
        )
    if result.outcome == "deadlock":
        text = deadlock.message(result.waiting, not result.pending, job.RESTART_HINT, cell.code)
        if result.pending and job.restart_on_hang:
            text = text[: text.rindex("; the waiting PEs")] + "; " + _restarted(job)
        return CellStoppedError(f"{text}. Where every PE was:", where_report(result.waiting, cell.code, job.n))
    if result.outcome == "stranded" or (result.outcome == "error" and result.waiting):
        released = result.outcome == "error"
        finished = [pe for pe in range(job.n) if pe not in result.errors and pe not in result.waiting]
        text = stranded.message(result.errors, result.waiting, released, job.RESTART_HINT, cell.code, finished)
        if not released and job.restart_on_hang:
            text = text[: text.rindex("; the waiting PEs")] + "; " + _restarted(job)
        if not result.errors:  # no PE raised: some finished the cell while the others wait for them
            return CellStoppedError(text, [])
        return PEError(result.errors, job.n, message=text)
    if result.outcome in ("timeout", "interrupted"):
        raised = {
            pe: f"raised {e[0]}"
            + (f" at line {stranded.raised_line(e[2])}" if stranded.raised_line(e[2]) else "")
            + (f": {e[1]}" if e[1] else "")
            for pe, e in result.errors.items()
        }
        lines = where_report({**raised, **where}, cell.code, job.n)
        what = f"did not finish within {cell.timeout:g} s" if result.outcome == "timeout" else "was interrupted"
        verb = "is" if len(result.pending) == 1 else "are"
        paused = (
            f"PE {pe_ranges(result.pending)} could not be interrupted (blocked in OpenSHMEM) and {verb} paused (no CPU)"
        )
        if not result.pending:
            return CellStoppedError(
                f"the cell {what}; every PE stopped at the interrupt and the job is still usable. Where every PE was:",
                lines,
            )
        job.state = "hung"
        if job.restart_on_hang:
            return CellStoppedError(f"the cell {what}; {paused}; {_restarted(job)}. Where every PE was:", lines)
        return CellStoppedError(
            f"the cell {what}; {paused}, so the job is marked hung: run `%shmem restart`. Where every PE was:", lines
        )
    if result.errors:
        return PEError(result.errors, job.n)
    return None


def _restarted(job: JobSurface) -> str:
    """Restart a hung job by itself (``restart_on_hang``); what was lost, in words."""
    arrays = ", ".join(job.specs)
    job.restart()
    kept = f"arrays {arrays} re-allocated (zeroed)" if arrays else "no arrays were declared"
    return (
        f"the job was restarted by itself (restart_on_hang): {job.n} fresh PEs, {kept}; every PE's "
        f"variables and undeclared symmetric arrays were lost"
    )
