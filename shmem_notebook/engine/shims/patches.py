"""Attributes replaced on shmem4py, and how to put them back (PE side)."""

from __future__ import annotations

from typing import Any

__all__ = ["Patches"]

_ABSENT = object()


class Patches:
    """Replacements made by one shim; :meth:`undo` restores what was there, newest first."""

    def __init__(self) -> None:
        self._saved: list[tuple[Any, str, Any]] = []

    def set(self, owner: Any, name: str, value: Any) -> None:
        """``setattr(owner, name, value)``, remembering the attribute's own previous value."""
        self._saved.append((owner, name, vars(owner).get(name, _ABSENT)))
        setattr(owner, name, value)

    def undo(self) -> None:
        for owner, name, old in reversed(self._saved):
            if old is _ABSENT:
                delattr(owner, name)
            else:
                setattr(owner, name, old)
        self._saved.clear()
