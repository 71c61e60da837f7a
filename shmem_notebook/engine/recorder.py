"""Record what one cell does to memory on this PE: shmem4py calls, loads and stores (PE side).

Used by the race detector (``job.run(code, race=True)``); ``--trace`` has its own
lighter recorder, :mod:`.trace` (calls only, plus heap snapshots per epoch), and
both may record the same cell. The API is three calls, all local to the PE:

- :func:`start` ``(options)``: record the next cell. Wraps shmem4py's module
  functions (RMA, atomics, synchronisation, collectives, locks, allocation) and
  puts :class:`~.instrument.AccessTransformer` on the engine shell's
  ``ast_transformers`` so loads/stores on NumPy arrays are seen too.
  ``options``: ``cap`` (most events kept, default 50,000), ``loads`` (default
  True), ``delay`` (``(seed, max_seconds)``: random sleeps around every shmem
  call, for stress runs).
- :func:`stop` ``() -> dict``: undo everything and return plain data (below).
- :func:`active` ``() -> bool``.

Off means off: nothing is wrapped or transformed unless :func:`start` was called.

The data :func:`stop` returns: ``pe``, ``npes``, ``events`` (program order),
``names`` (what the cell calls each piece of memory), ``ops`` (calls and
accesses seen, before summarising), ``truncated`` (``None`` or the cell line
where the cap was hit), ``cap``. Memory is ``space`` ``"sym"`` (offset in the
symmetric heap, the same on every PE) or ``"priv"`` (this PE's private address),
ranges are bytes ``[lo, hi)``; ``line`` is the 1-based line in the cell
(0 if unknown). Events are lists; repeated accesses from one line to adjacent
memory are merged into one event (a range), so loops stay small:

- ``["mem", op, line, mode, space, lo, hi, dtype]``: a load (``mode`` "read")
  or store ("write") on this PE's memory; ``op`` is ``load``/``store``/a method
  name.
- ``["rma", op, line, pe, lo, hi, dtype, lspace, llo, lhi, ctx, values]``: an
  RMA or atomic call on PE ``pe``'s symmetric range, with the local buffer it
  reads or writes (``lspace`` None for atomics), the context (0: default) and
  the values written when known (single-element writes).
- ``["sync", op, line, ctx, members]``: ``barrier_all``, ``sync_all`` (also
  ``sync``/``Team.sync``), ``alloc``, ``free`` (collective), ``quiet``,
  ``fence``, ``ctx_destroy``; ``members`` the team's world PEs (None: all).
- ``["coll", op, line, tspace, tlo, thi, sspace, slo, shi, dtype, root, members]``:
  broadcast, reductions, collect, fcollect, alltoall(s).
- ``["wait", op, line, lo, hi, dtype, observed]``: a ``wait_until*`` or a
  ``test*`` that succeeded, on this PE's symmetric range; ``observed`` the
  values seen when it returned.
- ``["lock", op, line, lock]``: ``set_lock``/``clear_lock`` (``test_lock``
  that acquired counts as ``set_lock``) on the lock at symmetric offset ``lock``.
"""

import operator
import random
import sys
import time
from weakref import ref as _weakref

import numpy as np
from shmem4py import shmem

from ..errors import ShmemNotebookError
from . import teams
from .instrument import HOOKS, AccessTransformer, MarkTransformer

__all__ = ["start", "stop", "active", "UnsupportedError", "install_unsupported", "UNSUPPORTED"]

DEFAULT_CAP = 50_000


class UnsupportedError(ShmemNotebookError, NotImplementedError):
    """The cell used an OpenSHMEM feature the library on the PEs does not implement."""


#: shmem4py functions this OpenSHMEM (Open MPI 4.1.4's OSHMEM, OpenSHMEM 1.4) lacks -> what to use
UNSUPPORTED = {
    **{
        f"atomic_{name}_nbi": f"shmem.atomic_{name}"
        for name in ("fetch", "swap", "compare_swap", "fetch_inc", "fetch_add", "fetch_and", "fetch_or", "fetch_xor")
    },
    "atomic_fetch_op_nbi": "shmem.atomic_fetch_op",
    "put_signal": "shmem.put + shmem.fence() + shmem.atomic_set on a flag",
    "put_signal_nbi": "shmem.put_nbi + shmem.fence() + shmem.atomic_set on a flag",
    "signal_wait_until": "shmem.wait_until on a flag array",
    "signal_fetch": "shmem.atomic_fetch on a flag array",
}


