"""``SHMEM_CTX_INVALID`` as OpenSHMEM 1.5 has it: its ``quiet`` and ``fence`` do nothing (PE side).

A team program stands ``shmem.CTX_INVALID`` in for the context of a team this PE is not in
(``team.create_ctx()`` failed) and still calls ``ctx.quiet()``; OpenSHMEM 1.5 says that does
nothing, and Open MPI's OSHMEM 1.4 dereferences the handle and the PE dies with SIGSEGV
(:data:`shmem_notebook.deviations.CTX_INVALID`). :func:`install` makes ``Ctx.quiet`` and
``Ctx.fence`` of an invalid context return at once on every library (``Ctx.destroy`` already
does); a put, get or atomic given an invalid context is refused by :mod:`.mistakes`.
"""

from __future__ import annotations

import functools
from typing import TYPE_CHECKING, Any

from .patches import Patches

__all__ = ["install"]

if TYPE_CHECKING:
    from collections.abc import Callable


def _valid_only(original: Callable[[Any], object]) -> Callable[[Any], None]:
    @functools.wraps(original)
    def method(self: Any) -> None:
        if self:  # a Ctx is false when it is SHMEM_CTX_INVALID (never created, or destroyed)
            original(self)

    return method


def install(shmem: Any) -> Callable[[], None]:
    """Replace ``Ctx.quiet`` and ``Ctx.fence``; return the undo."""
    patches = Patches()
    for name in ("quiet", "fence"):
        patches.set(shmem.Ctx, name, _valid_only(getattr(shmem.Ctx, name)))
    return patches.undo
