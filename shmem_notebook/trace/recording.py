"""The trace: one cell's calls on this PE with the heap between world barriers, for
``--trace`` and the replay (PE side: the trace stage's PE module, whose :data:`HANDLERS` answer
``trace_start`` and ``trace_stop``). A consumer of the recording's
:mod:`~shmem_notebook.engine.record.layer`, so it sees every call the race recording sees.

:meth:`TraceRecording.data` returns plain data:

- ``events``: one dict per call: ``pe``, ``seq``, ``t0`` and ``t`` (when the call began and
  returned, ns, this host's clock), ``line``
  (of the cell), ``op`` (the catalogue's name), ``target`` (the other PE, or None),
  ``array`` (the symmetric array's name in the cell, ``"(scratch)"`` for the teaching
  collectives' staging area), ``indices`` (flat ``[start, stop, step]``), ``epoch`` (world
  barriers passed before it), ``label`` (the teaching collective's step,
  :attr:`..context.PEContext.collective_label`) and ``values`` (what a put carried, at most :data:`PAYLOAD`
  elements); transfers also have ``bytes``; a world barrier has ``resume`` (ns: when the
  recorder's own snapshot and barrier after it ended: that time is the recorder's, not the cell's).
- ``host``, ``pid``, ``started``, ``stopped`` (ns: when the trace started, right before the
  cell, and stopped, right after it); ``cpu`` (ns this PE's thread ran on the CPU between them, None
  when they were not on one thread): where each PE waited tells computing from sleeping by it.
- ``snapshots``: the heap at the start, after every world barrier (``barrier_all``,
  ``sync_all``, ``sync`` on TEAM_WORLD; taken between that barrier and a second one the
  recorder adds, so no PE has started the next epoch) and at the end: ``{name: ndarray}``
  for arrays up to :data:`EXACT` elements, ``{name: {shape, dtype, min, max, mean}}``
  beyond, within :data:`BUDGET` bytes.
- ``dropped``: events beyond the cap, counted and not kept.

The teams emulation's own synchronisation words are not recorded.

A cell whose PEs block for good never answers ``trace_stop``. So, under a notebook's job, right
before every call that can block (waits, world and team syncs, collectives, ``set_lock``) the
recording appends what it recorded since its last such call to a spool file on this host
(:func:`shmem_notebook.protocol.trace_spool_path`, one pickled dict per append: first ``pe``,
``host``, ``pid``, ``started``; then ``events`` and ``snapshots`` added, ``dropped`` so far and
``open``, the call being entered: ``op``, ``line``, ``t0``), which the client reads for the PEs
that did not finish (:mod:`shmem_notebook.trace.spool`). ``trace_stop`` removes it.
"""

from __future__ import annotations

import os
import pickle
import socket
import threading
import time
from typing import TYPE_CHECKING, Any, cast

import numpy as np
from shmem4py import shmem

from ..engine.context import this_pe
from ..engine.record import layer
from ..operations import CALLS, CAP
from ..protocol import trace_spool_path

if TYPE_CHECKING:
    import numpy.typing as npt

    from ..operations import Operation

__all__ = ["TraceRecording", "PAYLOAD", "EXACT", "BUDGET", "trace_start", "trace_stop", "HANDLERS"]

PAYLOAD = 64  #: elements of a put's values kept in its event
EXACT = 4096  #: arrays up to this many elements are snapshotted exactly
BUDGET = 1 << 20  #: bytes of snapshots per PE per cell; beyond it, summaries only
_WORLD_SYNCS = ("sync", "Team.sync")
#: the calls that can block until other PEs act: the spool is brought up to date before each
BLOCKING = frozenset(
    name
    for name, op in CALLS.items()
    if op.kind in ("coll",)
    or name == "set_lock"
    or (op.kind == "wait" and name.split(".")[-1].startswith(("wait", "signal_wait")))
    or (op.kind == "sync" and op.collective and name not in ("alloc", "free"))
)