def _unsupported(name, instead):
    def refuse(*args, **kwargs):
        raise UnsupportedError(
            f"shmem.{name} is not supported by this OpenSHMEM (Open MPI's OSHMEM implements "
            f"OpenSHMEM 1.4, which has no non-blocking atomics and no put-with-signal); use {instead} instead"
        )

    refuse.__name__ = name
    return refuse


def install_unsupported(module):
    """Make the functions of :data:`UNSUPPORTED` raise :class:`UnsupportedError` (once, at PE start)."""
    for name, instead in UNSUPPORTED.items():
        if hasattr(module, name):
            setattr(module, name, _unsupported(name, instead))


# -- where memory is ------------------------------------------------------------------
def _heap_range():
    """``(lo, hi)`` of the symmetric heap's mapping in this process."""
    probe = [int(key) for key in list(shmem._heap.keys())[:1]] or [0xFF000000]  # OSHMEM's usual base
    with open("/proc/self/maps") as maps:
        for line in maps:
            lo, hi = (int(x, 16) for x in line.split()[0].split("-"))
            if lo <= probe[0] < hi:
                return lo, hi
    return 0, 0


_ffi = shmem.ffi


def _extent(a):
    """``(address, lo, hi)``: byte range an ndarray spans (its first..last element)."""
    if a.flags.c_contiguous and a.size:  # cffi finds the address ~3x faster than __array_interface__
        addr = int(_ffi.cast("uintptr_t", _ffi.from_buffer(a)))
        return addr, addr, addr + a.nbytes
    addr = a.__array_interface__["data"][0]
    lo = hi = addr
    for n, s in zip(a.shape, a.strides):
        if n == 0:
            return addr, addr, addr
        if s < 0:
            lo += (n - 1) * s
        else:
            hi += (n - 1) * s
    return addr, lo, hi + a.itemsize


