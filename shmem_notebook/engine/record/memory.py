"""Where memory is, for the recorders: symmetric (an offset in the heap, the same on every PE),
another PE's symmetric memory seen through a ``shmem.ptr`` view (that PE's number, and the
offset in its heap), or private (this PE's address), and what the cell calls it (PE side)."""

from __future__ import annotations

import ast
import functools
import linecache
import mmap
import sys
import types
from typing import TYPE_CHECKING, Any, cast
from weakref import ref as _weakref

import numpy as np
from shmem4py import shmem

from ...analysis.footprint import of_view, strided
from ..context import this_pe

if TYPE_CHECKING:
    from collections.abc import Callable
    from types import FrameType
    from typing import TypeAlias

    import numpy.typing as npt

    from ...analysis.footprint import Footprint

    Space: TypeAlias = "str | int"
    InfoRest: TypeAlias = "tuple[Space, int, int, int, int, str, int, int, Footprint | None]"
    Info: TypeAlias = "tuple[_weakref[npt.NDArray[Any]], Space, int, int, int, int, str, int, int, Footprint | None]"
    Sym: TypeAlias = "tuple[Space, int, int, str, Footprint | None]"
    Layout: TypeAlias = "tuple[int, tuple[int, ...], tuple[int, ...]]"

__all__ = [
    "heap_range",
    "heap_start",
    "anonymous_heap",
    "peer_heaps",
    "extent",
    "numpy_owned",
    "assigned_to",
    "AddressBook",
]

_ffi = shmem.ffi
_cast, _from_buffer = _ffi.cast, _ffi.from_buffer


def heap_range() -> tuple[int, int]:
    """``(lo, hi)`` of the symmetric heap's mapping in this process. A library's own heap mapping stays
    where it is for the job's life: it is read from ``/proc/self/maps`` once (60 us a recording's start);
    OSHMPI's anonymous one, which the kernel may merge with its neighbours, at every call."""
    live = [int(key) for key in list(shmem._heap.keys())]
    probe = live[:1] or [0xFF000000]  # OSHMEM's usual base
    kept = this_pe.record.heap_mapping[0]
    if kept is not None and kept[0] <= probe[0] < kept[1]:
        return kept
    with open("/proc/self/maps") as maps:
        for line in maps:
            lo, hi = (int(x, 16) for x in line.split()[0].split("-"))
            if lo <= probe[0] < hi:
                found = heap_start(lo, min(live, default=probe[0])), hi
                this_pe.record.heap_mapping[0] = None if anonymous_heap() else found
                return found
    return 0, 0


def heap_start(mapping: int, lowest: int) -> int:
    """Where the symmetric heap's offsets count from, given the start of the ``/proc/self/maps`` mapping
    holding it and the address of the lowest allocation still live.

    OSHMPI's heap is anonymous memory that the kernel may merge with the mappings beside it, differently
    on each PE: its offsets count from the page of the lowest allocation, at the same offset in every
    PE's heap as allocations are symmetric (the engine's own, made at start and kept, is in the heap's
    first page). Other libraries' heaps are mappings of their own."""
    if anonymous_heap():
        return max(mapping, lowest - lowest % mmap.PAGESIZE)
    return mapping


@functools.cache
def anonymous_heap() -> bool:
    return "OSHMPI" in shmem.info_get_name()


def peer_heaps(heap: tuple[int, int]) -> list[tuple[int, int, int]]:
    """``[(lo, hi, pe)]``: where the other PEs' heaps are mapped in this process (``shmem.ptr`` views
    point there; PEs on this node, where the library maps them at all)."""
    lo, hi = heap
    if not lo:
        return []
    me, base, found = shmem.my_pe(), _cast("void *", lo), []
    for pe in range(shmem.n_pes()):
        address = int(_cast("uintptr_t", shmem.lib.shmem_ptr(base, pe))) if pe != me else 0
        if address:
            found.append((address, address + hi - lo, pe))
    return found


def extent(a: npt.NDArray[Any]) -> tuple[int, int, int, Footprint | None]:
    """``(address, lo, hi, footprint)`` of an ndarray: where its first element is, the bytes from its
    lowest to its highest element, and the bytes it touches (None: all of ``[lo, hi)``, see
    :mod:`shmem_notebook.analysis.footprint`)."""
    if a.flags.c_contiguous and a.size:  # cffi finds the address ~3x faster than __array_interface__
        addr = int(_cast("uintptr_t", _from_buffer(a)))
        return addr, addr, addr + a.nbytes, None
    addr = a.__array_interface__["data"][0]
    if not a.size:
        return addr, addr, addr, None
    return (addr, *of_view(addr, a.itemsize, a.shape, a.strides))


