"""Where each PE of a traced cell waited (client side): ``trace.waits()``.

Per PE: the cell's time on that PE (from right before the cell to right after it, less
the recorder's own snapshots), the time in each waiting call (barriers, team syncs,
``wait_until*``, locks, collectives: :data:`.timeline.WAITING`) by call and line, the time
in other calls, and the time outside OpenSHMEM: the rest, between the calls, computing or
sleeping (``time.sleep``, input, a lock of Python's). The PE's CPU time over the cell tells the two
apart within bounds, at no cost per call: at least ``outside - cpu`` of it was off the CPU
(sleeping or blocked), at least ``cpu - (cell - outside)`` of it computing. ``str(waits)`` is one
sentence per PE: ``PE 3 waited 62% of the cell in barrier_all at line 7 (outside OpenSHMEM 35%)``,
``PE 0 spent 98% of the cell outside OpenSHMEM (at least 97% off the CPU: sleeping, blocked or
waiting for a core)``.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from .timeline import WAITING, lanes

__all__ = ["Waits", "PEWaits"]

if TYPE_CHECKING:
    from collections.abc import Iterator

    from .cell_trace import Trace


@dataclass
class PEWaits:
    """One PE: seconds of the cell, waiting per ``(call, line)``, in other calls, outside OpenSHMEM,
    and on the CPU."""

    pe: int
    cell: float = 0.0
    waiting: dict[tuple[str, int | None], float] = field(default_factory=dict)  # (call, line) -> seconds
    calls: float = 0.0  # seconds in calls that do not wait (puts, gets, atomics, quiet, ...)
    sent: bool = True
    cpu: float | None = None  # seconds the PE ran on the CPU over the cell (None: not measured)

    @property
    def waited(self) -> float:
        """Seconds waiting in all waiting calls."""
        return sum(self.waiting.values())

    @property
    def outside(self) -> float:
        """Seconds between calls, outside OpenSHMEM: computing or sleeping."""
        return max(0.0, self.cell - self.waited - self.calls)

    #: the name of :attr:`outside` before it was told from sleeping (it counted ``time.sleep`` too)
    compute = outside

    @property
    def off_cpu(self) -> float | None:
        """Seconds outside OpenSHMEM that were at least off the CPU (sleeping, blocked, waiting for a core), or None."""
        return None if self.cpu is None else min(self.outside, max(0.0, self.outside - self.cpu))

    @property
    def on_cpu(self) -> float | None:
        """Seconds outside OpenSHMEM that were at least computing (CPU time the calls cannot hold), or None."""
        return None if self.cpu is None else min(self.outside, max(0.0, self.cpu - (self.cell - self.outside)))

    def share(self, seconds: float) -> float:
        return seconds / self.cell if self.cell > 0 else 0.0

    def top(self) -> tuple[tuple[str, int | None], float] | None:
        """``((call, line), seconds)`` of the longest wait, or None."""
        return max(self.waiting.items(), key=lambda item: item[1], default=None)


def _percent(share: float) -> str:
    return "<1%" if 0 < share < 0.005 else f"{share:.0%}"


def _how(entry: PEWaits) -> str:
    """What the PE did outside OpenSHMEM, as far as its CPU time tells: sleeping, computing, or either."""
    if entry.off_cpu is not None and entry.off_cpu >= entry.outside / 2:
        return f"at least {_percent(entry.share(entry.off_cpu))} off the CPU: sleeping, blocked or waiting for a core"
    if entry.on_cpu is not None and entry.on_cpu >= entry.outside / 2:
        return f"at least {_percent(entry.share(entry.on_cpu))} on the CPU, computing"
    return "computing or sleeping"


class Waits:
    """``trace.waits()``: :class:`PEWaits` per PE (``waits[pe]``), :meth:`sentences`, :meth:`rows`."""

    def __init__(self, trace: Trace) -> None:
        self.trace, self.npes = trace, trace.npes
        self.what = trace.meta.get("what", "the cell")
        self.per_pe: dict[int, PEWaits] = {}
        for pe, lane in lanes(trace).items():
            info = trace.pe_info.get(pe) or {}
            entry = PEWaits(
                pe, sent=pe in trace.pe_info, cpu=info["cpu"] / 1e9 if info.get("cpu") is not None else None
            )
            started = info.get("started") or (lane[0].start if lane else 0)
            stopped = info.get("stopped") or (lane[-1].end if lane else started)
            entry.cell = max(0, stopped - started - sum(s.pause for s in lane)) / 1e9
            for s in lane:
                if s.op in WAITING:
                    key = (s.op, s.line)
                    entry.waiting[key] = entry.waiting.get(key, 0.0) + s.seconds
                else:
                    entry.calls += s.seconds
            self.per_pe[pe] = entry

    def __getitem__(self, pe: int) -> PEWaits:
        return self.per_pe[pe]

    def __iter__(self) -> Iterator[PEWaits]:
        return iter(self.per_pe[pe] for pe in sorted(self.per_pe))

    def sentence(self, pe: int) -> str:
        """One sentence on where PE ``pe`` spent the cell."""
        entry, where = self.per_pe[pe], self.trace.where
        if not entry.sent:
            return f"PE {pe} sent no trace"
        top, outside = entry.top(), entry.share(entry.outside)
        if top is not None and entry.share(top[1]) >= outside:
            (call, line), seconds = top
            at = f" at {where(line)}" if line else ""
            return (
                f"PE {pe} waited {_percent(entry.share(seconds))} of {self.what} in {call}{at} "
                f"(outside OpenSHMEM {_percent(outside)})"
            )
        notes = [_how(entry)]
        if top is not None and top[1] > 0:
            (call, line), seconds = top
            at = f" at {where(line)}" if line else ""
            notes.append(f"waited most in {call}{at}: {_percent(entry.share(seconds))}")
        return f"PE {pe} spent {_percent(outside)} of {self.what} outside OpenSHMEM ({'; '.join(notes)})"

    def sentences(self) -> list[str]:
        """One sentence per PE, in PE order."""
        return [self.sentence(pe) for pe in sorted(self.per_pe)]

    def rows(self) -> list[dict[str, Any]]:
        """``[{pe, cell, outside, off_cpu, on_cpu, calls, call, line, seconds}]``: one row per PE and waiting
        call and line (plain data, e.g. for a DataFrame; ``off_cpu``/``on_cpu``: at least that much of
        ``outside`` was sleeping / computing, None when not measured)."""
        out: list[dict[str, Any]] = []
        for entry in self:
            base = {
                "pe": entry.pe,
                "cell": entry.cell,
                "outside": entry.outside,
                "off_cpu": entry.off_cpu,
                "on_cpu": entry.on_cpu,
                "calls": entry.calls,
            }
            for (call, line), seconds in sorted(entry.waiting.items(), key=lambda item: -item[1]):
                out.append(dict(base, call=call, line=line, seconds=seconds))
            if not entry.waiting:
                out.append(dict(base, call=None, line=None, seconds=0.0))
        return out

    def __str__(self) -> str:
        return "\n".join(self.sentences())

    def __repr__(self) -> str:
        return f"<Waits: {'; '.join(self.sentences())}>"
