"""Attributes replaced on shmem4py, and how to put them back (PE side)."""

__all__ = ["Patches"]

_ABSENT = object()


class Patches:
    """Replacements made by one shim; :meth:`undo` restores what was there, newest first."""

    def __init__(self):
        self._saved = []

    def set(self, owner, name, value):
        """``setattr(owner, name, value)``, remembering the attribute's own previous value."""
        self._saved.append((owner, name, vars(owner).get(name, _ABSENT)))
        setattr(owner, name, value)

    def undo(self):
        for owner, name, old in reversed(self._saved):
            if old is _ABSENT:
                delattr(owner, name)
            else:
                setattr(owner, name, old)
        self._saved.clear()
