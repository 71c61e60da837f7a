"""OpenSHMEM 1.5 routines this library lacks: say so and what to use instead (PE side).

shmem4py 1.0.0 wraps OpenSHMEM 1.5, but Open MPI 4.1.4's OSHMEM implements 1.4;
a missing routine ends in a bare ``NotImplementedError: shmem_long_put_signal``.
:func:`install` makes shmem4py raise :class:`MissingRoutineError` (still a
``NotImplementedError``) with one sentence naming the library and an
alternative. Only the error path changes: calls that work are not slowed.
"""

import re

__all__ = ["MissingRoutineError", "explain", "install"]

#: (pattern on the C routine name, what to use instead), first match wins
ALTERNATIVES = [
    (r"put_signal", "use shmem.put(...), then shmem.fence(), then shmem.atomic_set(flag, value, pe) "
                    "on a symmetric int64/uint64 flag, and shmem.wait_until(flag, ...) on the receiver"),
    (r"signal_(fetch|wait_until)", "keep the signal in a symmetric int64/uint64 array and use "
                                   "shmem.atomic_fetch / shmem.wait_until on it"),
    (r"atomic_.*_nbi|_nbi.*atomic", "use the blocking form of the atomic (the same name without _nbi)"),
    (r"(wait_until|test)_(all|any|some)(_vector)?", "loop over the elements with shmem.wait_until / shmem.test"),
    (r"team_|ctx_get_team", "use the default team, shmem.TEAM_WORLD, or the active-set forms"),
    (r"malloc_with_hints|hints", "allocate without hints (shmem.alloc / shmem.zeros)"),
]


#: the error code shmem4py's C layer gives for a routine the library lacks (see shmem4py's _chkerr)
NOT_IMPLEMENTED = -1431655766


class MissingRoutineError(NotImplementedError):
    """An OpenSHMEM routine the OpenSHMEM library under this job does not provide."""


def explain(func, library="Open MPI 4.1.4's OSHMEM", spec="1.4"):
    """One sentence on the missing C routine ``func`` and what to use instead."""
    instead = next((alt for pattern, alt in ALTERNATIVES if re.search(pattern, func)),
                   "see the OpenSHMEM 1.4 specification for a routine that does the same")
    return (f"{func} is an OpenSHMEM 1.5 routine, but {library} implements OpenSHMEM {spec} and lacks it; "
            f"instead, {instead}")


def install(shmem):
    """Make shmem4py's missing-routine error say what is missing and what to use instead."""
    original = shmem._chkerr
    if getattr(original, "_explains_missing", False):
        return

    def chkerr(ierr, func="shmem"):  # as cheap as the original on the success path
        if ierr != 0:
            if ierr == NOT_IMPLEMENTED:
                raise MissingRoutineError(explain(func, *_library(shmem)))
            original(ierr, func)

    chkerr._explains_missing = True
    shmem._chkerr = chkerr


def _library(shmem):
    """("Open MPI 4.1.4's OSHMEM", "1.4") for the library under this PE (asked on the error path only)."""
    from .pitfalls import _describe, ompi_version

    try:
        vendor = shmem.info_get_name()
        major, minor = shmem.info_get_version()
    except Exception:
        return "this OpenSHMEM library", "1.4"
    library = _describe(vendor, ompi_version() if "open-mpi" in vendor.lower() else None)
    return (f"{library}'s OSHMEM" if library.startswith("Open MPI") else library), f"{major}.{minor}"
