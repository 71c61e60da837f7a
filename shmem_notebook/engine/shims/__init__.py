"""Every adaptation of shmem4py to the OpenSHMEM library under this PE, in one ordered table (PE side).

A :class:`Shim` names what it adapts, says when it applies and installs itself, returning
its undo. :func:`install` applies the table in order at PE start (collective: the teams
shim reserves symmetric memory on every PE); :func:`uninstall` undoes it, newest first.
Another library changes this table, not the modules that use shmem4py.

- :mod:`.numpy2`, :mod:`.scalars`: shmem4py 1.0.0 and code of its NumPy 1 era under NumPy 2.
- :mod:`.missing`: OpenSHMEM 1.5 routines the library lacks (:class:`UnsupportedError`).
- :mod:`.pitfalls`: guards against Open MPI 4.1.4's atomic bugs.
- :mod:`.late_zeroing`: zeroed allocations zero on every PE before any PE returns (Open MPI zeroes late).
- :mod:`.ctx_invalid`: ``quiet``/``fence`` of ``SHMEM_CTX_INVALID`` do nothing, as in OpenSHMEM 1.5.
- teams (:mod:`shmem_notebook.engine.teams`): native, or emulated on a 1.4 library.
- :mod:`.signals`: signal words noted as they are made (the race recording reads them).
- :mod:`.locks`: a symmetric one-element int64 array (a declared ``lock=int64[1]``) taken as a lock.
- :mod:`.mistakes`: wrong PEs, dtypes, lengths, non-symmetric buffers refused in one sentence.
- :mod:`.board`: blocking calls noted on the job's wait board (long waits are let sleep).
- :mod:`.diagnostics`: stack dumps on SIGUSR1, ``global_exit`` noted.
"""

from __future__ import annotations

from collections import namedtuple
from typing import TYPE_CHECKING, Any

from ..context import this_pe
from . import (
    board,
    ctx_invalid,
    diagnostics,
    late_zeroing,
    locks,
    missing,
    mistakes,
    numpy2,
    pitfalls,
    scalars,
    signals,
)
from .missing import UnsupportedError

__all__ = ["Shim", "SHIMS", "UnsupportedError", "install", "uninstall", "installed"]

if TYPE_CHECKING:
    from collections.abc import Callable, Collection

#: ``applies(shmem) -> bool``; ``install(shmem) -> undo()``
Shim = namedtuple("Shim", "name adapts applies install")


def _always(shmem: Any) -> bool:
    return True


def _pitfalls(shmem: Any) -> Callable[[], None]:
    pitfalls.install(shmem)
    return lambda: pitfalls.uninstall(shmem)


def _teams(shmem: Any) -> Callable[[], object]:
    from .. import native_teams, teams  # they import .patches from here

    if teams.install(shmem) != "native":
        return teams.uninstall
    undo_guards = native_teams.install(shmem)  # the library's own teams, guarded
    return lambda: (undo_guards(), teams.uninstall())  # type: ignore[func-returns-value]  # both undos, in order


#: in the order they are installed
SHIMS = [
    Shim("numpy2_array", "shmem.array under NumPy 2", numpy2.applies, numpy2.install),
    Shim(
        "numpy2_scalars",
        "1-element arrays passed as numbers (NumPy 1 era code) under NumPy 2",
        scalars.applies,
        scalars.install,
    ),
    Shim("missing", "routines the library lacks", _always, missing.install),
    Shim("pitfalls", "Open MPI 4.1.4's atomic bugs (guards chosen by pitfalls.decide)", _always, _pitfalls),
    Shim(
        "late_zeroing",
        "shmem_calloc zeroes after its barrier (Open MPI): zero, then sync, before any PE returns (collective)",
        late_zeroing.applies,
        late_zeroing.install,
    ),
    Shim("ctx_invalid", "quiet/fence of SHMEM_CTX_INVALID do nothing (OpenSHMEM 1.5)", _always, ctx_invalid.install),
    Shim("teams", "teams: native on 1.5, emulated on 1.4 (collective)", _always, _teams),
    Shim(
        "signals",
        "signal words noted as they are made (a race-checked cell reads their values first)",
        _always,
        signals.install,
    ),
    Shim(
        "locks",
        "a symmetric one-element int64 array (a declared lock=int64[1]) taken as a lock; other arrays refused",
        _always,
        locks.install,
    ),
    Shim(
        "mistakes",
        "calls the library would crash on or truncate silently, refused before it sees them",
        _always,
        mistakes.install,
    ),
    Shim(
        "board",
        "blocking calls noted on the wait board, so that the client lets long waits sleep",
        _always,
        board.install,
    ),
    Shim("diagnostics", "stack dumps and global_exit notes for the client", _always, diagnostics.install),
]


def install(shmem: Any, exclude: Collection[str] = ()) -> list[str]:
    """Install every shim of :data:`SHIMS` that applies, in order, but those named in ``exclude``
    (a program exported from a notebook leaves out ``diagnostics``, which serves the notebook);
    return their names. Once installed, another call does nothing. The first call of every entry point
    that imports shmem4py (the engine, the race runner, an exported script): it keeps ``shmem`` as
    ``this_pe.shmem`` for every room of the PE side. Collective."""
    this_pe.shmem = shmem
    if not this_pe.shims:
        for shim in SHIMS:
            if shim.name not in exclude and shim.applies(shmem):
                this_pe.shims.append((shim.name, shim.install(shmem)))
    return installed()


def uninstall() -> None:
    """Undo the installed shims, newest first."""
    while this_pe.shims:
        this_pe.shims.pop()[1]()


def installed() -> list[str]:
    """Names of the shims installed, in order."""
    return [name for name, _ in this_pe.shims]