def numpy_owned(a: npt.NDArray[Any]) -> bool:
    """Whether NumPy allocated ``a``'s memory (it, or the array it views, owns its data): then it is
    private, as shmem4py's symmetric arrays are views of the heap's buffers. A cheap test (no address)."""
    base = a.base
    return base is None or (isinstance(base, np.ndarray) and base.base is None)


def _assignments(filename: str) -> dict[int, str]:
    """``{line: target}`` of the file's statements ``target = call(...)`` with one target (an
    attribute, a subscript or a name), each line of the statement mapped to the target's text."""
    lines = linecache.getlines(filename)
    return _parsed_assignments(filename, len(lines), hash(lines[0]) if lines else 0)


@functools.lru_cache(maxsize=256)
def _parsed_assignments(filename: str, length: int, first: int) -> dict[int, str]:
    """:func:`_assignments` of the file as it is now (its length and first line tell a new text)."""
    found: dict[int, str] = {}
    try:
        tree = ast.parse("".join(linecache.getlines(filename)))
    except (SyntaxError, ValueError):
        tree = ast.Module(body=[], type_ignores=[])
    for node in ast.walk(tree):
        target = (
            node.targets[0]
            if isinstance(node, ast.Assign) and len(node.targets) == 1
            else node.target
            if isinstance(node, ast.AnnAssign)
            else None
        )
        if isinstance(target, (ast.Attribute, ast.Subscript, ast.Name)) and isinstance(
            cast("ast.Assign | ast.AnnAssign", node).value, ast.Call
        ):
            text = ast.unparse(target)
            for line in range(
                node.lineno,  # type: ignore[attr-defined]  # a statement
                (node.end_lineno or node.lineno) + 1,  # type: ignore[attr-defined]  # a statement
            ):
                found[line] = text
    return found


def assigned_to(files: Callable[[str], bool], depth: int = 1) -> str | None:
    """The text of what the program's statement running an allocation assigns its result to
    (``self.inbox``, ``bufs["halo"]``), or None: the innermost frame whose file is in ``files``
    (a callable telling a program's file) is looked up in its source (:mod:`linecache`)."""
    frame: FrameType | None = sys._getframe(depth)
    while frame is not None and not files(frame.f_code.co_filename):
        frame = frame.f_back
    if frame is None:
        return None
    return _assignments(frame.f_code.co_filename).get(frame.f_lineno)


def _slice_key(index: object) -> object:
    """A basic index as a dict key (slices are not hashable before Python 3.12)."""
    if type(index) is not tuple:
        return index
    return tuple((i.start, i.stop, i.step) if type(i) is slice else i for i in index)


