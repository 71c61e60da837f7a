"""A traced cell as Chrome trace-event JSON, which Perfetto (ui.perfetto.dev) opens (client side).

One process (``pid``) per node, one thread (``tid``) per PE on it, named ``PE k``; one
complete slice (``ph: X``) per call, named after the call, with its cell line, target PE,
array and bytes in ``args``; RMA and atomics as flow arrows (``ph: s`` -> ``ph: f``) from the
PE the data leaves to the PE it reaches, the caller's end inside the call's slice and the other
end no later (a get) or no earlier (the rest) on the target's lane; an instant (``ph: i``) where a
cut-short PE's trace ends. A cell race-checked too (``trace.races``): each race's two accesses as
short slices named ``race`` (a call's in its slice, a load's or store's after the last call before its
line), joined by a flow arrow from the earlier to the later. ``otherData`` names the job, the library
and the cell. Timestamps are microseconds from the trace's first moment, on each node's own clock
(see :mod:`.timeline`).
"""

from __future__ import annotations

import bisect
import json
from typing import TYPE_CHECKING, Any

from ..analysis.footprint import format_indices
from ..folding import pe_ranges
from .timeline import lanes, origin

__all__ = ["chrome_trace", "write_json", "CLOCK"]

if TYPE_CHECKING:
    import os
    from collections.abc import Sequence
    from typing import Protocol

    from ..analysis.happens_before import Access
    from .cell_trace import Trace
    from .timeline import Slice

    class _Bind(Protocol):
        def __call__(self, ns: int, later: bool) -> int | None: ...


#: what the timestamps mean, said in the file and in the docs
CLOCK = (
    "each node's own clock (time.time_ns): PEs on one node share it exactly; across nodes the lanes "
    "are as aligned as the nodes' clocks are (NTP: typically within a millisecond)"
)


def _us(ns: float, zero: float) -> float:
    return (ns - zero) / 1e3


def _nodes(trace: Trace) -> tuple[dict[int, int], list[tuple[int, str | None, list[int]]]]:
    """``{pe: pid}`` and ``[(pid, host, pes)]``: one pid per node, from 1; PEs that sent nothing on the last pid."""
    hosts: dict[str, int]
    pid_of: dict[int, int]
    hosts, pid_of = {}, {}
    for pe in range(trace.npes):
        host = (trace.pe_info.get(pe) or {}).get("host")
        if host is not None:
            pid_of[pe] = hosts.setdefault(host, len(hosts) + 1)
    nowhere = [pe for pe in range(trace.npes) if pe not in pid_of]
    pid_of.update((pe, len(hosts) + 1) for pe in nowhere)
    nodes: list[tuple[int, str | None, list[int]]] = [
        (pid, host, [pe for pe, p in pid_of.items() if p == pid]) for host, pid in hosts.items()
    ]
    if nowhere:
        nodes.append((len(hosts) + 1, None, nowhere))
    return pid_of, nodes


def _binder(lane: Sequence[Slice]) -> _Bind:
    """``bind(ns, later)``: a time inside the slice of ``lane`` at ``ns``, else inside the next one (``later``)
    or the one before (not ``later``); None if there is none: an arrow's end never moves across ``ns``."""
    starts = [s.start for s in lane]

    def bind(ns: int, later: bool) -> int | None:
        i = bisect.bisect_right(starts, ns) - 1
        if i >= 0 and lane[i].start <= ns <= lane[i].end:
            return ns
        j = i + 1 if later else i
        return (lane[j].start + lane[j].end) // 2 if 0 <= j < len(lane) else None

    return bind


def _args(trace: Trace, event: dict[str, Any], lines: Sequence[str]) -> dict[str, Any]:
    args: dict[str, Any] = {
        "line": event["line"],
        "where": trace.where(event["line"]) if event["line"] else "outside the cell",
    }
    line = event["line"]
    if lines and isinstance(line, int) and 0 < line <= len(lines):
        args["code"] = lines[line - 1].strip()
    for key in ("target", "array", "bytes", "epoch"):
        if event.get(key) is not None:
            args[key] = event[key]
    if event.get("label"):
        args["step"] = f"{event['label']['collective']} ({event['label']['algorithm']}): {event['label']['text']}"
    return args


def _access_time(lane: Sequence[Slice], access: Access, default: int) -> int:
    """When ``access`` happened on its PE's ``lane``: inside its own call's slice (a call on its line), else at
    the end of the last call before its line (a load or store), else ``default``."""
    at = default
    for s in lane:
        line = s.event.get("line")
        if line == access.line and s.op == access.op:
            return (s.start + s.end) // 2
        if not isinstance(line, int) or line > access.line:
            break
        at = s.end
    return at


def _access_said(trace: Trace, access: Access) -> str:
    """``PE 0 line 4 put (write)`` (``PE 0 prog.py:4 ...`` for the runner's lines)."""
    return f"PE {pe_ranges(access.pes or (access.pe,))} {trace.where(access.line)} {access.op} ({access.mode})"


