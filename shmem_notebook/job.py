"""A running OpenSHMEM job: N PEs, each an ipyparallel engine whose id is its PE.

Client side only: nothing here imports shmem4py. Calls that touch every PE
(``run``, ``alloc``, ``free``) are collective on the PEs: they go to all
engines at once, in the same order.
"""

import logging
import sys
import time
from dataclasses import dataclass, field

import ipyparallel as ipp
import numpy as np
import psutil

from .errors import HeapFullError, InputError, JobStateError, LaunchError, NoJobError, PEError
from .launcher import OshrunEngineSetLauncher, check_oshrun
from .output import OutputMerger, pe_ranges
from .rc import rc
from .specs import ArraySpec, SpecError, format_size, parse_size, parse_spec, parse_specs

__all__ = ["Job", "CellResult", "start", "current_job"]

_current = None


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


def _positive_int(n):
    if isinstance(n, bool) or not isinstance(n, (int, np.integer)) or n < 1:
        raise InputError(f"the number of PEs must be a positive integer, got {n!r}; e.g. start(n=4)")
    return int(n)


def _as_specs(arrays):
    """Specs from None, 'A=int64[8] B=..', ['A=int64[8]', ...] or ArraySpecs."""
    if arrays is None:
        return []
    if isinstance(arrays, str):
        arrays = arrays.split()
    return [a if isinstance(a, ArraySpec) else parse_spec(a) for a in arrays]


@dataclass
class CellResult:
    """What one cell did on every PE."""

    stdout: dict = field(default_factory=dict)  # PE -> text
    stderr: dict = field(default_factory=dict)
    results: dict = field(default_factory=dict)  # PE -> text/plain of the last expression
    errors: dict = field(default_factory=dict)  # PE -> (ename, evalue, traceback)
    seconds: float = 0.0
    pending: list = field(default_factory=list)  # PEs that had not finished (timeout)


