"""The cell line that led to an access made inside a function (PE side).

A call the cell makes from its own top level (not inside a ``def``, ``lambda`` or ``class``) goes
through the ``top`` hook (:mod:`.hooks`), which notes the events the call recorded in
``recording.calls``: an ``array`` of first event, end, line (the calls of one line in a row are one
span). When the recording stops, :func:`place_calls` gives each of those events whose line is not
the call's the call's line as its ``line`` (a line of this cell, where a fix goes) and its own line
as ``at`` (a line of the cell inside a ``def``, or ``place * RACE_LINES + line`` in a module: see
:mod:`.outside`); :func:`functions` names the function each ``at`` is in (``"smooth"``,
``"Ring.send"``) from its file's text. Not in the race runner (:mod:`.script`), which numbers its
programs' lines itself.
"""

from __future__ import annotations

import ast
import linecache
from typing import TYPE_CHECKING, cast

from ...operations import EVENT_FIELDS
from ...protocol import RACE_LINES
from ..context import this_pe
from . import outside

if TYPE_CHECKING:
    from collections.abc import Iterable

    from .accesses import RaceRecording

__all__ = ["place_calls", "functions"]

_WIDTH: dict[str, int] = {kind: len(fields.split()) for kind, fields in EVENT_FIELDS.items()}


def place_calls(recording: RaceRecording) -> set[int]:
    """Move the events of the cell's top-level calls to their call's line, keeping their own in ``at``;
    the own lines (``at``) it kept."""
    kept: set[int] = set()
    if not this_pe.record.outside_enabled:  # the race runner numbers its programs' lines its own way
        return kept
    events, calls = recording.events, getattr(recording, "calls", ())
    for start, end, line in zip(calls[0::3], calls[1::3], calls[2::3]):
        for i in range(start, min(end, len(events))):
            e = events[i]
            own = e[2]
            if own == line or not own:
                continue
            width = _WIDTH[e[0]]
            new = [*e[:width], *[None] * (width - len(e))]
            new[2], new[-1] = line, own
            events[i] = new
            kept.add(own)
    return kept


def functions(lines: Iterable[int]) -> dict[int, str]:
    """``{at: function name}`` of the events' own lines ``lines`` (``at``, see :func:`place_calls`) whose
    function is found in its file."""
    names: dict[int, str]
    trees: dict[str, list[tuple[int, int, str]]]
    names, trees = {}, {}
    for at in lines:
        number, line = divmod(at, RACE_LINES)
        filename = _filename(number)
        if filename is None:
            continue
        if filename not in trees:
            trees[filename] = _spans(filename)
        inside = [(lo, name) for lo, hi, name in trees[filename] if lo <= line <= hi]
        if inside:
            names[at] = max(inside)[1]
    return names


def _filename(number: int) -> str | None:
    """The file of a place (0: the cell being recorded), None when it is not a file."""
    if not number:
        return next(iter(this_pe.record.cell_files), None)
    place = outside.places().get(number)
    return place[1] if place is not None and place[0] == "file" else None


def _spans(filename: str) -> list[tuple[int, int, str]]:
    """``[(first line, last line, qualified name)]`` of the functions in ``filename``'s text."""
    try:
        tree = ast.parse("".join(linecache.getlines(filename)))
    except (SyntaxError, ValueError):
        return []
    spans: list[tuple[int, int, str]] = []

    def walk(node: ast.AST, prefix: str) -> None:
        for child in ast.iter_child_nodes(node):
            if isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
                name = prefix + child.name
                if not isinstance(child, ast.ClassDef):
                    spans.append((child.lineno, cast(int, child.end_lineno), name))
                walk(child, name + ".")
            else:
                walk(child, prefix)

    walk(tree, "")
    return spans