def _race_flows(
    trace: Trace, by_pe: dict[int, list[Slice]], pid_of: dict[int, int], zero: int, flow: int
) -> list[dict[str, Any]]:
    """Each race's two accesses (slices named ``race``) and a flow from the earlier one to the later."""
    out: list[dict[str, Any]] = []
    for race in getattr(trace, "races", None) or ():
        ends: list[tuple[int, int]] = []
        first, second = (_access_said(trace, a) for a in race.accesses)
        said = f"RACE {race.array}{format_indices(race.indices, race.shape)}: {first} / {second}"
        for access in race.accesses:
            pe = access.pe
            if pe not in pid_of:
                continue
            default = (trace.pe_info.get(pe) or {}).get("started") or zero
            t = _access_time(by_pe.get(pe) or [], access, default)
            args = {"race": said, "access": _access_said(trace, access), "line": access.line}
            out.append(
                {
                    "ph": "X",
                    "name": "race",
                    "cat": "race",
                    "pid": pid_of[pe],
                    "tid": pe,
                    "ts": _us(t, zero),
                    "dur": 0.001,
                    "args": args,
                }
            )
            ends.append((t, pe))
        if len(ends) != 2:
            continue
        (ta, a), (tb, b) = sorted(ends)
        flow += 1
        common = {"name": "race", "cat": "race", "id": flow}
        out.append(dict(common, ph="s", pid=pid_of[a], tid=a, ts=_us(ta, zero)))
        out.append(dict(common, ph="f", bp="e", pid=pid_of[b], tid=b, ts=_us(tb, zero)))
    return out


def chrome_trace(trace: Trace) -> dict[str, Any]:
    """The trace-event JSON object (a dict) of ``trace``."""
    from ..analysis.model import READS
    from ..operations import TRANSFERS

    zero, by_pe = origin(trace), lanes(trace)
    pid_of, nodes = _nodes(trace)
    lines = trace.code.splitlines() if trace.code else []
    out: list[dict[str, Any]] = []
    for pid, host, pes in nodes:
        name = f"node {host} (PE {pe_ranges(pes)})" if host else f"PE {pe_ranges(pes)}: no trace"
        out.append({"ph": "M", "name": "process_name", "pid": pid, "tid": 0, "args": {"name": name}})
        out.append({"ph": "M", "name": "process_sort_index", "pid": pid, "tid": 0, "args": {"sort_index": pid}})
    for pe in range(trace.npes):
        out.append({"ph": "M", "name": "thread_name", "pid": pid_of[pe], "tid": pe, "args": {"name": f"PE {pe}"}})
        out.append({"ph": "M", "name": "thread_sort_index", "pid": pid_of[pe], "tid": pe, "args": {"sort_index": pe}})
    binders = {pe: _binder(lane) for pe, lane in by_pe.items() if lane}
    flow = 0
    for pe, lane in by_pe.items():
        for s in lane:
            out.append(
                {
                    "ph": "X",
                    "name": s.op,
                    "cat": s.kind,
                    "pid": pid_of[pe],
                    "tid": pe,
                    "ts": _us(s.start, zero),
                    "dur": _us(s.end, s.start),
                    "args": _args(trace, s.event, lines),
                }
            )
            target = s.event.get("target")
            if s.op not in TRANSFERS or target is None or target == pe or target not in binders:
                continue
            middle = (s.start + s.end) // 2  # the caller's end: inside the call's own slice
            get = s.op in READS  # a get: the data flows from the target to the caller, by its time
            there = binders[target](middle, later=not get)
            if there is None:  # the target has no call on that side of this one to draw the arrow to
                continue
            flow += 1
            (a, ta), (b, tb) = ((target, there), (pe, middle)) if get else ((pe, middle), (target, there))
            common = {"name": s.op, "cat": "transfer", "id": flow}
            out.append(dict(common, ph="s", pid=pid_of[a], tid=a, ts=_us(ta, zero)))
            out.append(dict(common, ph="f", bp="e", pid=pid_of[b], tid=b, ts=_us(tb, zero)))
    out += _race_flows(trace, by_pe, pid_of, zero, flow)
    for pe, sentence in sorted(trace.ends.items()):
        lane = by_pe.get(pe) or []
        last = lane[-1].end if lane else (trace.pe_info.get(pe) or {}).get("stopped") or zero
        out.append(
            {
                "ph": "i",
                "s": "t",
                "name": f"trace ends: {sentence}",
                "cat": "end",
                "pid": pid_of[pe],
                "tid": pe,
                "ts": _us(last, zero),
            }
        )
    meta = {
        "job": trace.meta.get("job"),
        "library": trace.meta.get("library"),
        "cell": trace.meta.get("cell"),
        "npes": trace.npes,
        "calls": len(trace.events),
        "not_kept": trace.dropped,
        "clock": CLOCK,
        "complete": not trace.cut,
        "ends": {str(pe): text for pe, text in sorted(trace.ends.items())},
        "code": trace.code,
    }
    return {"traceEvents": out, "displayTimeUnit": "ns", "otherData": meta}


def write_json(trace: Trace, path: str | os.PathLike[str]) -> None:
    """Write :func:`chrome_trace` of ``trace`` to ``path``."""
    text = json.dumps(chrome_trace(trace), default=str)  # one string: much faster than json.dump's chunks
    with open(path, "w", encoding="utf-8") as f:
        f.write(text)
