"""PEs stranded by others that ended the cell (client side).

The most common failures of an SPMD cell: some PEs raise, or finish the cell early (a loop that
ran fewer times on them), while the others go on into a synchronisation, or a Python loop polling
symmetric memory, and wait for them forever. While a cell runs, :func:`waiting` notices it (some
PEs ended the cell, every other PE is blocked in an OpenSHMEM call or polls a symmetric array in a
loop nothing else writes), so the cell ends within a second. :func:`release` then frees the waiting
PEs where it can: PEs polling in Python are interrupted; when the others all wait in one world
synchronisation (:data:`shmem_notebook.operations.JOINABLE`), they are sent SIGINT and the PEs that
ended the cell make the same call, so the others return from it and stop at once; when they all
wait in a team call the tool emulates (a sub-team's ``sync`` or
collective on OpenSHMEM 1.4: :data:`~shmem_notebook.operations.EMULATED_WAIT`, a loop the
interrupt reaches), SIGINT stops them there. Then every PE drops the exceptions' frames (they may
hold symmetric arrays on some PEs only) and zeroes the emulated teams' counts: the rest of the
cell is abandoned on every PE, the job stays ready, variables kept.
Otherwise (a ``wait_until`` nobody will satisfy, the library's reduction) the waiting PEs are
paused with SIGSTOP, so they burn no CPU until the restart that is needed. A cell in which no PE
ended but every PE waits for another (a deadlock, :mod:`.deadlock`) ends through :func:`release` too.
"""

from __future__ import annotations

import ast
import functools
import re
import socket
import time
from typing import TYPE_CHECKING, Any, cast

from ..errors import ShmemNotebookError
from ..folding import pe_ranges
from ..operations import CALLS, EMULATED_WAIT, JOINABLE, WAITS

if TYPE_CHECKING:
    from collections.abc import Iterable, Mapping, Sequence

    from .surface import JobSurface, SentCell

__all__ = [
    "GRACE",
    "BLOCKING",
    "POLL_NAMES",
    "waiting",
    "polling_lines",
    "joinable",
    "release",
    "ended",
    "raised_line",
    "shown",
    "message",
    "VALUE",
]

#: seconds after the first error before looking whether the other PEs wait for it
GRACE = 0.2
_ANSI = re.compile(r"\x1b\[[0-9;]*m")
_CELL_LINE = re.compile(r"Cell In\[\d+\], line (\d+)")


#: shmem4py calls that wait for other PEs (the tool's emulated team calls wait in these too)
BLOCKING = frozenset(
    [name for name, op in CALLS.items() if (op.collective or op.kind == "wait") and not name.startswith("test")]
    + ["set_lock", "signal_wait_until", "split_strided", "split_2d", "destroy", EMULATED_WAIT]
)


def waiting(job: JobSurface, pending: Iterable[int], code: str | None = None) -> dict[int, Any] | None:
    """``{pe: (line, call)}`` when every PE of ``pending`` waits in a call that needs other PEs
    (:data:`BLOCKING`) or in a loop only another PE can end (``call`` None, see :func:`polling_lines`),
    else None. The cell path acts on two equal looks 0.3 s apart, so a PE that merely passes
    through a barrier is not taken for a stranded one."""
    where = job.locate(pending)
    if set(where) != set(pending) or not all(isinstance(w, tuple) for w in where.values()):
        return None
    polls = polling_lines(code) if code and any(w[1] is None for w in where.values()) else set()
    if all(call in BLOCKING or (call is None and line in polls) for line, call in where.values()):
        return where
    return None


#: names a polling loop's condition may use besides the arrays it polls (anything else, a clock
#: say, may end the loop by itself)
POLL_NAMES = frozenset({"int", "float", "bool", "np", "me", "npes", "len", "any", "all", "abs"})


def polling_lines(code: str) -> set[int]:
    """The lines of ``code``'s ``while`` loops that only another PE can end: the condition reads
    variables and constants (no clock, no call but ``int()`` and the like), and the body only
    passes, sleeps or calls OpenSHMEM, never storing to what the condition reads. Once every other
    PE ended the cell, such a loop runs for ever."""
    return set(_polling_lines(code))


