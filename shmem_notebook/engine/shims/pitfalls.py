"""Guards against two bugs of Open MPI 4.1.4's OpenSHMEM (OSHMEM over UCX), PE side.

:func:`install` wraps the shmem4py functions that reach the bugs, so a cell gets
either the correct answer or a :class:`LibraryBugError` naming the problem and the
safe alternative -- never a dead PE or a silently wrong value. It only acts on
affected libraries (see :func:`decide`); ``SHMEM_NOTEBOOK_PITFALLS=on|off`` forces it.
shmem4py is imported only by :func:`install` (importing it calls ``shmem_init``).
"""

from __future__ import annotations

import ctypes
import functools
import operator
import os
import re
import subprocess
import sys
import warnings
from typing import TYPE_CHECKING, Any, cast

import numpy as np

from ...errors import ShmemNotebookError

__all__ = [
    "GUARDS",
    "ENV",
    "LibraryBugError",
    "install",
    "uninstall",
    "active",
    "decide",
    "describe",
    "ompi_version",
    "parse_ompi_version",
]

if TYPE_CHECKING:
    from collections.abc import Callable, Collection
    from typing import TypedDict

    class _State(TypedDict):
        guards: tuple[str, ...]
        originals: dict[str, Callable[..., Any]]
        library: str


#: environment variable forcing the guards: "on", "off" or "auto" (the default)
ENV = "SHMEM_NOTEBOOK_PITFALLS"

#: The guards, name -> (bug and what the guard does). Measured on Debian's Open MPI
#: 4.1.4 + UCX 1.13.1, same results with plain C programs built with ``oshcc``.
GUARDS = {
    "cswap32": (
        "atomic_compare_swap on a 32-bit integer (int32/uint32, with or without ctx) aborts the "
        "PE with 'stack smashing detected': OSHMEM's UCX atomic component writes 8 bytes into "
        "the 4-byte result (open-mpi/ompi#11257; fixed in Open MPI 4.1.5 and 5.0). 64-bit "
        "compare_swap and every other 32-bit AMO work. Guard: raise before calling the library."
    ),
    "fetch_bitwise": (
        "atomic_fetch_and/_or/_xor and atomic_fetch_op(..., 'and'|'or'|'xor') on symmetric-heap "
        "memory return the old value but store `old OP old` instead of `old OP value` (target "
        "unchanged for and/or, zeroed for xor). Every width and signedness is hit in C; through "
        "shmem4py only uint32/uint64 reach it (it has no signed bitwise AMOs). Seen over UCX's "
        "shared-memory transports, not over tcp; fixed version unknown. The non-fetching "
        "atomic_and/_or/_xor work. Guard: uint64 goes through a compare-and-swap loop (atomic, "
        "correct); uint32 raises, since its compare-and-swap is bug 'cswap32'."
    ),
}

_FIXED_IN = {"cswap32": (4, 1, 5)}  # guards absent here: fixed version unknown
_BITWISE = {"and": operator.and_, "or": operator.or_, "xor": operator.xor}
_ATTR = "_shmem_notebook_pitfalls"  # set on the wrapped module: guards and originals
_VERSION_RE = re.compile(r"Open MPI v?(\d+)\.(\d+)\.(\d+)")


class LibraryBugError(ShmemNotebookError, RuntimeError):
    """The call would crash the PE or give a wrong answer because of an OpenSHMEM library bug."""


# -- which library, and is it affected ------------------------------------------------
def parse_ompi_version(text: str | None) -> tuple[int, ...] | None:
    """``(major, minor, release)`` from text like "Open MPI v4.1.4, ...", or None."""
    match = _VERSION_RE.search(text or "")
    return tuple(int(part) for part in match.groups()) if match else None


def _loaded_libmpi_version() -> tuple[int, ...] | None:
    """Ask the libmpi loaded in this process (MPI_Get_library_version works before MPI_Init)."""
    try:
        with open("/proc/self/maps") as maps:
            paths = sorted({line.split()[-1] for line in maps if re.search(r"/libmpi\.so[.\d]*$", line.strip())})
    except OSError:
        return None
    for path in paths:
        try:
            get = ctypes.CDLL(path).MPI_Get_library_version
            text, length = ctypes.create_string_buffer(8192), ctypes.c_int()
            if get(text, ctypes.byref(length)) == 0:
                return parse_ompi_version(text.value.decode(errors="replace"))
        except (OSError, AttributeError):
            continue
    return None


