"""Gather what every PE holds into a :class:`Snapshot` (client side, no shmem4py).

``gather_snapshot(job)`` asks each live PE for a summary of its symmetric heap
(:func:`shmem_notebook.engine.heap_summary.snapshot`), waits at most ``timeout``
seconds, and marks PEs that did not answer as unreachable. It is not
collective: PEs answer independently, so a dead or stuck PE never blocks the
others. The whole job's reply is kept under ``budget`` bytes (1 MiB by
default): each PE spends ``budget / npes``, sending small arrays exactly and
block summaries of larger ones.

Snapshot structure (``snap.pes[pe]``, one dict per PE, index == PE)::

    pe, state        'idle' | 'busy' | 'hung' | 'dead' (job/states.py); reachable (bool): answered this refresh
    note             why a PE has no data ('' if it answered)
    pid, host, rss   process id, host name, resident memory in bytes (None if unknown)
    last_cell        {'outcome': 'ok' | exception type | 'timed out' | 'interrupted' | 'deadlocked' (every PE
                     waited for another) | 'stranded' (waited for PEs that ended the cell, paused) | None,
                     'seconds': float | None}
    output_tail      the last lines of its stdout/stderr in the last %%pxshmem cell
    heap             {'base': address, 'size', 'used', 'free'} in bytes
    blocks           every symmetric allocation, by offset:
                     {'offset', 'address', 'bytes', 'name' (None if unnamed), 'aliases'}
    omitted          {'count', 'bytes'} of allocations not listed in blocks (only when a PE
                     has more than its budget can describe, e.g. thousands of arrays)
    arrays           name -> {'name', 'dtype', 'shape', 'bytes', 'offset', 'address',
                     'declared' (via %shmem/job.alloc), 'aliases', 'exact',
                     'values' (ndarray, when exact) or 'summary' (when not):
                     {'block': (br, bc), 'grid': (gr, gc), 'min', 'max', 'mean', 'hash'}}

Offsets are bytes from the start of the symmetric heap segment and are the
same on every PE. Higher-level reads: :meth:`Snapshot.names`,
:meth:`Snapshot.values`, :meth:`Snapshot.diff`, :meth:`Snapshot.differing`.
"""

import pickle
import time
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import numpy as np
from numpy.typing import NDArray

from ..errors import InputError, NoJobError
from ..folding import pe_ranges
from ..job.states import BUSY, HUNG
from .pattern import breaks_pattern

if TYPE_CHECKING:
    from ..job import Job

__all__ = ["Snapshot", "gather_snapshot", "DEFAULT_BUDGET", "DEFAULT_TIMEOUT"]

DEFAULT_BUDGET = 1 << 20  # bytes for the whole job per refresh
DEFAULT_TIMEOUT = 5.0  # seconds a PE has to answer
TAIL_LINES = 6
TAIL_CHARS = 600


def _tail(text: str) -> str:
    lines = text.rstrip("\n").splitlines()[-TAIL_LINES:]
    return "\n".join(lines)[-TAIL_CHARS:]