class AddressBook:
    """The byte ranges of the arrays a recording sees, cached by identity while they live.

    ``info(a)`` -> ``(weakref, space, address, lo, hi, itemsize, dtype, stride, n, footprint)``:
    ``space`` ``"sym"`` (offsets in the heap), ``"priv"``, or the number of the PE whose heap a
    ``shmem.ptr`` view shows (offsets in that heap); ``stride``/``n`` for 1-D arrays (else 0);
    ``footprint`` None when ``a`` fills ``[lo, hi)``, else the bytes it touches (see
    :mod:`shmem_notebook.analysis.footprint`).
    """

    def __init__(self) -> None:
        self.heap = heap_range()
        self.peers = peer_heaps(self.heap)
        self.cache: dict[int, Info] = {}
        # (id(x), index as a key) -> (weakref to x, its shape, its strides, x[index]'s info but its weakref)
        self.slices: dict[
            tuple[object, ...], tuple[_weakref[npt.NDArray[Any]], tuple[int, ...], tuple[int, ...], InfoRest]
        ]
        self.slices = {}
        self.hints: dict[tuple[Space, int], tuple[str, int, int]]
        self.hints = {}  # (space, lo) -> (name, hi, itemsize): what the program assigned an allocation to

    def info(self, a: npt.NDArray[Any]) -> Info:
        found = self.cache.get(id(a))
        if found is not None and found[0]() is a:
            return found
        addr, lo, hi, fp = extent(a)
        hlo, hhi = self.heap
        space: Space
        if hlo <= lo < hhi:
            space, lo, hi, addr = "sym", lo - hlo, hi - hlo, addr - hlo  # a footprint holds no address
        else:
            space = "priv"
            for plo, phi, pe in self.peers:
                if plo <= lo < phi:
                    space, lo, hi, addr = pe, lo - plo, hi - plo, addr - plo
                    break
        return self._keep(a, space, addr, lo, hi, fp)

    def view(self, x: npt.NDArray[Any], index: Any, r: npt.NDArray[Any]) -> Info:
        """The :meth:`info` of ``r = x[index]``, a view by basic indexing: the same index of the same
        array, as long as it has the same shape and strides (a loop's), is found again without asking
        NumPy where ``r`` is (a third of a loop's recording was that)."""
        key = (id(x), index.start, index.stop, index.step) if type(index) is slice else (id(x), _slice_key(index))
        known = self.slices.get(key)
        if known is not None and known[0]() is x and known[1] == x.shape and known[2] == x.strides:
            found = (_weakref(r), *known[3])
            self.cache[id(r)] = found
            return found
        found = self.info(r)
        if len(self.slices) > 10_000:
            self.slices.clear()
        self.slices[key] = (_weakref(x), x.shape, x.strides, found[1:])
        return found

    def allocated(self, name: str | None, lo: int, hi: int, itemsize: int | None) -> None:
        """Name the symmetric memory ``[lo, hi)`` (heap offsets) an allocation made: what the program
        assigned it to (see :func:`assigned_to`); the namespace's names come first."""
        if name is not None and itemsize and hi > lo:
            self.hints[("sym", lo)] = (name, hi, itemsize)

    def _keep(self, a: npt.NDArray[Any], space: Space, addr: int, lo: int, hi: int, fp: Footprint | None) -> Info:
        ndim = a.ndim
        found = (
            _weakref(a),
            space,
            addr,
            lo,
            hi,
            a.itemsize,
            a.dtype.str,
            a.strides[0] if ndim == 1 else 0,
            a.shape[0] if ndim == 1 else 0,
            fp,
        )
        cache = self.cache
        if len(cache) > 100_000:
            cache.clear()
        cache[id(a)] = found
        return found

    def sym(self, a: npt.NDArray[Any], count: int | None = None, stride: int = 1) -> Sym:
        """``(space, lo, hi, dtype, footprint)`` of the first ``count`` elements of ``a`` (every ``stride``-th)."""
        _, space, addr, lo, hi, itemsize, dtype, _, _, fp = self.info(a)
        if count is not None and a.flags.contiguous:
            if stride == 1 or count < 2:
                return space, addr, addr + count * itemsize, dtype, None
            lo, hi, fp = strided(addr, itemsize, count, stride)
            return space, lo, hi, dtype, fp
        return space, lo, hi, dtype, fp

    def layout(self, a: npt.NDArray[Any]) -> Layout | None:
        """``(origin, shape, strides)`` for naming the elements of an N-D or strided array, else None."""
        if a.ndim == 1 and a.strides[0] == a.itemsize:
            return None
        return self.info(a)[2], tuple(a.shape), tuple(a.strides)

    def offset(self, address: int) -> int:
        """A raw address (a lock) as a heap offset when it is in the heap."""
        return address - self.heap[0] if self.heap[0] <= address < self.heap[1] else address

    def names(self) -> list[list[Any]]:
        """``[name, space, lo, hi, itemsize, priority, layout]`` for the memory the cell can name: declared
        arrays first, then the namespace's arrays, items of its lists and dicts and attributes of its objects
        (``ring.inbox``, ``ring.bufs[0]``), then what the program assigned its allocations to (``self.inbox``)."""

        found: list[list[Any]] = []

        def add(name: str, value: object, priority: int) -> None:
            if isinstance(value, np.ndarray) and value.size:
                _, space, _, lo, hi, itemsize = self.info(value)[:6]
                found.append([name, space, lo, hi, itemsize, priority, self.layout(value)])

        for name, value in this_pe.arrays.items():
            add(name, value, 0)
        for name, value in list(this_pe.namespace.items()):
            if name.startswith("_") or name in this_pe.arrays:
                continue
            if isinstance(value, np.ndarray):
                add(name, value, 1)
            elif _held(name, value, add, 2) is None and _is_object(value):
                for attr, item in list(vars(value).items())[:64]:  # an instance's (or a class's) attributes
                    if not attr.startswith("_"):
                        add(f"{name}.{attr}", item, 2)
                        _held(f"{name}.{attr}", item, add, 2)
        for (space, lo), (name, hi, itemsize) in self.hints.items():
            found.append([name, space, lo, hi, itemsize, 3])
        return found


def _held(name: str, value: object, add: Callable[[str, object, int], None], priority: int) -> bool | None:
    """``add`` the arrays a list, tuple or dict ``value`` holds (``name[0]``, ``name['halo']``);
    None when ``value`` is not one."""
    if isinstance(value, (list, tuple)):
        for i, item in enumerate(value[:64]):
            add(f"{name}[{i}]", item, priority)
        return True
    if isinstance(value, dict):
        for k, item in list(value.items())[:64]:
            add(f"{name}[{k!r}]", item, priority)
        return True
    return None


def _is_object(value: object) -> bool:
    """An instance or a class of the program's own, whose attributes may hold its arrays (not a
    module, a function or NumPy's)."""
    if isinstance(value, (types.ModuleType, types.FunctionType, types.BuiltinFunctionType, np.generic)):
        return False
    cls = value if isinstance(value, type) else type(value)
    return cls.__module__ not in ("builtins", "numpy") and hasattr(value, "__dict__")