@functools.lru_cache(maxsize=64)
def _polling_lines(code: str) -> frozenset[int]:
    """:func:`polling_lines`, found once per text (cells are run again)."""
    try:
        tree = ast.parse(code)
    except SyntaxError:
        return frozenset()
    lines: set[int] = set()
    for loop in (n for n in ast.walk(tree) if isinstance(n, ast.While)):
        calls = [n for n in ast.walk(loop.test) if isinstance(n, ast.Call)]
        if any(not isinstance(c.func, ast.Name) or c.func.id not in POLL_NAMES for c in calls):
            continue
        read = {n.id for n in ast.walk(loop.test) if isinstance(n, ast.Name)} - POLL_NAMES
        if not read or not all(_idle(stmt, read) for stmt in loop.body) or loop.orelse:
            continue
        lines.update(range(loop.lineno, cast(int, loop.end_lineno) + 1))
    return frozenset(lines)


def _idle(stmt: ast.stmt, read: set[str]) -> bool:
    """A statement of a polling loop's body: ``pass``, ``continue``, a sleep or an OpenSHMEM call
    not storing to ``read``."""
    if isinstance(stmt, (ast.Pass, ast.Continue)):
        return True
    if not isinstance(stmt, ast.Expr) or not isinstance(stmt.value, ast.Call):
        return False
    func = stmt.value.func
    name = func.attr if isinstance(func, ast.Attribute) else getattr(func, "id", None)
    owner = func.value.id if isinstance(func, ast.Attribute) and isinstance(func.value, ast.Name) else None
    if owner == "shmem" and name not in ("get", "get_nbi", "iget", "atomic_fetch", "atomic_set"):
        return True  # an OpenSHMEM call that writes nothing the condition reads locally
    return name == "sleep" and owner in (None, "time")


def joinable(job: JobSurface, where: Mapping[int, tuple[int, str | None]]) -> str | None:
    """The one call every waiting PE is in, if they can be released from here."""
    calls = {call for _, call in where.values()}
    call = calls.pop() if len(calls) == 1 else None
    if (
        call not in JOINABLE
        and call != EMULATED_WAIT
        or (call == "sync" and job.pes.get(0, {}).get("teams") != "emulated")
    ):
        return None  # natively, shmem.sync may be a sub-team's: joining TEAM_WORLD would not release it
    here = socket.gethostname()
    if any(job.pes.get(pe, {}).get("host") != here for pe in where):
        return None  # SIGINT reaches PEs of this host only
    return call


def release(
    job: JobSurface,
    cell: SentCell,
    where: Mapping[int, tuple[int, str | None]],
    restore: dict[str, list[Any]] | None = None,
) -> list[int]:
    """Free the PEs of ``where`` (waiting for PEs whose cell ended); the PEs still running the cell.
    When they cannot be freed, they are paused (SIGSTOP) and the job is marked hung. ``restore``: the
    words :mod:`.unblock` wrote into waits, put back once every PE ended the cell."""
    polling = sorted(pe for pe, (_, call) in where.items() if call is None)
    if polling:  # a Python loop: the interrupt stops it at once (the others go on waiting)
        job.interrupt(cell, polling, grace=0)
        ended(job, cell, where, polling)
    blocked = {pe: w for pe, w in where.items() if pe not in polling}
    call = joinable(job, blocked) if blocked else None
    if call == EMULATED_WAIT:  # the interrupt stops them in the emulation's wait loop
        job.interrupt(cell, sorted(blocked), grace=0)
        ended(job, cell, where, blocked)
    elif call is not None:
        job.interrupt(cell, sorted(blocked), grace=0)  # they stop right after the call returns
        others = [pe for pe in range(job.n) if pe not in blocked]
        try:
            job.ask("join", call, pes=others, timeout=10)
        except ShmemNotebookError:
            pass
        ended(job, cell, where, blocked)
    if (call is not None or not blocked) and not cell.pending():
        try:  # every PE drops the exceptions' frames and zeroes the emulated teams' counts
            job.ask("released", restore, timeout=10)
            return []
        except ShmemNotebookError:
            pass
    job.pause(cell.pending())
    return cell.pending()


