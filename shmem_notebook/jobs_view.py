"""The instructor's view: the jobs running on this server, read-only (``python -m shmem_notebook.jobs_view``).

For each job: its user, PEs (a ``spare=True`` job's spare set apart: ``2/2 (+2 spare)``), library, state, CPU
and age, from what the jobs already leave on the server: every process of a job carries its token
(``SHMEM_NOTEBOOK_OWNER``, :mod:`.job.watchdog`), and around every cell the job notes its state
(:mod:`.job.state_file`). The state is one of the words :mod:`.job.states` defines (``%shmem status`` says
them of each PE):

- ``dead``: PEs are gone (fewer alive than the job has), or the notebook's kernel is;
- ``busy``: a cell runs (for how long: ``since``); ``hung``: the last cell left PEs blocked for good
  (``%shmem restart`` in the notebook);
- ``idle``: otherwise (the job waits for its next cell).

Root (or the instructor through sudo) sees every user's jobs; an ordinary user sees their own only,
since the tokens are in the processes' environments and the state files are private (mode 0600).
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import sys
import time
from typing import TYPE_CHECKING, Any, cast

import psutil

from .job.state_file import read_state
from .job.states import DEAD, IDLE
from .job.watchdog import OWNER, environment_values
from .launcher.library import known, library
from .launcher.stub_program import is_stub
from .protocol import ENGINE_MODULE, FORKSERVER_MODULE as FORKSERVER, SPARE_ENV, SPARE_GO

if TYPE_CHECKING:
    from collections.abc import Iterable, Sequence
    from contextlib import AbstractContextManager
    from typing import Protocol

    class _Process(Protocol):
        info: dict[str, Any]

        def environ(self) -> dict[str, str]: ...
        def status(self) -> str: ...
        def create_time(self) -> float: ...
        def cpu_percent(self, interval: float | None) -> float: ...
        def cpu_times(self) -> Any: ...
        def oneshot(self) -> AbstractContextManager[None]: ...
        def username(self) -> str: ...
        def ppid(self) -> int: ...


__all__ = ["JobView", "jobs", "table", "main"]

#: how long CPU use is sampled, seconds
SAMPLE = 0.5


class JobView:
    """What the instructor sees of one job."""

    def __init__(
        self,
        token: str,
        user: str,
        pes: int,
        n: int,
        library: str,
        state: str,
        since: float | None,
        cpu_seconds: float,
        cpu_percent: float,
        started: float,
        kernel: int | None,
        spare: int = 0,
    ) -> None:
        self.token, self.user, self.pes, self.n, self.library = token, user, pes, n, library
        self.spare = spare  #: PEs of the spare set waiting for a restart (not the job's PEs)
        self.state, self.since, self.cpu_seconds, self.cpu_percent = state, since, cpu_seconds, cpu_percent
        self.started, self.kernel = started, kernel

    def as_dict(self) -> dict[str, Any]:
        return dict(vars(self))

    def __repr__(self) -> str:
        return f"<JobView {self.user} {_pes(self)} PEs {self.state}>"


def _pes(view: JobView) -> str:
    """``2/2``: the job's PEs alive of its PEs; ``2/2 (+2 spare)`` with a spare set waiting."""
    return f"{view.pes}/{view.n}" + (f" (+{view.spare} spare)" if view.spare else "")


def _owned() -> dict[str, list[_Process]]:
    """token -> [psutil.Process] of every process that carries a job's token (those we may read), each
    with ``info``: its pid, command line and status."""
    groups: dict[str, list[_Process]] = {}
    for pid, token in environment_values(OWNER).items():  # one read per process, not a psutil handle each
        try:
            proc = psutil.Process(pid)
            proc.info = proc.as_dict(["pid", "cmdline", "status"])
        except psutil.Error:
            continue
        if token and proc.info["status"] != psutil.STATUS_ZOMBIE:
            groups.setdefault(token, []).append(proc)
    return groups


def _role(proc: _Process) -> str:
    """watchdog, controller, pe, fork server (a PE forked from it shows its command line), stub (what
    oshrun starts in a forked PE's place) or launcher (what started the PEs: oshrun, mpirun, ...)."""
    cmdline = proc.info["cmdline"] or []
    module = cmdline[2] if cmdline[1:2] == ["-m"] and len(cmdline) > 2 else ""
    if module == ENGINE_MODULE:
        return "pe"
    if module == FORKSERVER:
        try:
            forked = psutil.Process(proc.ppid()).cmdline()[1:3] == ["-m", FORKSERVER]
        except psutil.Error:
            forked = False
        return "pe" if forked else "fork server"
    if is_stub(cmdline):
        return "stub"
    if module == "shmem_notebook.launcher.controller":
        return "controller"
    return "watchdog" if "shmem_notebook.job.watchdog" in " ".join(cmdline[:5]) else "launcher"  # its -c code


def _spare(proc: _Process) -> bool:
    """Whether PE process ``proc`` is of a spare set still waiting: its lock file (:mod:`.job.spare`) is
    there without "go" (a taken set's PEs keep the variable, and their file says "go" or is gone)."""
    try:
        path = proc.environ().get(SPARE_ENV)
    except (psutil.Error, OSError):
        return False
    if not path:
        return False
    try:
        with open(path, "rb") as lock:
            return lock.read(len(SPARE_GO)) != SPARE_GO
    except OSError:
        return False


def _size(launchers: Iterable[_Process]) -> int | None:
    """The PEs the launcher was asked for (``-n N``/``-np N``), or None."""
    for proc in launchers:
        cmdline = proc.info["cmdline"] or []
        for flag, value in zip(cmdline, cmdline[1:]):
            if flag in ("-n", "-np") and value.isdigit():
                return int(value)
    return None


