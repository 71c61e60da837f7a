"""Merge the output streams of many PEs into labelled lines.

Lines are emitted as they arrive, labelled ``[PE 2]``; the n-th line of
several PEs, when identical, is emitted once as ``[PE 0-3] text``; so are
lines that differ only by each PE's own pid (``own``), shown as ``<pid>``
(PE numbers are not folded: ``print(me)`` must stay per PE). A line
waits at most ``hold`` seconds for the other running PEs to print theirs:
0.25 s, longer on a busy machine, where PEs' lines arrive further apart.
"""

from __future__ import annotations

import os
import queue
import re
import threading
import time
from collections import deque
from typing import TYPE_CHECKING, cast

from ..folding import pe_ranges
from ..protocol import PE_DONE, PE_LINE

if TYPE_CHECKING:
    from collections.abc import Callable, Iterable, Mapping

__all__ = ["OutputMerger", "busy_hold", "merge_marked"]

HOLD, MAX_HOLD = 0.25, 2.0  # seconds a line waits for the other PEs', on an idle and a busy machine

#: a line as a PE of the race runner marks it (protocol.PE_LINE, PE_DONE)
_MARKED = re.compile(
    re.escape(PE_LINE)
    .replace(r"\{pe\}", r"(?P<pe>\d+)")
    .replace(r"\{npes\}", r"(?P<npes>\d+)")
    .replace(r"\{text\}", r"(?P<text>.*)")
    + r"$",
    re.S,
)
_DONE = re.compile(re.escape(PE_DONE).replace(r"\{pe\}", r"(?P<pe>\d+)").replace(r"\{npes\}", r"(?P<npes>\d+)") + "$")


def busy_hold(load: float | None = None, cpus: int | None = None) -> float:
    """How long a line waits for the other PEs': ``HOLD`` scaled by the run queue per core (the last
    minute's load average), at most ``MAX_HOLD`` (thirty students' PEs on two cores print seconds apart)."""
    load = os.getloadavg()[0] if load is None else load
    cpus = cpus or len(os.sched_getaffinity(0))
    return min(MAX_HOLD, HOLD * max(1.0, load / cpus))


class OutputMerger:
    """Turn per-PE text chunks of one stream into grouped, labelled lines."""

    def __init__(
        self,
        pes: Iterable[int],
        write: Callable[[str], object],
        hold: float | None = None,
        clock: Callable[[], float] = time.monotonic,
        own: Mapping[int, Mapping[str, object]] | None = None,
    ) -> None:
        self.write = write
        # PE -> [(pattern, placeholder)]: numbers only that PE prints (its pid), so that lines
        # differing only by them fold, e.g. "[PE 0-3] warning in process <pid>"
        self.own: dict[int, list[tuple[str, re.Pattern[str], str]]] = {
            pe: [
                (str(v), re.compile(rf"(?<![\w.]){re.escape(str(v))}(?![\w.])"), f"<{k}>")
                for k, v in values.items()
                if v
            ]
            for pe, values in (own or {}).items()
        }
        self.hold = busy_hold() if hold is None else hold
        self.clock = clock
        self.lines: dict[int, deque[tuple[float, str]]] = {pe: deque() for pe in pes}  # complete lines: (arrival, text)
        self.partial = {pe: "" for pe in pes}
        self.finished: set[int] = set()  # PEs that will print no more

    def feed(self, pe: int, text: str) -> None:
        """Add a chunk of PE ``pe``'s output."""
        now = self.clock()
        *complete, self.partial[pe] = (self.partial[pe] + text).split("\n")
        self.lines[pe].extend((now, line) for line in complete)

    def finish(self, pe: int) -> None:
        """PE ``pe`` is done: its unterminated last line counts as a line."""
        if self.partial[pe]:
            self.lines[pe].append((self.clock(), self.partial[pe]))
            self.partial[pe] = ""
        self.finished.add(pe)

    def _generic(self, pe: int, text: str) -> str:
        for value, pattern, placeholder in self.own.get(pe, ()):
            if value in text:
                text = pattern.sub(placeholder, text)
        return text

    def _emit_round(self, pes: list[int]) -> None:
        groups: dict[str, list[int]] = {}
        for pe in pes:
            text = self.lines[pe].popleft()[1]
            groups.setdefault(text, []).append(pe)
        if self.own and len(groups) > 1:  # fold lines that differ only by each PE's own numbers
            generic: dict[str, list[tuple[str, list[int]]]] = {}
            for text, group in groups.items():
                generic.setdefault(self._generic(group[0], text), []).append((text, group))
            groups = {}
            for common, members in generic.items():
                if len(members) == 1:
                    groups[members[0][0]] = members[0][1]
                else:
                    groups[common] = sorted(pe for _, group in members for pe in group)
        for text, group in groups.items():
            self.write(f"[PE {pe_ranges(group)}] {text}\n")

    def flush(self, final: bool = False) -> None:
        """Emit every line that is complete, or has waited long enough."""
        while True:
            ready = [pe for pe, q in self.lines.items() if q]
            if not ready:
                return
            waiting = [pe for pe in self.lines if not self.lines[pe] and pe not in self.finished]
            oldest = min(self.lines[pe][0][0] for pe in ready)
            if waiting and not final and self.clock() - oldest < self.hold:
                return
            self._emit_round(ready)

    def close(self) -> None:
        """Emit everything that is left, partial lines included."""
        for pe in self.lines:
            self.finish(pe)
        self.flush(final=True)


def merge_marked(stream: Iterable[str], write: Callable[[str], object], hold: float | None = None) -> None:
    """Read the lines of ``stream`` (one pipe the PEs of the race runner share) until it ends and
    ``write`` them as the notebook shows a cell's output: lines the PEs marked (``PE_LINE``) labelled
    ``[PE 2]`` and folded (``[PE 0-3] text``), other lines (the launcher's) as they come."""
    lines: queue.Queue[str | None] = queue.Queue()

    def read() -> None:
        for line in stream:
            lines.put(line)
        lines.put(None)

    threading.Thread(target=read, daemon=True).start()
    hold = busy_hold() if hold is None else hold
    merger: OutputMerger | None = None
    while True:
        try:
            line = lines.get(timeout=hold / 2)
        except queue.Empty:
            line = ""
        if line is None:
            break
        text = line.rstrip("\n")
        marked, done = _MARKED.match(text), _DONE.match(text)
        found = marked or done
        if found and merger is None:
            merger = OutputMerger(range(int(found["npes"])), write, hold=hold)
        if done:
            cast(OutputMerger, merger).finish(int(done["pe"]))
        elif marked:
            cast(OutputMerger, merger).feed(int(marked["pe"]), marked["text"] + "\n")
        elif line:
            write(line if line.endswith("\n") else line + "\n")
        if merger is not None:
            merger.flush()
    if merger is not None:
        merger.close()
