"""Beginners' mistakes in shmem4py calls refused before the library sees them (PE side).

Through shmem4py a PE number out of range, or a remote buffer that is not symmetric, kills the
job (``PEDiedError``, naming nothing); two dtypes end in an empty ``AssertionError``; slices of
different lengths copy the shorter length silently (a whole array as the longer side keeps
shmem4py's meaning: its first elements); a NumPy array as ``put_signal``'s signal
ends in a cffi error. :func:`install` wraps the RMA, atomic and collective calls so that each
such call raises :class:`ShmemArgumentError` in one sentence naming the call, its line and what
was wrong ("shmem.put at line 3 names PE 4, but valid PEs are 0-2"); nothing reached the library,
so the job stays usable. A call that passes costs a few comparisons (put/get: about 0.3 us);
only a failing one is explained (:func:`explain_rma` and friends).

Longer than 420 lines once formatted: each family of calls (RMA, strided, signals, atomics,
collectives) has its check and its explanation here, against one table of calls.
"""

from __future__ import annotations

import functools
import inspect
import os
import sys
from typing import TYPE_CHECKING, Any

import numpy as np

from ...errors import InputError
from ...folding import pe_ranges
from ...operations import CALLS
from .. import heap
from ..context import Checks, this_pe
from .missing import LACKING
from .patches import Patches

__all__ = [
    "CHECKED",
    "ShmemArgumentError",
    "explain_amo",
    "explain_collective",
    "explain_rma",
    "explain_signal",
    "install",
]

if TYPE_CHECKING:
    from collections.abc import Callable
    from types import FrameType

    import numpy.typing as npt


class ShmemArgumentError(InputError):
    """A shmem call's arguments are wrong in a way the library would crash on or ignore silently."""


_CONTIGUOUS = ("put", "get", "put_nbi", "get_nbi")
_STRIDED = ("iput", "iget")
_SIGNAL = ("put_signal", "put_signal_nbi")
_SIGNAL_WAITS = ("signal_wait_until", "signal_fetch")
_AMOS = tuple(name for name, op in CALLS.items() if op.kind == "amo" and op.params)
_COLLECTIVES = tuple(name for name, op in CALLS.items() if op.kind == "coll")
#: the shmem4py functions :func:`install` checks (those this shmem4py has)
CHECKED = (*_CONTIGUOUS, *_STRIDED, *_SIGNAL, *_SIGNAL_WAITS, *_AMOS, *_COLLECTIVES)

_ndarray = np.ndarray
_HIDDEN = (os.sep + "shmem4py" + os.sep, os.sep + os.path.join("shmem_notebook", "engine") + os.sep)
_ATTR = "_shmem_notebook_npes"  # a Ctx's team size, noted on the Ctx the first time it is used


# -- where, and what ----------------------------------------------------------------------
def _where() -> str:
    """``at line 3`` (``at line 3 (in halo)``, ``at kernels.py:12``): the user's innermost frame."""
    f: FrameType | None = sys._getframe(2)
    while f is not None and any(part in f.f_code.co_filename for part in _HIDDEN):
        f = f.f_back
    if f is None:
        return ""
    code = f.f_code
    if f.f_globals.get("__name__") == "__main__":  # a cell (or an exported program's script)
        return f" at line {f.f_lineno}" + ("" if code.co_name == "<module>" else f" (in {code.co_name})")
    return f" at {os.path.basename(code.co_filename)}:{f.f_lineno}"


def _valid(n: int, what: str = "PEs") -> str:
    return "the only valid PE is 0" if n == 1 else f"valid {what} are {pe_ranges(range(n))}"


def _pe_problem(pe: Any, n: int, team: str = "") -> str | None:
    """What is wrong with PE number ``pe`` among ``n`` (None: nothing)."""
    try:
        if 0 <= pe < n:
            return None
    except TypeError:
        return None  # not a number: shmem4py's own error stands
    return f"names PE {pe}, but {_valid(n)}{team}"