def _ompi_info_version() -> tuple[int, ...] | None:
    try:
        out = subprocess.run(["ompi_info", "--version"], capture_output=True, text=True, timeout=30)
    except (OSError, subprocess.SubprocessError):
        return None
    return parse_ompi_version(out.stdout)


def ompi_version() -> tuple[int, ...] | None:
    """Open MPI's version: from the loaded libmpi, else from ``ompi_info``; None if unknown."""
    return _loaded_libmpi_version() or _ompi_info_version()


def decide(vendor: str | None, version: tuple[int, ...] | None, setting: str | None = None) -> tuple[str, ...]:
    """Names of the guards to install, in :data:`GUARDS` order. Pure function.

    ``vendor`` is ``shmem.info_get_name()``, ``version`` Open MPI's ``(major, minor,
    release)`` or None, ``setting`` the value of :data:`ENV`. Auto: only Open MPI is
    guarded; an unknown version counts as affected; "fetch_bitwise" (fixed version
    unknown) only for 4.1.0 to 4.1.4.
    """
    setting = (setting or "auto").strip().lower()
    if setting in ("off", "0", "false", "no"):
        return ()
    if setting in ("on", "1", "true", "yes"):
        return tuple(GUARDS)
    if setting != "auto":
        warnings.warn(f"{ENV}={setting!r} is not on/off/auto; using auto", stacklevel=2)
    if "open-mpi" not in (vendor or "").lower():
        return ()
    if version is None:
        return tuple(GUARDS)
    affected = {
        "cswap32": version < _FIXED_IN["cswap32"],
        "fetch_bitwise": (4, 1, 0) <= version <= (4, 1, 4),
    }
    return tuple(name for name in GUARDS if affected[name])


def describe(vendor: str | None, version: tuple[int, ...] | None) -> str:
    """The library in words, e.g. ``Open MPI 4.1.4`` (``version``: a tuple, or None when unknown)."""
    if "open-mpi" in (vendor or "").lower():
        return "Open MPI " + (".".join(map(str, version)) if version else "(version unknown)")
    return f"this OpenSHMEM library ({vendor})"


# -- the wrappers -----------------------------------------------------------------------
def _int_dtype(target: Any) -> np.dtype[Any] | None:
    """The dtype of an integer ndarray, else None (shmem4py then raises its own error)."""
    return target.dtype if isinstance(target, np.ndarray) and target.dtype.kind in "iu" else None


def _cswap_guard(original: Callable[..., Any], lib: str) -> Callable[..., Any]:
    @functools.wraps(original)
    def atomic_compare_swap(target: Any, cond: Any, value: Any, pe: int, ctx: Any = None) -> Any:
        dtype = _int_dtype(target)
        if dtype is not None and dtype.itemsize == 4:
            raise LibraryBugError(
                f"shmem.atomic_compare_swap on a 32-bit {dtype} array crashes {lib}'s OSHMEM "
                f"(stack smash, fixed in Open MPI 4.1.5); use a 64-bit array (int64/uint64) instead"
            )
        return original(target, cond, value, pe, ctx)

    return atomic_compare_swap


def _fetch_bitwise(
    op: str, target: Any, value: Any, pe: int, ctx: Any, originals: dict[str, Callable[..., Any]], lib: str
) -> Any:
    """The guarded fetch-and-op, or NotImplemented to let the library do it."""
    dtype = _int_dtype(target)
    if dtype is None or dtype.kind != "u":
        return NotImplemented  # shmem4py has no signed bitwise AMOs: its own error stands
    if dtype.itemsize != 8:
        raise LibraryBugError(
            f"shmem.atomic_fetch_{op} on a {8 * dtype.itemsize}-bit {dtype} array stores a wrong "
            f"value in {lib}'s OSHMEM (old {op} old instead of old {op} value), and the 32-bit "
            f"compare-and-swap that could emulate it crashes; use a uint64 array (handled "
            f"correctly), or shmem.atomic_{op} if you do not need the old value"
        )
    value, mask = operator.index(value), (1 << 64) - 1
    if not 0 <= value <= mask:
        raise OverflowError(f"value {value} does not fit in {dtype}")
    old = originals["atomic_fetch"](target, pe, ctx)
    while True:  # compare-and-swap loop: the successful swap is the atomic update
        seen = originals["atomic_compare_swap"](target, old, _BITWISE[op](old, value) & mask, pe, ctx)
        if seen == old:
            return old
        old = seen


