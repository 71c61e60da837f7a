"""What the race runner (:mod:`shmem_notebook.race`) makes of the PEs' recordings: the races over
all of them with one number per file, the report with ``file:line`` for the lines, the timeline.

Each PE numbers the files it ran in its own order; :func:`numbered` gives every file one number on
every PE, and a recorded line is ``number * RACE_LINES + line``. Client side: nothing here imports
shmem4py.
"""

from __future__ import annotations

import os
import re
import shlex
from typing import TYPE_CHECKING, Any, TypeAlias

from .analysis.happens_before import find_races, format_indices
from .analysis.partial import cut
from .analysis.places import notes
from .analysis.report import PROGRAM, Stop, report_lines
from .folding import pe_ranges
from .protocol import RACE_LINES
from .words import plural

if TYPE_CHECKING:
    from collections.abc import Callable, Sequence

    from .analysis.happens_before import Access, Race
    from .trace.cell_trace import Trace

    #: ``{pe: what the PE wrote}`` (:mod:`shmem_notebook.engine.record.script`)
    Reports: TypeAlias = dict[int, dict[str, Any]]

__all__ = ["analyse", "numbered", "where", "format_race", "report", "save_timeline"]


def analyse(reports: Reports) -> tuple[list[Race], dict[int, str], Reports, int]:
    """``(races, files, traces, npes)``: the races over every PE's recording, with the lines renumbered so
    that one file has one number on every PE; ``files`` maps number -> path."""
    files = numbered(reports)
    numbers = {p: n for n, p in files.items()}
    traces: Reports = {}
    for pe, report in reports.items():
        data = report.get("data")
        if data is None:
            continue
        local = {n: numbers[p] for n, p in report["files"].items()}
        data = dict(
            data,
            events=[_renumber(e, local) for e in data["events"]],
            compiled=[_renumbered(line, local) for line in data.get("compiled") or ()],
        )
        if data.get("truncated"):
            data["truncated"] = _renumbered(data["truncated"], local)
        traces[pe] = data
    npes = max([r.get("npes", 0) for r in reports.values()] + [0])
    return (find_races(traces, npes) if traces else []), files, traces, npes


def numbered(reports: Reports) -> dict[int, str]:
    """``{number: path}``: one number per file the PEs ran, the same on every PE."""
    files: dict[int, str]
    numbers: dict[str, int]
    files, numbers = {}, {}
    for pe in sorted(reports):
        for _, path in sorted(reports[pe]["files"].items()):
            if path not in numbers:
                numbers[path] = len(numbers) + 1
                files[numbers[path]] = path
    return files


def _renumbered(line: int, local: dict[int, int]) -> int:
    number, rest = divmod(line, RACE_LINES)
    return local[number] * RACE_LINES + rest if number in local else line


def _renumber(event: Sequence[Any], local: dict[int, int]) -> list[Any]:
    event = list(event)
    event[2] = _renumbered(event[2], local)  # every kind of event has its line third
    return event


def where(line: int, files: dict[int, str]) -> str:
    """``prog.py:12`` for a recorded line."""
    number, rest = divmod(line, RACE_LINES)
    if number not in files:
        return "an unknown line" if not line else f"line {line}"
    path = files[number]
    shown = os.path.relpath(path) if not os.path.relpath(path).startswith("..") else path
    return f"{shown}:{rest}"


def format_race(race: Race, files: dict[int, str]) -> str:
    """``str(race)`` with ``file:line`` for the lines."""

    def side(access: Access) -> str:
        return f"PE {pe_ranges(access.pes or (access.pe,))} {where(access.line, files)} {access.op} ({access.mode})"

    hint = re.sub(r"\bline (\d+)", lambda m: where(int(m.group(1)), files), race.hint)
    first, second = race.accesses
    return (
        f"RACE {race.array}{format_indices(race.indices, race.shape)} on PE {pe_ranges(race.pes or (race.pe,))}: "
        f"{side(first)} / {side(second)} are unordered; {hint}"
    )


def report(
    races: list[Race],
    files: dict[int, str],
    traces: Reports,
    npes: int,
    write: Callable[[str], object] = print,
    status: dict[int, int] | None = None,
) -> None:
    """The race report, as the notebook's ``--race`` prints it after a cell (:mod:`.analysis.report`);
    ``status``: ``{pe: exit status}`` (a PE that exited with another status than 0 did not run to its end)."""
    stops = {pe: Stop(None, f"exited with status {code}") for pe, code in (status or {}).items() if code}
    for line in report_lines(
        races,
        traces,
        npes,
        show=lambda race: format_race(race, files),
        checked=cut(traces)[1],
        stops=stops,
        words=PROGRAM,
        where=lambda line: where(line, files),
        notes=notes(traces, name=lambda line: where(line, files)),
    ):
        write(line)


def save_timeline(
    reports: Reports,
    files: dict[int, str],
    npes: int,
    path: str,
    command: Sequence[str],
    write: Callable[[str], object] = print,
    what: str = "the program",
    races: Sequence[Race] = (),
) -> Trace:
    """Write the PEs' timelines (``--trace FILE``) as :meth:`Trace.save` does for a cell; ``what`` the run is;
    ``races``: the run's, drawn in the Perfetto export as for a cell (flow arrows between their accesses)."""
    from .trace.cell_trace import Trace
    from .trace.ends import ends, said

    numbers = {p: n for n, p in files.items()}
    sent: Reports = {}
    for pe, report in reports.items():
        timeline = (report.get("data") or {}).get("timeline")
        if timeline:
            local = {n: numbers[p] for n, p in report["files"].items() if p in numbers}
            events = [dict(e, line=_renumbered(e["line"], local) if e["line"] else None) for e in timeline["events"]]
            sent[pe] = dict(timeline, events=events)
    name = lambda line: where(line, files)  # noqa: E731
    stops = {pe: Stop(None, f"exited with status {r['status']}") for pe, r in reports.items() if r.get("status")}
    program = next((w for w in command if w.endswith(".py")), command[-1])
    cell = program if what == "the program" else f"{program}, {what}"
    meta = {"job": shlex.join(command), "library": os.path.basename(command[0]), "cell": cell, "what": what}
    trace = Trace(list(sent.values()), npes=npes, meta=meta, ends=ends(sent, npes, stops, name), where=name)
    trace.races = list(races)
    trace.save(path)
    cut = f"; cut short: {said(trace.ends)}" if trace.cut else ""
    write(f"trace: {plural(len(trace.events), 'call')} on {plural(npes, 'PE')} written to {path}{cut}")
    return trace
