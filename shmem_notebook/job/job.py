"""The :class:`Job`: one OpenSHMEM job of N PEs, each an ipyparallel engine whose id is its PE.

Client side only: nothing here imports shmem4py. This module holds the process lifecycle (controller,
``oshrun``, restart, reaping); heap bookkeeping is in :mod:`.arrays`, failure diagnosis in :mod:`.health`,
the cell path in :mod:`shmem_notebook.cells`. Calls that touch every PE (``run``, ``alloc``, ``free``)
are collective on the PEs: they go to all engines at once, in the same order.
"""

import contextlib
import dataclasses
import glob
import logging
import os
import socket
import sys
import time
import uuid
import warnings
from typing import TYPE_CHECKING, Any, Self, TextIO, Unpack, cast

import ipyparallel as ipp

from ..arguments import check_timeout
from ..cells import STAGES, CellResult, ctrl_c, run_cell
from ..cells.channel import DISPATCH, ApplyTransport, CellChannel
from ..cells.syntax import as_numbered, check_syntax
from ..errors import InputError, JobStateError, LaunchError
from ..launcher import OshrunEngineSetLauncher, check_oshrun, check_shmem4py, check_slurm, listen_privately
from ..launcher.entry_points import cache as cache_entry_points
from ..launcher.library import library as library_named
from ..launcher.listen import LOOPBACK
from ..launcher.proc_tree import descendants
from ..launcher.shm import Segments
from ..rc import rc
from ..specs import ArraySpec, check_heap
from ..words import plural
from .arrays import SymmetricArrays
from .batch import QueueProgress, batch_options
from .forks import ForkServer
from .health import Health
from .history import History
from .options import StartOptions, check, given, launcher_settings, signature
from .pe_requests import Asking
from .processes import LocalPEs, alive, process, wait
from .site import admit, within_site
from .spare import Spares
from .watchdog import kill_owned, owned_by, remove_profile_files, start_watchdog, stop_watchdog, tell_watchdog

if TYPE_CHECKING:
    from subprocess import Popen

    from .script_export import Exported

__all__ = ["Job"]