def _library_of(launchers: Iterable[_Process], pes: Iterable[_Process]) -> str:
    """The library whose launcher (and PEs' Python) these are: libraries may share a launcher (OSHMPI
    runs Open MPI's mpirun), so their Python decides; the first known (the default) when all match."""

    def real(path: str) -> str:
        return os.path.realpath(shutil.which(path) or path)

    started = {real((p.info["cmdline"] or ["?"])[0]) for p in launchers}
    pythons = {real((p.info["cmdline"] or ["?"])[0]) for p in pes}
    names = [name for name, lib in known().items() if real(lib.oshrun) in started]
    return next((n for n in names if real(library(n).python) in pythons), names[0] if names else "?")


def jobs(sample: float = SAMPLE) -> list[JobView]:
    """A :class:`JobView` of every job this user may see (all of them as root), oldest first."""
    groups = _owned()
    procs = [p for group in groups.values() for p in group]
    for proc in procs:  # CPU over the sample
        try:
            proc.cpu_percent(None)
        except psutil.Error:
            pass
    time.sleep(sample)
    views = []
    for token, group in groups.items():
        view = _view(token, group)
        if view is not None:
            views.append(view)
    return sorted(views, key=lambda v: v.started)


def _view(token: str, group: list[_Process]) -> JobView | None:
    """The job's :class:`JobView`, or None when it ended while we looked (its watchdog, or all its
    processes, gone). A process of the job that ends meanwhile (a PE of a set a restart replaced, a
    helper) is left out, not the job."""
    group = [p for p in group if _still(p)]
    roles: dict[str, list[_Process]] = {}
    for proc in group:
        roles.setdefault(_role(proc), []).append(proc)
    watchdog = (roles.get("watchdog") or cast("list[_Process | None]", [None]))[0]
    try:
        anchor = watchdog or min(group, key=lambda p: p.create_time())
        user, started = anchor.username(), anchor.create_time()
        kernel = watchdog.ppid() if watchdog else None
    except (psutil.Error, ValueError):
        return None  # the job ended while we looked
    cpu_seconds = cpu_percent = 0.0
    for proc in group:
        try:
            with proc.oneshot():
                times = proc.cpu_times()
                cpu_seconds += times.user + times.system
                cpu_percent += proc.cpu_percent(None)
        except psutil.Error:
            continue  # this one ended while we looked; the others still speak for the job
    note = None
    for proc in roles.get("controller", []):
        try:
            env = proc.environ()
        except psutil.Error:
            continue
        note = read_state(env.get("IPP_PROFILE_DIR", ""), env.get("IPP_CLUSTER_ID", ""))
        break
    pes: list[_Process]
    spare: list[_Process]
    pes, spare = [], []
    for proc in roles.get("pe", []):
        if _still(proc):
            (spare if _spare(proc) else pes).append(proc)
    n = (note or {}).get("n") or _size(roles.get("launcher", [])) or len(pes)
    state, since = IDLE, None
    newest_pe = max((_created(p) for p in pes), default=0.0)
    if note and note.get("since", 0) >= newest_pe:  # a note before a restart speaks of PEs that are gone
        state, since = note.get("state", IDLE), note.get("since")
    kernel_gone = kernel is not None and not _alive(kernel, watchdog)
    if len(pes) < n or kernel_gone or (not pes and "controller" in roles):
        state = DEAD
    lib = (note or {}).get("library") or _library_of(roles.get("launcher", []), pes)
    return JobView(token, user, len(pes), n, lib, state, since, cpu_seconds, cpu_percent, started, kernel, len(spare))


def _still(proc: _Process) -> bool:
    """Whether ``proc`` still runs (not ended, not a zombie)."""
    try:
        return cast(bool, proc.status() != psutil.STATUS_ZOMBIE)
    except psutil.Error:
        return False


def _created(proc: _Process) -> float:
    try:
        return proc.create_time()
    except psutil.Error:
        return 0.0


def _alive(kernel: int, watchdog: _Process | None) -> bool:
    """The watchdog's parent is the notebook's kernel while it lives (then it is reparented)."""
    return kernel > 1 and cast(bool, psutil.pid_exists(kernel)) and watchdog is not None


def _duration(seconds: float) -> str:
    seconds = int(seconds)
    if seconds < 60:
        return f"{seconds}s"
    if seconds < 3600:
        return f"{seconds // 60}m{seconds % 60:02d}s"
    return f"{seconds // 3600}h{seconds % 3600 // 60:02d}m"


def table(views: Iterable[JobView], now: float | None = None) -> str:
    """The jobs as a text table, one line each."""
    now = time.time() if now is None else now
    rows = [("USER", "PES", "LIBRARY", "STATE", "FOR", "CPU", "CPU NOW", "UP")]
    for v in views:
        rows.append(
            (
                v.user,
                _pes(v),
                v.library,
                v.state,
                _duration(now - v.since) if v.since else "-",
                _duration(v.cpu_seconds),
                f"{v.cpu_percent:.0f}%",
                _duration(now - v.started),
            )
        )
    widths = [max(len(r[i]) for r in rows) for i in range(len(rows[0]))]
    return "\n".join("  ".join(cell.ljust(w) for cell, w in zip(row, widths)).rstrip() for row in rows)


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m shmem_notebook.jobs_view",
        description="List the OpenSHMEM jobs running on this server (every user's as root; read-only).",
    )
    parser.add_argument("--json", action="store_true", help="one JSON object per job instead of the table")
    args = parser.parse_args(argv)
    views = jobs()
    if args.json:
        for view in views:
            print(json.dumps(view.as_dict()))
    else:
        print(table(views))
        if not views:
            print("(no jobs" + ("" if os.geteuid() == 0 else " of yours: run as root to see every user's") + ")")
    return 0


if __name__ == "__main__":
    sys.exit(main())
