"""A running OpenSHMEM job: N PEs, each an ipyparallel engine whose id is its PE.

Client side only: nothing here imports shmem4py. Calls that touch every PE
(``run``, ``alloc``, ``free``) are collective on the PEs: they go to all
engines at once, in the same order.
"""

import concurrent.futures
import contextlib
import glob
import logging
import os
import signal
import socket
import sys
import time
import uuid
from dataclasses import dataclass, field

import ipyparallel as ipp
import numpy as np
import psutil

from .errors import (
    CellStoppedError,
    HeapFullError,
    InputError,
    JobStateError,
    LaunchError,
    NoJobError,
    PEDiedError,
    PEError,
)
from .launcher import OshrunEngineSetLauncher, check_oshrun
from .output import OutputMerger, pe_ranges
from .postmortem import cell_location, crash_causes, stack_path, where_report
from .rc import rc
from .specs import ArraySpec, SpecError, format_size, parse_size, parse_spec, parse_specs
from .watchdog import owned_by, start_watchdog, stop_watchdog

__all__ = ["Job", "CellResult", "start", "current_job"]

_current = None
RESTART_HINT = "run `%shmem restart` (or job.restart()) to get a fresh job"
LOOPBACK = ("127.0.0.1", "localhost", "::1")


def _on_pe(op, *args):
    """Runs on a PE: call ``shmem_notebook.pe.<op>``."""
    from shmem_notebook import pe

    return getattr(pe, op)(*args)


def _alive(process):
    """Whether a psutil process still runs (the launcher's own state lags behind)."""
    try:
        return process is not None and process.status() != psutil.STATUS_ZOMBIE
    except psutil.NoSuchProcess:
        return False


def _process(pid):
    """A psutil handle on ``pid``, or None if it is gone."""
    try:
        return psutil.Process(pid)
    except psutil.NoSuchProcess:
        return None


def _positive_int(n):
    if isinstance(n, bool) or not isinstance(n, (int, np.integer)) or n < 1:
        raise InputError(f"the number of PEs must be a positive integer, got {n!r}; e.g. start(n=4)")
    return int(n)


def _timeout(value):
    if value is not None and (isinstance(value, bool) or not isinstance(value, (int, float)) or value <= 0):
        raise InputError(f"a timeout is a positive number of seconds or None, got {value!r}; e.g. timeout=30")
    return value


def _as_specs(arrays):
    """Specs from None, 'A=int64[8] B=..', ['A=int64[8]', ...] or ArraySpecs."""
    if arrays is None:
        return []
    if isinstance(arrays, str):
        arrays = arrays.split()
    return [a if isinstance(a, ArraySpec) else parse_spec(a) for a in arrays]


def _wait(condition, timeout, step=0.02):
    """Poll ``condition`` until true or ``timeout`` seconds; return its last value."""
    deadline = time.monotonic() + timeout
    while not (ok := condition()) and time.monotonic() < deadline:
        time.sleep(step)
    return ok


@dataclass
class CellResult:
    """What one cell did on every PE."""

    stdout: dict = field(default_factory=dict)  # PE -> text
    stderr: dict = field(default_factory=dict)
    results: dict = field(default_factory=dict)  # PE -> text/plain of the last expression
    errors: dict = field(default_factory=dict)  # PE -> (ename, evalue, traceback)
    seconds: float = 0.0
    pending: list = field(default_factory=list)  # PEs that had not finished (timeout, interrupt, death)
    outcome: str = "ok"  # ok, error, timeout, interrupted, died


