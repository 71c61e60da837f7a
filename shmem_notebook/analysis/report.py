"""The race report (client side): one line per race, then the verdict.

Written here once for the ``race`` stage of a cell (:mod:`shmem_notebook.cells.race_stage`) and for
the command-line runner (:mod:`shmem_notebook.race`). The verdict is a plain ``no races found``
(``3 races found``) only when every PE sent its trace, ran to the end and no trace reached the
cap; otherwise it says what was checked and why the rest was not::

    no races found in what was checked: PE 0-1 up to line 6; the cell raised ValueError on PE 0-1 at line 6 (...)
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from ..folding import pe_ranges
from ..words import plural

__all__ = ["Stop", "Words", "CELL", "PROGRAM", "stops_of", "verdict", "report_lines"]

if TYPE_CHECKING:
    from collections.abc import Callable, Hashable, Iterable, Mapping, Sequence
    from typing import Protocol, TypeVar

    from .happens_before import Race
    from .partial import Checked

    _V = TypeVar("_V", bound=Hashable)

    class _Ended(Protocol):
        errors: dict[int, tuple[str, str, str]]
        outcome: str
        waiting: dict[int, Any]
        pending: list[int]


@dataclass(frozen=True)
class Words:
    """How the report names what was traced: ``cell``/``trace`` in a notebook, ``program``/``recording`` for the
    runner."""

    subject: str
    trace: str
    cap_advice: str


CELL = Words("cell", "trace", "trace fewer iterations")
PROGRAM = Words("program", "recording", "run fewer iterations, or raise --cap")


@dataclass(frozen=True)
class Stop:
    """Why a PE's trace ends before the end of the cell: ``the cell {what} on PE 0 at line {line}{after}``."""

    line: int | None = None  # None: where it stopped is not known
    what: str = "stopped"
    after: str = ""


def stops_of(
    result: _Ended, timeout: float | None = None, raised_line: Callable[[str], int | None] | None = None
) -> dict[int, Stop]:
    """``{pe: Stop}`` for a cell's :class:`~shmem_notebook.cells.CellResult`: the PEs that raised, were
    interrupted, stopped at ``timeout``, waited for PEs that raised or could not be stopped.
    ``raised_line(traceback)``: the cell line of an error."""
    line_of = raised_line or (lambda tb: None)
    stops: dict[int, Stop] = {}
    for pe, (ename, _, tb) in result.errors.items():
        if ename == "KeyboardInterrupt" and result.outcome == "timeout":
            stops[pe] = Stop(line_of(tb), f"was stopped by its timeout of {timeout:g} s" if timeout else "timed out")
        elif ename == "KeyboardInterrupt" and result.outcome == "interrupted":
            stops[pe] = Stop(line_of(tb), "was interrupted")
        else:
            stops[pe] = Stop(line_of(tb), f"raised {ename}")
    for pe, (line, _) in (result.waiting or {}).items():
        stops[pe] = Stop(line, "was stopped", ", where it waited for the PEs that raised")
    for pe in result.pending:
        if pe not in stops:
            stops[pe] = Stop(None, "did not stop (blocked in OpenSHMEM)" if result.outcome != "died" else "died")
    return stops


def _line(line: int) -> str:
    return f"line {line}"


def _plural(count: int, word: str) -> str:
    return plural(count, word)


def verdict(
    races: Sequence[Race],
    traces: Mapping[int, dict[str, Any]],
    npes: int,
    checked: Checked | None = None,
    stops: Mapping[int, Stop] | None = None,
    words: Words = CELL,
    where: Callable[[int], str] = _line,
    after: str = "",
    cost: str = "",
) -> str:
    """The summary line. ``traces``: ``{pe: trace data}`` of the PEs that sent one; ``checked``: the
    :class:`~shmem_notebook.analysis.partial.Checked` of a capped trace (None: no cap reached);
    ``stops``: ``{pe: Stop}``; ``where(line)``: how a line is named; ``after``, ``cost``: added to
    the parenthesis (``, after what In [4] left in flight``, ``, +0.02 s``)."""
    stops = stops or {}
    count = len(races)
    found = f"{_plural(count, 'race')} found" if count else "no races found"
    missing = [pe for pe in range(npes) if pe not in traces]
    if checked is not None or missing or any(pe in traces for pe in stops):
        found += f" in what was checked: {_what_was_checked(traces, missing, checked, stops, words, where)}"
    ops = sum(data["ops"] for data in traces.values())
    return f"{found} ({words.subject} traced: {_plural(ops, 'operation')} on {_plural(len(traces), 'PE')}{after}{cost})"


def _what_was_checked(
    traces: Mapping[int, dict[str, Any]],
    missing: list[int],
    checked: dict[int, int | None] | None,
    stops: Mapping[int, Stop],
    words: Words,
    where: Callable[[int], str],
) -> str:
    """``PE 0-1 up to line 6; PE 2 sent no trace; the cell raised ValueError on PE 0-1 at line 6``."""
    reach: dict[int, str] = {}
    for pe in sorted(traces):
        cap, stop = (checked or {}).get(pe), stops.get(pe)
        if cap is not None:
            reach[pe] = f"up to {where(cap)}"
        elif stop is not None:
            reach[pe] = f"up to {where(stop.line)}" if stop.line is not None else "up to where it stopped"
        else:
            reach[pe] = f"the whole {words.subject}"
    for pe in missing:
        reach[pe] = f"sent no {words.trace}"
    parts = [f"PE {pe_ranges(pes)} {text}" for text, pes in _groups(reach)]
    if checked is not None:
        caps = [data.get("cap") for data in traces.values() if data.get("truncated") is not None]
        cap = max([c for c in caps if c] or [0])
        parts.append(
            f"accesses after that were not checked (a PE's {words.trace} reached the cap of {cap:,} "
            f"events: {words.cap_advice})"
        )
    for stop, pes in _groups(stops):
        at = f" at {where(stop.line)}" if stop.line is not None else ""
        parts.append(f"the {words.subject} {stop.what} on PE {pe_ranges(pes)}{at}{stop.after}")
    return "; ".join(parts)


def _groups(per_pe: Mapping[int, _V]) -> list[tuple[_V, list[int]]]:
    """``[(value, [pes])]`` of a ``{pe: value}``, in the order of each value's first PE."""
    groups: dict[_V, list[int]] = {}
    for pe, value in sorted(per_pe.items()):
        groups.setdefault(value, []).append(pe)
    return list(groups.items())


def report_lines(
    races: Sequence[Race],
    traces: Mapping[int, dict[str, Any]],
    npes: int,
    show: Callable[[Race], str] = str,
    notes: Iterable[str] = (),
    **options: Any,
) -> list[str]:
    """The report's lines (without newlines): ``show(race)`` for each race, the ``notes`` (lines that
    called compiled code, see :mod:`.places`), then the :func:`verdict` (``options``: its keywords);
    one line saying nothing was checked when no PE sent its trace."""
    lines = [show(race) for race in races] + list(notes)
    if not traces:
        words = options.get("words", CELL)
        return lines + [f"race check: no PE sent its {words.trace}, so nothing was checked"]
    return lines + [verdict(races, traces, npes, **options)]
