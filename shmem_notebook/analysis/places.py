"""Where a recorded line is, for the race report (client side).

The PEs record a line of the cell as it is, and a line of code outside it (a helper defined in
an earlier cell, the user's module, ``exec``'d code: see ``shmem_notebook.engine.record.outside``)
as ``place * RACE_LINES + line``, with a table of the places in their recordings (``places``)
and the lines that called compiled code (``compiled``). :func:`where` names a line
(``"line 7"``, ``"In [3] line 4"``, ``"kernels.py:12"``, ``"exec'd code line 3 (called at line 9)"``);
:func:`name_places` names the accesses and hints of races; :func:`notes` says which lines called
compiled code. Pure Python over plain data.
"""

from __future__ import annotations

import dataclasses
import hashlib
import os
import re
from typing import TYPE_CHECKING, Any

from ..protocol import RACE_LINES

__all__ = ["cell_labels", "name_places", "namer", "notes", "places_of", "where"]

if TYPE_CHECKING:
    from collections.abc import Callable, Iterable, Mapping
    from typing import Protocol

    from .happens_before import Access, Race

    class _Record(Protocol):
        code: str
        count: int | None
        part: int
        number: int


_LINE = re.compile(r"\bline (\d+)")


def places_of(traces: Mapping[int, dict[str, Any]]) -> dict[int, Any]:
    """``{number: place}`` over every PE's recording (a place has one number on every PE)."""
    found: dict[int, Any] = {}
    for data in traces.values():
        found.update(data.get("places") or {})
    return found


def cell_labels(history: Iterable[_Record] | None) -> dict[str, str]:
    """``{sha1 of a cell's code: "In [3]"}`` of a job's history (``cell 3`` outside a notebook; the latest run wins)."""
    labels: dict[str, str] = {}
    for record in history or ():
        label = (
            f"cell {record.number}"
            if record.count is None
            else f"In [{record.count}]" + (f".{record.part}" if record.part > 1 else "")
        )
        labels[hashlib.sha1(record.code.strip().encode()).hexdigest()] = label  # as the PEs hash it
    return labels


def where(line: int, places: Mapping[int, Any], cells: Mapping[str, str] | None = None) -> str:
    """A recorded ``line`` named for the report: ``"line 7"`` for the cell's own lines."""
    number, rest = divmod(line, RACE_LINES)
    place = places.get(number) if number else None
    if place is None:
        return f"line {line}"
    kind = place[0]
    if kind == "cell":
        return f"{(cells or {}).get(place[1]) or 'an earlier cell'} line {rest}"
    if kind == "file":
        return f"{os.path.basename(place[1])}:{rest}"
    return f"exec'd code line {rest} (called at {where(place[1], places, cells)})"


def namer(traces: Mapping[int, dict[str, Any]], history: Iterable[_Record] | None = None) -> Callable[[int], str]:
    """``name(line)``: :func:`where` with the places of ``traces`` and the cells of ``history``."""
    places = places_of(traces)
    cells = cell_labels(history) if places else None
    return lambda line: where(line, places, cells)


def _outside(line: int) -> bool:
    return line >= RACE_LINES


def name_places(
    races: list[Race], traces: Mapping[int, dict[str, Any]], history: Iterable[_Record] | None = None
) -> list[Race]:
    """``races`` with the accesses outside the cell named (``Access.place``), the own places of accesses
    made in functions the cell called (``own_file``, ``own_line``, ``function``) and so the hints' lines;
    a fix that would edit code outside the cell is dropped (``fix`` None: the hint says what to change)."""
    places = places_of(traces)
    functions: dict[int, str] = {}
    for data in traces.values():
        functions.update(data.get("functions") or {})
    if not places and not functions:
        return races
    cells = cell_labels(history)
    out: list[Race] = []
    for race in races:
        named = [int(m.group(1)) for m in _LINE.finditer(f"{race.hint} {race.fix or ''}")]
        lines = [a.line for a in race.accesses] + [a.own_line or 0 for a in race.accesses] + named
        if not any(_outside(line) for line in lines) and not any(a.own_line in functions for a in race.accesses):
            out.append(race)
            continue
        accesses = tuple(_own_place(a, places, cells, functions) for a in race.accesses)
        hint = _LINE.sub(lambda m: where(int(m.group(1)), places, cells), race.hint or "")
        fix = race.fix
        if fix is not None and any(_outside(int(m.group(1))) for m in _LINE.finditer(str(fix))):
            fix = None
        out.append(dataclasses.replace(race, accesses=accesses, hint=hint, fix=fix))
    return out


def _own_place(
    access: Access, places: Mapping[int, Any], cells: Mapping[str, str] | None, functions: Mapping[int, str]
) -> Access:
    """``access`` with its place named: its own place in a function (file, line, name), or its line's."""
    at = access.own_line
    if at is None:
        return dataclasses.replace(access, place=where(access.line, places, cells)) if _outside(access.line) else access
    number, line = divmod(at, RACE_LINES)
    place = places.get(number) if number else None
    own_file = None
    if place is not None:
        own_file = place[1] if place[0] == "file" else where(at, places, cells).rsplit(" line ", 1)[0]
    return dataclasses.replace(
        access,
        own_line=line,
        own_file=own_file,
        function=functions.get(at),
        place=where(at, places, cells) if number else None,
    )


def notes(
    traces: Mapping[int, dict[str, Any]],
    history: Iterable[_Record] | None = None,
    name: Callable[[int], str] | None = None,
) -> list[str]:
    """One line per line that called compiled code: ``"line 12 calls compiled code: its arrays counted as
    read and written"``; ``name(line)`` names a line (default: :func:`where`)."""
    name = name or namer(traces, history)
    lines = sorted({line for data in traces.values() for line in data.get("compiled") or ()})
    return [f"{name(line)} calls compiled code: its arrays counted as read and written" for line in lines]
