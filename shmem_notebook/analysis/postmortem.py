"""What happened to the PEs: why they died, and where hung ones are stuck.

Pure text analysis, testable without OpenSHMEM:

- :func:`crash_causes` reads ``oshrun``'s (or ``srun``'s) output (Open MPI's abort messages,
  UCX's signal reports, our ``global_exit`` marker,
  :data:`shmem_notebook.protocol.GLOBAL_EXIT_MARK`) into a cause per PE;
  :func:`with_first_deaths` corrects it by the PEs seen to end first.
- :func:`cell_location` reads a ``faulthandler`` dump of a PE (taken with
  SIGUSR1, which works while the PE is blocked inside a shmem call) into the
  line of the user's cell it is on and the shmem call it is blocked in;
  :func:`crash_site` says where a fatal signal struck a PE off its cell's lines.
"""

from __future__ import annotations

import re
import signal
from typing import TYPE_CHECKING

from ..folding import pe_ranges
from ..operations import EMULATED_WAIT

__all__ = [
    "crash_causes",
    "with_first_deaths",
    "describe_exit",
    "cell_location",
    "crash_site",
    "cell_thread_place",
    "thread_stacks",
    "NO_PYTHON_THREAD",
    "where_report",
    "cell_error",
]

if TYPE_CHECKING:
    from collections.abc import Collection, Mapping

_SIGNAL_RANK = re.compile(r"process rank (\d+) with PID \d+ on node \S+ exited on signal (\d+)")
_EXIT_RANK = re.compile(r"Process name:\s*\[\[\d+,\d+\],(\d+)\]\s*\n\s*Exit code:\s*(-?\d+)")
_UCX_SIGNAL = re.compile(r"\[[^:\]]+:(\d+):\d+:\d+\] Caught signal (\d+)")
_SYNTAX_WHERE = re.compile(r"\s*\((?:[^()]*\.py|<[^>]*>), line (\d+)\)$")
_SRUN_EXIT = re.compile(r"srun: error: \S+: task (\d+): Exited with exit code (\d+)")
_SRUN_SEGV = re.compile(r"srun: error: \S+: task (\d+): Segmentation fault")
#: MPICH's mpiexec.hydra (Sandia OpenSHMEM's oshrun): the first PE that ended badly, by pid
_HYDRA_EXIT = re.compile(
    r"=\s+PID (\d+) RUNNING AT \S+\s*\n=\s+EXIT CODE: (\d+)(?:.*?EXIT STRING: [^\n]*\(signal (\d+)\))?", re.S
)
_GLOBAL_EXIT = re.compile(r"shmem_notebook: PE (\d+) called shmem\.global_exit\((-?\d+)\)")


def _signal_text(number: int) -> str:
    try:
        return f"signal {number} ({signal.Signals(number).name})"
    except ValueError:
        return f"signal {number}"


def describe_exit(code: int | None) -> str:
    """``-11`` / ``139`` -> ``'signal 11 (SIGSEGV)'``; ``3`` -> ``'exit code 3'``."""
    if code is None:
        return "an unknown cause"
    if code < 0:
        return _signal_text(-code)
    if code > 128:
        return _signal_text(code - 128)
    return f"exit code {code}"


def crash_causes(output: str, pids: Mapping[int, int | None] | None = None) -> dict[int, str]:
    """PE -> cause (``'signal 11 (SIGSEGV)'``, ``'exit code 3'``, ...) found in ``oshrun`` output.

    ``pids`` maps PE -> pid, to attribute UCX signal reports and MPICH hydra's (which name a pid).
    """
    causes: dict[int, str] = {}
    for pe, status in _GLOBAL_EXIT.findall(output):
        causes.setdefault(int(pe), f"shmem.global_exit({status})")
    by_pid = {pid: pe for pe, pid in (pids or {}).items()}
    for pid, number in _UCX_SIGNAL.findall(output):
        if int(pid) in by_pid:
            causes.setdefault(by_pid[int(pid)], _signal_text(int(number)))
    for pid, code, number in _HYDRA_EXIT.findall(output):
        if int(pid) in by_pid:
            causes.setdefault(by_pid[int(pid)], _signal_text(int(number)) if number else f"exit code {code}")
    for rank, number in _SIGNAL_RANK.findall(output):
        causes.setdefault(int(rank), _signal_text(int(number)))
    for rank, code in _EXIT_RANK.findall(output):
        causes.setdefault(int(rank), f"exit code {code}")
    for rank in _SRUN_SEGV.findall(output):  # PEs started by srun (a Slurm batch job)
        causes.setdefault(int(rank), _signal_text(11))
    for rank, code in _SRUN_EXIT.findall(output):
        causes.setdefault(int(rank), f"exit code {code}")
    return causes


