"""Where each PE of a traced cell waited (client side): ``trace.waits()``.

Per PE: the cell's time on that PE (from right before the cell to right after it, less
the recorder's own snapshots), the time in each waiting call (barriers, team syncs,
``wait_until*``, locks, collectives: :data:`.timeline.WAITING`) by call and line, the time
in other calls, and the compute time: the rest, between the calls. ``str(waits)`` is one
sentence per PE: ``PE 3 waited 62% of the cell in barrier_all at line 7 (computed 35%)``.
"""

from dataclasses import dataclass, field

from .timeline import WAITING, lanes

__all__ = ["Waits", "PEWaits"]


@dataclass
class PEWaits:
    """One PE: seconds of the cell, waiting per ``(call, line)``, in other calls, computing."""

    pe: int
    cell: float = 0.0
    waiting: dict = field(default_factory=dict)  # (call, line) -> seconds
    calls: float = 0.0  # seconds in calls that do not wait (puts, gets, atomics, quiet, ...)
    sent: bool = True

    @property
    def waited(self):
        """Seconds waiting in all waiting calls."""
        return sum(self.waiting.values())

    @property
    def compute(self):
        """Seconds between calls: the cell's own work."""
        return max(0.0, self.cell - self.waited - self.calls)

    def share(self, seconds):
        return seconds / self.cell if self.cell > 0 else 0.0

    def top(self):
        """``((call, line), seconds)`` of the longest wait, or None."""
        return max(self.waiting.items(), key=lambda item: item[1], default=None)


def _percent(share):
    return "<1%" if 0 < share < 0.005 else f"{share:.0%}"


class Waits:
    """``trace.waits()``: :class:`PEWaits` per PE (``waits[pe]``), :meth:`sentences`, :meth:`rows`."""

    def __init__(self, trace):
        self.trace, self.npes = trace, trace.npes
        self.what = trace.meta.get("what", "the cell")
        self.per_pe = {}
        for pe, lane in lanes(trace).items():
            info = trace.pe_info.get(pe) or {}
            entry = PEWaits(pe, sent=pe in trace.pe_info)
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

    def __getitem__(self, pe):
        return self.per_pe[pe]

    def __iter__(self):
        return iter(self.per_pe[pe] for pe in sorted(self.per_pe))

    def sentence(self, pe):
        """One sentence on where PE ``pe`` spent the cell."""
        entry, where = self.per_pe[pe], self.trace.where
        if not entry.sent:
            return f"PE {pe} sent no trace"
        top, compute = entry.top(), entry.share(entry.compute)
        if top is not None and entry.share(top[1]) >= compute:
            (call, line), seconds = top
            at = f" at {where(line)}" if line else ""
            return (
                f"PE {pe} waited {_percent(entry.share(seconds))} of {self.what} in {call}{at} "
                f"(computed {_percent(compute)})"
            )
        said = f"PE {pe} computed {_percent(compute)} of {self.what}"
        if top is not None and top[1] > 0:
            (call, line), seconds = top
            at = f" at {where(line)}" if line else ""
            said += f" (waited most in {call}{at}: {_percent(entry.share(seconds))})"
        return said

    def sentences(self):
        """One sentence per PE, in PE order."""
        return [self.sentence(pe) for pe in sorted(self.per_pe)]

    def rows(self):
        """``[{pe, cell, compute, calls, call, line, seconds}]``: one row per PE and waiting call and line
        (plain data, e.g. for a DataFrame)."""
        out = []
        for entry in self:
            base = {"pe": entry.pe, "cell": entry.cell, "compute": entry.compute, "calls": entry.calls}
            for (call, line), seconds in sorted(entry.waiting.items(), key=lambda item: -item[1]):
                out.append(dict(base, call=call, line=line, seconds=seconds))
            if not entry.waiting:
                out.append(dict(base, call=None, line=None, seconds=0.0))
        return out

    def __str__(self):
        return "\n".join(self.sentences())

    def __repr__(self):
        return f"<Waits: {'; '.join(self.sentences())}>"