@dataclass
class Snapshot:
    """What every PE held at one refresh; see the module docstring for ``pes``."""

    npes: int
    pes: list[dict[str, Any]]
    time: float = 0.0  # time.time() at the refresh
    seconds: float = 0.0  # how long the refresh took
    payload_bytes: int = 0  # pickled size of all PE replies
    budget: int = DEFAULT_BUDGET
    job_state: str = "running"
    errors: list[str] = field(default_factory=list)  # problems met while gathering, as text

    # -- arrays ------------------------------------------------------------
    def names(self) -> list[str]:
        """Array names in heap order (by offset), over every PE that answered."""
        seen: dict[str, int] = {}
        for p in self.pes:
            for name, info in p["arrays"].items():
                seen.setdefault(name, info["offset"] if info["offset"] is not None else 0)
        return sorted(seen, key=lambda n: (seen[n], n))

    def _infos(self, name: str) -> dict[int, dict[str, Any]]:
        if not isinstance(name, str) or name not in self.names():
            known = ", ".join(self.names()) or "none"
            raise InputError(
                f"no symmetric array named {name!r} on any PE that answered; arrays: {known} "
                f"(refresh the inspector after allocating)"
            )
        infos = {p["pe"]: p["arrays"][name] for p in self.pes if name in p["arrays"]}
        layouts = {(i["dtype"], i["shape"], i["exact"], (i["summary"] or {}).get("block")) for i in infos.values()}
        if len(layouts) > 1:
            where = "; ".join(f"PE {pe}: {i['dtype']}{list(i['shape'])}" for pe, i in infos.items())
            raise InputError(
                f"array {name!r} has a different dtype, shape or summary on different PEs ({where}); "
                f"bind the name to the same symmetric array on every PE"
            )
        return infos

    def info(self, name: str) -> dict[str, Any]:
        """Metadata of array ``name`` (from the lowest PE that holds it)."""
        infos = self._infos(name)
        return {k: v for k, v in infos[min(infos)].items() if k not in ("values", "summary")}

    def is_exact(self, name: str) -> bool:
        """Whether ``name`` came exactly (else as block summaries)."""
        infos = self._infos(name)
        exact: bool = infos[min(infos)]["exact"]
        return exact

    def values(self, name: str, stat: str = "mean") -> NDArray[Any]:
        """Values of ``name`` on every PE: an ndarray ``(npes, *shape)``.

        Exact arrays give their values (``stat`` ignored). Summarised arrays
        give the block statistic ``stat`` ('mean', 'min' or 'max') on the
        block grid: ``(npes, gc)`` for 1-D arrays, ``(npes, gr, gc)`` otherwise.
        Rows of PEs without data are NaN (and the result is float).
        """
        if stat not in ("mean", "min", "max"):
            raise InputError(f"stat must be 'mean', 'min' or 'max', got {stat!r}")
        infos = self._infos(name)
        rows = {pe: self._row(info, stat) for pe, info in infos.items()}
        sample = next(iter(rows.values()))
        if len(rows) == self.npes:
            return np.stack([rows[pe] for pe in range(self.npes)])
        out = np.full((self.npes, *sample.shape), np.nan, dtype=np.result_type(sample.dtype, np.float64))
        for pe, row in rows.items():
            out[pe] = row
        return out

    @staticmethod
    def _row(info: dict[str, Any], stat: str) -> NDArray[Any]:
        if info["exact"]:
            values: NDArray[Any] = info["values"]
            return values
        grid: NDArray[Any] = info["summary"][stat]
        row: NDArray[Any] = grid[0] if len(info["shape"]) <= 1 else grid
        return row

    def _keys(self, name: str) -> dict[int, NDArray[Any]]:
        """Per PE, what :meth:`diff` compares: exact values, or block hashes."""
        return {
            pe: self._row(info, "hash") if not info["exact"] else info["values"]
            for pe, info in self._infos(name).items()
        }

    def diff(self, name: str, reference: int | None = None) -> NDArray[np.bool_]:
        """Where PEs disagree on ``name``: a bool array shaped like :meth:`values`.

        ``reference=None`` compares each PE with the consensus: per element,
        the value held by the most PEs (ties go to the value of the lowest
        PE). ``reference=k`` compares each PE with PE ``k``. Exact arrays are
        compared element by element (NaN equals NaN); summarised ones block by
        block through the hash of the block's bits. PEs without data are
        never marked.
        """
        keys = self._keys(name)
        if reference is not None:
            if (
                isinstance(reference, bool)
                or not isinstance(reference, (int, np.integer))
                or not 0 <= reference < self.npes
            ):
                raise InputError(f"reference must be a PE number 0..{self.npes - 1} or None, got {reference!r}")
            if reference not in keys:
                raise InputError(
                    f"PE {reference} has no data for {name!r} (it is {self.pes[reference]['state']}); "
                    f"choose another reference PE or None"
                )
        sample = next(iter(keys.values()))
        mask = np.zeros((self.npes, *sample.shape), dtype=bool)
        pes = sorted(keys)
        pattern = self._pattern(name) if reference is None else None
        if pattern is not None:
            for i, p in enumerate(pes):
                mask[p] = pattern[i].reshape(sample.shape)
            return mask
        if reference is None:
            ref, _ = _consensus(keys)
        else:
            ref = keys[reference]
        for p in pes:
            mask[p] = ~_equal(keys[p], ref)
        return mask

    def _pattern(self, name: str) -> NDArray[np.bool_] | None:
        """When PEs hold different data by design (no majority at most elements of an exact array),
        the values that break the pattern they share (see :mod:`.pattern`), in PE order; else None."""
        keys = self._keys(name)
        if not self.is_exact(name) or len(keys) < 3:
            return None
        _, held = _consensus(keys)
        if (2 * held <= len(keys)).sum() * 2 <= held.size:  # a majority at most elements: the consensus is meaningful
            return None
        return breaks_pattern(np.stack([np.asarray(keys[p]).reshape(-1) for p in sorted(keys)]))

    def without(self, name: str) -> dict[int, str]:
        """``{pe: why}`` of the PEs with no data for ``name``: their state when they did not answer
        (``hung``, ``dead``, ``busy``), else ``no such array`` (bound on other PEs only)."""
        self._infos(name)  # an unknown name is one sentence
        return {
            p["pe"]: (p["state"] if not p.get("reachable", True) else "no such array")
            for p in self.pes
            if name not in p["arrays"]
        }

    def differing(self, name: str, reference: int | None = None) -> dict[int, int]:
        """``{pe: number of differing elements (or blocks)}`` for PEs that differ."""
        mask = self.diff(name, reference)
        counts = mask.reshape(self.npes, -1).sum(axis=1)
        return {pe: int(c) for pe, c in enumerate(counts) if c}

    def describe_diff(self, name: str, reference: int | None = None) -> str:
        """One sentence on where PEs disagree on ``name``, e.g.
        ``squares: PE 3 differs from the consensus at 1 of 12 elements``."""
        what = "elements" if self.is_exact(name) else "blocks"
        against = "the consensus" if reference is None else f"PE {reference}"
        counts = self.differing(name, reference)
        mask = self.diff(name, reference)
        total = int(np.prod(mask.shape[1:]))
        if reference is None and self._pattern(name) is not None:
            return _describe_pattern(name, mask, counts, total)
        holders = [p["pe"] for p in self.pes if name in p["arrays"]]
        if not counts:
            verb = "agrees" if len(holders) == 1 else "agree"
            return f"{name}: PE {pe_ranges(holders)} {verb} with {against} on all {total} {what}" + _no_data(
                self.without(name)
            )
        if len(counts) == 1:
            ((pe, c),) = counts.items()
            text = f"{name}: PE {pe} differs from {against} at {c} of {total} {what}"
        else:
            parts = ", ".join(f"PE {pe} at {c}" for pe, c in counts.items())
            text = f"{name}: PE {pe_ranges(counts)} differ from {against} ({parts} of {total} {what})"
        if reference is None:
            keys = self._keys(name)
            _, held = _consensus(keys)
            split = int((2 * held <= len(keys)).sum())
            if split:
                text = (
                    f"{name}: no majority: no value is held by more than half of the PEs at {split} of {total} "
                    f"{what}, so the consensus there is only the most common value (ties: the lowest PE's); "
                    f"choose a reference PE to compare with. " + text[len(name) + 2 :]
                )
        return text + _no_data(self.without(name))