UNREPORTED = "a cause the launcher did not report"


def with_first_deaths(
    causes: dict[int, str], first: Mapping[int, int | None], watched: Collection[int]
) -> dict[int, str]:
    """``causes`` (from :func:`crash_causes`) corrected by ``first``: PE -> wait status (or None) of
    the PEs of ``watched`` (those on this host) seen ended first.

    Once a PE died the launcher ends the others (SIGKILL; MPICH's hydra may send SIGTERM), and hydra
    may then report one of those instead. Of the PEs seen ended at once, those that ended of a cause
    of their own came first. A report naming only PEs the launcher ended is replaced by them, or,
    when none is, by the PEs seen ended if it names none of those (it named a PE that ended later).
    When it names one of them, the evidence cannot order them: a PE already reaped (status None) may
    have died first (the launcher reaped it, then ended the rest; a soak met it) or been ended first
    (a soak met that too, the report then right). The report is kept, and the reaped PEs are added
    with :data:`UNREPORTED`: both candidates are named; so are all PEs seen ended when there is no report
    and none ended of a cause of its own. A report naming only PEs seen ended gains
    what was seen of them. A report naming both a PE that died of its own cause and PEs the launcher
    ended keeps only the first (and launcher-ended PEs seen ending before the rest, as a PE the OOM
    killer took would).
    """
    causes = _without_launcher_ends(causes, first)
    if not first or not set(causes) <= set(watched):
        return causes
    seen = {pe: _status_text(status) for pe, status in first.items()}
    own = {pe for pe, cause in seen.items() if cause is not None and cause not in _LAUNCHER_ENDS}
    earliest = own or {pe for pe, cause in seen.items() if cause is None} or set(seen)
    if causes and set(causes.values()) <= _LAUNCHER_ENDS and set(causes).isdisjoint(own or set(seen)):
        return {pe: seen[pe] or UNREPORTED for pe in sorted(earliest)}
    if set(causes) <= set(first):
        if not causes and not own:  # nothing reported and no cause of their own: each PE seen ended may be first
            earliest = set(seen)
        return {**{pe: seen[pe] or UNREPORTED for pe in sorted(earliest)}, **causes}
    return causes


_LAUNCHER_ENDS = {_signal_text(int(signal.SIGKILL)), _signal_text(int(signal.SIGTERM))}


def _without_launcher_ends(causes: dict[int, str], first: Mapping[int, int | None]) -> dict[int, str]:
    own = {pe for pe, cause in causes.items() if cause not in _LAUNCHER_ENDS}
    if not own:
        return causes
    early = {pe for pe, status in first.items() if _status_text(status) not in _LAUNCHER_ENDS}
    return {pe: cause for pe, cause in causes.items() if pe in own or pe in early}


def _status_text(status: int | None) -> str | None:
    if status is None:
        return None
    return _signal_text(status & 0x7F) if status & 0x7F else f"exit code {status >> 8 & 0xFF}"


#: where a faulthandler dump's next thread begins (``Current thread 0x...`` marks the signalled one)
_THREAD_BLOCK = re.compile(r"\n(?=(?:Current thread|Thread) 0x)")
#: how :func:`crash_site` begins when the signal struck a thread running no Python code
NO_PYTHON_THREAD = "in a thread that runs no Python code"
_FRAME = re.compile(r'^\s*File "(?P<file>[^"]+)", line (?P<line>\d+) in (?P<func>\S+)')


def _frames(block: str) -> list[dict[str, str]]:
    """The frames of one thread's block of a faulthandler dump (file, line, func), most recent first."""
    return [m.groupdict() for m in map(_FRAME.match, block.splitlines()) if m]


def thread_stacks(dump: str) -> list[str]:
    """A faulthandler dump cut into its header and one block per thread, the signalled thread's first."""
    return sorted(_THREAD_BLOCK.split(dump), key=lambda block: block.startswith("Thread"))


def cell_location(dump: str) -> tuple[int, str | None] | None:
    """``(line, shmem_call)`` of the thread running a cell in a faulthandler dump.

    ``line`` is the line of the cell's code (1-based); ``shmem_call`` the
    shmem4py function the PE is inside (e.g. ``'barrier_all'``), :data:`EMULATED_WAIT` when it
    waits in a team call the tool emulates, or ``None``.
    Returns ``None`` when no thread is running a cell.
    """
    for block in _THREAD_BLOCK.split(dump):
        frames = _frames(block)
        for i, frame in enumerate(frames):  # most recent call first
            if frame["func"] == "run_code" and frame["file"].endswith("interactiveshell.py") and i > 0:
                cell = frames[i - 1]
                if any(f["func"] == EMULATED_WAIT and f["file"].endswith("teams.py") for f in frames[:i]):
                    return int(cell["line"]), EMULATED_WAIT
                shmem_calls = [f["func"] for f in frames[:i] if "shmem4py" in f["file"]]
                return int(cell["line"]), (shmem_calls[-1] if shmem_calls else None)
    return None