def _is_symmetric(a: npt.NDArray[Any]) -> bool:
    """Symmetric memory of this PE: shmem4py's arrays are views of a memoryview of a cffi buffer
    (found in a few lookups); anything else is measured against the live allocations."""
    base: Any = a.base
    if type(base) is _ndarray:  # a view's base is the array shmem4py made
        base = base.base
    return (
        (type(base) is memoryview and type(base.obj) is this_pe.checks.buffer_type)
        or a.size == 0
        or heap.is_symmetric(a)
    )


def _ctype(a: npt.NDArray[Any]) -> str | None:
    return this_pe.checks.numpy_to_shmem.get(a.dtype.char)


def _elements(n: int) -> str:
    return f"{n} element" if n == 1 else f"{n} elements"


def _copy_problem(
    verb: str,
    target: npt.NDArray[Any],
    source: npt.NDArray[Any],
    size: int | None,
    tst: int = 1,
    sst: int = 1,
    npes: int = 1,
    per_pe: bool = False,
) -> str | None:
    """What is wrong with copying ``source`` into ``target`` (dtype, lengths), or None. Without
    ``size``, lengths that differ are a mistake when the longer one is a slice the user cut
    (``put(u[11:13], u[9:11][:1], pe)``); a whole array may be longer (``put(remote, one, pe)``
    writes its first element: shmem4py's meaning)."""
    if _ctype(target) != _ctype(source):
        return f"{verb} {source.dtype} into {target.dtype}; give both arrays one dtype"
    tlen, slen = -(-target.size // tst), -(-source.size // sst)
    if size is None:
        if per_pe:
            return None
        if tlen != slen and type((target if tlen > slen else source).base) is _ndarray:
            return (
                f"{verb} {_elements(slen)} into {tlen} (source {slen}, target {tlen}), and shmem4py would "
                f"silently use only {min(tlen, slen)}; make both the same length, or pass size={min(tlen, slen)}"
            )
        return None
    for side, n in (("target", tlen), ("source", slen)):
        if size * npes > n:
            each = f" ({size} from each of {npes} PEs)" if per_pe else ""
            return f"has size={size}{each}, but its {side} holds only {_elements(n)}"
    return None


def _team_npes(team: Any) -> int:
    return this_pe.checks.npes if team is None else team.n_pes()


def _ctx_npes(ctx: Any) -> int:
    """The size of the team a context belongs to (OpenSHMEM 1.4: every context is the world's);
    0 for ``SHMEM_CTX_INVALID``, so that the call is explained (:data:`_INVALID_CTX`)."""
    if not ctx:
        return 0
    n: int | None = getattr(ctx, _ATTR, None)
    if n is None:
        n = this_pe.checks.npes
        if this_pe.checks.native_teams:
            try:
                n = ctx.get_team().n_pes()
            except Exception:  # a destroyed or invalid context: the library says so
                return this_pe.checks.npes
            n = n if n > 0 else this_pe.checks.npes
        try:
            setattr(ctx, _ATTR, n)
        except AttributeError:
            pass
    return n


_INVALID_CTX = (
    "was given an invalid context (shmem.CTX_INVALID, or one destroyed): nothing would be done, or the library "
    "would kill the PE; use a context made by shmem.Ctx.create() or team.create_ctx(), or guard the call with "
    "`if ctx:`"
)


def explain_rma(
    name: str,
    target: Any,
    source: Any,
    pe: Any,
    size: int | None = None,
    ctx: Any = None,
    tst: int = 1,
    sst: int = 1,
    signal: Any = None,
) -> str | None:
    """One sentence on what is wrong with this RMA call, or None if nothing is."""
    if ctx is not None and not ctx:
        return f"shmem.{name}{_where()} {_INVALID_CTX}"
    if not isinstance(target, np.ndarray) or not isinstance(source, np.ndarray):
        return None
    n = this_pe.checks.npes if ctx is None else _ctx_npes(ctx)
    problem = _pe_problem(pe, n, "" if n == this_pe.checks.npes else " (its context's team)")
    remote, side = (target, "target") if name.startswith(("put", "iput")) else (source, "source")
    if problem is None and not _is_symmetric(remote):
        problem = (
            f"has a {side} that is not symmetric (the remote side of a {name.removesuffix('_nbi')} must be "
            f"made by shmem.zeros/shmem.array or declared); the library would kill the PE"
        )
    if problem is None and name in _SIGNAL and isinstance(signal, np.ndarray):
        problem = _NOT_A_SIGNAL
    if problem is None:
        problem = _copy_problem("copies", target, source, size, tst, sst)
    return None if problem is None else f"shmem.{name}{_where()} {problem}"


def explain_amo(name: str, remote: Any, pe: Any, ctx: Any = None, fetch: Any = None) -> str | None:
    """One sentence on what is wrong with this atomic, or None if nothing is."""
    if ctx is not None and not ctx:
        return f"shmem.{name}{_where()} {_INVALID_CTX}"
    if not isinstance(remote, np.ndarray):
        return None
    n = this_pe.checks.npes if ctx is None else _ctx_npes(ctx)
    problem = _pe_problem(pe, n, "" if n == this_pe.checks.npes else " (its context's team)")
    if problem is None and remote.size != 1:
        problem = f"works on one element, but its target has {remote.size}; pass a 1-element slice such as a[0:1]"
    elif problem is None and not _is_symmetric(remote):
        problem = (
            "has a target that is not symmetric (made by shmem.zeros/shmem.array or declared); "
            "the library would kill the PE"
        )
    elif problem is None and isinstance(fetch, np.ndarray):
        if fetch.size != 1:
            problem = f"fetches one element, but its fetch array has {fetch.size}; pass a 1-element array"
        elif _ctype(fetch) != _ctype(remote):
            problem = f"fetches {remote.dtype} into a {fetch.dtype} array; give both one dtype"
    return None if problem is None else f"shmem.{name}{_where()} {problem}"


_NOT_A_SIGNAL = (
    "has a NumPy array as its signal; pass a signal word made by sig = shmem.new_signal() "
    "and wait for it with shmem.signal_wait_until(sig, ...)"
)


def explain_signal(name: str, signal: Any) -> str | None:
    """One sentence on a NumPy array given as a signal word, or None."""
    return f"shmem.{name}{_where()} {_NOT_A_SIGNAL}" if isinstance(signal, np.ndarray) else None


def explain_collective(
    name: str,
    target: Any,
    source: Any,
    size: int | None = None,
    team: Any = None,
    root: Any = None,
    tst: int = 1,
    sst: int = 1,
) -> str | None:
    """One sentence on what is wrong with this collective, or None if nothing is. Collective
    calls refused this way are refused on every PE that makes the same mistake."""
    if not isinstance(target, np.ndarray) or not isinstance(source, np.ndarray):
        return None
    try:
        n = _team_npes(team)
    except Exception:  # an invalid team: the team code says so
        return None
    if n <= 0:
        return None
    problem = None
    if name == "broadcast":
        problem = _pe_problem(root, n, "" if team is None else " (team PE numbers)")
        problem = problem and problem.replace("names PE", "has root", 1)
    for side, a in (("target", target), ("source", source)):
        if problem is None and not _is_symmetric(a):
            problem = (
                f"has a {side} that is not symmetric (made by shmem.zeros/shmem.array or declared); "
                "the library would kill the PE"
            )
    if problem is None:
        if name in ("collect", "fcollect"):
            per = source.size if size is None else size  # collect: sizes may differ from PE to PE
            if _ctype(target) != _ctype(source):
                problem = f"collects {source.dtype} into {target.dtype}; give both arrays one dtype"
            elif per > source.size or (name == "collect" and per > target.size):
                side, held = ("source", source.size) if per > source.size else ("target", target.size)
                problem = f"has size={per}, but its {side} holds only {_elements(held)}"
            elif name == "fcollect" and per * n > target.size:
                problem = (
                    f"gathers {_elements(per)} from each of {n} PEs ({per * n}), but its target holds only "
                    f"{target.size}"
                )
        elif name in ("alltoall", "alltoalls"):
            problem = _copy_problem("exchanges", target, source, size, tst, sst, n, per_pe=True)
            tlen, slen = -(-target.size // tst), -(-source.size // sst)
            if problem is None and size is None and min(tlen, slen) % n:
                problem = (
                    f"exchanges {_elements(min(tlen, slen))}, which {n} PEs cannot share evenly; "
                    f"pass size= (elements per PE)"
                )
        else:
            problem = _copy_problem("reduces" if name.endswith("reduce") else "copies", target, source, size)
    return None if problem is None else f"shmem.{name}{_where()} {problem}"


# -- the wrappers --------------------------------------------------------------------------
def _contiguous(name: str, original: Callable[..., Any]) -> Callable[..., Any]:
    remote_is_target = name.startswith("put")
    npes, buffer_type = this_pe.checks.npes, this_pe.checks.buffer_type  # install's, read once: a put's hot path

    @functools.wraps(original)
    def call(target: Any, source: Any, pe: Any, size: int | None = None, ctx: Any = None) -> Any:
        try:  # the usual call, in a few comparisons: shmem4py's own arrays, one dtype, one length
            tsize, ssize = target.size, source.size
            ok = (
                0 <= pe < (npes if ctx is None else _ctx_npes(ctx))
                and target.dtype is source.dtype
                and (
                    size <= tsize and size <= ssize
                    if size is not None
                    else tsize == ssize or type((target if tsize > ssize else source).base) is not _ndarray
                )
            )
            if ok:
                base = (target if remote_is_target else source).base
                if type(base) is _ndarray:
                    base = base.base
                ok = type(base) is memoryview and type(base.obj) is buffer_type
        except (AttributeError, TypeError):
            ok = True  # not arrays, not a number: shmem4py's own error stands
        if not ok:
            message = explain_rma(name, target, source, pe, size, ctx)
            if message is not None:
                target = source = ctx = base = None  # the traceback keeps this frame, not the call's arrays
                raise ShmemArgumentError(message) from None
        return original(target, source, pe, size, ctx)

    return call


def _signalled(name: str, original: Callable[..., Any]) -> Callable[..., Any]:
    """put_signal(_nbi): the checks of a put, and the signal word not a NumPy array."""
    npes, buffer_type = this_pe.checks.npes, this_pe.checks.buffer_type

    @functools.wraps(original)
    def call(
        target: Any,
        source: Any,
        pe: Any,
        signal: Any,
        value: Any,
        sigop: Any,
        size: int | None = None,
        ctx: Any = None,
    ) -> Any:
        try:
            tsize, ssize = target.size, source.size
            ok = (
                0 <= pe < (npes if ctx is None else _ctx_npes(ctx))
                and target.dtype is source.dtype
                and not isinstance(signal, np.ndarray)
                and (
                    size <= tsize and size <= ssize
                    if size is not None
                    else tsize == ssize or type((target if tsize > ssize else source).base) is not _ndarray
                )
            )
            if ok:
                base = target.base
                if type(base) is _ndarray:
                    base = base.base
                ok = type(base) is memoryview and type(base.obj) is buffer_type
        except (AttributeError, TypeError):
            ok = True
        if not ok:
            message = explain_rma(name, target, source, pe, size, ctx, signal=signal)
            if message is not None:
                target = source = signal = ctx = base = None  # the traceback keeps this frame, not the arrays
                raise ShmemArgumentError(message) from None
        return original(target, source, pe, signal, value, sigop, size, ctx)

    return call


def _general(
    name: str, original: Callable[..., Any], explain: Callable[..., str | None], fields: dict[str, str]
) -> Callable[..., Any]:
    """A wrapper that binds the call's arguments by name and asks ``explain`` (calls slower than a put)."""
    signature = inspect.signature(original)

    @functools.wraps(original)
    def call(*args: Any, **kwargs: Any) -> Any:
        try:
            bound: dict[str, Any] | None = signature.bind(*args, **kwargs).arguments
        except TypeError:
            bound = None  # shmem4py's own error stands
        if bound is not None:
            message = explain(name, **{key: bound[param] for key, param in fields.items() if param in bound})
            if message is not None:
                del args, kwargs, bound  # the traceback keeps this frame, but not the call's arrays
                raise ShmemArgumentError(message) from None
        return original(*args, **kwargs)

    return call


def _amo(name: str, original: Callable[..., Any]) -> Callable[..., Any]:
    params = CALLS[name].params
    remote = "source" if "source" in params else "target"
    index = params.index(remote), params.index("pe")
    fetch = "fetch" in params
    if fetch:
        return _general(name, original, explain_amo, {"remote": remote, "pe": "pe", "ctx": "ctx", "fetch": "fetch"})
    at, pe_at = index
    npes, buffer_type = this_pe.checks.npes, this_pe.checks.buffer_type

    @functools.wraps(original)
    def call(*args: Any, **kwargs: Any) -> Any:
        if kwargs or len(args) <= pe_at:
            bound = _bind(original, args, kwargs)
            message = explain_amo(name, bound.get(remote), bound.get("pe"), bound.get("ctx")) if bound else None
        else:
            try:
                ctx = args[pe_at + 1] if len(args) > pe_at + 1 else None
                target = args[at]
                base = target.base
                if type(base) is _ndarray:
                    base = base.base
                ok = (
                    0 <= args[pe_at] < (npes if ctx is None else _ctx_npes(ctx))
                    and target.size == 1
                    and type(base) is memoryview
                    and type(base.obj) is buffer_type
                )
            except (AttributeError, TypeError, IndexError):
                ok = True
            message = None if ok else explain_amo(name, args[at], args[pe_at], ctx)
        if message is not None:
            args = kwargs = bound = target = base = ctx = None  # type: ignore[assignment]  # the traceback keeps this frame, not the arrays
            raise ShmemArgumentError(message) from None
        return original(*args, **kwargs)

    return call


def _bind(function: Callable[..., Any], args: tuple[Any, ...], kwargs: dict[str, Any]) -> dict[str, Any] | None:
    try:
        return inspect.signature(function).bind(*args, **kwargs).arguments
    except TypeError:
        return None


_RMA_FIELDS = {"target": "target", "source": "source", "pe": "pe", "size": "size", "ctx": "ctx"}
_STRIDED_FIELDS = {**_RMA_FIELDS, "tst": "tst", "sst": "sst"}
_COLLECTIVE_FIELDS = {
    "target": "target",
    "source": "source",
    "size": "size",
    "team": "team",
    "root": "root",
    "tst": "tst",
    "sst": "sst",
}


def install(shmem: Any) -> Callable[[], None]:
    """Wrap every call of :data:`CHECKED` this shmem4py has (but routines the library lacks, which
    :mod:`.missing` refuses already); return the undo."""
    this_pe.checks = Checks(
        shmem.n_pes(),
        tuple(shmem.info_get_version()) >= (1, 5),
        shmem.ffi.buffer,
        dict(shmem._numpy_to_shmem),
    )
    patches = Patches()
    for name in CHECKED:
        original = getattr(shmem, name, None)
        if original is None or (not this_pe.checks.native_teams and name in LACKING):
            continue
        if name in _CONTIGUOUS:
            wrapper = _contiguous(name, original)
        elif name in _SIGNAL:
            wrapper = _signalled(name, original)
        elif name in _SIGNAL_WAITS:
            wrapper = _general(name, original, explain_signal, {"signal": "signal"})
        elif name in _STRIDED:
            wrapper = _general(name, original, explain_rma, _STRIDED_FIELDS)
        elif name in _AMOS:
            wrapper = _amo(name, original)
        else:
            wrapper = _general(name, original, explain_collective, _COLLECTIVE_FIELDS)
        patches.set(shmem, name, wrapper)
    return patches.undo