def _fetch_guards(originals: dict[str, Callable[..., Any]], lib: str) -> dict[str, Callable[..., Any]]:
    def make(op: str) -> Callable[..., Any]:
        original = originals[f"atomic_fetch_{op}"]

        @functools.wraps(original)
        def guarded(target: Any, value: Any, pe: int, ctx: Any = None) -> Any:
            result = _fetch_bitwise(op, target, value, pe, ctx, originals, lib)
            return original(target, value, pe, ctx) if result is NotImplemented else result

        return guarded

    fetch_op = originals["atomic_fetch_op"]

    @functools.wraps(fetch_op)
    def atomic_fetch_op(target: Any, value: Any, op: Any, pe: int, ctx: Any = None) -> Any:
        name = f"{op}".lower()
        if name in _BITWISE:
            result = _fetch_bitwise(name, target, value, pe, ctx, originals, lib)
            if result is not NotImplemented:
                return result
        return fetch_op(target, value, op, pe, ctx)

    wrappers: dict[str, Callable[..., Any]] = {f"atomic_fetch_{op}": make(op) for op in _BITWISE}
    wrappers["atomic_fetch_op"] = atomic_fetch_op
    return wrappers


# the functions install() may replace, plus those the replacements call
_WRAPPED = ("atomic_fetch", "atomic_compare_swap", "atomic_fetch_op", *(f"atomic_fetch_{op}" for op in _BITWISE))


# -- install / inspect --------------------------------------------------------------------
def install(shmem_module: Any = None, *, guards: Collection[str] | None = None) -> tuple[str, ...]:
    """Wrap the shmem4py functions hit by this library's bugs; return the active guard names.

    ``shmem_module`` defaults to ``shmem4py.shmem``; ``guards`` (names from
    :data:`GUARDS`) overrides :func:`decide`. Idempotent: a second call changes nothing.
    """
    if shmem_module is None:
        from shmem4py import shmem as shmem_module  # type: ignore[no-redef]  # the default, imported only then
    state: _State | None = getattr(shmem_module, _ATTR, None)
    if state is not None:
        return state["guards"]
    vendor = shmem_module.info_get_name()
    version = ompi_version() if "open-mpi" in vendor.lower() else None
    if guards is None:
        guards = decide(vendor, version, os.environ.get(ENV))
    unknown = set(guards) - set(GUARDS)
    if unknown:
        raise ValueError(f"unknown guards {sorted(unknown)}; known: {list(GUARDS)}")
    guards = tuple(name for name in GUARDS if name in guards)
    lib = describe(vendor, version)
    originals = {name: getattr(shmem_module, name) for name in _WRAPPED}
    wrappers: dict[str, Callable[..., Any]] = {}
    if "cswap32" in guards:
        wrappers["atomic_compare_swap"] = _cswap_guard(originals["atomic_compare_swap"], lib)
    if "fetch_bitwise" in guards:
        wrappers.update(_fetch_guards(originals, lib))
    for name, wrapper in wrappers.items():
        setattr(shmem_module, name, wrapper)
    setattr(shmem_module, _ATTR, {"guards": guards, "originals": originals, "library": lib})
    return guards


def uninstall(shmem_module: Any = None) -> None:
    """Put the original functions back (mainly for tests)."""
    shmem_module = shmem_module or sys.modules.get("shmem4py.shmem")
    state: _State | None = getattr(shmem_module, _ATTR, None)
    if state is None:
        return
    for name, original in state["originals"].items():
        setattr(shmem_module, name, original)
    delattr(shmem_module, _ATTR)


def active(shmem_module: Any = None) -> tuple[str, ...]:
    """Names of the guards installed on ``shmem_module`` (default: shmem4py.shmem if imported)."""
    shmem_module = shmem_module or sys.modules.get("shmem4py.shmem")
    return cast("tuple[str, ...]", getattr(shmem_module, _ATTR, {"guards": ()})["guards"])
