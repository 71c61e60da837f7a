"""What a capped trace lets the race analysis check (client side).

A PE whose trace hit the cap (:data:`shmem_notebook.operations.CAP`) recorded nothing after
it, not even its barriers: checking the other PEs' later accesses against its early ones
would report races a barrier it did reach orders. :func:`cut` keeps, on every PE, the
events up to the last world synchronisation every capped PE recorded, then the events
after it up to the first wait or team synchronisation (whose partner may be past the cap).
"""

from __future__ import annotations

from typing import Any

from ..folding import pe_ranges
from ..operations import FIELD
from .model import COLLECTIVE_SYNCS as _WORLD_SYNCS

__all__ = ["Checked", "cut"]


class Checked(dict):  # type: ignore[type-arg]  # the runtime base stays a plain dict
    """PE -> the line its check stopped at (the cap, or the first event left out), None: all of it."""

    def describe(self) -> str:
        """``'PE 0-1 up to line 7; PE 2-3 the whole cell'``."""
        groups: dict[int | None, list[int]] = {}
        for pe, line in sorted(self.items()):
            groups.setdefault(line, []).append(pe)
        parts = [
            f"PE {pe_ranges(pes)} " + ("the whole cell" if line is None else f"up to line {line}")
            for line, pes in sorted(groups.items(), key=lambda g: min(g[1]))
        ]
        return "; ".join(parts)


def _members(e: list[Any]) -> Any:
    index = FIELD[e[0]]["members"]
    return e[index] if len(e) > index else None


def _world(e: list[Any]) -> bool:
    """A synchronisation of every PE (barrier, sync_all, allocation, world collective)."""
    collective = e[0] == "coll" or (e[0] == "sync" and e[1] in _WORLD_SYNCS)
    return collective and _members(e) is None


def _partner(e: list[Any]) -> bool:
    """An event another PE's later events may complete: a wait, a team synchronisation."""
    collective = e[0] == "coll" or (e[0] == "sync" and e[1] in _WORLD_SYNCS)
    return e[0] == "wait" or (collective and _members(e) is not None)


def cut(traces: dict[int, dict[str, Any]]) -> tuple[dict[int, dict[str, Any]], Checked | None]:
    """``(traces, checked)``: the traces cut as the module says and a :class:`Checked`, or the
    traces unchanged and None when no PE's trace was capped."""
    capped = [pe for pe, data in traces.items() if data.get("truncated") is not None]
    if not capped:
        return traces, None
    epochs = min(sum(map(_world, traces[pe]["events"])) for pe in capped)
    out: dict[int, dict[str, Any]]
    out, checked = {}, Checked()
    for pe, data in traces.items():
        kept: int | None
        events, kept, seen = data["events"], None, 0
        for i, e in enumerate(events):
            if seen == epochs and (_world(e) or _partner(e)):
                kept = i
                break
            seen += _world(e)
        if kept is None and pe not in capped:
            checked[pe] = None
            out[pe] = data
            continue
        checked[pe] = data.get("truncated") if kept is None else events[kept][2]
        kept = len(events) if kept is None else kept
        out[pe] = dict(data, events=events[:kept])
    return out, checked
