"""The hooks a rewritten cell calls on every array load and store (PE side).

:class:`.instrument.AccessTransformer` rewrites the recorded cell so that ``x[i]``,
``x[i] = v`` (also as a target of ``a[i], b[j] = v, w``), ``x[i] += v`` and calls go through
these functions, which note the access in the active race recording (:func:`install` sets it)
and do what the cell asked. Accesses made inside a recorded shmem call are the layer's to record.

Longer than 420 lines once formatted: a hook for each access the transformer rewrites and the
search for what a call writes belong together.

What a call writes is found, not listed: a ufunc writes its outputs (positional after
``nin``, or ``out=``) and ``ufunc.at`` its first argument; any other NumPy (or SciPy) call
or method is called with its array arguments and receiver read-only (``out=`` is a write):
if NumPy refuses ("... is read-only"), the call is made again with one of them writable at a
time until it succeeds: that one is written (NumPy checks before it changes anything; a call
writing two arguments would run twice). What a call wrote is remembered for calls of the same
callable, argument count and keywords, which are not probed again. Arrays the cell made
read-only stay so; views returned of a probed array are writable, as without the probe.
Python functions defined outside the cell run rewritten (:mod:`.outside`), and so do the
``__init__`` of classes defined there and code given to ``exec`` (text, or a code object whose text
is known: ``compile`` called by rewritten code is noted). Compiled code the recording cannot see
into (numba, Cython, ctypes and cffi functions, C extensions but NumPy's and SciPy's) reads and
writes its array arguments: its line is noted in the recording's ``compiled``. Other calls only read
their arrays. ``x.flat[i]`` reads and writes element ``i`` of ``x`` in C order; a memoryview's ``x[i]``
touches the bytes of the same element of the array it shows, and calls only read through it.
"""

from __future__ import annotations

import array
import builtins
import collections
import ctypes
import dataclasses
import functools
import operator
import queue
import sys
import types
import weakref
from typing import TYPE_CHECKING, Any

import numpy as np

from ...analysis.footprint import of_view, scattered
from ..context import this_pe
from . import outside
from .layer import depth as _depth  # >0 inside a recorded call (a list: read without a call)
from .memory import extent, numpy_owned

if TYPE_CHECKING:
    from collections.abc import Callable, Hashable, Mapping
    from typing import TypeAlias, TypeVar

    import numpy.typing as npt

    from ...analysis.footprint import Footprint
    from .accesses import RaceRecording
    from .memory import Info

    _T = TypeVar("_T")
    _Span: TypeAlias = "tuple[int, int, Footprint | None]"

__all__ = ["install", "uninstall", "get_rest", "element_range", "element_spans", "FUNCS"]

# the race recording the hooks feed (``race``, or None) and what calls wrote (``written``) are this PE's
# (:class:`..context.RecordState`), bound here once
_record = this_pe.record


def install(recording: RaceRecording) -> None:
    """Feed ``recording`` from now on; the hook functions go into the shell's namespace."""
    from . import in_c
    from .instrument import HOOKS

    _record.race = recording
    recording.compiled = set()  # lines calling compiled code
    recording.calls = array.array("q")  # first event, end, line of the top-level calls that recorded (.callsites)
    recording.call_line = None  # the line of the last of them
    _record.outside.update(_record.offsets)  # the layer's lines of calls made by code outside the cell
    _record.written.clear()
    ns = this_pe.namespace
    native = in_c.module()
    hooks = (
        FUNCS
        if native is None
        else {**FUNCS, "get": native.get, "set": native.set, "read": native.read, "ix": native.Index()}
    )
    if native is not None:
        native.feed(recording)
    for hook, func in hooks.items():
        ns[HOOKS[hook]] = func
        setattr(builtins, HOOKS[hook], func)  # for rewritten code outside the cell (other globals)


def uninstall() -> None:
    """Stop feeding (the hooks stay in the namespace: functions the cell defined still call them)."""
    from . import in_c

    _record.race = None
    native = in_c.module()
    if native is not None:
        native.feed(None)
    _record.outside.clear()  # other consumers (the trace) name cell lines only


