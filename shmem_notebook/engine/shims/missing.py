"""OpenSHMEM 1.5 routines the library under this PE lacks: one error naming the library and
what to use instead (PE side).

shmem4py 1.0.0 wraps OpenSHMEM 1.5; Open MPI 4.1.4's OSHMEM implements 1.4. A routine the
library lacks ends, in shmem4py, in a bare ``NotImplementedError: shmem_long_put_signal``
(or does not reach C at all). :func:`install` makes every such call raise
:class:`UnsupportedError` (still a ``NotImplementedError``) with one sentence from
:func:`explain`: shmem4py's error check is wrapped (the error path only: calls that work
are not slowed) and, on a library older than 1.5, the routines of :data:`LACKING` are
replaced by functions that refuse before calling the library; on OSHMPI, whose multi-word waits
and tests abort the job (:data:`shmem_notebook.deviations.MULTI_WAITS`), so are those.
"""

from __future__ import annotations

import re
from typing import TYPE_CHECKING, Any, NoReturn

from ...deviations import MULTI_WAITS, affects
from ...errors import ShmemNotebookError
from .patches import Patches

__all__ = ["UnsupportedError", "ALTERNATIVES", "LACKING", "explain", "explain_no_ctx", "install"]

if TYPE_CHECKING:
    from collections.abc import Callable

#: (pattern on the routine's name, what to use instead), first match wins
ALTERNATIVES = [
    (
        r"put_signal_nbi",
        "use shmem.put_nbi(...), then shmem.fence(), then shmem.atomic_set(flag, value, pe) "
        "on a symmetric int64/uint64 flag, and shmem.wait_until(flag, ...) on the receiver",
    ),
    (
        r"put_signal",
        "use shmem.put(...), then shmem.fence(), then shmem.atomic_set(flag, value, pe) "
        "on a symmetric int64/uint64 flag, and shmem.wait_until(flag, ...) on the receiver",
    ),
    (
        r"signal_(fetch|wait_until)",
        "keep the signal in a symmetric int64/uint64 array and use shmem.atomic_fetch / shmem.wait_until on it",
    ),
    (r"atomic_.*_nbi|_nbi.*atomic", "use the blocking form of the atomic (the same name without _nbi)"),
    (r"(wait_until|test)_(all|any|some)(_vector)?", "loop over the elements with shmem.wait_until / shmem.test"),
    (r"team_|ctx_get_team", "use the default team, shmem.TEAM_WORLD, or the active-set forms"),
    (r"malloc_with_hints|hints", "allocate without hints (shmem.alloc / shmem.zeros)"),
]

#: shmem4py functions an OpenSHMEM 1.4 library lacks, refused before they reach it
LACKING = (
    *(
        f"atomic_{op}_nbi"
        for op in (
            "fetch",
            "swap",
            "compare_swap",
            "fetch_inc",
            "fetch_add",
            "fetch_and",
            "fetch_or",
            "fetch_xor",
            "fetch_op",
        )
    ),
    "put_signal",
    "put_signal_nbi",
    "signal_wait_until",
    "signal_fetch",
)

#: the error code shmem4py's C layer gives for a routine the library lacks (see shmem4py's _chkerr)
NOT_IMPLEMENTED = -1431655766


#: shmem4py's names for the routines that create a context (OSHMPI's always return SHMEM_NO_CTX)
CTX_CREATORS = ("shmem_ctx_create", "shmem_team_create_ctx")


def explain_no_ctx(routine: str, library: str) -> str:
    """One sentence on a context the library could not create, and what to use instead."""
    return (
        f"{library} could not create a context ({routine}; OSHMPI never can, as MPI has no endpoints); "
        "use the default context instead: drop ctx= and complete the puts with shmem.quiet()"
    )


class UnsupportedError(ShmemNotebookError, NotImplementedError):
    """The cell used an OpenSHMEM routine the library under this job does not implement."""


def explain(routine: str, library: str = "Open MPI 4.1.4's OSHMEM", spec: str = "1.4") -> str:
    """One sentence on the missing ``routine`` and what to use instead."""
    instead = next(
        (alt for pattern, alt in ALTERNATIVES if re.search(pattern, routine)),
        f"see the OpenSHMEM {spec} specification for a routine that does the same",
    )
    return (
        f"{routine} is an OpenSHMEM 1.5 routine, but {library} implements OpenSHMEM {spec} and lacks it; "
        f"instead, {instead}"
    )


def install(shmem: Any) -> Callable[[], None]:
    """Make calls of routines the library lacks raise :class:`UnsupportedError`; return the undo."""
    patches = Patches()
    original = shmem._chkerr

    def chkerr(ierr: int, func: str = "shmem") -> None:  # as cheap as the original on the success path
        if ierr != 0:
            if ierr == NOT_IMPLEMENTED:
                raise UnsupportedError(explain(func, *_library(shmem)))
            if func in CTX_CREATORS:
                raise UnsupportedError(explain_no_ctx(func, _library(shmem)[0]))
            original(ierr, func)

    patches.set(shmem, "_chkerr", chkerr)
    if tuple(shmem.info_get_version()) < (1, 5):
        for name in LACKING:
            if hasattr(shmem, name):
                patches.set(shmem, name, _refusal(shmem, name))
    if affects(MULTI_WAITS, shmem.info_get_name()):
        for name in MULTI_WAIT_ROUTINES:
            if hasattr(shmem, name):
                patches.set(shmem, name, _refusal(shmem, name, ABORTS))
    return patches.undo


#: the multi-word waits and tests (OpenSHMEM 1.4), which OSHMPI implements as an abort of the job
MULTI_WAIT_ROUTINES = tuple(
    f"{kind}_{which}{vector}"
    for kind in ("wait_until", "test")
    for which in ("all", "any", "some")
    for vector in ("", "_vector")
)
#: why they are refused there
ABORTS = (
    "{routine} would abort the whole job on {library}, which implements the multi-word waits and tests as "
    "OSHMPI_ASSERT(0); instead, loop over the elements with shmem.wait_until / shmem.test"
)


def _refusal(shmem: Any, name: str, why: str | None = None) -> Callable[..., NoReturn]:
    """A function named like shmem4py's ``name`` that raises :class:`UnsupportedError` (``why``: a
    format of ``routine`` and ``library``; by default :func:`explain`'s sentence)."""

    def refuse(*args: Any, **kwargs: Any) -> NoReturn:
        del args, kwargs  # the traceback keeps this frame: not the call's symmetric arrays (see layer)
        library = _library(shmem)
        routine = f"shmem.{name}"
        raise UnsupportedError(
            explain(routine, *library) if why is None else why.format(routine=routine, library=library[0])
        )

    refuse.__name__ = refuse.__qualname__ = name
    refuse.__module__ = shmem.__name__
    refuse.__doc__ = (
        "Not provided by this OpenSHMEM library (an OpenSHMEM 1.5 routine); calling it says what to use instead."
    )
    return refuse


def _library(shmem: Any) -> tuple[str, str]:
    """("Open MPI 4.1.4's OSHMEM", "1.4") for the library under this PE (asked on the error path only)."""
    from .pitfalls import describe, ompi_version

    try:
        vendor = shmem.info_get_name()
        major, minor = shmem.info_get_version()
    except Exception:
        return "this OpenSHMEM library", "1.4"
    library = describe(vendor, ompi_version() if "open-mpi" in vendor.lower() else None)
    return (f"{library}'s OSHMEM" if library.startswith("Open MPI") else library), f"{major}.{minor}"
