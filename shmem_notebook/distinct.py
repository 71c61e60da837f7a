"""A PE's recorded events as they cross to the client: each distinct event once, and per event which
one it is.

A loop records the same few events in every iteration (the 1-D stencil: 7 per iteration, 11
distinct in 1,404); pickled one by one they cost the PE and the client a microsecond each, and the
client's folding of repeated iterations (:mod:`.analysis.repeats`) hashes every one of them again.
:class:`Events` pickles as the distinct events and the index, unpickles as the same list (an
event that repeats is one object at each of its positions) with the index kept as ``ids``, which
the folding compares instead of the events. Shared by both sides (no dependencies).
"""

__all__ = ["Events", "numbering"]


class Events(list):
    """A PE's events (a list) that knows which of them are the same: ``table``, the distinct events in
    order of first appearance, and ``ids``, each event's position in it; both None if not known.
    Pickles as ``table`` and ``ids`` when known, as the list otherwise. Read it, change nothing in it:
    ``ids`` would no longer say which event is which."""

    table: list | None = None
    ids: list[int] | None = None

    @classmethod
    def numbered(cls, events, distinct):
        """``events`` with their ``table`` and ``ids`` from ``distinct(events)`` (the C module's)."""
        out = cls(events)
        out.table, out.ids = distinct(events)
        return out

    def __reduce__(self):
        return (_rebuilt, (self.table, self.ids)) if self.ids is not None else (Events, (list(self),))


def _rebuilt(table, ids):
    out = Events([table[i] for i in ids])
    out.table, out.ids = table, ids
    return out


def numbering(events):
    """``(table, ids)`` of ``events`` if it is an :class:`Events` whose repeats are known (and that
    still has as many events as ``ids``), else None."""
    ids = getattr(events, "ids", None)
    return (events.table, ids) if ids is not None and len(ids) == len(events) else None
