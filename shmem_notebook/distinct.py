"""A PE's recorded events as they cross to the client: each distinct event once, and per event which
one it is.

A loop records the same few events in every iteration (the 1-D stencil: 7 per iteration, 11
distinct in 1,404); pickled one by one they cost the PE and the client a microsecond each, and the
client's folding of repeated iterations (:mod:`.analysis.repeats`) hashes every one of them again.
:class:`Events` pickles as the distinct events and the index, unpickles as the same list (an
event that repeats is one object at each of its positions) with the index kept as ``ids``, which
the folding compares instead of the events. Shared by both sides (no dependencies).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, cast

if TYPE_CHECKING:
    from collections.abc import Callable, Sequence
    from typing import Protocol

    class _Numbered(Protocol):
        table: list[Any]
        ids: list[int]


__all__ = ["Events", "numbering", "prepended"]


class Events(list):  # type: ignore[type-arg]  # the runtime base stays a plain list
    """A PE's events (a list) that knows which of them are the same: ``table``, the distinct events in
    order of first appearance, and ``ids``, each event's position in it; both None if not known.
    Pickles as ``table`` and ``ids`` when known, as the list otherwise. Read it, change nothing in it:
    ``ids`` would no longer say which event is which."""

    table: list[Any] | None = None
    ids: list[int] | None = None

    @classmethod
    def numbered(cls, events: list[Any], distinct: Callable[[list[Any]], tuple[list[Any], list[int]]]) -> Events:
        """``events`` with their ``table`` and ``ids`` from ``distinct(events)`` (the C module's)."""
        out = cls(events)
        out.table, out.ids = distinct(events)
        return out

    def __reduce__(self) -> tuple[Callable[..., Events], tuple[Any, ...]]:
        return (_rebuilt, (self.table, self.ids)) if self.ids is not None else (Events, (list(self),))


def _rebuilt(table: list[Any], ids: list[int]) -> Events:
    out = Events([table[i] for i in ids])
    out.table, out.ids = table, ids
    return out


def numbering(events: Sequence[Any]) -> tuple[list[Any], list[int]] | None:
    """``(table, ids)`` of ``events`` if it is an :class:`Events` whose repeats are known (and that
    still has as many events as ``ids``), else None."""
    ids = getattr(events, "ids", None)
    return (cast("_Numbered", events).table, ids) if ids is not None and len(ids) == len(events) else None


def prepended(head: list[Any], events: list[Any]) -> list[Any]:
    """``head + events``: an :class:`Events` whose repeats are known when those of ``events`` are (each
    event of ``head`` its own), else a list."""
    known = numbering(events)
    if known is None:
        return head + events
    out = Events(head + events)
    out.table, out.ids = head + known[0], [*range(len(head)), *map(len(head).__add__, known[1])]
    return out