def _no_data(without: dict[int, str]) -> str:
    """``; PE 0 has no data (hung)`` for the PEs of ``{pe: why}``, grouped by why ('' when none)."""
    by_why: dict[str, list[int]] = {}
    for pe, why in sorted(without.items()):
        by_why.setdefault(why, []).append(pe)
    return "".join(
        f"; PE {pe_ranges(pes)} {'has' if len(pes) == 1 else 'have'} no data ({why})" for why, pes in by_why.items()
    )


def _describe_pattern(name: str, mask: NDArray[np.bool_], counts: dict[int, int], total: int) -> str:
    """``name: PEs hold different data by design (...); PE 3 breaks the shared pattern at 1 of 16 elements: [5]``"""
    by_design = f"{name}: PEs hold different data by design (value = a[i] + b[pe] fits the rest)"
    if not counts:
        return (
            f"{name}: PEs hold different data by design, all in one pattern (value = a[i] + b[pe]); "
            "no element breaks it"
        )
    parts = []
    for pe, count in counts.items():
        where = [tuple(int(i) for i in np.unravel_index(k, mask.shape[1:])) for k in np.flatnonzero(mask[pe])[:3]]
        shown = ", ".join(str(w[0]) if len(w) == 1 else str(list(w)) for w in where) + (" ..." if count > 3 else "")
        parts.append(f"PE {pe} breaks the shared pattern at {count} of {total} elements: [{shown}]")
    return f"{by_design}; " + "; ".join(parts)


def _consensus(keys: dict[int, NDArray[Any]]) -> tuple[NDArray[Any], NDArray[Any]]:
    """Per element, the value most PEs hold (ties: the lowest PE's) and how many PEs hold it."""
    pes = sorted(keys)
    sample = keys[pes[0]]
    count = {p: sum(_equal(keys[p], keys[q]).astype(int) for q in pes) for p in pes}
    best = np.zeros(sample.shape, dtype=int)
    best_pe = np.full(sample.shape, pes[0])
    for p in pes:  # ascending: ties keep the lowest PE
        better = count[p] > best
        best = np.where(better, count[p], best)
        best_pe = np.where(better, p, best_pe)
    ref = np.empty_like(sample)
    for p in pes:
        ref = np.where(best_pe == p, keys[p], ref)
    return ref, best


def _equal(a: NDArray[Any], b: NDArray[Any]) -> NDArray[np.bool_]:
    eq = a == b
    if a.dtype.kind in "fc":
        eq |= np.isnan(a) & np.isnan(b)
    return np.asarray(eq)


def _job_status(job: "Job") -> tuple[dict[int, dict[str, Any]], list[str]]:
    """Engine rows from job.status(), or all-dead rows when even that fails."""
    try:
        return {row["pe"]: row for row in job.status()}, []
    except Exception as exc:  # controller gone: nothing answers
        return {pe: {"pe": pe, "state": "dead"} for pe in range(job.n)}, [f"status: {exc}"]