class Job(SymmetricArrays, Health, Asking):
    """One OpenSHMEM job of ``n`` PEs driven from this kernel.

    Use :func:`start` to create and start one; a ``Job`` is a context manager
    that stops the job on exit. Its options (``heap``, ``library``, ``slurm=True`` and the batch
    job's, ``restart_on_hang``, ...) are declared once, with what each does, in
    :mod:`shmem_notebook.launcher.start_options` (the table: docs/api.md, "Start options").
    """

    def __init__(self, n: int = 4, **options: Unpack[StartOptions]) -> None:  # declared in .options.JobOptions
        self.options = o = check(given(n=n, **options))  # one sentence now for an unknown option or a wrong value
        self.n, self.library, self.slurm = o.n, library_named(o.library), bool(o.slurm)
        if self.slurm and self.library.launcher != "openmpi":
            raise InputError(
                f"Slurm batch jobs start the PEs with Open MPI's oshrun or srun; the {self.library.name} "
                f"library is not supported there yet: start it without --slurm, inside an allocation"
            )
        self.restart_on_hang = bool(o.restart_on_hang)  # a hung cell restarts the job by itself
        asked_ip = o.ip or (rc.ip if rc.ip not in LOOPBACK else None)  # a SHMEM_NOTEBOOK_IP counts
        self.batch = batch_options(o, asked_ip)
        self.heap = within_site(o)  # the site's default heap, its limits (one sentence), before launch
        self.heap_bytes = check_heap(self.heap)  # one sentence before launch, e.g. for heap=0
        self.oversubscribe, self.hostfile, self.ip = o.oversubscribe, o.hostfile, o.ip or rc.ip
        self.spares = Spares(self, o.spare)  # a spare set of PEs the next restart takes
        self.forks = ForkServer(self)  # what the PEs are forked from (see .forks)
        self.timeout = check_timeout(rc.timeout if o.timeout is None else o.timeout)  # rc's too
        if rc.dispatch not in DISPATCH:
            raise InputError(f"rc.dispatch is {rc.dispatch!r}; use one of {', '.join(map(repr, DISPATCH))}")
        self.dispatch = rc.dispatch
        self.specs: dict[str, ArraySpec] = {}  # name -> ArraySpec, in declaration order
        self.state = "stopped"  # stopped, running, hung, dead
        self.crash: dict[int, Any] = {}  # PE -> cause, once PEs died
        self.crash_dumps: dict[int, str] = {}  # PE -> the stacks it wrote when a signal killed it (this host)
        self.paused: set[int] = set()  # PEs stopped (SIGSTOP) for good
        self.pes: dict[int, dict[str, Any]] = {}  # PE -> info from the PE's 'info' request
        self.last_cell = None  # the last cell's request (see cells.channel)
        self.last_result: CellResult | None = None  # CellResult of the last cell, also when it raised or timed out
        self.last_gather: Any = None  # the last gather's route: "memory" (from the PEs), "file" (/dev/shm) or "message"
        self.cell_callbacks: list[Any] = []  # callback(job, result) after every cell
        self.history = History(self)  # every cell run, in order (see .history); job.export writes them out
        self.stage_state: dict[str, Any] = {}  # stage name -> what it keeps between cells (race: operations in flight)
        self._token = uuid.uuid4().hex  # marks every process of this job (see watchdog)
        self._cluster = self._client = self._transport = self._watchdog = self._engine_set_id = None
        self._pe_procs = LocalPEs({})  # PE -> psutil.Process, for PEs on this host
        self._segments: dict[Any, Segments] = {}  # engine set id -> Segments: shared memory to remove once it ended
        self._heap_stale, self._gathers = False, 0

    def __repr__(self) -> str:
        return f"<Job n={self.n} heap={self.heap} state={self.state}>"

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()

    # -- lifecycle -------------------------------------------------------
    @ctrl_c.watching()  # a Ctrl-C that a finalizer dropped still stops it
    def start(self) -> Self:
        """Start the controller and the PEs; return when every PE answers."""
        if self.state != "stopped":
            raise JobStateError(f"this job is {self.state}; use restart() or stop() first")
        if self.library.caution:
            warnings.warn(self.library.caution, stacklevel=2)
        if self.slurm:
            check_slurm()  # the batch job's nodes cannot be measured from here: no heap check
        else:
            check_oshrun(hostfile=self.hostfile, library=self.library.name)
            admit(self.n, self.heap_bytes, self.hostfile, self.library.name)  # the heaps fit, with room for others
        check_shmem4py(self.library.python)
        try:
            self._watchdog = start_watchdog(self._token, self._batch_name if self.slurm else None)
            self.forks.start()  # it imports while the controller starts
            self._start_controller()
            self._start_pes()
        except KeyboardInterrupt:
            self._teardown()
            raise self._interrupted("start") from None
        except BaseException:
            self._teardown()
            raise
        return self

    def _interrupted(self, what: str) -> LaunchError:
        cancelled = " (its Slurm batch job was cancelled)" if self.slurm else ""
        return LaunchError(
            f"the {what} of {plural(self.n, 'PE')} was interrupted; its processes were stopped{cancelled} and nothing "
            f"is left running: run `%shmem start -n {self.n}` (or shmem_notebook.start({self.n})) to start again"
        )

    def _start_controller(self) -> None:
        """Spawn the controller; don't wait for it (the PEs and the client wait for its files)."""
        cache_entry_points()  # ipyparallel scans every installed distribution 5 times a start otherwise
        self._cluster = ipp.Cluster(
            engines=OshrunEngineSetLauncher,
            n=self.n,
            controller_ip=self.ip,
            controller_location=socket.gethostname() if self.ip in ("0.0.0.0", "*") else "",
            controller_args=[f"--HeartMonitor.period={rc.heartbeat_ms}", "--nodb"],
            delay=0,
            # on one node oshrun starts while the controller starts: each PE reads the
            # controller's connection file once OpenSHMEM is initialised (engine.runtime.main);
            # PEs on other nodes may not see this file system: they get it in their environment
            send_engines_connection_env=bool(self.slurm or self.hostfile),
            log_level=logging.ERROR,  # we report failures ourselves
        )  # one host: it listens on Unix sockets in the private profile (no TCP port to lose to another job)
        listen_privately(self._cluster, one_host=self.ip in LOOPBACK and not (self.slurm or self.hostfile))
        tell_watchdog(cast("Popen[bytes]", self._watchdog), self._cluster.profile_dir, self._cluster.cluster_id)
        with owned_by(self._token):  # ipcontroller, with a heart monitor that registers PEs at once
            self._cluster.start_controller_sync(
                controller_cmd=[sys.executable, "-m", "shmem_notebook.launcher.controller", "--pes", str(self.n)]
            )

    @property
    def _batch_name(self) -> str:
        """The name of this job's Slurm batch jobs: it carries the job's token."""
        return f"shmem_notebook-{self._token[:12]}"

    def _set_options(self) -> dict[str, Any]:
        """The launcher's options (.options.launcher_settings) with this job's heap, library and batch options."""
        resolved = dataclasses.replace(self.options, heap=self.heap, library=self.library.name, **self.batch)
        named = {"batch_name": self._batch_name} if self.slurm else {"forkserver": self.forks.address()}
        return launcher_settings(resolved) | named | {"local_only": self.ip in LOOPBACK and not self.slurm}

    def _start_pes(self) -> None:
        with owned_by(self._token):  # the spare set, if one waits (see .spare)
            self._engine_set_id = self.spares.take() or self._cluster.start_engines_sync(self.n, **self._set_options())
        if self._client is None:  # the controller shares the CPU with the starting PEs: be patient
            self._client = self._cluster.connect_client_sync(timeout=max(10.0, rc.start_timeout))
        self._private_files()
        self._wait_for_pes(time.monotonic() + rc.start_timeout)
        self._close_transport()
        self._transport = ApplyTransport(self._client, self.n)  # the one route before the channel
        self.state, self.crash, self.crash_dumps, self.paused = "running", {}, {}, set()
        self._pe_procs = LocalPEs({})  # the PEs before a restart are not these PEs' health
        self._forget_cells()
        infos = self.ask("info").values()
        self.library.check_world(self.n, [info["npes"] for info in infos])  # not N one-PE jobs
        self.pes = {info["pe"]: info for info in infos}
        self._pe_procs = LocalPEs.on_this_host(self.pes)
        if self.dispatch == "direct":
            channel = CellChannel(self.n, self.ip)
            channel.connect(self._transport)  # it closes again when a PE cannot reach it
            self._transport = channel
        self._note_segments()
        if self.specs:
            self._alloc_on_pes(list(self.specs.values()))
        self.spares.keep()

    def _private_files(self) -> None:
        """Connection and cluster files readable by the owner only."""
        security = os.path.join(self._cluster.profile_dir, "security")
        for path in glob.glob(os.path.join(security, f"*{self._cluster.cluster_id}*")):
            os.chmod(path, 0o600)

    def _engine_set(self, set_id: str | None = None) -> Any:
        return self._cluster.engines.get(set_id or self._engine_set_id) if self._cluster else None

    def _controller_alive(self) -> bool:
        return self._cluster is not None and alive(getattr(self._cluster.controller, "process", None))

    def _oshrun_running(self, set_id: str | None = None) -> bool:
        engines = self._engine_set(set_id)
        return engines is not None and alive(engines.process)

    def _oshrun_output(self, lines: int = 15) -> str:
        engines = self._engine_set()
        out = engines.get_output(remove=False) if engines else ""
        return "\n".join(out.strip().splitlines()[-lines:])

    def _note_segments(self, set_id: str | None = None) -> None:
        """Remember the shared memory oshrun and the PEs of engine set ``set_id`` map now
        (PEs on this host that Slurm started are not oshrun's children: they count too)."""
        set_id = set_id or self._engine_set_id
        engines = self._engine_set(set_id)
        if engines is None or not alive(engines.process):
            return
        pids = [engines.process.pid, *descendants(engines.process.pid)]
        if set_id == self._engine_set_id:  # PEs this host runs outside oshrun's tree, and forked ones
            pids += [p.pid for p in self._pe_procs.values() if alive(p)] + self.forks.pids()
        self._segments.setdefault(set_id, Segments(self._token)).note(pids)

    def _wait_for_pes(self, deadline: float) -> None:
        """Wait until every PE registered; a batch job's time in the queue does not count."""
        what = "the Slurm batch job" if self.slurm else "oshrun"
        queue = QueueProgress(self._engine_set().output_file, self.n) if self.slurm else None
        next_note = 0.0
        try:
            while set(range(self.n)) - set(self._client.ids):
                if time.monotonic() > next_note:  # a start that fails must not leave its segments
                    self._note_segments()
                    next_note = time.monotonic() + 0.5
                if (ended := self._ended_while_starting(what)) is not None:
                    raise LaunchError(ended)
                if queue is not None:
                    queue.update(len(self._client.ids))
                    if (queue.mark or {}).get("state") != "RUNNING":
                        deadline = time.monotonic() + rc.start_timeout
                if time.monotonic() > deadline:
                    said = self._oshrun_output() or "(nothing)"
                    raise LaunchError(
                        f"only {len(self._client.ids)} of {plural(self.n, 'PE')} registered in {rc.start_timeout:g} s "
                        f"(SHMEM_NOTEBOOK_START_TIMEOUT); the job was stopped; {what} said:\n{said}"
                    )
                ctrl_c.sleep(0.02)
        finally:
            if queue is not None:
                queue.done(len(self._client.ids))

    def _release_pes(self, polite: bool = True) -> None:
        """Ask the PEs to exit, politely if the job is healthy (and ``polite``), by SIGKILL otherwise; don't wait."""
        self._let_go()
        if (engines := self._engine_set()) is None:
            return
        self._note_segments()
        if polite and self.state == "running" and self._oshrun_running() and self._controller_alive():
            with contextlib.suppress(Exception):
                self._client.shutdown(targets=list(range(self.n)), block=False)
        else:
            engines.kill_pes()  # kills a local oshrun's PEs, cancels a batch job
        self._forget_pes()

    def _forget_pes(self) -> None:
        """Tell the controller the PEs are gone, so their ids are free for new PEs at once. Without it the
        controller frees the id of a killed PE only after 10 missed heartbeats (2.5 s), and of a PE shutting
        down only once it unregistered itself."""
        client = self._client
        if client is None or client._closed:
            return
        for eid in list(client.ids):
            # the message a leaving engine sends; the controller answers every client
            # with an unregistration notification, which empties client.ids
            client._io_loop.add_callback(
                client.session.send, client._query_stream, "unregistration_request", content={"id": eid}
            )

    def _reap(self, set_id: str | None, left_behind: bool = False) -> None:
        """Wait for engine set ``set_id``'s oshrun to end (killing its PEs after 3 s; ``left_behind``: a
        restart's old set, oshrun too, at once), remove the shared memory it left and forget it."""
        if (engines := self._engine_set(set_id) if set_id is not None else None) is None:
            return
        if left_behind and not self.slurm:  # its PEs were killed at the restart; oshrun would linger 1-2 s
            engines.kill_pes(launcher=True)
        if not wait(lambda: not self._oshrun_running(set_id), 3.0):
            engines.kill_pes()  # kills a local oshrun's PEs, cancels a batch job
            wait(lambda: not self._oshrun_running(set_id), 3.0)
        with contextlib.suppress(Exception):
            self._cluster.stop_engines_sync(set_id)
        self._cluster.engines.pop(set_id, None)
        wait(lambda: not any(alive(process(pid)) for pid in self._segments.get(set_id, Segments()).pids), 3.0)
        self._segments.pop(set_id, Segments(self._token)).release()

    def _reap_ended(self) -> None:
        """Reap the engine sets a restart left behind whose oshrun has ended (not waiting)."""
        for set_id in self._left_behind():
            if not self._oshrun_running(set_id):
                self._reap(set_id)

    def _left_behind(self) -> list[str]:
        """Engine sets other than the current one and the spare (a restart's old PEs)."""
        engines = self._cluster.engines if self._cluster else {}
        return [set_id for set_id in engines if set_id not in (self._engine_set_id, self.spares.set_id)]

    def _stop_pes(self) -> None:
        """End the PEs and wait until they are gone, with those a restart left behind (not the spare set)."""
        self._release_pes()
        for set_id in self._left_behind():
            self._reap(set_id, left_behind=True)
        self._reap(self._engine_set_id)
        self._engine_set_id = None

    @ctrl_c.held()  # pressed meanwhile: it ends all the same, or processes would be left running
    def _teardown(self) -> None:
        self._close_transport()
        cluster = self._cluster
        if cluster is not None:
            self._stop_pes()
            self.spares.discard()
            if self._client is not None:
                self._client.close()
            with contextlib.suppress(Exception):
                cluster.stop_cluster_sync()
        self.forks.stop()
        # kills whatever of this job is still alive and removes what it left; what a watchdog that
        # did not finish in time left is removed here, once no process of the job can write again
        if not stop_watchdog(self._watchdog):
            kill_owned(self._token)
        if cluster is not None:
            remove_profile_files(cluster.profile_dir, cluster.cluster_id)
        self._cluster = self._client = self._watchdog = None

    def stop(self) -> None:
        """Stop every PE and the controller. Harmless when already stopped."""
        self._teardown()
        self.state, self.pes = "stopped", {}
        self._forget_cells()

    def _forget_cells(self) -> None:
        """The cells of PEs that are gone say nothing about the new ones (start, restart, stop)."""
        self.last_cell = self.last_result = None
        self._heap_stale = False

    @ctrl_c.watching()
    def restart(self) -> Self:
        """A fresh job with the same N and options; declared arrays come back zeroed. Keeps the
        controller and relaunches only the PEs when it can."""
        if not self._controller_alive():
            self.stop()
            return self.start()
        # the old PEs' state is discarded: killing them spares the new PEs the CPU of their
        # shmem_finalize; their oshrun lingers 1-2 s, so it is reaped (and the shared memory
        # it left removed) once it ended: at the next cell, status, restart or stop
        self._release_pes(polite=self.slurm)
        self.state = "stopped"
        # the new PEs can have ids 0..n-1 once the hub dropped the old ones; an exiting
        # engine unregisters first, so the old oshrun may still be finishing meanwhile
        if not wait(lambda: not self._client.ids, 5.0):
            self.stop()
            return self.start()
        try:
            self._start_pes()
        except KeyboardInterrupt:
            self.stop()
            raise self._interrupted("restart") from None
        except BaseException:
            self.stop()
            raise
        finally:
            self._reap_ended()
        self.forks.start(restart_likely=True)  # a job that restarted once forks the PEs of its next restarts (.forks)
        return self

    # -- cells ---------------------------------------------------------------
    def run(self, code: str, arrays: Any = None, timeout: float | None = None, stdout: TextIO | None = None,
            stderr: TextIO | None = None, **options: Any) -> CellResult:  # fmt: skip
        """Run ``code`` on every PE; stream its output labelled by PE. Collective.

        Arrays declared in ``arrays`` are allocated first unless already allocated with the same spec.
        After all output was shown, raises :class:`CellSyntaxError` before sending a cell that is not
        valid Python, :class:`PEError` if the cell raised on any PE, :class:`PEDiedError` if PEs died,
        :class:`CellStoppedError` on timeout or interrupt (with where every PE was). Keyword ``options``
        switch on optional stages of the cell path by name (see :mod:`shmem_notebook.cells.stages`)."""
        code = as_numbered(code)  # the PEs' IPython numbers the lines from the first that is not blank
        check_syntax(code)  # before anything reaches the PEs
        with self.history.running(code, arrays, dict(options, timeout=timeout)):  # recorded by a cell callback
            return run_cell(self, code, arrays=arrays, timeout=timeout, stdout=stdout, stderr=stderr, **options)

    def race_reset(self) -> None:
        """Forget the operations earlier race-checked cells left in flight: the next ``race=True``
        cell is checked alone. Not collective: nothing reaches the PEs."""
        STAGES["race"].reset(self)

    def export(
        self, path: str | os.PathLike[str], cells: str | None = None, slurm: bool | dict[str, Any] = False
    ) -> "Exported":
        """Write the cells run so far (``cells``: those chosen, e.g. ``"4,6-8"``, by their In[k]) as one
        standalone shmem4py program at ``path``; ``slurm=True`` (or a dict of sbatch options) also writes
        an sbatch script next to it. Not collective: nothing reaches the PEs. See :mod:`.script_export`."""
        from .script_export import export

        return export(self, path, cells=cells, slurm=slurm)


Job.__init__.__signature__ = signature(method=True)  # type: ignore[attr-defined]  # help(Job) shows every option