def cell_thread_place(dump: str) -> str | None:
    """Where the thread running a cell was in a faulthandler dump, in words: ``'at line 4'``, or
    ``'between two of its statements'`` while IPython compiles or starts the cell's next statement (a
    signal striking another thread meets it there); ``None`` when no thread runs a cell."""
    place = cell_location(dump)
    if place is not None:
        return f"at line {place[0]}"
    for block in _THREAD_BLOCK.split(dump):
        frames = _frames(block)
        if any(f["func"] == "run_ast_nodes" and f["file"].endswith("interactiveshell.py") for f in frames):
            return "between two of its statements"
    return None


def crash_site(dump: str) -> str | None:
    """Where a fatal signal struck a PE off its cell's lines, from the ``faulthandler`` dump it wrote then:
    ``'in race_stop (shmem_notebook/engine/record/__init__.py:120)'`` (the signalled thread's innermost
    Python frame), or ``'in a thread that runs no Python code (...)'`` when it struck one of the OpenSHMEM
    library's own threads (or another C library's). ``None`` when it struck the thread running the cell
    (:func:`cell_location` says where), and for an empty or unreadable dump."""
    if "Fatal Python error" not in dump:
        return None
    for block in _THREAD_BLOCK.split(dump):
        if block.startswith("Current thread"):
            frames = _frames(block)
            if not frames:
                return "in a thread with no Python frame"
            if cell_location(block) is not None:
                return None
            return f"in {frames[0]['func']} ({_short_path(frames[0]['file'])}:{frames[0]['line']})"
    return f"{NO_PYTHON_THREAD} (the OpenSHMEM library's own, or another C library's)"


def _short_path(path: str) -> str:
    """A frame's file from its package: ``.../site-packages/shmem4py/shmem.py`` -> ``shmem4py/shmem.py``,
    ``.../lib/python3.11/threading.py`` -> ``threading.py``, ``.../shmem_notebook/x.py`` -> ``shmem_notebook/x.py``."""
    match = re.search(r"/(?:site-packages|dist-packages|lib/python3\.\d+)/(.+)$|/(shmem_notebook/.+)$", path)
    return next((part for part in match.groups() if part), path) if match else path


def where_report(locations: Mapping[int, tuple[int, str | None] | str], code: str, npes: int) -> list[str]:
    """Lines like ``PE 0: line 3, shmem.barrier_all()`` / ``PE 1-3: finished``.

    ``locations`` maps PE -> ``(line, shmem_call)``, ``'finished'``, or a
    string saying why the location is unknown.
    """
    source = code.splitlines()
    groups: dict[str, list[int]] = {}
    for pe in range(npes):
        where = locations.get(pe, "finished")
        if isinstance(where, tuple):
            line, call = where
            text = source[line - 1].strip() if 0 < line <= len(source) else "?"
            if call == EMULATED_WAIT:
                where = f"line {line}, {text}  (waiting in a team call the tool emulates)"
            else:
                blocked = f"  (blocked in shmem.{call})" if call and not _shows(text, call) else ""
                where = f"line {line}, {text}{blocked}"
        groups.setdefault(where, []).append(pe)
    return [f"PE {pe_ranges(pes)}: {where}" for where, pes in groups.items()]


def _shows(text: str, call: str) -> bool:
    """Whether a cell's line calls shmem's ``call`` itself: ``shmem.reduce(`` or a bare ``reduce(``, not
    ``collectives.allreduce(`` (blocked in the library's reduce, which the report must then name)."""
    return re.search(rf"(?<![\w.]){call}\(|\bshmem\.{call}\(", text) is not None


def cell_error(error: tuple[str, str, str], code: str) -> tuple[str, str, str]:
    """A PE's ``(ename, evalue, traceback)`` with a syntax error's temporary file name
    (``(2614432101.py, line 2)``) replaced by the cell's line: ``(line 2 of the cell: if x = 2:)``."""
    ename, evalue, tb = error
    match = _SYNTAX_WHERE.search(evalue or "")
    if ename not in ("SyntaxError", "IndentationError", "TabError") or not match:
        return error
    n, lines = int(match.group(1)), code.splitlines()
    text = lines[n - 1].strip() if 0 < n <= len(lines) else ""
    return ename, f"{evalue[: match.start()]} (line {n} of the cell{': ' + text if text else ''})", tb
