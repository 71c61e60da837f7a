"""Fold per-PE values into PE ranges: ``[0, 1, 2, 5]`` -> ``'0-2,5'``.

Shared by both sides (plain definitions, no dependencies).
"""

from collections.abc import Hashable, Iterable, Mapping
from typing import TypeVar

__all__ = ["pe_ranges", "fold"]

K = TypeVar("K")
V = TypeVar("V", bound=Hashable)


def pe_ranges(pes: Iterable[int]) -> str:
    """``[0, 1, 2, 5]`` -> ``'0-2,5'``."""
    pes = sorted(set(pes))
    runs: list[str] = []
    start: int | None = None
    for i, pe in enumerate(pes):
        if start is None:
            start = pe
        if i + 1 == len(pes) or pes[i + 1] != pe + 1:
            runs.append(f"{start}" if start == pe else f"{start}-{pe}")
            start = None
    return ",".join(runs)


def fold(mapping: Mapping[K, V]) -> dict[V, list[K]]:
    """``{pe: value}`` -> ``{value: [pes]}``, in PE order of first appearance."""
    groups: dict[V, list[K]] = {}
    for key, value in sorted(mapping.items()):
        groups.setdefault(value, []).append(key)
    return groups
