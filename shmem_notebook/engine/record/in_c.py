"""The recording's hot path in C (:mod:`shmem_notebook.native_record`) on this PE: the module,
loaded at its first use and given what its functions read, or None where it is not built (PE side).

Imports nothing of the recording: the record package gives it the layer's and the hooks' parts
(:func:`give`) once they are imported."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from ... import native_record
from ..context import this_pe

if TYPE_CHECKING:
    from collections.abc import Callable
    from types import FrameType

__all__ = ["give", "module"]


def give(
    depth: list[int],
    cell_files: set[str],
    line_of: list[Callable[[FrameType], int]],
    cell_line: Callable[[FrameType], int],
    python: dict[str, Callable[..., Any]],
) -> None:
    """What the C functions read: the layer's depth list, the cell files, ``layer.line_of`` (the function
    that finds a call's line: the layer's own ``cell_line``, also given, or the race runner's), and
    ``python``, the hooks that take the cases C leaves (``get_rest``, ``read``, ``set``,
    ``element_range``). The recording the hooks note into is given by ``hooks.install`` (``feed``)."""
    this_pe.record.given[:] = [depth, cell_files, line_of, cell_line, python]


def module() -> Any:
    """The C module, set up at its first use; None where it is not built or is switched off."""
    given, loaded = this_pe.record.given, this_pe.record.native
    if not loaded:
        found = native_record.load() if given else None
        if found is not None:
            found.setup(*given)
        loaded.append(found)
    return loaded[0]