_ndarray = np.ndarray
_memoryview = memoryview
#: a memoryview's methods that make another view of it (or end it): no element touched
_VIEW_METHODS = frozenset({"cast", "toreadonly", "release", "__enter__", "__exit__"})
_SCALARS = (int, np.integer)  # a store of one of these may reset a flag: its value is kept
_BASIC = (int, slice, type(Ellipsis), type(None), np.integer)
_NO_READ_METHODS = frozenset(
    "reshape view ravel transpose swapaxes squeeze __array__ __array_interface__ nonzero".split()
)
_NO_READ_FUNCS = {
    len,
    isinstance,
    type,
    id,
    hasattr,
    getattr,
    callable,
    np.shape,
    np.ndim,
    np.size,
    np.frombuffer,
    np.asarray,
    np.asanyarray,
    np.may_share_memory,
    np.shares_memory,
}
_AUG: dict[str, Callable[[Any, Any], Any]] = {
    "+": operator.iadd,
    "-": operator.isub,
    "*": operator.imul,
    "/": operator.itruediv,
    "//": operator.ifloordiv,
    "%": operator.imod,
    "**": operator.ipow,
    "<<": operator.ilshift,
    ">>": operator.irshift,
    "|": operator.ior,
    "^": operator.ixor,
    "&": operator.iand,
    "@": operator.imatmul,
}


def _basic(index: object) -> bool:
    if isinstance(index, tuple):
        return all(isinstance(i, _BASIC) for i in index)
    return isinstance(index, _BASIC)


def _wanted(rec: RaceRecording, x: npt.NDArray[Any]) -> Info | None:
    """``x``'s :meth:`~.memory.AddressBook.info`, or None when no access to it can matter: private
    memory while no non-blocking call uses any (see :meth:`.accesses.RaceRecording.access`)."""
    if not rec.private.starts and numpy_owned(x):
        return None
    info = rec.memory.info(x)
    return None if info[1] == "priv" and not rec.private.starts else info


def element_range(rec: RaceRecording, x: npt.NDArray[Any], index: Any, info: Info) -> _Span | None:
    """``(lo, hi, footprint)`` of the bytes ``x[index]`` touches (bounds for fancy indexing)."""
    if info[7] and isinstance(index, (int, np.integer)):  # 1-D, one element: the fast path
        i = int(index)
        if i < 0:
            i += info[8]
        lo = info[2] + i * info[7]
        return lo, lo + info[5], None
    if info[7] and type(index) is slice:  # 1-D, a slice: arithmetic, no view
        start, stop, step = index.indices(info[8])
        n = len(range(start, stop, step))
        if n <= 0:
            return None
        lo = info[2] + start * info[7]
        if info[7] * step == info[5]:
            return lo, lo + n * info[5], None
        return of_view(lo, info[5], (n,), (info[7] * step,))
    if _basic(index):
        idx = index if isinstance(index, tuple) else (index,)
        idx = tuple(slice(i, i + 1 or None) if isinstance(i, (int, np.integer)) else i for i in idx)
        view = x[idx]
        if view.size == 0:
            return None
        base = rec.memory.heap[0] if info[1] == "sym" else 0
        _, lo, hi, fp = extent(view)
        return lo - base, hi - base, fp
    spans = _positions_spans(x, np.arange(x.size).reshape(x.shape)[index], info)
    if not spans:
        return None
    if len(spans) == 1:
        return spans[0]
    return min(s[0] for s in spans), max(s[1] for s in spans), None  # bounds: element_spans has them all


def element_spans(rec: RaceRecording, x: npt.NDArray[Any], index: Any, info: Info) -> list[_Span]:
    """``[(lo, hi, footprint)]`` of exactly the bytes ``x[index]`` touches: one span for basic
    indexing, the elements' progressions for index arrays and boolean masks."""
    if _basic(index):
        span = element_range(rec, x, index, info)
        return [span] if span else []
    return _positions_spans(x, np.arange(x.size).reshape(x.shape)[index], info)


def _positions_spans(x: npt.NDArray[Any], positions: npt.ArrayLike, info: Info) -> list[_Span]:
    """The spans (see :func:`element_spans`) of the elements of ``x`` at flat C-order ``positions``;
    beyond :func:`~shmem_notebook.analysis.footprint.scattered`'s pieces, their bounding range."""
    positions = np.unique(np.asarray(positions, dtype=np.intp).reshape(-1))
    if not positions.size:
        return []
    if x.flags.c_contiguous:
        offsets = info[2] + positions * x.itemsize
    else:
        offsets = np.unique(info[2] + np.dot(np.stack(np.unravel_index(positions, x.shape), -1), x.strides))
    offsets = offsets.tolist()
    spans = scattered(offsets, x.itemsize)
    return spans if spans is not None else [(offsets[0], offsets[-1] + x.itemsize, None)]