def _known_arrays() -> list[tuple[int, int, str, npt.NDArray[Any]]]:
    """(start address, end address, name, array) of the symmetric arrays a cell can name."""
    found = [(this_pe.teams.words, "(sync)"), (this_pe.teams.exchange, "(sync)"), (this_pe.scratch, "(scratch)")]
    for name, value in list(this_pe.namespace.items()) + list(this_pe.arrays.items()):
        if isinstance(value, np.ndarray) and not name.startswith("_") and value.size:
            found.append((value, name))
    spans: list[tuple[int, int, str, npt.NDArray[Any]]] = []
    for array, name in found:
        if array is not None:
            base = array.__array_interface__["data"][0]
            spans.append((base, base + array.nbytes, name, array))
    return sorted(spans, key=lambda span: span[0] - span[1])  # largest first: views lose to their base


class TraceRecording:
    """One cell's calls and heap states on this PE."""

    def __init__(self, cap: int) -> None:
        self.cap = cap
        self.me = shmem.my_pe()
        self.events: list[dict[str, Any]]
        self.snapshots: list[dict[str, Any]]
        self.events, self.snapshots = [], []
        self.seq = self.epoch = self.dropped = self.bytes = 0
        self.spans = _known_arrays()
        self.snapshot()
        self.t0 = self.started = time.time_ns()
        #: this thread's CPU time at the start (the cell runs on it): what the PE computed vs slept
        self.cpu, self.thread = time.thread_time_ns(), threading.get_ident()
        self.spool: tuple[str, int] | None
        self.spool, self.spooled = None, (0, 0)  # its path and fd; events and snapshots written so far
        profile, cluster = os.environ.get("IPP_PROFILE_DIR"), os.environ.get("IPP_CLUSTER_ID")
        if profile and cluster:  # under a notebook's job (not the race runner's program)
            path = trace_spool_path(profile, cluster, self.me)
            try:
                fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_APPEND, 0o600)
            except OSError:
                return
            self.spool = (path, fd)
            self._write({"pe": self.me, "host": socket.gethostname(), "pid": os.getpid(), "started": self.started})

    def before(self, op: Operation, args: dict[str, Any], line: int) -> None:
        self.t0 = time.time_ns()
        if self.spool is not None and op.name in BLOCKING:
            events, snapshots = self.spooled
            self._write(
                {
                    "events": self.events[events:],
                    "snapshots": self.snapshots[snapshots:],
                    "dropped": self.dropped,
                    "open": {"op": op.name, "line": line or None, "t0": self.t0},
                }
            )
            self.spooled = (len(self.events), len(self.snapshots))

    def _write(self, part: dict[str, Any]) -> None:
        try:
            os.write(cast("tuple[str, int]", self.spool)[1], pickle.dumps(part, protocol=pickle.HIGHEST_PROTOCOL))
        except (OSError, pickle.PicklingError):
            self.close_spool()

    def close_spool(self) -> None:
        """Remove the spool: the trace is sent whole (``trace_stop``)."""
        if self.spool is not None:
            path, fd = self.spool
            self.spool = None
            os.close(fd)
            try:
                os.unlink(path)
            except OSError:
                pass

    def _locate(self, array: object) -> tuple[str | None, int | None]:
        """(name, flat start index) of the symmetric array ``array`` points into."""
        if not isinstance(array, np.ndarray):
            return None, None
        address = array.__array_interface__["data"][0]
        for attempt in range(2):
            for lo, hi, name, known in self.spans:
                if lo <= address < hi:
                    return name, (address - lo) // max(known.itemsize, 1)
            if attempt == 0:
                self.spans = _known_arrays()  # the cell allocated something new
        return "(private)", 0

    def snapshot(self) -> None:
        exact: dict[str, Any] = {}
        for name, value in list(this_pe.namespace.items()):
            if not isinstance(value, np.ndarray) or name.startswith("_") or not value.size:
                continue
            try:
                if not shmem.addr_accessible(value, self.me):
                    continue
            except Exception:
                continue
            if value.size <= EXACT and self.bytes + value.nbytes <= BUDGET:
                exact[name] = np.array(value)
                self.bytes += value.nbytes
            else:
                numeric = value.dtype.kind in "biuf"
                exact[name] = {
                    "shape": list(value.shape),
                    "dtype": str(value.dtype),
                    **{k: float(getattr(value, k)()) if numeric else None for k in ("min", "max", "mean")},
                }
        self.snapshots.append(exact)

    def _record(
        self,
        op: str,
        line: int,
        target: int | None = None,
        array: str | None = None,
        indices: list[int] | None = None,
        values: list[Any] | None = None,
        nbytes: int | None = None,
    ) -> None:
        self.seq += 1
        if len(self.events) >= self.cap:
            self.dropped += 1
            return
        label = this_pe.collective_label
        self.events.append(
            {
                "pe": self.me,
                "seq": self.seq,
                "t0": self.t0,
                "t": time.time_ns(),
                "line": line or None,
                "op": op,
                "target": target,
                "bytes": nbytes,
                "array": array,
                "indices": indices,
                "epoch": self.epoch,
                "label": dict(label, call=this_pe.collective_calls) if label else None,
                "values": values,
            }
        )

    def after(self, op: Operation, args: dict[str, Any], result: Any, line: int) -> None:
        kind = op.kind
        if kind in ("rma", "amo"):
            array, start = self._locate(args.get(op.remote))
            if array == "(sync)" or start is None:
                return  # the emulation's own words
            strided = "tst" in args
            step = int(args.get("tst" if op.writes else "sst", 1) or 1) if strided else 1
            local: Any = args.get(op.local)
            if kind == "amo":
                count = 1
            elif strided:
                count = int(args.get("size") or 1)
            else:
                count = int(
                    args.get("size") or min(np.size(cast("npt.ArrayLike", args.get(op.remote))), np.size(local))
                )
            values = None
            if kind == "rma" and op.writes and count <= PAYLOAD:
                sst = int(args.get("sst", 1) or 1) if strided else 1
                values = np.asarray(local).reshape(-1)[: count * sst : sst].tolist()
            elif op.name == "atomic_set":
                values = [args.get("value")]
            itemsize = getattr(args.get(op.remote), "itemsize", 0)
            self._record(
                op.name,
                line,
                int(args["pe"]),
                array,
                [int(start), int(start + count * step), step],
                values,
                count * itemsize,
            )
        elif kind == "coll":
            self._record(op.name, line, None, self._locate(args.get("target"))[0])
        elif kind == "wait" and self._locate(args.get("ivar", args.get("ivars")))[0] == "(sync)":
            return
        else:
            self._record(op.name, line)
            world = op.name in ("barrier_all", "sync_all") or (
                op.name in _WORLD_SYNCS and args.get("team") in (None, shmem.TEAM_WORLD)
            )
            if world:
                self.epoch += 1
                self.snapshot()
                layer.original("barrier_all")()  # nobody writes the next epoch before every PE took its snapshot
                if self.events and self.events[-1]["seq"] == self.seq:
                    self.events[-1]["resume"] = time.time_ns()

    def data(self) -> dict[str, Any]:
        """The plain data (see the module docstring); takes the final heap state and removes the spool."""
        self.close_spool()
        stopped = time.time_ns()
        cpu = time.thread_time_ns() - self.cpu if threading.get_ident() == self.thread else None
        self.snapshot()
        return {
            "pe": self.me,
            "events": self.events,
            "snapshots": self.snapshots,
            "dropped": self.dropped,
            "host": socket.gethostname(),
            "pid": os.getpid(),
            "started": self.started,
            "stopped": stopped,
            "cpu": cpu,  # ns on the CPU between started and stopped (None: not measured on one thread)
        }


def trace_start(options: dict[str, Any] | None = None) -> bool:
    """Trace the next cell: its calls and the heap between world barriers."""
    options = dict(options or {})
    layer.detach("trace")
    layer.attach("trace", TraceRecording(int(options.get("cap") or CAP)))
    return True


def trace_stop() -> dict[str, Any]:
    """Stop tracing; the trace's plain data, or an empty one if none ran."""
    recording = cast("TraceRecording | None", layer.detach("trace"))
    if recording is None:
        return {"pe": None, "events": [], "snapshots": [], "dropped": 0}
    return recording.data()


#: the trace stage's requests (their names: :mod:`shmem_notebook.stage_registry`) -> functions
HANDLERS = {"trace_start": trace_start, "trace_stop": trace_stop}
