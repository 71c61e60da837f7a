"""What a race-checked cell leaves for the next one: its operations still in flight (client side).

A cell boundary orders everything (every PE finished the cell before the next starts) but
completes no put or ``*_nbi``: an operation no ``quiet``, barrier or matched wait completed
by the end of its cell may still race with the next cell. :func:`~.happens_before.analyse` starts
the next cell's trace with them (each labelled with the cell it was issued in) and returns
what is still in flight after that cell.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from ..operations import CALLS, FIELD

__all__ = ["Carry"]

_R = FIELD["rma"]


@dataclass
class Carry:
    """``ops``: PE -> ``[(event, cell label)]``, the operations still in flight, in issue order;
    ``after``: what the next cell must follow for them to apply (set by the cell path)."""

    ops: dict[int, list[tuple[list[Any], str | None]]] = field(default_factory=dict)
    after: object = None

    def __len__(self) -> int:
        return sum(len(ops) for ops in self.ops.values())

    def cells(self) -> list[str | None]:
        """The labels of the cells the operations come from, in order of first appearance."""
        seen: list[str | None] = []
        for ops in self.ops.values():
            for _, label in ops:
                if label not in seen:
                    seen.append(label)
        return seen

    def private(self, npes: int) -> list[list[list[int]]]:
        """Per PE, ``[lo, hi]`` of the private buffers its non-blocking operations in flight use: the
        next cell's recording keeps that PE's accesses there (plain data, for ``race_start``)."""
        found: list[list[list[int]]] = [[] for _ in range(npes)]
        for pe, ops in self.ops.items():
            for e, _ in ops:
                if e[0] == "rma" and e[_R["lspace"]] == "priv" and getattr(CALLS.get(e[1]), "nbi", False) and pe < npes:
                    found[pe].append([e[_R["llo"]], e[_R["lhi"]]])
        return found