def _flat_positions(a: npt.NDArray[Any], index: Any, mode: str | None = None) -> npt.NDArray[Any]:
    """The flat C-order positions ``a.flat[index]`` (or ``np.put(a, index, ..., mode)``) touches."""
    pos = np.asarray(np.arange(a.size)[index] if mode is None else index, dtype=np.intp).reshape(-1)
    if mode == "wrap":
        return pos % a.size
    if mode == "clip":
        return np.clip(pos, 0, a.size - 1)
    return np.where(pos < 0, pos + a.size, pos)


def _note_at(rec: RaceRecording, a: npt.NDArray[Any], positions: npt.ArrayLike, op: str, mode: str, line: int) -> None:
    """Note ``a``'s elements at flat C-order ``positions`` as read or written (``mode``) by ``op``."""
    info = _wanted(rec, a)
    if info and a.size:
        for span in _positions_spans(a, positions, info):
            rec.access(a, op, mode, line, *span, info)


def _mark() -> None:
    if _record.race is not None:
        _record.cell_files.add(sys._getframe(1).f_code.co_filename)


def _flat_range(
    rec: RaceRecording, x: np.flatiter[Any], index: Any
) -> tuple[npt.NDArray[Any], Info, list[_Span]] | None:
    """``(x, info, spans)`` of the elements ``x.flat[index]`` touches of its array (C order, see
    :func:`element_spans`); None when no access to them can matter."""
    a = x.base
    info = _wanted(rec, a)
    if not info or not a.size:
        return None
    spans = _positions_spans(a, _flat_positions(a, index), info)
    return (a, info, spans) if spans else None


def _get(x: Any, index: Any, line: int) -> Any:
    return get_rest(x, index, line, x[index])


def get_rest(x: Any, index: Any, line: int, r: _T) -> _T:
    """What :func:`_get` notes of ``r = x[index]`` (the C ``get`` takes slices of arrays itself)."""
    rec = _record.race
    if rec is not None and not _depth[0]:
        if isinstance(x, _ndarray):
            if isinstance(r, _ndarray) and (type(index) is slice or _basic(index)):
                base = x.base  # numpy_owned(x), inline: most views a loop takes are of NumPy's memory
                if rec.private.starts or not (base is None or (isinstance(base, _ndarray) and base.base is None)):
                    rec.memory.view(x, index, r)
                return r  # a view: memory is counted when the view is used
            info = _wanted(rec, x)
            for span in element_spans(rec, x, index, info) if info else ():
                rec.access(x, "load", "read", line, *span, info)
        elif type(x) is _flatiter:
            found = _flat_range(rec, x, index)
            for span in found[2] if found else ():
                rec.access(found[0], "load", "read", line, *span, found[1])  # type: ignore[index]  # has spans
        elif type(x) is _memoryview and type(r) is not _memoryview:  # a slice of it is a view, counted when used
            _note_viewed(rec, x, index, "load", "read", line)
    return r


def _set(x: Any, index: Any, value: Any, line: int) -> None:
    rec = _record.race
    if rec is not None and not _depth[0]:
        if isinstance(x, _ndarray):
            if isinstance(value, _ndarray):
                rec.access(value, "load", "read", line)
            info = _wanted(rec, x)
            spans = element_spans(rec, x, index, info) if info else ()
            kept = value if isinstance(value, _SCALARS) and len(spans) == 1 else None
            for span in spans:
                rec.access(x, "store", "write", line, *span, info, kept)
        elif type(x) is _flatiter:
            if isinstance(value, _ndarray):
                rec.access(value, "load", "read", line)
            found = _flat_range(rec, x, index)
            for span in found[2] if found else ():
                rec.access(found[0], "store", "write", line, *span, found[1])  # type: ignore[index]  # has spans
        elif type(x) is _memoryview:
            _note_viewed(rec, x, index, "store", "write", line)
    x[index] = value


class _Slot:
    """``x[index]`` as one target of an unpacking or chained assignment: the rewritten cell assigns
    ``_slot(x, index, line).value``, a store through :func:`_set` when Python makes it."""

    __slots__ = ("x", "index", "line")

    def __init__(self, x: Any, index: Any, line: int) -> None:
        self.x, self.index, self.line = x, index, line

    def _store(self, value: Any) -> None:
        _set(self.x, self.index, value, self.line)

    value = property(fset=_store)