class Job:
    """One OpenSHMEM job of ``n`` PEs driven from this kernel.

    Use :func:`start` to create and start one; a ``Job`` is a context manager
    that stops the job on exit. ``ip`` other than 127.0.0.1 makes the
    controller listen on that address (multi-node use; see the README).
    """

    def __init__(self, n=4, heap=None, oversubscribe=None, hostfile=None, timeout=None, ip=None):
        self.n = _positive_int(n)
        self.heap = heap or rc.heap
        self.heap_bytes = parse_size(self.heap)
        self.oversubscribe = oversubscribe
        self.hostfile = hostfile
        self.timeout = _timeout(rc.timeout if timeout is None else timeout)
        self.ip = ip or rc.ip
        self.specs = {}  # name -> ArraySpec, in declaration order
        self.state = "stopped"  # stopped, running, hung, dead
        self.crash = {}  # PE -> cause, once PEs died
        self.pes = {}  # PE -> info from pe.info()
        self.last_cell = None  # AsyncResult of the last cell
        self.last_result = None  # CellResult of the last cell, also when it raised or timed out
        self.cell_callbacks = []  # callback(job, result) after every cell
        self._token = uuid.uuid4().hex  # marks every process of this job (see watchdog)
        self._cluster = self._client = self._view = self._watchdog = None
        self._engine_set_id = None
        self._pe_procs = {}  # PE -> psutil.Process, for PEs on this host
        self._heap_stale = False

    def __repr__(self):
        return f"<Job n={self.n} heap={self.heap} state={self.state}>"

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.stop()

    # -- lifecycle -------------------------------------------------------
    def start(self):
        """Start the controller and the PEs; return when every PE answers."""
        if self.state != "stopped":
            raise JobStateError(f"this job is {self.state}; use restart() or stop() first")
        check_oshrun(hostfile=self.hostfile)
        try:
            self._watchdog = start_watchdog(self._token)
            self._start_controller()
            self._start_pes()
        except BaseException:
            self._teardown()
            raise
        return self

    def _start_controller(self):
        everywhere = self.ip in ("0.0.0.0", "*")
        self._cluster = ipp.Cluster(
            engines=OshrunEngineSetLauncher,
            n=self.n,
            controller_ip=self.ip,
            controller_location=socket.gethostname() if everywhere else "",
            controller_args=[f"--HeartMonitor.period={rc.heartbeat_ms}", "--nodb"],
            delay=0,
            log_level=logging.ERROR,  # we report failures ourselves
        )
        with owned_by(self._token):
            self._cluster.start_controller_sync()
        self._client = self._cluster.connect_client_sync()
        self._private_files()

    def _start_pes(self):
        with owned_by(self._token):
            self._engine_set_id = self._cluster.start_engines_sync(
                self.n,
                heap=self.heap,
                oversubscribe=self.oversubscribe,
                hostfile=self.hostfile or "",
                local_only=self.ip in LOOPBACK,
            )
        self._private_files()
        self._wait_for_pes(time.monotonic() + rc.start_timeout)
        self._view = self._client[list(range(self.n))]
        self.state, self.crash = "running", {}
        self.pes = {info["pe"]: info for info in self._call("info")}
        here = socket.gethostname()
        self._pe_procs = {pe: _process(i["pid"]) for pe, i in self.pes.items() if i["host"] == here}
        if self.specs:
            self._alloc_on_pes(list(self.specs.values()))

    def _private_files(self):
        """Connection and cluster files readable by the owner only."""
        security = os.path.join(self._cluster.profile_dir, "security")
        for path in glob.glob(os.path.join(security, f"*{self._cluster.cluster_id}*")):
            os.chmod(path, 0o600)

    def _engine_set(self, set_id=None):
        return self._cluster.engines.get(set_id or self._engine_set_id) if self._cluster else None

    def _oshrun_running(self, set_id=None):
        engines = self._engine_set(set_id)
        return engines is not None and _alive(engines.process)

    def _oshrun_output(self, lines=15):
        engines = self._engine_set()
        out = engines.get_output(remove=False) if engines else ""
        return "\n".join(out.strip().splitlines()[-lines:])

    def _wait_for_pes(self, deadline):
        while set(range(self.n)) - set(self._client.ids):
            if not self._oshrun_running():
                raise LaunchError(
                    f"oshrun exited before all {self.n} PEs started; its output:\n{self._oshrun_output()}"
                )
            if time.monotonic() > deadline:
                raise LaunchError(
                    f"only {len(self._client.ids)} of {self.n} PEs registered within {rc.start_timeout:.0f} s; "
                    f"oshrun output:\n{self._oshrun_output()}"
                )
            time.sleep(0.02)

    def _release_pes(self):
        """Ask the PEs to exit, politely if the job is healthy, by SIGKILL otherwise; don't wait."""
        engines = self._engine_set()
        if engines is None:
            return
        if self.state == "running" and self._oshrun_running():
            with contextlib.suppress(Exception):
                self._client.shutdown(targets=list(range(self.n)), block=False)
        else:
            self._kill_pes(engines)

    @staticmethod
    def _kill_pes(engines):
        # a PE blocked in a shmem call never runs a SIGTERM handler: kill the PEs, oshrun follows
        with contextlib.suppress(psutil.Error):
            for child in engines.process.children(recursive=True):
                with contextlib.suppress(psutil.Error):
                    child.kill()

    def _reap(self, set_id):
        """Wait for engine set ``set_id``'s oshrun to end (killing its PEs after 3 s) and forget it."""
        engines = self._engine_set(set_id) if set_id is not None else None
        if engines is None:
            return
        if not _wait(lambda: not self._oshrun_running(set_id), 3.0):
            self._kill_pes(engines)
            _wait(lambda: not self._oshrun_running(set_id), 3.0)
        with contextlib.suppress(Exception):
            self._cluster.stop_engines_sync(set_id)
        self._cluster.engines.pop(set_id, None)

    def _stop_pes(self):
        """End the PEs and wait until they are gone."""
        self._release_pes()
        self._reap(self._engine_set_id)
        self._engine_set_id = None

    def _teardown(self):
        if self._cluster is not None:
            self._stop_pes()
            if self._client is not None:
                self._client.close()
            with contextlib.suppress(Exception):
                self._cluster.stop_cluster_sync()
        stop_watchdog(self._watchdog)  # kills whatever of this job is still alive
        self._cluster = self._client = self._view = self._watchdog = None

    def stop(self):
        """Stop every PE and the controller. Harmless when already stopped."""
        self._teardown()
        self.state = "stopped"
        self.pes = {}

    def restart(self):
        """A fresh job with the same N and options; declared arrays come back zeroed.

        Keeps the controller and relaunches only the PEs when it can.
        """
        controller = self._cluster.controller if self._cluster else None
        if controller is None or not _alive(getattr(controller, "process", None)):
            self.stop()
            return self.start()
        old = self._engine_set_id
        self._release_pes()
        self.state = "stopped"
        # the new PEs can have ids 0..n-1 once the hub dropped the old ones; an exiting
        # engine unregisters first, so the old oshrun may still be finishing meanwhile
        if not _wait(lambda: not self._client.ids, 5.0):
            self.stop()
            return self.start()
        try:
            self._start_pes()
        except BaseException:
            self.stop()
            raise
        finally:
            self._reap(old)
        return self

    # -- talking to the PEs ----------------------------------------------
    def _call(self, op, *args, timeout=60.0):
        """``pe.<op>(*args)`` on every PE, in PE order. Collective."""
        ar = self._view.apply_async(_on_pe, op, *args)
        try:
            return ar.get(timeout)
        except ipp.error.TimeoutError:
            self.state = "hung"
            raise JobStateError(f"the PEs did not answer {op} within {timeout:.0f} s; {RESTART_HINT}") from None
        finally:
            with contextlib.suppress(Exception):
                self._client.purge_local_results(ar)

    def _require_running(self, what):
        if self.state == "stopped":
            raise NoJobError(what)
        if self.state == "running" and self._dead_pes(each=False):
            self._mark_dead()
        if self.state == "dead":
            raise PEDiedError(f"the job is dead ({self._crash_text()}); {RESTART_HINT}", self.crash)
        if self.state == "hung":
            raise JobStateError(f"the job is hung (a cell did not finish); {RESTART_HINT}")

    def _dead_pes(self, each=True):
        """PEs whose process is gone: all of them once oshrun exited; with ``each``,
        also single PEs on this host that exited while oshrun waits for the rest."""
        if self.state == "dead" or not self._oshrun_running():
            return list(range(self.n))
        return [pe for pe, proc in self._pe_procs.items() if not _alive(proc)] if each else []

    def _mark_dead(self):
        """Record why the PEs died, make sure none is left, keep the controller for a fast restart."""
        _wait(lambda: not self._oshrun_running(), 3.0)  # oshrun reports, then exits
        output = self._oshrun_output(lines=400)
        self.crash = crash_causes(output, {pe: info.get("pid") for pe, info in self.pes.items()})
        self.state = "dead"
        self._stop_pes()

    def _crash_text(self):
        if not self.crash:
            return "oshrun exited"
        return "; ".join(f"PE {pe_ranges(pes)} died of {cause}" for cause, pes in _group(self.crash).items())

    def _locate(self, pes, code):
        """Where each of ``pes`` is in ``code``: dump their stacks with SIGUSR1 and read them."""
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
        _wait(lambda: all(os.path.getsize(p) for p in paths.values()), 2.0)
        time.sleep(0.05)  # let the dumps finish
        for pe, path in paths.items():
            with open(path, errors="replace") as f:
                location = cell_location(f.read())
            where[pe] = location or "running, outside the cell's code"
        return where

    # -- symmetric arrays --------------------------------------------------
    def alloc(self, *declarations, **specs):
        """Allocate symmetric arrays on every PE, zeroed. Collective.

        ``job.alloc("A=int64[8]", flags="int32[npes]")``. A new spec for an
        existing name re-allocates it.
        """
        self._require_running("an allocation")
        parsed = _as_specs(declarations) + [parse_spec(f"{k}={v}") for k, v in specs.items()]
        parse_specs(str(s) for s in parsed)  # reject duplicates
        self._alloc_on_pes(parsed)

    def _alloc_on_pes(self, specs):
        try:
            decls = [(s.name, s.dtype, s.shape(self.n)) for s in specs]
        except SpecError as exc:
            raise SpecError(f"{exc} (npes={self.n})") from None
        self._check_heap(specs)
        try:
            usage = self._call("alloc", decls)
        except ipp.error.CompositeError as exc:
            raise HeapFullError(f"allocating {' '.join(map(str, specs))} failed on the PEs: {exc}") from None
        for s in specs:
            self.specs.pop(s.name, None)
            self.specs[s.name] = s
        self._record_usage(usage)

    def _record_usage(self, usage):
        for pe, (used, size) in enumerate(usage):
            self.pes.setdefault(pe, {}).update(heap_used=used, heap_size=size)
        self._heap_stale = False

    def _check_heap(self, specs):
        if self._heap_stale:  # cells may have allocated with shmem4py directly
            self._record_usage(self._call("heap_usage"))
        replaced = sum(self.specs[s.name].nbytes(self.n) for s in specs if s.name in self.specs)
        need = sum(s.nbytes(self.n) for s in specs) - replaced
        used = max(info.get("heap_used", 0) for info in self.pes.values())
        size = min(info.get("heap_size", self.heap_bytes) for info in self.pes.values())
        if used + need > size:
            raise HeapFullError(
                f"{' '.join(map(str, specs))} needs {format_size(need)} per PE but the symmetric heap has "
                f"{format_size(size - used)} free of {format_size(size)}; free arrays (`%shmem free NAME`) "
                f"or start with a larger heap (`%shmem stop`, then `%shmem start -n {self.n} --heap 1G`)"
            )

    def _declared(self, name):
        if name not in self.specs:
            raise SpecError(f"no array named {name!r} is declared; declared: {', '.join(self.specs) or 'none'}")

    def free(self, name):
        """Free the declared array ``name`` on every PE. Collective."""
        self._require_running("free")
        self._declared(name)
        self._record_usage(self._call("free", name))
        del self.specs[name]

    def gather(self, name):
        """Copy array ``name`` from every PE: a NumPy array of shape ``(npes, *shape)``."""
        self._require_running("gather")
        self._declared(name)
        return np.stack(self._call("gather", name))

    def arrays(self):
        """Declared arrays: one dict per array with name, dtype, shape, bytes."""
        return [
            {"name": s.name, "dtype": s.dtype, "shape": s.shape(self.n), "bytes": s.nbytes(self.n)}
            for s in self.specs.values()
        ]

    def inspect(self, auto=False, **options):
        """Display the inspector of this job (not collective); see :func:`shmem_notebook.inspector.inspect`."""
        from .inspector import inspect

        return inspect(self, auto=auto, **options)

    # -- status ------------------------------------------------------------
    def status(self):
        """One dict per PE: pe, state (idle/busy/dead), pid, host, heap_used, heap_size."""
        if self.state == "stopped":
            raise NoJobError("status")
        dead = set(range(self.n)) if self.state == "dead" else set(self._dead_pes())
        rows = []
        for pe in range(self.n):
            info = self.pes.get(pe, {})
            if pe in dead:
                state = "dead"
            else:
                state = "busy" if self._unanswered(pe) else "idle"
            rows.append(
                {
                    "pe": pe,
                    "state": state,
                    "pid": info.get("pid"),
                    "host": info.get("host"),
                    "heap_used": info.get("heap_used"),
                    "heap_size": info.get("heap_size", self.heap_bytes),
                }
            )
        return rows

    def _unanswered(self, pe):
        """Requests this client sent to PE ``pe`` that have no reply yet (the hub's count lags)."""
        uuid_ = self._client._engines.get(pe)
        return len(self._client._outstanding_dict[uuid_]) if uuid_ else 0

    # -- cells ---------------------------------------------------------------
    def run(self, code, arrays=None, timeout=None, stdout=None, stderr=None):
        """Run ``code`` on every PE; stream its output labelled by PE. Collective.

        Arrays declared in ``arrays`` are allocated first unless already
        allocated with the same spec. After all output was shown, raises
        :class:`PEError` if the cell raised on any PE, :class:`PEDiedError`
        if PEs died, :class:`CellStoppedError` on timeout or interrupt (with
        where every PE was).
        """
        self._require_running("a cell")
        specs = _as_specs(arrays)
        parse_specs(str(s) for s in specs)
        todo = [s for s in specs if self.specs.get(s.name) != s]
        if todo:
            self._alloc_on_pes(todo)
        timeout = self.timeout if timeout is None else _timeout(timeout)
        write_out, write_err = (stdout or sys.stdout).write, (stderr or sys.stderr).write
        started = time.monotonic()
        ar = self._view.execute(code, silent=False, block=False)
        self.last_cell, self._heap_stale = ar, True
        try:
            outcome, pending = self._stream(ar, started, timeout, write_out, write_err)
        except KeyboardInterrupt:
            outcome, pending = "interrupted", self._pending(ar)
        where = self._locate(pending, code) if outcome in ("timeout", "interrupted") else {}
        if outcome == "interrupted":  # Ctrl-C: let PEs that can raise KeyboardInterrupt do so
            self._signal(pending, signal.SIGINT)
            _wait(lambda: not self._pending(ar), 1.5)
            pending = self._pending(ar)
        result = self._collect(ar, time.monotonic() - started, pending, outcome)
        self.last_result = result
        for callback in list(self.cell_callbacks):
            callback(self, result)
        self._report(result, where, code, timeout, write_out)
        if not pending:
            with contextlib.suppress(Exception):
                self._client.purge_local_results(ar)
        return result

    def _pending(self, ar):
        # a PE is finished once its reply *and* all its output arrived
        return [pe for pe, c in enumerate(ar._children) if not (c.done() and c.output.done())]

    def _signal(self, pes, signum):
        here = socket.gethostname()
        for pe in pes:
            info = self.pes.get(pe, {})
            if info.get("host") == here:
                with contextlib.suppress(ProcessLookupError):
                    os.kill(info["pid"], signum)

    def _stream(self, ar, started, timeout, write_out, write_err):
        """Show output as it arrives; return (outcome, PEs still running) once every PE
        finished ('ok'), the timeout passed ('timeout') or PEs died ('died')."""
        out, err = OutputMerger(range(self.n), write_out), OutputMerger(range(self.n), write_err)
        seen = {}

        def feed():
            pending = self._pending(ar)
            for pe, md in enumerate(ar._metadata):
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

        futures = [f for child in ar._children for f in (child, child.output)]
        next_check, outcome = time.monotonic() + 0.25, None
        try:
            while outcome is None:
                # wakes when every reply and all output arrived; polls output every 50 ms meanwhile
                concurrent.futures.wait(futures, timeout=0.05)
                pending = feed()
                now = time.monotonic()
                if not pending:
                    outcome = "ok"
                elif timeout is not None and now - started > timeout:
                    outcome = "timeout"
                elif now > next_check:  # a dead PE never answers: look every 0.25 s
                    next_check = now + 0.25
                    if self._dead_pes():
                        time.sleep(0.3)  # the survivors' last output is on its way
                        outcome = "died"
            return outcome, feed()
        finally:
            out.close()
            err.close()

    def _collect(self, ar, seconds, pending, outcome):
        result = CellResult(seconds=seconds, pending=list(pending), outcome=outcome)
        for pe, md in enumerate(ar._metadata):
            result.stdout[pe], result.stderr[pe] = md.get("stdout", ""), md.get("stderr", "")
            data = (md.get("execute_result") or {}).get("data", {})
            if "text/plain" in data:
                result.results[pe] = data["text/plain"]
            error = md.get("error") if md.get("status") == "error" else None
            if error is not None and pe not in pending and outcome != "died":
                result.errors[pe] = (error.ename, error.evalue, "\n".join(error.render_traceback()))
        if outcome == "ok" and result.errors:
            result.outcome = "error"
        return result

    def _report(self, result, where, code, timeout, write_out):
        """Show the last expressions, then raise for whatever went wrong."""
        for text, pes in _group(result.results).items():
            write_out(f"Out[PE {pe_ranges(pes)}]: {text}\n")
        if result.outcome == "died":
            self._mark_dead()
            raise PEDiedError(
                f"{self._crash_text()} while the cell ran; OpenSHMEM has no fault tolerance, so oshrun ended "
                f"the job (the other PEs' output is above); {RESTART_HINT}",
                self.crash,
            )
        if result.outcome in ("timeout", "interrupted"):
            lines = where_report(where, code, self.n)
            if not result.pending:
                raise CellStoppedError("the cell was interrupted; every PE stopped and the job is still usable", lines)
            self.state = "hung"
            what = f"did not finish within {timeout} s" if result.outcome == "timeout" else "was interrupted"
            raise CellStoppedError(
                f"the cell {what} on PE {pe_ranges(result.pending)}; the job is marked hung: "
                f"run `%shmem restart`. Where every PE was:",
                lines,
            )
        if result.errors:
            raise PEError(result.errors, self.n)


def _group(mapping):
    """{key: value} -> {value: [keys]}, first-seen order."""
    groups = {}
    for key, value in sorted(mapping.items()):
        groups.setdefault(value, []).append(key)
    return groups


def start(n=4, heap=None, oversubscribe=None, hostfile=None, timeout=None, ip=None):
    """Start an OpenSHMEM job of ``n`` PEs and make it the current job."""
    global _current
    if _current is not None and _current.state != "stopped":
        raise JobStateError(
            f"a job of {_current.n} PEs is already {_current.state}; use `%shmem restart` or `%shmem stop` "
            f"(job.restart() / job.stop()) first"
        )
    job = Job(n, heap=heap, oversubscribe=oversubscribe, hostfile=hostfile, timeout=timeout, ip=ip)
    job.start()
    _current = job
    return job


def current_job():
    """The job started last by :func:`start` (``None`` if none)."""
    return _current