class Recording:
    """What the current cell did on this PE (see the module docstring for the event format)."""

    def __init__(self, options, shell):
        self.cap = int(options.get("cap") or DEFAULT_CAP)
        self.shell = shell
        self.events = []
        self.ops = 0
        self.truncated = None
        self.depth = 0  # >0 while inside a wrapped shmem call: inner calls are not recorded again
        self.files = set()  # code file names of the traced cell
        self.heap = _heap_range()
        self.cache = {}  # id(array) -> (weakref, space, base address, lo, hi, itemsize, dtype, stride, n)
        self.merge = {}  # merge key -> event (reset at every synchronisation)
        self.n_async = 0  # async RMA events so far (local accesses do not merge across them)
        self.n_local = 0
        self.hints = {}  # (space, lo) -> (name, hi, itemsize) from the cell's own expressions
        self.started = time.perf_counter()
        delay = options.get("delay")
        self.rng = random.Random(f"{delay[0]}:{shmem.my_pe()}") if delay else None  # per PE, reproducible
        self.max_delay = delay[1] if delay else 0.0

    # -- memory ----------------------------------------------------------------------
    def info(self, a):
        key = id(a)
        found = self.cache.get(key)
        if found is not None and found[0]() is a:
            return found
        addr, lo, hi = _extent(a)
        hlo, hhi = self.heap
        if hlo <= lo < hhi:
            space, lo, hi, addr = "sym", lo - hlo, hi - hlo, addr - hlo
        else:
            space = "priv"
        stride = a.strides[0] if a.ndim == 1 else 0
        found = (_weakref(a), space, addr, lo, hi, a.itemsize, a.dtype.str, stride, a.shape[0] if a.ndim == 1 else 0)
        if len(self.cache) > 100_000:
            self.cache.clear()
        self.cache[key] = found
        return found

    def sym(self, a, count=None, stride=1):
        """Symmetric byte range of the first ``count`` elements of ``a`` (every ``stride``-th)."""
        _, space, addr, lo, hi, itemsize, dtype, _, _ = self.info(a)
        if count is not None and a.flags.contiguous:
            hi = addr + ((count - 1) * stride + 1) * itemsize if count else addr
            lo = addr
        return space, lo, hi, dtype

    # -- events ----------------------------------------------------------------------
    def _add(self, event, key=None):
        self.ops += 1
        if key is not None:
            last = self.merge.get(key)
            if last is not None and self._extend(last, event):
                return
        if len(self.events) >= self.cap:
            if self.truncated is None:
                self.truncated = event[2]
            return
        self.events.append(event)
        if key is not None:
            self.merge[key] = event

    @staticmethod
    def _extend(last, event):
        """Merge ``event`` into ``last`` when their ranges touch or overlap (same key)."""
        if last[0] == "mem":
            lo, hi = event[5], event[6]
            if lo <= last[6] and hi >= last[5]:
                last[5], last[6] = min(last[5], lo), max(last[6], hi)
                return True
            return False
        lo, hi = event[4], event[5]
        if not (lo <= last[5] and hi >= last[4]):
            return False
        if last[7] is not None:
            llo, lhi = event[8], event[9]
            if not (llo <= last[9] and lhi >= last[8]):
                return False
            last[8], last[9] = min(last[8], llo), max(last[9], lhi)
        last[4], last[5] = min(last[4], lo), max(last[5], hi)
        if last[11] is not None and event[11] is not None and len(last[11]) < 16:
            for v in event[11]:
                if v not in last[11]:
                    last[11].append(v)
        elif event[11] is None:
            last[11] = None
        return True

    def access(self, a, op, mode, line, lo=None, hi=None):
        """A load/store of ``a`` (or of bytes ``[lo, hi)`` of it) by the cell."""
        _, space, _, alo, ahi, _, dtype, _, _ = self.info(a)
        if lo is None:
            lo, hi = alo, ahi
        self.n_local += 1
        self._add(["mem", op, line, mode, space, lo, hi, dtype], ("mem", op, line, mode, space, dtype, self.n_async))

    def rma(self, op, line, target, pe, count, local, ctx, values, asynchronous, stride=1):
        space, lo, hi, dtype = self.sym(target, count, stride)
        if local is not None:
            lspace, _, llo, lhi = self.info(local)[1:5]
        else:
            lspace = llo = lhi = None
        ctx = _ctx_key(ctx)
        if asynchronous or pe == _me:
            self.n_async += 1
            key = ("rma", op, line, pe, dtype, lspace, ctx, self.n_local)
        else:
            key = ("rma", op, line, pe, dtype, lspace, ctx)
        self._add(["rma", op, line, pe, lo, hi, dtype, lspace, llo, lhi, ctx, values], key)

    def sync(self, event):
        self.merge.clear()
        self._add(event)

    def pause(self):
        """Stress runs: sleep a random time, or not at all (half the time), from the seeded generator."""
        if self.rng is not None and self.rng.random() < 0.5:
            time.sleep(self.rng.random() * self.max_delay)

    def names(self):
        """``[name, space, lo, hi, itemsize, priority]`` for the memory the cell can name."""
        from . import heap

        found = []

        def add(name, value, priority):
            if isinstance(value, np.ndarray) and value.size:
                _, space, _, lo, hi, itemsize, _, _, _ = self.info(value)
                found.append([name, space, lo, hi, itemsize, priority])

        for name, value in heap.arrays.items():
            add(name, value, 0)
        for name, value in list(self.shell.user_ns.items()):
            if name.startswith("_") or name in heap.arrays:
                continue
            if isinstance(value, np.ndarray):
                add(name, value, 1)
            elif isinstance(value, (list, tuple)):
                for i, item in enumerate(value[:64]):
                    add(f"{name}[{i}]", item, 2)
            elif isinstance(value, dict):
                for k, item in list(value.items())[:64]:
                    add(f"{name}[{k!r}]", item, 2)
        for (space, lo), (name, hi, itemsize) in self.hints.items():
            found.append([name, space, lo, hi, itemsize, 3])
        return found

    def data(self):
        """The plain data :func:`stop` returns."""
        used = [(e[7], e[8], e[9]) for e in self.events if e[0] == "rma" and e[7] == "priv"]
        used += [(e[3], e[4], e[5]) for e in self.events if e[0] == "coll" and e[3] == "priv"]
        used += [(e[6], e[7], e[8]) for e in self.events if e[0] == "coll" and e[6] == "priv"]

        def kept(e):
            if e[0] != "mem" or e[4] == "sym":
                return True
            return any(lo < e[6] and e[5] < hi for _, lo, hi in used)

        return {
            "pe": _me,
            "npes": shmem.n_pes(),
            "events": [e for e in self.events if kept(e)],
            "names": self.names(),
            "ops": self.ops,
            "truncated": self.truncated,
            "cap": self.cap,
            "seconds": time.perf_counter() - self.started,
        }