class Job:
    """One OpenSHMEM job of ``n`` PEs driven from this kernel.

    Use :func:`start` to create and start one; a ``Job`` is a context manager
    that stops the job on exit.
    """

    def __init__(self, n=4, heap=None, oversubscribe=None, hostfile=None, timeout=None):
        self.n = _positive_int(n)
        self.heap = heap or rc.heap
        self.heap_bytes = parse_size(self.heap)
        self.oversubscribe = oversubscribe
        self.hostfile = hostfile
        self.timeout = rc.timeout if timeout is None else timeout
        self.specs = {}  # name -> ArraySpec, in declaration order
        self.state = "stopped"  # stopped, running, hung, dead
        self.pes = {}  # PE -> info from pe.info()
        self.last_cell = None  # AsyncResult of the last cell
        self.last_result = None  # CellResult of the last cell, also when it raised or timed out
        self.cell_callbacks = []  # callback(job, result) after every cell
        self._cluster = self._client = self._view = None

    def __repr__(self):
        return f"<Job n={self.n} heap={self.heap} state={self.state}>"

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.stop()

    # -- lifecycle -------------------------------------------------------
    def start(self):
        """Start the PEs and wait until every one answers."""
        if self.state != "stopped":
            raise JobStateError(f"this job is {self.state}; use restart() or stop() first")
        check_oshrun(hostfile=self.hostfile)
        cluster = ipp.Cluster(
            engines=OshrunEngineSetLauncher,
            n=self.n,
            controller_ip=rc.ip,
            controller_args=[f"--HeartMonitor.period={rc.heartbeat_ms}"],
            delay=0,
            log_level=logging.ERROR,  # we report failures ourselves
        )
        self._cluster = cluster
        try:
            cluster.start_controller_sync()
            cluster.start_engines_sync(
                self.n, heap=self.heap, oversubscribe=self.oversubscribe, hostfile=self.hostfile or ""
            )
            self._client = cluster.connect_client_sync()
            self._wait_for_pes(time.monotonic() + rc.start_timeout)
        except BaseException:
            self._teardown()
            raise
        self._view = self._client[list(range(self.n))]
        self.state = "running"
        self.pes = {info["pe"]: info for info in self._view.apply_sync(_on_pe, "info")}
        if self.specs:
            self._alloc_on_pes(list(self.specs.values()))
        return self

    def _engine_set(self):
        return next(iter(self._cluster.engines.values()), None) if self._cluster else None

    def _oshrun_output(self, lines=15):
        engines = self._engine_set()
        out = engines.get_output(remove=False) if engines else ""
        return "\n".join(out.strip().splitlines()[-lines:])

    def _wait_for_pes(self, deadline):
        while len(self._client.ids) < self.n:
            if not self._oshrun_running():
                raise LaunchError(
                    f"oshrun exited before all {self.n} PEs started; its output:\n"
                    f"{self._oshrun_output()}"
                )
            if time.monotonic() > deadline:
                raise LaunchError(
                    f"only {len(self._client.ids)} of {self.n} PEs registered within {rc.start_timeout:.0f} s; "
                    f"oshrun output:\n{self._oshrun_output()}"
                )
            time.sleep(0.02)

    def _teardown(self, grace=3.0):
        cluster = self._cluster
        if self._client is not None and self._oshrun_running():
            # ask the engines to exit so every PE finalizes cleanly; signals only if they don't
            try:
                self._client.shutdown(targets="all", block=False)
            except Exception:
                pass
            deadline = time.monotonic() + grace
            while self._oshrun_running() and time.monotonic() < deadline:
                time.sleep(0.02)
        if self._client is not None:
            self._client.close()
        self._client = self._view = self._cluster = None
        if cluster is not None:
            try:
                cluster.stop_cluster_sync()
            except Exception:  # already gone
                pass

    def stop(self):
        """Stop every PE and the controller. Harmless when already stopped."""
        self._teardown()
        self.state = "stopped"
        self.pes = {}

    def restart(self):
        """Stop and start again with the same N and options; declared arrays come back zeroed."""
        self.stop()
        return self.start()

    # -- checks ----------------------------------------------------------
    def _require_running(self, what):
        if self.state == "stopped":
            raise NoJobError(what)
        if self.state in ("dead", "hung"):
            raise JobStateError(f"the job is {self.state}; run `%shmem restart` (or job.restart()) to get a fresh one")
        if self._dead_pes():
            self.state = "dead"
            raise JobStateError(
                f"PE {pe_ranges(self._dead_pes())} died; run `%shmem restart` (or job.restart()) to get a fresh job"
            )

    def _unanswered(self, pe):
        """Requests this client sent to PE ``pe`` that have no reply yet (the hub's count lags)."""
        return len(self._client._outstanding_dict[self._client._engines[pe]])

    def _oshrun_running(self):
        engines = self._engine_set()
        return engines is not None and _alive(engines.process)

    def _dead_pes(self):
        if not self._oshrun_running():
            return list(range(self.n))
        return sorted(set(range(self.n)) - set(self._client.ids))

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
            usage = self._view.apply_sync(_on_pe, "alloc", decls)
        except ipp.error.CompositeError as exc:
            self.state = "dead" if self._dead_pes() else self.state
            raise HeapFullError(f"allocating {' '.join(map(str, specs))} failed on the PEs: {exc}") from None
        for s in specs:
            self.specs.pop(s.name, None)
            self.specs[s.name] = s
        self._record_usage(usage)

    def _record_usage(self, usage):
        for pe, (used, size) in enumerate(usage):
            self.pes.setdefault(pe, {}).update(heap_used=used, heap_size=size)

    def _check_heap(self, specs):
        if self.last_cell is not None:  # cells may have allocated with shmem4py directly
            self._record_usage(self._view.apply_sync(_on_pe, "heap_usage"))
            self.last_cell = None
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

    def free(self, name):
        """Free the declared array ``name`` on every PE. Collective."""
        self._require_running("free")
        if name not in self.specs:
            raise SpecError(f"no array named {name!r} is declared; declared: {', '.join(self.specs) or 'none'}")
        self._record_usage(self._view.apply_sync(_on_pe, "free", name))
        del self.specs[name]

    def gather(self, name):
        """Copy array ``name`` from every PE: a NumPy array of shape ``(npes, *shape)``."""
        self._require_running("gather")
        if name not in self.specs:
            raise SpecError(f"no array named {name!r} is declared; declared: {', '.join(self.specs) or 'none'}")
        return np.stack(self._view.apply_sync(_on_pe, "gather", name))

    def arrays(self):
        """Declared arrays: one dict per array with name, dtype, shape, bytes."""
        return [
            {"name": s.name, "dtype": s.dtype, "shape": s.shape(self.n), "bytes": s.nbytes(self.n)}
            for s in self.specs.values()
        ]

    # -- status ------------------------------------------------------------
    def status(self):
        """One dict per PE: pe, state (idle/busy/dead), pid, host, heap_used, heap_size."""
        if self.state == "stopped":
            raise NoJobError("status")
        dead = set(self._dead_pes())
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

    # -- cells ---------------------------------------------------------------
    def run(self, code, arrays=None, timeout=None, stdout=None, stderr=None):
        """Run ``code`` on every PE; stream its output labelled by PE. Collective.

        Arrays declared in ``arrays`` are allocated first unless already
        allocated with the same spec. Raises :class:`PEError` if the cell
        raised on any PE, after all output was shown; :class:`JobStateError`
        if it did not finish within ``timeout`` seconds.
        """
        self._require_running("a cell")
        specs = _as_specs(arrays)
        parse_specs(str(s) for s in specs)
        todo = [s for s in specs if self.specs.get(s.name) != s]
        if todo:
            self._alloc_on_pes(todo)
        timeout = self.timeout if timeout is None else timeout
        write_out, write_err = (stdout or sys.stdout).write, (stderr or sys.stderr).write
        started = time.monotonic()
        ar = self._view.execute(code, silent=False, block=False)
        self.last_cell = ar
        pending = self._stream(ar, started, timeout, write_out, write_err)
        result = self._collect(ar, time.monotonic() - started, pending)
        self.last_result = result
        for callback in list(self.cell_callbacks):
            callback(self, result)
        if pending:
            self.state = "hung"
            raise JobStateError(
                f"the cell did not finish on PE {pe_ranges(pending)} within {timeout} s; the job is "
                f"marked hung: run `%shmem restart` to get a fresh job"
            )
        groups = {}
        for pe, text in result.results.items():
            groups.setdefault(text, []).append(pe)
        for text, pes in groups.items():
            write_out(f"Out[PE {pe_ranges(pes)}]: {text}\n")
        if result.errors:
            raise PEError(result.errors, self.n)
        return result

    def _stream(self, ar, started, timeout, write_out, write_err):
        """Show output as it arrives until every PE finished; return the PEs still running."""
        out, err = OutputMerger(range(self.n), write_out), OutputMerger(range(self.n), write_err)
        seen = {}
        while True:
            ar.wait(0.02)
            pending = []
            for pe, (md, child) in enumerate(zip(ar._metadata, ar._children)):
                for key, merger in (("stdout", out), ("stderr", err)):
                    text = md.get(key, "")
                    if len(text) > seen.get((pe, key), 0):
                        merger.feed(pe, text[seen.get((pe, key), 0) :])
                        seen[(pe, key)] = len(text)
                # a PE is finished once its reply *and* all its output arrived
                if child.done() and child.output.done():
                    out.finish(pe)
                    err.finish(pe)
                else:
                    pending.append(pe)
            out.flush()
            err.flush()
            if not pending or (timeout is not None and time.monotonic() - started > timeout):
                out.close()
                err.close()
                return pending

    def _collect(self, ar, seconds, pending):
        result = CellResult(seconds=seconds, pending=list(pending))
        for pe, md in enumerate(ar._metadata):
            result.stdout[pe], result.stderr[pe] = md.get("stdout", ""), md.get("stderr", "")
            data = (md.get("execute_result") or {}).get("data", {})
            if "text/plain" in data:
                result.results[pe] = data["text/plain"]
            error = md.get("error") if md.get("status") == "error" else None
            if error is not None:
                result.errors[pe] = (error.ename, error.evalue, "\n".join(error.render_traceback()))
        return result


def start(n=4, heap=None, oversubscribe=None, hostfile=None, timeout=None):
    """Start an OpenSHMEM job of ``n`` PEs and make it the current job."""
    global _current
    if _current is not None and _current.state != "stopped":
        raise JobStateError(
            f"a job of {_current.n} PEs is already {_current.state}; use `%shmem restart` or `%shmem stop` "
            f"(job.restart() / job.stop()) first"
        )
    job = Job(n, heap=heap, oversubscribe=oversubscribe, hostfile=hostfile, timeout=timeout)
    job.start()
    _current = job
    return job


def current_job():
    """The job started last by :func:`start` (``None`` if none)."""
    return _current