def _aug(x: Any, index: Any, op: str, value: Any, line: int) -> None:
    rec = _record.race
    if rec is not None and not _depth[0] and type(x) is _memoryview:
        _note_viewed(rec, x, index, "load", "read", line)
        _note_viewed(rec, x, index, "store", "write", line)
    if rec is not None and not _depth[0] and (isinstance(x, _ndarray) or type(x) is _flatiter):
        if isinstance(value, _ndarray):
            rec.access(value, "load", "read", line)
        a: npt.NDArray[Any]
        if isinstance(x, _ndarray):
            info = _wanted(rec, x)
            spans = element_spans(rec, x, index, info) if info else ()
            a = x
        else:
            found = _flat_range(rec, x, index)
            a, info, spans = found or (None, None, ())  # type: ignore[assignment]  # None: no spans
        for span in spans:
            rec.access(a, "load", "read", line, *span, info)
            rec.access(a, "store", "write", line, *span, info)
    x[index] = _AUG[op](x[index], value)


def _viewed(x: memoryview) -> npt.NDArray[Any] | None:
    """The memory ``x`` shows, as an array of its format and shape (no copy); None where NumPy cannot
    read it (a format it does not know, a released view)."""
    try:
        return np.asarray(x)
    except (TypeError, ValueError):
        return None


def _note_viewed(rec: RaceRecording, x: memoryview, index: Any, op: str, mode: str, line: int) -> None:
    """Note ``x[index]`` of a memoryview ``x`` as read or written: the same bytes as of the array it shows."""
    a = _viewed(x)
    info = _wanted(rec, a) if a is not None else None
    try:
        spans = element_spans(rec, a, index, info) if info else ()  # type: ignore[arg-type]  # info: a is set
    except (IndexError, TypeError, ValueError):  # an index the memoryview refuses: it raises in the cell
        spans = ()
    for span in spans:
        rec.access(a, op, mode, line, *span, info)  # type: ignore[arg-type]  # spans: a is set


def _read(value: _T, line: int) -> _T:
    rec = _record.race
    if isinstance(value, _ndarray) and rec is not None and not _depth[0]:
        rec.access(value, "load", "read", line)
    return value


def _iter(value: _T, line: int) -> _T:
    """``for x in value``: a 1-D array's elements are read; an N-D array hands out its rows, views whose
    elements count when they are used (a generator made now may read them much later)."""
    rec = _record.race
    if isinstance(value, _ndarray) and value.ndim < 2 and rec is not None and not _depth[0]:
        rec.access(value, "load", "read", line)
    elif isinstance(value, _memoryview) and value.ndim < 2 and rec is not None and not _depth[0]:
        _read_viewed(rec, value, "load", line)
    return value


def _rw(value: object, line: int) -> None:
    rec = _record.race
    if isinstance(value, _ndarray) and rec is not None and not _depth[0]:
        rec.access(value, "load", "read", line)
        rec.access(value, "store", "write", line)