_rec = None
_me = None
_originals = {}  # (owner, name) -> original attribute


def _ctx_key(ctx):
    if ctx is None:
        return 0
    handle = ctx.ob_ctx
    if handle == shmem.CTX_DEFAULT.ob_ctx:
        return 0
    return int(shmem.ffi.cast("uintptr_t", handle))


def _line():
    """The cell line the current shmem call comes from (0 if not from the traced cell)."""
    f = sys._getframe(2)
    files = _rec.files
    while f is not None:
        if f.f_code.co_filename in files:
            return f.f_lineno
        f = f.f_back
    return 0


def _arg(args, kwargs, index, name, default=None):
    return args[index] if len(args) > index else kwargs.get(name, default)


def _value(a):
    """The single value an RMA source holds, else None."""
    if isinstance(a, np.ndarray) and a.size == 1:
        return a.item(0)
    return None


# -- wrappers of shmem4py functions ---------------------------------------------------------
def _wrap(name, orig, record):
    """``orig`` that, while recording, calls ``record(line, result, args, kwargs)`` after it."""

    def wrapper(*args, **kwargs):
        rec = _rec
        if rec is None or rec.depth:
            return orig(*args, **kwargs)
        line = _line()
        if rec.rng is not None:  # stress runs only
            rec.pause()
        rec.depth += 1
        try:
            result = orig(*args, **kwargs)
        finally:
            rec.depth -= 1
        record(rec, line, result, args, kwargs)
        if rec.rng is not None:
            rec.pause()
        return result

    wrapper.__name__ = wrapper.__qualname__ = name
    wrapper.__doc__ = orig.__doc__
    wrapper.__wrapped__ = orig
    wrapper.__shmem_race_skip__ = True
    return wrapper


