"""A traced cell as a timeline (client side): one lane of call slices per PE, on its node's clock.

What the exports (:mod:`.chrome_trace`, :mod:`.otf2_export`) and the wait profile
(:mod:`.waits`) share. Times are ns of each node's own clock (``time.time_ns()``): PEs on
one node share one clock, so their slices line up exactly; across nodes the lanes are only
as aligned as the nodes' clocks are synchronised (NTP: typically within a millisecond).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from ..operations import ATOMICS, CALLS, COLLECTIVES, RMA, WAITS

__all__ = ["Slice", "lanes", "kind_of", "WAITING", "origin"]

if TYPE_CHECKING:
    from .cell_trace import Trace

#: calls in which a PE waits for others: barriers, team syncs, waits on memory, locks, collectives
WAITING = (
    frozenset(("barrier_all", "sync_all", "sync", "Team.sync", "set_lock", *WAITS, *COLLECTIVES))
    - {name for name in WAITS if name.startswith("test")}
    - {"signal_fetch"}
)


def kind_of(op: str) -> str:
    """``"wait"``, ``"rma"``, ``"amo"``, or the catalogue's kind (``"sync"``, ``"lock"``, ...)."""
    if op in WAITING:
        return "wait"
    if op in RMA:
        return "rma"
    if op in ATOMICS:
        return "amo"
    return CALLS[op].kind if op in CALLS else "other"


@dataclass
class Slice:
    """One call on one PE: ``start``/``end`` ns (end >= start), ``pause`` ns the recorder spent after it."""

    pe: int
    op: str
    start: int
    end: int
    line: int | None
    event: dict[str, Any]
    pause: int = 0

    @property
    def kind(self) -> str:
        return kind_of(self.op)

    @property
    def seconds(self) -> float:
        return (self.end - self.start) / 1e9


def lanes(trace: Trace) -> dict[int, list[Slice]]:
    """``{pe: [Slice]}`` in time order, for every PE of ``trace`` (an empty lane for a PE that sent nothing)."""
    out: dict[int, list[Slice]] = {pe: [] for pe in range(trace.npes)}
    for event in trace.events:
        end = event["t"]
        start = min(event.get("t0", end), end)
        pause = max(0, event.get("resume", end) - end)
        out.setdefault(event["pe"], []).append(Slice(event["pe"], event["op"], start, end, event["line"], event, pause))
    for slices in out.values():
        slices.sort(key=lambda s: (s.start, s.end))
    return out


def origin(trace: Trace) -> int:
    """The earliest time of the trace (ns): the first PE's start, else its first call."""
    times: list[int] = [info["started"] for info in trace.pe_info.values() if info.get("started")]
    times += [min(e.get("t0", e["t"]), e["t"]) for e in trace.events]
    return min(times, default=0)