def _call(line: int, f: Any, *args: Any, **kwargs: Any) -> Any:
    rec = _record.race
    if rec is None or _depth[0] or getattr(f, "__shmem_race_skip__", False):
        return f(*args, **kwargs)
    if f is _compile_builtin:  # its text is run rewritten if the code object goes to exec
        code = f(*args, **kwargs)
        outside.compiled(code, args[0] if args else kwargs.get("source"))
        return code
    kind = type(f)
    if kind is _Function or kind is _Method:
        if _record.outside_enabled:
            g = outside.rewritten(f)  # None: library code, or its source is not found
            if g is not None:
                return g(*args, **kwargs)
        elif getattr(f, "__shmem_race_cell__", False):
            return f(*args, **kwargs)
    elif kind is type:
        made = _construct(f, args, kwargs) if _record.outside_enabled else _NOT_MADE
        if made is not _NOT_MADE:
            return made
        if _binds_only(f):
            return f(*args, **kwargs)
    owner = getattr(f, "__self__", None)
    name = getattr(f, "__name__", "call")
    if isinstance(f, _ufunc) or isinstance(owner, _ufunc):
        return _call_ufunc(rec, line, f, owner, name, args, kwargs)
    try:
        skip = f in _NO_READ_FUNCS
        binds, iterates, indexed = f in _BINDERS, f in _ITERATING, _INDEXED.get(f)
    except TypeError:  # unhashable callables
        skip = binds = iterates = False
        indexed = None
    if owner is not None and not binds:
        binds = name in _ADDS and isinstance(owner, _CONTAINERS) or (name in _FFI_BINDS and _is_ffi(owner))
        iterates = name in _EXTENDS and isinstance(owner, _CONTAINERS)
        if name == "put" and isinstance(owner, _ndarray):
            indexed = _put
    if binds:  # binding an array (to a partial, a container, an address) touches no element
        return f(*args, **kwargs)
    if iterates:  # an N-D array's rows are views, used later; a 1-D array's elements are read
        for a in args:
            if isinstance(a, _ndarray) and a.ndim < 2:
                rec.access(a, name, "read", line)
        return f(*args, **kwargs)
    if indexed is not None:
        return indexed(rec, line, name, owner, args, kwargs)
    arrays = [owner] if isinstance(owner, _ndarray) and name not in _NO_READ_METHODS else []
    if type(owner) is _memoryview and name not in _VIEW_METHODS:  # tolist, tobytes, hex, ...: read
        _read_viewed(rec, owner, name, line)
    if not skip:
        for a in args:
            if isinstance(a, _ndarray):
                arrays.append(a)
            elif type(a) is _memoryview:  # bytes(view), np.array(view), ...: nothing writes through it
                _read_viewed(rec, a, name, line)
            elif isinstance(a, (list, tuple)) and len(a) <= 64:
                for item in a:
                    if isinstance(item, _ndarray):
                        rec.access(item, name, "read", line)
        out = kwargs.get("out")
        for key, a in kwargs.items():
            if isinstance(a, _ndarray) and key != "out":
                arrays.append(a)
        for a in out if isinstance(out, tuple) else (out,):
            if isinstance(a, _ndarray):
                rec.access(a, name, "write", line)
    if not arrays:
        return f(*args, **kwargs)
    module = getattr(f, "__module__", None) or type(owner).__module__
    if _compiled(f, kind, module):
        rec.compiled.add(line)
        for a in arrays:
            rec.access(a, name, "read", line)
            rec.access(a, name, "write", line)
        return f(*args, **kwargs)
    if not module or module.partition(".")[0] not in _PROBED:
        for a in arrays:
            rec.access(a, name, "read", line)
        return f(*args, **kwargs)
    try:
        result, written = _probe(f, _key(f, owner, name, args, kwargs), args, kwargs, arrays)
    except BaseException:
        for a in arrays:
            rec.access(a, name, "read", line)
        raise
    for a in arrays:  # a write covers its read (`sort` reads too): one event for it
        rec.access(a, name, "write" if any(a is w for w in written) else "read", line)
    return result


_NOT_MADE = object()


def _read_viewed(rec: RaceRecording, x: memoryview, name: str, line: int) -> None:
    a = _viewed(x)
    if a is not None and a.size:
        rec.access(a, name, "read", line)


def _binds_only(cls: type[Any]) -> bool:
    """Does making ``cls`` only bind its arguments, or leave them to code that is recorded itself: an
    ``__init__`` defined in the cell (rewritten), a dataclass's, a named tuple, ``functools.partial``?"""
    init = cls.__init__
    return bool(
        getattr(init, "__shmem_race_cell__", False)
        or cls in _BINDERS
        or (dataclasses.is_dataclass(cls) and type(init) is _Function and init.__code__.co_filename == "<string>")
        or (issubclass(cls, tuple) and hasattr(cls, "_fields"))
    )


