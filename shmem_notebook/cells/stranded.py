"""PEs stranded by another PE's error (client side).

The most common failure of an SPMD cell: some PEs raise while the others go on into a
synchronisation and wait for them forever. While a cell runs, :func:`waiting` notices it (some
PEs raised, every other PE is blocked in an OpenSHMEM call), so the cell ends about half a
second after the error. :func:`release` then frees the waiting PEs where it can: when they
all wait in one world synchronisation (:data:`shmem_notebook.operations.JOINABLE`), they are
sent SIGINT and the PEs that finished make the same call, so the others return from it and stop
at once; when they all wait in a team call the tool emulates (a sub-team's ``sync`` or
collective on OpenSHMEM 1.4: :data:`~shmem_notebook.operations.EMULATED_WAIT`, a loop the
interrupt reaches), SIGINT stops them there. Then every PE drops the exceptions' frames (they may
hold symmetric arrays on some PEs only) and zeroes the emulated teams' counts: the rest of the
cell is abandoned on every PE, the job stays ready, variables kept.
Otherwise (a ``wait_until`` nobody will satisfy, the library's reduction) the waiting PEs are
paused with SIGSTOP, so they burn no CPU until the restart that is needed.
"""

import re
import socket

from ..errors import ShmemNotebookError
from ..folding import pe_ranges
from ..operations import CALLS, EMULATED_WAIT, JOINABLE

__all__ = ["GRACE", "BLOCKING", "waiting", "release", "raised_line", "message"]

#: seconds after the first error before looking whether the other PEs wait for it
GRACE = 0.2
_ANSI = re.compile(r"\x1b\[[0-9;]*m")
_CELL_LINE = re.compile(r"Cell In\[\d+\], line (\d+)")


#: shmem4py calls that wait for other PEs (the tool's emulated team calls wait in these too)
BLOCKING = frozenset(
    [name for name, op in CALLS.items() if (op.collective or op.kind == "wait") and not name.startswith("test")]
    + ["set_lock", "signal_wait_until", "split_strided", "split_2d", "destroy", EMULATED_WAIT]
)


def waiting(job, pending):
    """``{pe: (line, call)}`` when every PE of ``pending`` waits in a call that needs other PEs
    (:data:`BLOCKING`), else None. The cell path acts on two equal looks 0.3 s apart, so a PE
    that merely passes through a barrier is not taken for a stranded one."""
    where = job.locate(pending)
    if set(where) == set(pending) and all(isinstance(w, tuple) and w[1] in BLOCKING for w in where.values()):
        return where
    return None


def _joinable(job, where):
    """The one call every waiting PE is in, if they can be released from here."""
    calls = {call for _, call in where.values()}
    call = calls.pop() if len(calls) == 1 else None
    if call not in JOINABLE and call != EMULATED_WAIT or (call == "sync" and job.pes.get(0, {}).get("teams") != "emulated"):
        return None  # natively, shmem.sync may be a sub-team's: joining TEAM_WORLD would not release it
    here = socket.gethostname()
    if any(job.pes.get(pe, {}).get("host") != here for pe in where):
        return None  # SIGINT reaches PEs of this host only
    return call


def release(job, cell, where):
    """Free the PEs of ``where`` (waiting for PEs whose cell ended); the PEs still running the cell.
    When they cannot be freed, they are paused (SIGSTOP) and the job is marked hung."""
    pending = sorted(where)
    call = _joinable(job, where)
    if call == EMULATED_WAIT:  # the interrupt stops them in the emulation's wait loop
        job.interrupt(cell, pending, grace=2.0)
    elif call is not None:
        job.interrupt(cell, pending, grace=0)  # they stop right after the call returns
        finished = [pe for pe in range(job.n) if pe not in where]
        try:
            job.ask("join", call, pes=finished, timeout=10)
        except ShmemNotebookError:
            pass
        cell.wait(2.0)
    if call is not None and not cell.pending():
        try:  # every PE drops the exceptions' frames and zeroes the emulated teams' counts
            job.ask("released", timeout=10)
            return []
        except ShmemNotebookError:
            pass
    job.pause(cell.pending())
    return cell.pending()


def raised_line(traceback):
    """The line of the cell where a PE's exception was raised (its innermost cell frame), or None."""
    found = _CELL_LINE.findall(_ANSI.sub("", traceback or ""))
    return int(found[-1]) if found else None


def _shown(call, line, code):
    """How the user wrote the call a PE waits in: ``shmem.barrier_all()``, or the cell's statement
    for a team call (``half.sync()``: the tool's emulation, or ``shmem.sync`` of any team)."""
    if call in (EMULATED_WAIT, "sync"):
        lines = (code or "").splitlines()
        text = lines[line - 1].strip() if 0 < line <= len(lines) else "a team call"
        return text if len(text) <= 60 else text[:57] + "..."
    return f"shmem.{call}()"


def message(errors, where, released, restart_hint, code=None):
    """``PE 0 raised ValueError at line 2: boom; PE 1-3 wait in shmem.barrier_all() at line 3 for it; ...``"""
    raised, waits = {}, {}
    for pe, (ename, evalue, tb) in sorted(errors.items()):
        line = raised_line(tb)
        at = f" at line {line}" if line else ""
        raised.setdefault(f"raised {ename}{at}: {evalue}" if evalue else f"raised {ename}{at}", []).append(pe)
    for pe, (line, call) in sorted(where.items()):
        waits.setdefault(f"{_shown(call, line, code)} at line {line}", []).append(pe)
    them = "it" if len(errors) == 1 else "them"
    parts = [f"PE {pe_ranges(pes)} {what}" for what, pes in raised.items()]
    parts += [f"PE {pe_ranges(pes)} {'waits' if len(pes) == 1 else 'wait'} in {what} for {them}" for what, pes in waits.items()]
    if released:
        parts.append("the rest of the cell was abandoned on every PE; the job is ready and every PE kept its variables")
    else:
        parts.append(f"the waiting PEs cannot be released from that call (only a world barrier or sync, or a team "
                     f"call the tool emulates, can be), so they are paused (no CPU) and the job is marked hung: "
                     f"{restart_hint}")
    return "; ".join(parts)