def _unfinished(outcome: str, crash: object = None) -> str:
    """How the last cell ended on a PE that never finished it (``outcome``: the cell's, see CellResult)."""
    if outcome == "died":
        return f"died ({crash})" if crash else "died (the job ended)"
    return {"interrupted": "interrupted", "stranded": "stranded", "deadlock": "deadlocked"}.get(outcome, "timed out")


def gather_snapshot(job: "Job", budget: int = DEFAULT_BUDGET, timeout: float = DEFAULT_TIMEOUT) -> "Snapshot":
    """Ask every live PE of ``job`` for its heap summary; a :class:`Snapshot`.

    Not collective: each PE answers on its own within ``timeout`` seconds,
    PEs that do not (busy in a cell, hung) are marked unreachable and their
    queued request is withdrawn. ``budget`` bounds the bytes the whole job
    sends (``budget / npes`` per PE).
    """
    if job is None or job.state == "stopped":
        raise NoJobError("the inspector")
    if not isinstance(budget, (int, np.integer)) or budget < 4096 * job.n:
        raise InputError(f"budget must be an integer of at least {4096 * job.n} bytes for {job.n} PEs, got {budget!r}")
    if not (isinstance(timeout, (int, float)) and timeout > 0):
        raise InputError(f"timeout must be a positive number of seconds, got {timeout!r}")
    started = time.monotonic()
    status, errors = _job_status(job)
    live = [pe for pe in range(job.n) if status[pe]["state"] != "dead"]
    replies = job.ask(
        "snapshot", int(budget) // job.n, pes=live, timeout=max(0.0, started + timeout - time.monotonic()), partial=True
    )
    failed = replies.failed  # the PE raised or its engine vanished
    errors += [f"PE {pe}: {text}" for pe, text in failed.items()]
    payload = sum(len(pickle.dumps(reply, protocol=5)) for reply in replies.values())
    job.record_usage({pe: (r["heap"]["used"], r["heap"]["size"]) for pe, r in replies.items()})
    last = job.last_result
    pes: list[dict[str, Any]] = []
    for pe in range(job.n):
        info = job.pes.get(pe, {})
        row = status[pe]
        reply = replies.get(pe)
        entry: dict[str, Any] = {
            "pe": pe,
            "state": row["state"],
            "reachable": reply is not None,
            "note": "",
            "pid": info.get("pid"),
            "host": info.get("host"),
            "rss": None,
            "last_cell": {"outcome": None, "seconds": None},
            "output_tail": "",
            "heap": {"base": None, "size": row.get("heap_size"), "used": row.get("heap_used"), "free": None},
            "blocks": [],
            "arrays": {},
            "omitted": {"count": 0, "bytes": 0},
        }
        if reply is not None:
            entry.update({k: reply[k] for k in ("pid", "host", "rss", "heap", "blocks", "arrays", "omitted")})
            entry["last_cell"] = {
                "outcome": reply["last_cell"].get("outcome"),
                "seconds": reply["last_cell"].get("seconds"),
            }
            entry["state"] = "idle"
        elif pe in getattr(job, "paused", ()) and row["state"] != "dead":  # the hub's heartbeat took it for dead
            entry["state"] = HUNG
            entry["note"] = (
                f"unreachable: no answer within {timeout:g} s, paused (no CPU) where it waits for PEs that "
                f"ended the cell, until %shmem restart"
            )
        elif row["state"] == "dead" or "died" in failed.get(pe, ""):
            entry["state"] = "dead"
            entry["note"] = "dead: its process is gone"
        elif pe in failed:
            entry["note"] = f"no data: {failed[pe][:200]}"
        else:
            entry["state"] = HUNG if job.state == "hung" else BUSY  # the words of job/states.py
            entry["note"] = f"unreachable: no answer within {timeout:g} s (busy in a cell or hung)"
        if last is not None:
            if pe in last.pending:
                entry["last_cell"]["outcome"] = _unfinished(last.outcome, job.crash.get(pe))
            elif pe in last.errors:
                entry["last_cell"]["outcome"] = last.errors[pe][0]
            elif entry["last_cell"]["outcome"] is None and reply is None:
                entry["last_cell"]["outcome"] = "ok"
            if pe in last.pending:
                entry["last_cell"]["seconds"] = last.seconds  # how long it ran before the client gave up
            entry["output_tail"] = _tail((last.stdout.get(pe, "") or "") + (last.stderr.get(pe, "") or ""))
        pes.append(entry)
    return Snapshot(
        npes=job.n,
        pes=pes,
        time=time.time(),
        seconds=time.monotonic() - started,
        payload_bytes=payload,
        budget=int(budget),
        job_state=job.state,
        errors=errors,
    )