def _put(rec: RaceRecording, line: int, name: str, owner: Any, args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
    """``np.put(a, ind, v, mode)`` / ``a.put(ind, v, mode)``: writes ``a.flat`` at ``ind`` (wrapped or clipped)."""
    a, rest = (owner, args) if owner is not None else (args[0] if args else kwargs.get("a"), args[1:])
    ind = rest[0] if rest else kwargs.get("ind")
    v = rest[1] if len(rest) > 1 else kwargs.get("v")
    mode = rest[2] if len(rest) > 2 else kwargs.get("mode", "raise")
    if isinstance(v, _ndarray):
        rec.access(v, name, "read", line)
    if isinstance(a, _ndarray) and a.size:
        _note_at(rec, a, _flat_positions(a, ind, mode), name, "write", line)
    return (owner.put if owner is not None else np.put)(*args, **kwargs)


def _masked(rec: RaceRecording, line: int, name: str, owner: Any, args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
    """``np.place(arr, mask, vals)`` / ``np.putmask(a, mask, values)``: writes the elements where ``mask``."""
    a = args[0] if args else kwargs.get("arr", kwargs.get("a"))
    mask = args[1] if len(args) > 1 else kwargs.get("mask")
    vals = args[2] if len(args) > 2 else kwargs.get("vals", kwargs.get("values"))
    if isinstance(vals, _ndarray):
        rec.access(vals, name, "read", line)
    if isinstance(a, _ndarray) and a.size:
        _note_at(rec, a, np.flatnonzero(np.asarray(mask, dtype=bool)), name, "write", line)
    return _INDEXED_FUNCS[name](*args, **kwargs)


def _copyto(rec: RaceRecording, line: int, name: str, owner: Any, args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
    """``np.copyto(dst, src, casting, where)``: writes ``dst`` where ``where`` (broadcast) holds."""
    dst = args[0] if args else kwargs.get("dst")
    src = args[1] if len(args) > 1 else kwargs.get("src")
    where = args[3] if len(args) > 3 else kwargs.get("where", True)
    if isinstance(src, _ndarray):
        rec.access(src, name, "read", line)
    if isinstance(dst, _ndarray) and dst.size:
        if where is True:
            rec.access(dst, name, "write", line)
        else:
            mask = np.broadcast_to(np.asarray(where, dtype=bool), dst.shape)
            _note_at(rec, dst, np.flatnonzero(mask), name, "write", line)
    return np.copyto(*args, **kwargs)


_INDEXED_FUNCS: dict[str, Callable[..., Any]] = {
    "put": np.put,
    "place": np.place,
    "putmask": np.putmask,
    "copyto": np.copyto,
}
#: NumPy calls that write the elements an index, a mask or ``where=`` selects: their exact footprint
_INDEXED = {np.put: _put, np.place: _masked, np.putmask: _masked, np.copyto: _copyto}
#: callables that only bind their arguments (a partial, a namespace, an attribute, a buffer): no element touched
_BINDERS = {
    functools.partial,
    functools.partialmethod,
    types.SimpleNamespace,
    types.MethodType,
    setattr,
    object.__setattr__,
    memoryview,
    weakref.ref,
    weakref.proxy,
    np.ctypeslib.as_ctypes,
}
#: containers whose adding methods (:data:`_ADDS`) bind an array, and whose ``extend`` iterates it
_CONTAINERS = (list, dict, set, collections.deque, queue.Queue, queue.SimpleQueue)
_ADDS = frozenset({"append", "appendleft", "insert", "setdefault", "update", "add", "put", "put_nowait", "__setitem__"})
_EXTENDS = frozenset({"extend", "extendleft"})
#: builtins that iterate an array: over an N-D array they hand out views (rows), over a 1-D one elements
_ITERATING = {list, tuple, zip, enumerate, iter, reversed, dict}
#: cffi's FFI methods that make a pointer or a buffer of an array: its address, not its elements
_FFI_BINDS = frozenset({"from_buffer", "cast", "addressof", "buffer", "new_handle", "typeof", "sizeof"})


def _is_ffi(owner: object) -> bool:
    return type(owner).__module__ == "_cffi_backend"


def _construct(cls: type[Any], args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
    """``cls(*args, **kwargs)`` with its ``__init__`` rewritten (a class defined in an earlier cell or the
    user's module), as ``type.__call__`` makes it: ``object.__new__`` then ``__init__``. Only for a plain
    class (no metaclass, no ``__new__`` of its own); :data:`_NOT_MADE` when not (the call is made as before)."""
    init = cls.__init__
    if type(init) is not _Function or cls.__new__ is not _object_new:  # type: ignore[comparison-overlap]  # typeshed
        return _NOT_MADE
    g = outside.rewritten(init)
    if g is None or g is init:  # library code, or rewritten already (defined in the cell)
        return _NOT_MADE
    made = _object_new(cls)
    g(made, *args, **kwargs)
    return made


_object_new = object.__new__
_ufunc = np.ufunc
_flatiter = np.flatiter
_Function, _Method, _Builtin = types.FunctionType, types.MethodType, types.BuiltinFunctionType
_CFuncPtr = ctypes._CFuncPtr  # type: ignore[attr-defined]  # private in typeshed: the base of ctypes functions
_CYTHON = {"cython_function_or_method", "fused_cython_function"}
#: modules whose C functions do not write arrays unseen: NumPy's and SciPy's are probed, the others only read
_SEEN_INTO = {"numpy", "scipy", "shmem4py", "shmem_notebook", "builtins", *sys.stdlib_module_names}
_PROBED = {"numpy", "scipy"}  # C-level code that checks WRITEABLE before it changes anything
_READ_ONLY = ("read-only", "writable", "writeable")
_UFUNC_OUT = {"reduce": 3, "accumulate": 3, "reduceat": 4}  # positional `out` of a ufunc's methods


def _call_ufunc(
    rec: RaceRecording,
    line: int,
    f: Any,
    owner: np.ufunc | None,
    name: str,
    args: tuple[Any, ...],
    kwargs: dict[str, Any],
) -> Any:
    """A ufunc writes its outputs (positional after ``nin``, or ``out=``); ``ufunc.at`` its first argument."""
    if owner is None:
        outputs = args[f.nin :]
        reads = args[: f.nin]
    elif name == "at" and args and isinstance(args[0], _ndarray) and len(args) > 1:  # a[idx] op= b, exactly
        a, name = args[0], f"{owner.__name__}.at"
        for b in (*args[2:], *kwargs.values()):
            if isinstance(b, _ndarray):
                rec.access(b, name, "read", line)
        if a.size:
            positions = np.arange(a.size).reshape(a.shape)[args[1]]
            _note_at(rec, a, positions, name, "read", line)
            _note_at(rec, a, positions, name, "write", line)
        return f(*args, **kwargs)
    else:
        at = _UFUNC_OUT.get(name)
        outputs = args[:1] if name == "at" else (args[at : at + 1] if at is not None else ())
        reads = args[:at] if at is not None else args
        name = f"{owner.__name__}.{name}"
    out = kwargs.get("out")
    outputs = (*outputs, *(out if isinstance(out, tuple) else (out,)))
    for a in (*reads, *(v for k, v in kwargs.items() if k != "out")):
        if isinstance(a, _ndarray):
            rec.access(a, name, "read", line)
    for a in outputs:
        if isinstance(a, _ndarray):
            rec.access(a, name, "write", line)
    return f(*args, **kwargs)


def _compiled(f: object, kind: type, module: str | None) -> bool:
    """Is ``f`` compiled code the recording cannot see into: a numba, Cython, ctypes or cffi function,
    or a C extension's function (not NumPy's, SciPy's or the standard library's)?"""
    if kind is _Builtin:
        return (module or "builtins").partition(".")[0] not in _SEEN_INTO
    if kind is _Function or kind is _Method:
        return False
    return (
        isinstance(f, _CFuncPtr)
        or kind.__name__ in _CYTHON
        or kind.__module__.partition(".")[0] in ("numba", "_cffi_backend")
    )


def _key(f: object, owner: object, name: str, args: tuple[Any, ...], kwargs: dict[str, Any]) -> Hashable:
    """What a call's writes are remembered by: the callable, its arguments' count, the keywords
    (with their values when plain: ``copy=False`` writes where ``copy=True`` does not)."""
    plain = tuple((k, v) if isinstance(v, (bool, int, str, type(None))) else k for k, v in kwargs.items())
    return (f if owner is None else (type(owner), name)), len(args), plain


def _probe(
    f: Callable[..., Any], key: Hashable, args: tuple[Any, ...], kwargs: dict[str, Any], arrays: list[npt.NDArray[Any]]
) -> tuple[Any, list[npt.NDArray[Any]]]:
    """Call ``f`` with ``arrays`` read-only; if NumPy refuses to write one, find which (each made
    writable alone; if none suffices, the first, then again). Returns the result and the arrays
    ``f`` wrote. The positions found written are remembered by ``key`` and not probed again."""
    try:
        known = _record.written.get(key, ())
    except TypeError:  # an unhashable callable
        key, known = None, ()
    written = [i for i in known if i < len(arrays)]
    protected = [i for i, a in enumerate(arrays) if i not in written and a.flags.writeable]
    while True:
        done, result = _attempt(f, args, kwargs, arrays, protected)
        for j in protected if not done else ():
            done, result = _attempt(f, args, kwargs, arrays, [i for i in protected if i != j])
            if done:
                written.append(j)
                break
        if done:
            break
        written.append(protected.pop(0))  # two or more are written
    if key is not None and written:
        _record.written[key] = tuple(sorted(set(known) | set(written)))
    return _writable_views(result, arrays), [arrays[i] for i in written]


def _attempt(
    f: Callable[..., Any],
    args: tuple[Any, ...],
    kwargs: dict[str, Any],
    arrays: list[npt.NDArray[Any]],
    protected: list[int],
) -> tuple[bool, Any]:
    """``(True, result)`` of ``f`` called with ``arrays[i]`` read-only for ``i`` in ``protected``;
    ``(False, None)`` if NumPy refused to write one of them (NumPy checks before it writes)."""
    for i in protected:
        arrays[i].setflags(write=False)
    try:
        result = f(*args, **kwargs)
    except ValueError as exc:
        if not protected or not any(w in str(exc) for w in _READ_ONLY):
            raise
        return False, None
    finally:
        for i in protected:
            arrays[i].setflags(write=True)
    return True, result


def _writable_views(result: _T, arrays: list[npt.NDArray[Any]]) -> _T:
    """Views ``f`` returned of an array it saw read-only are made writable again, as without the probe."""
    for r in result if isinstance(result, (list, tuple)) and len(result) <= 64 else (result,):
        if isinstance(r, _ndarray) and not r.flags.writeable and r.base is not None:
            if any(np.may_share_memory(r, a) and a.flags.writeable for a in arrays):
                try:
                    r.flags.writeable = True
                except ValueError:
                    pass
    return result


_exec_builtin = builtins.exec
_compile_builtin = builtins.compile


def _exec(
    line: int, f: Callable[..., Any], g: dict[str, Any], loc: Mapping[str, object], *args: Any, **kwargs: Any
) -> Any:
    """``f(*args)`` called by rewritten code at ``line`` with ``globals()`` and ``locals()`` there: when
    ``f`` is ``exec`` and it is given text, or a code object whose text is known (:func:`.outside.code_text`),
    the text runs rewritten (see :mod:`.outside`)."""
    if f is not _exec_builtin:
        return f(*args, **kwargs)
    if len(args) == 1 and not kwargs:  # exec's default: the namespaces of its caller
        args = (args[0], g, loc)
    if _record.race is not None and not _depth[0] and _record.outside_enabled and args:
        text = outside.code_text(args[0]) if type(args[0]) is types.CodeType else args[0]
        if isinstance(text, (str, bytes)):
            code = outside.exec_code(text, line)
            if code is not None:
                args = (code, *args[1:])
    return _exec_builtin(*args, **kwargs)


def _top(line: int, f: Any, *args: Any, **kwargs: Any) -> Any:
    """:func:`_call` made by the cell's top-level code: the events a Python function, method or class it
    calls records are noted as that line's (see :mod:`.callsites`)."""
    rec = _record.race
    if rec is None or _depth[0] or not _record.outside_enabled:  # the race runner numbers its programs' lines itself
        return _call(line, f, *args, **kwargs)
    kind = type(f)
    if kind is _Function or kind is _Method:
        if getattr(f, "__shmem_race_skip__", False):
            return f(*args, **kwargs)
        g = outside.rewritten(f)  # as _call runs it, without its frame
        if g is None:
            return _call(line, f, *args, **kwargs)
    elif isinstance(f, type):
        g = None  # made by _call, which looks into its __init__
    else:
        return _call(line, f, *args, **kwargs)  # nothing of the user's runs in it
    if rec.call_line != line:  # no event of another call's merges into this one's (nor the other way)
        rec.merge.clear()
        rec.call_line = line
    events = rec.events
    start = len(events)
    try:
        return g(*args, **kwargs) if g is not None else _call(line, f, *args, **kwargs)
    finally:
        end = len(events)
        if end > start:
            calls = rec.calls
            if calls and calls[-2] == start and calls[-1] == line:  # a loop's calls of one line: one span
                calls[-2] = end
            else:
                calls.extend((start, end, line))


def _fn(f: _T) -> _T:
    try:
        f.__shmem_race_cell__ = True  # type: ignore[attr-defined]  # a function takes attributes
    except (AttributeError, TypeError):
        pass
    return f


class _Index:
    """``_Index()[key] -> key``: a rewritten subscript's index as a value (``native_record.c``'s ``Index``)."""

    def __getitem__(self, key: _T) -> _T:
        return key


FUNCS: dict[str, Callable[..., Any]] = {
    "mark": _mark,
    "get": _get,
    "set": _set,
    "slot": _Slot,
    "aug": _aug,
    "read": _read,
    "rw": _rw,
    "iter": _iter,
    "call": _call,
    "top": _top,
    "fn": _fn,
    "exec": _exec,
    "ix": _Index(),  # type: ignore[dict-item]  # not called: subscripted
}