#: seconds released PEs are given to end the cell, and in all while they are seen elsewhere than where they
#: waited (handling the interrupt: a PE's first traceback imports IPython's formatter, which took 2.9 s
#: for 3 PEs at once on 2 cores)
ENDING, LATE = 2.0, 20.0


def ended(job: JobSurface, cell: SentCell, where: Mapping[int, Any], pes: Iterable[int]) -> None:
    """Wait until ``pes`` ended ``cell`` (after an interrupt or a join): :data:`ENDING` seconds, then on while
    each of them still running it is seen somewhere else than at ``where`` (it handles the interrupt), up to
    :data:`LATE` seconds in all."""
    start = time.monotonic()
    while left := sorted(set(pes) & set(cell.pending())):
        waited = time.monotonic() - start
        if waited > LATE:
            return
        if waited < ENDING:
            cell.wait(0.05)
            continue
        seen = job.locate(left)
        if any(seen.get(pe) == where.get(pe) for pe in left):
            return  # still where it waited: the interrupt or the join did not free it
        cell.wait(0.5)


def raised_line(traceback: str | None) -> int | None:
    """The line of the cell where a PE's exception was raised (its innermost cell frame), or None."""
    found = _CELL_LINE.findall(_ANSI.sub("", traceback or ""))
    return int(found[-1]) if found else None


def shown(call: str | None, line: int, code: str | None) -> str:
    """How the user wrote the call a PE waits in: ``shmem.barrier_all()``, or the cell's statement
    for a team call (``half.sync()``: the tool's emulation, or ``shmem.sync`` of any team)."""
    if call is None:
        return "a polling loop"
    if call in (EMULATED_WAIT, "sync"):
        lines = (code or "").splitlines()
        text = lines[line - 1].strip() if 0 < line <= len(lines) else "a team call"
        return text if len(text) <= 60 else text[:57] + "..."
    return f"shmem.{call}()"


#: what a PE in a wait or a polling loop waits for once the PEs that could have written it left the cell
VALUE = "a value that no PE will write now"


def message(
    errors: Mapping[int, tuple[str, str, str]],
    where: Mapping[int, tuple[int, str | None]],
    released: bool,
    restart_hint: str,
    code: str | None = None,
    finished: Sequence[int] = (),
) -> str:
    """``PE 0 raised ValueError at line 2: boom; PE 1-3 wait in shmem.barrier_all() at line 3 for it; ...``
    (a PE in a wait waits ``for a value that no PE will write now``);
    ``finished``: PEs that ended the cell without an error (``PE 2 finished the cell``)."""
    raised: dict[str, list[int]] = {}
    waits: dict[str, list[int]] = {}
    for pe, (ename, evalue, tb) in sorted(errors.items()):
        line = raised_line(tb)
        at = f" at line {line}" if line and f"at line {line}" not in str(evalue) else ""  # the message may say it
        raised.setdefault(f"raised {ename}{at}: {evalue}" if evalue else f"raised {ename}{at}", []).append(pe)
    them = "it" if len(errors) + len(finished) == 1 else "them"
    for pe, (line, call) in sorted(where.items()):
        # a wait or a polling loop waits for a value, a collective for the PEs that left
        awaited = VALUE if call is None or call in WAITS else them
        waits.setdefault(f"{shown(call, line, code)} at line {line} for {awaited}", []).append(pe)
    parts = [f"PE {pe_ranges(pes)} {what}" for what, pes in raised.items()]
    if finished:
        parts.append(f"PE {pe_ranges(finished)} finished the cell")
    parts += [f"PE {pe_ranges(pes)} {'waits' if len(pes) == 1 else 'wait'} in {what}" for what, pes in waits.items()]
    if released:
        parts.append("the rest of the cell was abandoned on every PE; the job is ready and every PE kept its variables")
    else:
        parts.append(
            f"the waiting PEs cannot be released from that call (only a world barrier or sync, or a team "
            f"call the tool emulates, can be), so they are paused (no CPU) and the job is marked hung: "
            f"{restart_hint}"
        )
    return "; ".join(parts)
