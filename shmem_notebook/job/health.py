"""Is the job alive, and if not, why: dead PEs, crash causes, where hung PEs are (client side)."""

from __future__ import annotations

import contextlib
import os
import signal
import socket
import time
from collections.abc import Iterable
from typing import Any

from ..analysis.postmortem import cell_location, cell_thread_place, crash_causes, crash_site, with_first_deaths
from ..errors import JobStateError, NoJobError, PEDiedError
from ..folding import fold, pe_ranges
from ..operations import EMULATED_WAIT
from ..protocol import BOARD_STRIDE, board_path, crash_path, exit_path, stack_path
from ..words import plural
from .members import JobMembers
from .processes import alive, wait
from .states import IDLE, pe_state

__all__ = ["Health"]


class Health:
    """The :class:`~shmem_notebook.Job` methods that tell its state and diagnose failures."""

    RESTART_HINT = "run `%shmem restart` (or job.restart()) to get a fresh job"
    #: PE -> where in the cell it died (" at line 3 (in shmem.put)"), once PEs died of a signal
    _crash_places: dict[int, str] = {}

    def _require_running(self: JobMembers, what: str) -> None:
        if self.state == "stopped":
            raise NoJobError(what)
        if self.state == "running" and self.dead_pes(each=False):
            self.mark_dead()
        if self.state == "dead":
            raise PEDiedError(
                f"the job is dead ({self._crash_text()}); {self.RESTART_HINT}", self.crash, self.crash_dumps
            )
        if self.state == "hung":
            raise JobStateError(f"the job is hung (a cell did not finish); {self.RESTART_HINT}")

    def dead_pes(self: JobMembers, each: bool = True) -> list[int]:
        """PEs whose process is gone: all of them once oshrun exited; with ``each``,
        also single PEs on this host that exited while oshrun waits for the rest."""
        if self.state == "dead" or not self._oshrun_running():
            return list(range(self.n))
        return [pe for pe, proc in self._pe_procs.items() if not alive(proc)] if each else []

    def _ended_while_starting(self: JobMembers, what: str) -> str | None:
        """Why the PEs can no longer all register while a start waits for them: the controller or ``what``
        (``oshrun``, the Slurm batch job) ended; None while both run."""
        if not self._controller_alive():
            said = self._cluster.controller.get_output().strip() or "(nothing)"
            return (
                f"the job's controller ended before all {plural(self.n, 'PE')} registered; the job was stopped: "
                f"start it again; the controller said:\n{said}"
            )
        if not self._oshrun_running():
            cause = self.library.launcher_problem()  # Sandia OpenSHMEM's oshrun set up by hand
            return (
                f"{what} ended before all {plural(self.n, 'PE')} started{'; ' + cause if cause else ''}; "
                f"its output:\n{self._oshrun_output()}"
            )
        return None

    def mark_dead(self: JobMembers) -> str:
        """Record why the PEs died, make sure none is left, keep the controller for a fast restart;
        return what killed them (e.g. "PE 1 died of SIGKILL")."""
        wait(lambda: not self._oshrun_running(), 3.0)  # oshrun reports, then exits
        output = self._oshrun_output(lines=400)
        self.crash = crash_causes(output, {pe: info.get("pid") for pe, info in self.pes.items()})
        self.crash = with_first_deaths(self.crash, self._pe_procs.first_deaths(), self._pe_procs)
        self.crash.update(self._global_exits())  # oshrun's output may have lost the PE's own note
        self.crash_dumps.clear()
        self._crash_places = self._died_at(self.crash)
        self.state = "dead"
        self._stop_pes()
        self.forks.start(restart_likely=True)  # the restart that comes next forks its PEs (.forks)
        return self._crash_text()

    def _global_exits(self: JobMembers) -> dict[int, str]:
        """PE -> 'shmem.global_exit(status)' for PEs of this host that noted calling it (notes read are removed)."""
        found: dict[int, str] = {}
        for pe in range(self.n):
            path = exit_path(self._cluster.profile_dir, self._cluster.cluster_id, pe)
            with contextlib.suppress(OSError, ValueError):
                with open(path) as f:
                    found[pe] = f"shmem.global_exit({int(f.read())})"
                os.remove(path)
        return found

    def _died_at(self: JobMembers, pes: Iterable[int]) -> dict[int, str]:
        """PE -> " at line 3 (in shmem.put)": the line of the cell each of ``pes`` (of this host) ran when a
        signal killed it, or where off the cell's lines the signal struck (another thread, the engine's
        code), from the stacks it wrote then
        (:mod:`shmem_notebook.engine.shims.diagnostics`; the files read are removed, their text kept in
        ``crash_dumps``). PEs that died of no signal are not named."""
        here, found = socket.gethostname(), {}
        for pe in pes:
            if self.pes.get(pe, {}).get("host") != here:
                continue
            path = crash_path(self._cluster.profile_dir, self._cluster.cluster_id, pe)
            with contextlib.suppress(OSError):
                with open(path, errors="replace") as f:
                    dump = f.read()
                os.remove(path)
                if dump:
                    self.crash_dumps[pe] = dump
                place, site = cell_location(dump), crash_site(dump)
                if site is not None:  # another thread, or the engine's code between cells
                    cell_thread = cell_thread_place(dump)
                    found[pe] = f" {site}" + (f" with the cell's thread {cell_thread}" if cell_thread else "")
                elif place is not None:
                    line, call = place
                    found[pe] = f" at line {line}" + (f" (in shmem.{call})" if call and call != EMULATED_WAIT else "")
        return found

    def _crash_text(self: JobMembers) -> str:
        if not self.crash:
            return "oshrun exited"
        causes = {pe: cause + self._crash_places.get(pe, "") for pe, cause in self.crash.items()}
        return "; ".join(f"PE {pe_ranges(pes)} died of {cause}" for cause, pes in fold(causes).items())

    def _signal(self: JobMembers, pes: Iterable[int], signum: int) -> None:
        """Send ``signum`` to those of ``pes`` that run on this host (the governor wakes them first)."""
        if self._governor and signum != signal.SIGSTOP:
            self._governor.nudge()
        here = socket.gethostname()
        for pe in pes:
            info = self.pes.get(pe, {})
            if info.get("host") == here:
                with contextlib.suppress(ProcessLookupError):
                    os.kill(info["pid"], signum)

    def locate(self: JobMembers, pes: Iterable[int]) -> dict[int, Any]:
        """Where each of ``pes`` is in the cell: dump their stacks with SIGUSR1 and read them (the
        governor lets them run first: a PE stopped mid-dump would leave half a stack)."""
        if self._governor:
            self._governor.nudge()
        paths: dict[int, str]
        where: dict[int, Any]
        here, paths, where = socket.gethostname(), {}, {}
        for pe in pes:
            info = self.pes.get(pe, {})
            if info.get("host") != here:
                where[pe] = f"running on {info.get('host')} (no stack from other hosts)"
                continue
            paths[pe] = stack_path(self._cluster.profile_dir, self._cluster.cluster_id, pe)
            open(paths[pe], "w").close()
            with contextlib.suppress(ProcessLookupError):
                os.kill(info["pid"], signal.SIGUSR1)
        wait(lambda: all(os.path.getsize(p) for p in paths.values()), 2.0)
        time.sleep(0.05)  # let the dumps finish
        for pe, path in paths.items():
            with open(path, errors="replace") as f:
                location = cell_location(f.read())
            where[pe] = location or "running, outside the cell's code"
        return where

    def blocked_calls(self: JobMembers, pes: Iterable[int]) -> dict[int, Any]:
        """``{pe: {"call": name, "args": [...], "kwargs": {...}}}``: the OpenSHMEM call each of ``pes``
        (of this host) is blocked in and its arguments, told by a thread of the PE
        (:mod:`shmem_notebook.engine.shims.blocked_call`); ``{"call": None}`` outside one, None when the
        PE did not tell within 2 s. No request reaches the PEs' main threads."""
        import json

        from ..protocol import blocked_call_paths

        if self._governor:
            self._governor.nudge()
        replies: dict[int, str]
        here, replies, told = socket.gethostname(), {}, dict[int, Any]()
        for pe in pes:
            if self.pes.get(pe, {}).get("host") != here:
                told[pe] = None
                continue
            ask, reply = blocked_call_paths(self._cluster.profile_dir, self._cluster.cluster_id, pe)
            with contextlib.suppress(OSError):
                os.remove(reply)
            try:
                fd = os.open(ask, os.O_WRONLY | os.O_NONBLOCK)  # ENXIO: no thread listens
            except OSError:
                told[pe] = None
                continue
            os.write(fd, b"?")
            os.close(fd)
            replies[pe] = reply
        wait(lambda: all(os.path.exists(r) for r in replies.values()), 2.0)
        for pe, reply in replies.items():
            try:
                with open(reply) as f:
                    told[pe] = json.load(f)
                os.remove(reply)
            except (OSError, ValueError):
                told[pe] = None
        return told

    def write_word(self: JobMembers, pe: int, address: int, data: bytes) -> bool:
        """Write ``data`` at ``address`` in PE ``pe``'s memory, straight (PEs of this host; a library
        whose waits poll their flag sees it at once); whether it was written. Not collective."""
        from .remote import write_into

        info = self.pes.get(pe, {})
        if info.get("host") != socket.gethostname() or not info.get("pid"):
            return False
        return bool(write_into(info["pid"], address, data))

    def waiting_since(self: JobMembers) -> dict[int, int] | None:
        """``{pe: time.monotonic_ns() at which it entered the blocking call it is in}`` (0: in none) from
        the job's wait board (:mod:`.governor`); None when a PE runs on another host or the PEs keep no
        board. A read of a small file, no signal to any PE."""
        here, size = socket.gethostname(), 8 * BOARD_STRIDE * self.n
        if self._cluster is None or len(self.pes) != self.n or any(i.get("host") != here for i in self.pes.values()):
            return None
        try:
            with open(board_path(self._cluster.profile_dir, self._cluster.cluster_id), "rb") as f:
                data = f.read(size)
        except OSError:
            return None
        if len(data) < size:
            return None
        slots = memoryview(data).cast("q")
        return {pe: slots[pe * BOARD_STRIDE] for pe in range(self.n)}

    def status(self: JobMembers) -> list[dict[str, Any]]:
        """One dict per PE: pe, state (idle/busy/hung/dead: :mod:`.states`), pid, host, node (Slurm's
        name for it), heap_used (None when unknown: the PE is busy, hung or dead), heap_size, teams
        ("native" or "emulated": how the PE provides OpenSHMEM teams), library (the job's library
        name), vendor (what the library calls itself), spec (the OpenSHMEM version it implements),
        mpi (the MPI it runs over, as that names itself, or None).

        Heap use is asked of every idle PE after a cell ran (not collective).
        """
        if self.state == "stopped":
            raise NoJobError("status")
        self._reap_ended()
        dead = set(range(self.n)) if self.state == "dead" else set(self.dead_pes())
        if self.state in ("running", "hung"):
            self._refresh_usage(skip=dead)
        rows: list[dict[str, Any]] = []
        for pe in range(self.n):
            info = self.pes.get(pe, {})
            state = pe_state(self.state, pe in dead, bool(self._unanswered(pe)))  # the words of .states
            rows.append(
                {
                    "pe": pe,
                    "state": state,
                    "pid": info.get("pid"),
                    "host": info.get("host"),
                    "node": info.get("node", info.get("host")),
                    "heap_used": info.get("heap_used") if state == IDLE else None,  # unknown unless idle
                    "heap_size": info.get("heap_size", self.heap_bytes),
                    "teams": info.get("teams"),
                    "library": self.library.name,
                    "vendor": info.get("library"),
                    "spec": info.get("spec_version"),
                    "mpi": info.get("mpi"),
                }
            )
        return rows

    def _unanswered(self: JobMembers, pe: int) -> int:
        """Requests this client sent to PE ``pe`` that have no reply yet (the hub's count lags),
        the last cell included while PE ``pe`` has not finished it."""
        uuid_ = self._client._engines.get(pe)
        requests = len(self._client._outstanding_dict[uuid_]) if uuid_ else 0
        in_cell = self.last_cell is not None and pe in self.last_cell.pending()
        return requests + in_cell
