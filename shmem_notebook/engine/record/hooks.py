"""The hooks a rewritten cell calls on every array load and store (PE side).

:class:`.instrument.AccessTransformer` rewrites the recorded cell so that ``x[i]``,
``x[i] = v``, ``x[i] += v`` and calls go through these functions, which note the
access in the active race recording (:func:`install` sets it) and do what the cell
asked. Accesses made inside a recorded shmem call are the layer's to record.
"""

import operator
import sys

import numpy as np

from . import state
from .layer import _depth  # >0 inside a recorded call (a list: read without a call)
from ...analysis.footprint import of_view
from .memory import extent

__all__ = ["install", "uninstall", "FUNCS"]

_rec = None  # the RaceRecording the hooks feed, or None


def install(recording):
    """Feed ``recording`` from now on; the hook functions go into the shell's namespace."""
    global _rec
    from .instrument import HOOKS

    _rec = recording
    ns = state.shell.user_ns
    for hook, func in FUNCS.items():
        ns[HOOKS[hook]] = func


def uninstall():
    """Stop feeding (the hooks stay in the namespace: functions the cell defined still call them)."""
    global _rec
    _rec = None


_ndarray = np.ndarray
_BASIC = (int, slice, type(Ellipsis), type(None), np.integer)
_NO_READ_METHODS = frozenset(
    "reshape view ravel transpose swapaxes squeeze __array__ __array_interface__ nonzero".split()
)
_WRITE_METHODS = frozenset("fill itemset put setfield resize".split())
_RW_METHODS = frozenset("sort partition byteswap".split())
_NO_READ_FUNCS = {len, isinstance, type, id, hasattr, getattr, callable, np.shape, np.ndim, np.size,
                  np.frombuffer, np.asarray, np.asanyarray, np.may_share_memory, np.shares_memory}
_WRITE_FIRST = {np.copyto, np.put, np.place, np.putmask, np.fill_diagonal}
_AUG = {
    "+": operator.iadd, "-": operator.isub, "*": operator.imul, "/": operator.itruediv, "//": operator.ifloordiv,
    "%": operator.imod, "**": operator.ipow, "<<": operator.ilshift, ">>": operator.irshift, "|": operator.ior,
    "^": operator.ixor, "&": operator.iand, "@": operator.imatmul,
}


def _basic(index):
    if isinstance(index, tuple):
        return all(isinstance(i, _BASIC) for i in index)
    return isinstance(index, _BASIC)


def _element_range(rec, x, index):
    """``(lo, hi, footprint)`` of the bytes ``x[index]`` touches (bounds for fancy indexing)."""
    info = rec.memory.info(x)
    if info[7] and isinstance(index, (int, np.integer)):  # 1-D, one element: the fast path
        i = int(index)
        if i < 0:
            i += info[8]
        lo = info[2] + i * info[7]
        return lo, lo + info[5], None
    if _basic(index):
        idx = index if isinstance(index, tuple) else (index,)
        idx = tuple(slice(i, i + 1 or None) if isinstance(i, (int, np.integer)) else i for i in idx)
        view = x[idx]
        if view.size == 0:
            return None
        base = rec.memory.heap[0] if info[1] == "sym" else 0
        if view.flags.c_contiguous:
            _, lo, hi = extent(view)
            return lo - base, hi - base, None
        return of_view(view.__array_interface__["data"][0] - base, view.itemsize, view.shape, view.strides)
    flat = np.arange(x.size).reshape(x.shape)[index]
    if np.size(flat) == 0:
        return None
    first, last = int(np.min(flat)), int(np.max(flat))
    if x.flags.c_contiguous:
        return info[2] + first * x.itemsize, info[2] + (last + 1) * x.itemsize, None
    return info[3], info[4], info[9]


def _mark():
    if _rec is not None:
        state.cell_files.add(sys._getframe(1).f_code.co_filename)


def _get(x, index, line):
    r = x[index]
    rec = _rec
    if rec is not None and isinstance(x, _ndarray) and not _depth[0]:
        if isinstance(r, _ndarray) and _basic(index):
            return r  # a view: memory is counted when the view is used
        span = _element_range(rec, x, index)
        if span:
            rec.access(x, "load", "read", line, *span)
    return r


def _set(x, index, value, line):
    rec = _rec
    if rec is not None and isinstance(x, _ndarray) and not _depth[0]:
        if isinstance(value, _ndarray):
            rec.access(value, "load", "read", line)
        span = _element_range(rec, x, index)
        if span:
            rec.access(x, "store", "write", line, *span)
    x[index] = value


def _aug(x, index, op, value, line):
    rec = _rec
    if rec is not None and isinstance(x, _ndarray) and not _depth[0]:
        if isinstance(value, _ndarray):
            rec.access(value, "load", "read", line)
        span = _element_range(rec, x, index)
        if span:
            rec.access(x, "load", "read", line, *span)
            rec.access(x, "store", "write", line, *span)
    x[index] = _AUG[op](x[index], value)


def _read(value, line):
    if isinstance(value, _ndarray) and _rec is not None and not _depth[0]:
        _rec.access(value, "load", "read", line)
    return value


def _rw(value, line):
    if isinstance(value, _ndarray) and _rec is not None and not _depth[0]:
        _rec.access(value, "load", "read", line)
        _rec.access(value, "store", "write", line)


def _write(value, line):
    if isinstance(value, _ndarray) and _rec is not None and not _depth[0]:
        _rec.access(value, "store", "write", line)


def _call(line, f, *args, **kwargs):
    rec = _rec
    if rec is None or _depth[0] or getattr(f, "__shmem_race_skip__", False) or getattr(f, "__shmem_race_cell__", False):
        return f(*args, **kwargs)
    owner = getattr(f, "__self__", None)
    if isinstance(owner, _ndarray):
        name = getattr(f, "__name__", "")
        if name in _WRITE_METHODS:
            rec.access(owner, name, "write", line)
        elif name in _RW_METHODS:
            rec.access(owner, name, "read", line)
            rec.access(owner, name, "write", line)
        elif name not in _NO_READ_METHODS:
            rec.access(owner, name, "read", line)
    try:
        skip = f in _NO_READ_FUNCS
        first_written = f in _WRITE_FIRST
    except TypeError:  # unhashable callables
        skip = first_written = False
    if not skip:
        name = getattr(f, "__name__", "call")
        for i, a in enumerate(args):
            if isinstance(a, _ndarray):
                rec.access(a, name, "write" if (i == 0 and first_written) else "read", line)
            elif isinstance(a, (list, tuple)) and len(a) <= 64:
                for item in a:
                    if isinstance(item, _ndarray):
                        rec.access(item, name, "read", line)
        for key, a in kwargs.items():
            if isinstance(a, _ndarray):
                rec.access(a, name, "write" if key == "out" else "read", line)
            elif key == "out" and isinstance(a, tuple):
                for item in a:
                    if isinstance(item, _ndarray):
                        rec.access(item, name, "write", line)
    return f(*args, **kwargs)


def _fn(f):
    try:
        f.__shmem_race_cell__ = True
    except (AttributeError, TypeError):
        pass
    return f


FUNCS = {"mark": _mark, "get": _get, "set": _set, "aug": _aug, "read": _read, "rw": _rw,
               "write": _write, "call": _call, "fn": _fn}