def _rma_recorder(op):
    strided = op in ("iput", "iget")
    is_put = op.startswith("put") or op == "iput"
    asynchronous = op.endswith("_nbi")

    def record(rec, line, result, args, kwargs):
        if not kwargs and not strided and 3 <= len(args) <= 5:  # the usual put(target, source, pe)
            target, source, pe, size, ctx = (*args, None, None)[:5]
            tst = sst = 1
        else:
            target, source, pe = _arg(args, kwargs, 0, "target"), _arg(args, kwargs, 1, "source"), _arg(args, kwargs, 2, "pe")
            if strided:
                tst, sst = _arg(args, kwargs, 3, "tst", 1), _arg(args, kwargs, 4, "sst", 1)
                size, ctx = _arg(args, kwargs, 5, "size"), _arg(args, kwargs, 6, "ctx")
            else:
                tst = sst = 1
                size, ctx = _arg(args, kwargs, 3, "size"), _arg(args, kwargs, 4, "ctx")
        remote, local = (target, source) if is_put else (source, target)
        rstride = tst if is_put else sst
        count = size
        if count is None:
            count = min(-(-target.size // tst), -(-source.size // sst))
        value = _value(source) if is_put and count == 1 else None
        values = [value] if value is not None else None
        rec.rma(op, line, remote, pe, count, local, ctx, values, asynchronous, rstride)

    return record


#: atomic name -> (index of pe, index of the written value or None, fetching?, writes?)
_ATOMICS = {
    "atomic_set": (2, 1, False, True),
    "atomic_inc": (1, None, False, True),
    "atomic_add": (2, None, False, True),
    "atomic_and": (2, None, False, True),
    "atomic_or": (2, None, False, True),
    "atomic_xor": (2, None, False, True),
    "atomic_fetch": (1, None, True, False),
    "atomic_swap": (2, 1, True, True),
    "atomic_compare_swap": (3, 2, True, True),
    "atomic_fetch_inc": (1, None, True, True),
    "atomic_fetch_add": (2, None, True, True),
    "atomic_fetch_and": (2, None, True, True),
    "atomic_fetch_or": (2, None, True, True),
    "atomic_fetch_xor": (2, None, True, True),
    "atomic_op": (3, None, False, True),
    "atomic_fetch_op": (3, None, True, True),
}


def _atomic_recorder(op):
    pe_index, value_index, fetching, writes = _ATOMICS[op]

    def record(rec, line, result, args, kwargs):
        target = args[0] if args else next(iter(kwargs.values()))
        pe = _arg(args, kwargs, pe_index, "pe")
        ctx = _arg(args, kwargs, pe_index + 1, "ctx")
        values = None
        if value_index is not None:
            values = [_arg(args, kwargs, value_index, "value")]
        elif op == "atomic_op" and str(_arg(args, kwargs, 2, "op")).lower().endswith("set"):
            values = [_arg(args, kwargs, 1, "value")]
        name = op if writes else "atomic_fetch"
        rec.rma(name, line, target, pe, 1, None, ctx, values, not fetching)

    return record


def _members(team):
    """World PEs of ``team`` (None: every PE), for matching collectives of one team."""
    if team is None:
        return None
    try:
        pes = list(teams.members(team).pes)
    except Exception:  # not a member, or teams not set up: the call itself will say so
        return None
    return None if len(pes) == shmem.n_pes() else pes


def _sync_recorder(op, ctx_index=None, method=False, team_index=None):
    def record(rec, line, result, args, kwargs):
        ctx = team = None
        if method and team_index is not None:
            team = args[0]
        elif method:
            ctx = args[0]
        elif ctx_index is not None:
            ctx = _arg(args, kwargs, ctx_index, "ctx")
        elif team_index is not None:
            team = _arg(args, kwargs, team_index, "team")
        rec.sync(["sync", op, line, _ctx_key(ctx), _members(team)])

    return record


def _coll_recorder(op, team_index, root_index=None):
    def record(rec, line, result, args, kwargs):
        target, source = _arg(args, kwargs, 0, "target"), _arg(args, kwargs, 1, "source")
        _, tspace, _, tlo, thi, _, dtype, _, _ = rec.info(target)
        _, sspace, _, slo, shi, _, _, _, _ = rec.info(source)
        root = _arg(args, kwargs, root_index, "root") if root_index is not None else None
        members = _members(_arg(args, kwargs, team_index, "team"))
        rec.sync(["coll", op, line, tspace, tlo, thi, sspace, slo, shi, dtype, root, members])

    return record


def _wait_recorder(op):
    def record(rec, line, result, args, kwargs):
        if op.startswith("test") and (result is None or result is False or result == []):
            return  # a test that failed orders nothing
        ivar = _arg(args, kwargs, 0, "ivar" if op in ("wait_until", "test") else "ivars")
        space, lo, hi, dtype = rec.sym(ivar)
        rec.sync(["wait", op, line, lo, hi, dtype, np.asarray(ivar).reshape(-1)[:64].tolist()])

    return record


def _lock_key(rec, lock):
    addr = int(shmem.ffi.cast("uintptr_t", lock))
    return addr - rec.heap[0] if rec.heap[0] <= addr < rec.heap[1] else addr


def _lock_recorder(op):
    def record(rec, line, result, args, kwargs):
        if op == "test_lock" and result:
            return  # the lock was taken by someone else: nothing acquired
        rec.sync(["lock", "clear_lock" if op == "clear_lock" else "set_lock", line, _lock_key(rec, args[0])])

    return record


def _recorders():
    """(owner, attribute name) -> record function, for everything shmem4py offers here."""
    table = {}
    for op in ("put", "get", "put_nbi", "get_nbi", "iput", "iget"):
        table[(shmem, op)] = _rma_recorder(op)
    for op in _ATOMICS:
        table[(shmem, op)] = _atomic_recorder(op)
    for op in ("barrier_all", "sync_all", "alloc", "free"):
        table[(shmem, op)] = _sync_recorder(op)
    table[(shmem, "sync")] = _sync_recorder("sync_all", team_index=0)
    table[(shmem, "quiet")] = _sync_recorder("quiet", ctx_index=0)
    table[(shmem, "fence")] = _sync_recorder("fence", ctx_index=0)
    table[(shmem.Ctx, "quiet")] = _sync_recorder("quiet", method=True)
    table[(shmem.Ctx, "fence")] = _sync_recorder("fence", method=True)
    table[(shmem.Ctx, "destroy")] = _sync_recorder("ctx_destroy", method=True)
    table[(shmem.Team, "sync")] = _sync_recorder("sync_all", method=True, team_index=0)
    table[(shmem, "broadcast")] = _coll_recorder("broadcast", 4, root_index=2)
    for op, team_index in (("collect", 3), ("fcollect", 3), ("alltoall", 3), ("alltoalls", 5), ("reduce", 4)):
        table[(shmem, op)] = _coll_recorder(op, team_index)
    for op in ("and", "or", "xor", "max", "min", "sum", "prod"):
        table[(shmem, f"{op}_reduce")] = _coll_recorder(f"{op}_reduce", 3)
    for op in ("wait_until", "wait_until_all", "wait_until_any", "wait_until_some", "wait_until_all_vector",
               "wait_until_any_vector", "wait_until_some_vector", "test", "test_all", "test_any", "test_some",
               "test_all_vector", "test_any_vector", "test_some_vector"):
        table[(shmem, op)] = _wait_recorder(op)
    for op in ("set_lock", "test_lock", "clear_lock"):
        table[(shmem, op)] = _lock_recorder(op)
    return {key: rec for key, rec in table.items() if hasattr(key[0], key[1])}


# -- hooks called by the rewritten cell (see instrument.HOOKS) -----------------------------------
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
    """``(lo, hi)`` of the bytes ``x[index]`` touches (bounds for fancy indexing)."""
    info = rec.info(x)
    if info[7] and isinstance(index, (int, np.integer)):  # 1-D, one element: the fast path
        i = int(index)
        if i < 0:
            i += info[8]
        lo = info[2] + i * info[7]
        return lo, lo + info[5]
    if _basic(index):
        idx = index if isinstance(index, tuple) else (index,)
        idx = tuple(slice(i, i + 1 or None) if isinstance(i, (int, np.integer)) else i for i in idx)
        view = x[idx]
        if view.size == 0:
            return None
        _, lo, hi = _extent(view)
        base = rec.heap[0] if info[1] == "sym" else 0
        return lo - base, hi - base
    flat = np.arange(x.size).reshape(x.shape)[index]
    if np.size(flat) == 0:
        return None
    first, last = int(np.min(flat)), int(np.max(flat))
    if x.flags.c_contiguous:
        return info[2] + first * x.itemsize, info[2] + (last + 1) * x.itemsize
    return info[3], info[4]


def _mark():
    if _rec is not None:
        _rec.files.add(sys._getframe(1).f_code.co_filename)


def _get(x, index, line):
    r = x[index]
    rec = _rec
    if rec is not None and isinstance(x, _ndarray) and not rec.depth:
        if isinstance(r, _ndarray) and _basic(index):
            return r  # a view: memory is counted when the view is used
        span = _element_range(rec, x, index)
        if span:
            rec.access(x, "load", "read", line, *span)
    return r


def _set(x, index, value, line):
    rec = _rec
    if rec is not None and isinstance(x, _ndarray) and not rec.depth:
        if isinstance(value, _ndarray):
            rec.access(value, "load", "read", line)
        span = _element_range(rec, x, index)
        if span:
            rec.access(x, "store", "write", line, *span)
    x[index] = value


def _aug(x, index, op, value, line):
    rec = _rec
    if rec is not None and isinstance(x, _ndarray) and not rec.depth:
        if isinstance(value, _ndarray):
            rec.access(value, "load", "read", line)
        span = _element_range(rec, x, index)
        if span:
            rec.access(x, "load", "read", line, *span)
            rec.access(x, "store", "write", line, *span)
    x[index] = _AUG[op](x[index], value)


def _read(value, line):
    if isinstance(value, _ndarray) and _rec is not None and not _rec.depth:
        _rec.access(value, "load", "read", line)
    return value


def _rw(value, line):
    if isinstance(value, _ndarray) and _rec is not None and not _rec.depth:
        _rec.access(value, "load", "read", line)
        _rec.access(value, "store", "write", line)


def _write(value, line):
    if isinstance(value, _ndarray) and _rec is not None and not _rec.depth:
        _rec.access(value, "store", "write", line)


def _call(line, f, *args, **kwargs):
    rec = _rec
    if rec is None or rec.depth or getattr(f, "__shmem_race_skip__", False) or getattr(f, "__shmem_race_cell__", False):
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


_HOOK_FUNCS = {"mark": _mark, "get": _get, "set": _set, "aug": _aug, "read": _read, "rw": _rw,
               "write": _write, "call": _call, "fn": _fn}


# -- the API -------------------------------------------------------------------------------
def _shell():
    from . import runtime

    return runtime._shell


def active():
    """Is a cell being recorded on this PE?"""
    return _rec is not None


def start(options=None):
    """Record the next cell on this PE (see the module docstring). Not collective."""
    global _rec, _me
    if _rec is not None:
        stop()
    options = dict(options or {})
    shell = _shell()
    _me = shmem.my_pe()
    rec = Recording(options, shell)
    for (owner, name), record in _recorders().items():
        orig = owner.__dict__[name]
        _originals[(owner, name)] = orig
        setattr(owner, name, _wrap(name, orig, record))
    ns = shell.user_ns
    for hook, func in _HOOK_FUNCS.items():
        ns[HOOKS[hook]] = func
    transformer = AccessTransformer() if options.get("loads", True) else MarkTransformer()
    rec.transformer = transformer
    shell.ast_transformers.append(transformer)
    _rec = rec


def stop():
    """Stop recording, undo every wrapper and hook; return the plain data (see the module docstring)."""
    global _rec
    rec = _rec
    if rec is None:
        return None
    _rec = None
    for (owner, name), orig in _originals.items():
        setattr(owner, name, orig)
    _originals.clear()
    shell = rec.shell
    if rec.transformer in shell.ast_transformers:
        shell.ast_transformers.remove(rec.transformer)
    data = rec.data()
    rec.cache.clear()  # the hooks stay in the namespace: functions the cell defined still call them
    return data


# -- stress runs: the declared arrays as they were before the cell ---------------------------
_saved = {}


def save_arrays():
    """Keep a private copy of every declared array (before a cell that stress runs repeat)."""
    from . import heap

    _saved.clear()
    _saved.update({name: np.array(a) for name, a in heap.arrays.items()})


def restore_arrays():
    """Put the copies kept by :func:`save_arrays` back; return the names restored."""
    from . import heap

    for name, copy in _saved.items():
        if name in heap.arrays and heap.arrays[name].shape == copy.shape:
            np.copyto(heap.arrays[name], copy)
    return sorted(_saved)


def declared_values():
    """``{name: list of values}`` of the declared arrays (small ones, for the stress report)."""
    from . import heap

    return {name: a.reshape(-1)[:16].tolist() for name, a in heap.arrays.items()}
