"""PE side of the inspector: summarise this PE's symmetric heap and state.

Runs on a PE only (imports shmem4py). Nothing
here is collective: every call reads local memory only, so a PE answers even
when the others are stuck. :func:`snapshot` spends at most about ``budget``
bytes: small arrays come exactly, larger ones as block summaries (min, max,
mean and a bitwise hash per block), so one refresh moves a bounded payload
whatever the heap size.
"""

from __future__ import annotations

import bisect
import os
import socket
from typing import TYPE_CHECKING, Any, cast

import numpy as np
import psutil
from shmem4py import shmem

from . import heap
from .context import this_pe
from .record.memory import heap_start

__all__ = ["snapshot", "allocations", "heap_base", "named_arrays", "summarise", "BLOCK_OVERHEAD", "PE_OVERHEAD"]

if TYPE_CHECKING:
    from collections.abc import Container

    import numpy.typing as npt

#: bytes charged per listed allocation / per PE reply for metadata (keys, pickling)
BLOCK_OVERHEAD = 320
PE_OVERHEAD = 1024
#: elements processed at once while summarising (bounds temporary memory)
_CHUNK = 1 << 20
_M = np.uint64(0xFFFFFFFFFFFFFFFF)


def allocations() -> list[tuple[int, int]]:
    """Every live shmem4py allocation on this PE but the tool's own: sorted ``[(address, bytes), ...]``."""
    return [a for a in heap.allocations() if a[0] not in this_pe.reserved]


def heap_base(lowest: int | None = None, maps: str = "/proc/self/maps") -> int | None:
    """Start address of the symmetric heap segment, or ``None`` if unknown.

    OSHMEM maps the symmetric heap as one shared segment at the same virtual
    address on every PE (0xFF000000 with Open MPI 4.1's default
    ``sshmem_base_start_address``); shmem4py's allocations live inside it. The
    base is the start of the ``/proc/self/maps`` mapping that contains the
    lowest allocation (OSHMEM's own internal objects sit below it, so the
    first user array has a small non-zero offset). Without allocations, the
    mapping that starts at the configured base address is used. Where
    ``/proc`` is unavailable the lowest allocation itself is the base (offsets
    then start at 0).
    """
    configured = int(os.environ.get("OMPI_MCA_sshmem_base_start_address", "0xFF000000"), 0)
    try:
        with open(maps) as f:
            for line in f:
                start, end = (int(x, 16) for x in line.split(None, 1)[0].split("-"))
                if lowest is not None and start <= lowest < end:
                    return heap_start(start, heap.allocations()[0][0])  # OSHMPI's mapping may start lower
                if lowest is None and start == configured:
                    return start
    except OSError:
        pass
    return lowest


def named_arrays() -> dict[int, list[tuple[str, npt.NDArray[Any], bool]]]:
    """Names bound to whole symmetric allocations: ``{address: [(name, ndarray, declared), ...]}``.

    Declared arrays (``this_pe.arrays``) come first, then names in the engine's
    namespace (not starting with ``_``) bound to an ndarray or memoryview that
    covers a whole allocation (shmem4py's ``zeros``, ``array``, ``alloc`` ...).
    Views of part of an allocation are not names of it.
    """
    blocks = dict(allocations())
    starts = sorted(blocks)
    found: dict[int, list[tuple[str, npt.NDArray[Any], bool]]] = {}
    taken: set[str] = set()

    def consider(name: str, obj: object, declared: bool) -> None:
        if isinstance(obj, memoryview):
            try:
                obj = np.frombuffer(obj, np.uint8)
            except (TypeError, ValueError):
                return
        if not isinstance(obj, np.ndarray) or obj.nbytes == 0 or name in taken:
            return
        address = obj.__array_interface__["data"][0]
        i = bisect.bisect_right(starts, address) - 1
        if i >= 0 and starts[i] == address and blocks[address] == obj.nbytes:
            found.setdefault(address, []).append((name, obj, declared))
            taken.add(name)

    for name, obj in this_pe.arrays.items():
        consider(name, obj, True)
    namespace = this_pe.namespace
    for name in sorted(namespace):
        if not name.startswith("_") and name not in ("In", "Out"):
            consider(name, namespace[name], False)
    return found


def _keys(x: npt.NDArray[Any]) -> npt.NDArray[np.uint64]:
    """A uint64 key per element holding its bits (for hashing)."""
    size = x.dtype.itemsize
    if size in (1, 2, 4, 8):
        return x.view(f"u{size}").astype(np.uint64)
    raw = np.ascontiguousarray(x).view(np.uint64).reshape(*x.shape, size // 8)
    key = raw[..., 0].copy()
    for k in range(1, raw.shape[-1]):
        key = key * np.uint64(0x100000001B3) ^ raw[..., k]
    return key


def _mix(z: npt.NDArray[np.uint64]) -> npt.NDArray[np.uint64]:
    """splitmix64 finaliser, elementwise (wrapping uint64 arithmetic)."""
    z = z + np.uint64(0x9E3779B97F4A7C15)
    z = (z ^ (z >> np.uint64(30))) * np.uint64(0xBF58476D1CE4E5B9)
    z = (z ^ (z >> np.uint64(27))) * np.uint64(0x94D049BB133111EB)
    return z ^ (z >> np.uint64(31))


def _as_2d(a: npt.NDArray[Any]) -> npt.NDArray[Any]:
    if a.ndim == 0:
        return a.reshape(1, 1)
    if a.ndim == 1:
        return a.reshape(1, -1)
    return a.reshape(-1, a.shape[-1])


def _grid(rows: int, cols: int, max_blocks: float) -> tuple[int, int]:
    """Block size ``(br, bc)`` giving at most ``max_blocks`` blocks, keeping the aspect."""
    max_blocks = max(1, int(max_blocks))
    scale = max(1.0, (rows * cols / max_blocks) ** 0.5)
    gr = max(1, min(rows, int(rows / scale)))
    gc = max(1, min(cols, max_blocks // gr))
    return -(-rows // gr), -(-cols // gc)


def _stat_view(x: npt.NDArray[Any]) -> npt.NDArray[Any]:
    """Values the min/max/mean are taken over: abs for complex, uint8 for bool, float64 for long double."""
    if x.dtype.kind == "c":
        return cast("npt.NDArray[Any]", np.abs(x))
    if x.dtype.kind == "b":
        return x.view(np.uint8)
    if x.dtype.kind == "f" and x.dtype.itemsize > 8:
        return x.astype(np.float64)
    return x


def summarise(a: npt.NDArray[Any], max_blocks: int) -> dict[str, Any]:
    """Block summary of ``a`` (viewed as 2-D) in at most ``max_blocks`` blocks.

    Returns ``{"block": (br, bc), "grid": (gr, gc), "min", "max", "mean", "hash"}``:
    each a ``(gr, gc)`` array (for 1-D arrays ``gr == 1``). ``hash`` is a
    uint64 of the block's bits and positions: two PEs' blocks are identical
    exactly when (up to hash collisions) their hashes are equal.
    """
    x2 = _as_2d(a)
    rows, cols = x2.shape
    br, bc = _grid(rows, cols, max_blocks)
    gr, gc = -(-rows // br), -(-cols // bc)
    sv = _stat_view(x2)
    out: dict[str, Any] = {
        "min": np.empty((gr, gc), sv.dtype),
        "max": np.empty((gr, gc), sv.dtype),
        "mean": np.empty((gr, gc), np.float64),
        "hash": np.empty((gr, gc), np.uint64),
    }
    pos = np.arange(br * bc, dtype=np.uint64).reshape(br, bc) * np.uint64(2) + np.uint64(1)
    weight = _mix(pos)
    step = bc * max(1, _CHUNK // (br * bc))  # columns per chunk, whole blocks
    for i in range(gr):
        r0, r1 = i * br, min(rows, (i + 1) * br)
        h = r1 - r0
        for c0 in range(0, cols, step):
            c1 = min(cols, c0 + step)
            full = (c1 - c0) // bc
            parts: list[tuple[int, int, int, slice]] = []
            if full:
                parts.append((c0 // bc, full, bc, slice(c0, c0 + full * bc)))
            if c0 + full * bc < c1:
                parts.append((c0 // bc + full, 1, c1 - c0 - full * bc, slice(c0 + full * bc, c1)))
            for j, n, w, cs in parts:
                s = sv[r0:r1, cs].reshape(h, n, w)
                out["min"][i, j : j + n] = np.fmin.reduce(s, axis=(0, 2))
                out["max"][i, j : j + n] = np.fmax.reduce(s, axis=(0, 2))
                out["mean"][i, j : j + n] = s.sum(axis=(0, 2), dtype=np.float64) / (h * w)
                k = _mix(_keys(x2[r0:r1, cs]).reshape(h, n, w))
                out["hash"][i, j : j + n] = (k * weight[:h, None, :w]).sum(axis=(0, 2), dtype=np.uint64)
    out.update(block=(br, bc), grid=(gr, gc))
    return out


def _block_cost(dtype: np.dtype[Any]) -> int:
    """Bytes one summary block costs: min, max, mean, hash."""
    stat = np.float64 if dtype.kind == "c" else (np.uint8 if dtype.kind == "b" else dtype)
    return 2 * np.dtype(stat).itemsize + 16


def _plan(arrays: dict[str, npt.NDArray[Any]], budget: int) -> dict[str, int | None]:
    """Per array: ``None`` (exact) or the number of summary blocks, within ``budget`` bytes.

    Water-filling from the smallest array: each gets an equal share of what is
    left; arrays that fit come exactly, the rest are summarised in their share.
    Deterministic in the arrays' sizes, so PEs holding the same arrays decide alike.
    """
    plan: dict[str, int | None] = {}
    left = max(0, budget)
    order = sorted(arrays, key=lambda n: (arrays[n].nbytes, n))
    for k, name in enumerate(order):
        a = arrays[name]
        share = left // (len(order) - k)
        if a.nbytes <= max(share, _block_cost(a.dtype)):  # tiny arrays cost less exactly than summarised
            plan[name] = None
            left -= a.nbytes
        else:
            blocks = max(1, share // _block_cost(a.dtype))
            plan[name] = blocks
            left -= blocks * _block_cost(a.dtype)
    return plan


def snapshot(budget: int = 256 << 10) -> dict[str, Any]:
    """This PE's heap, arrays and state, in about ``budget`` bytes. Not collective.

    Returns a dict: ``pe``, ``pid``, ``host``, ``rss`` (bytes), ``last_cell``
    (state, outcome, seconds), ``heap`` (base address, size, used, free),
    ``blocks`` (every allocation: offset, bytes, name or None, aliases),
    ``arrays`` (name -> dtype, shape, bytes, offset, address, declared,
    aliases, exact, and ``values`` (exact copy) or ``summary`` (see
    :func:`summarise`)) and ``omitted`` (count and bytes of allocations not
    listed: with thousands of them, only as many as half the budget allows
    are, named ones first).
    """
    allocs = allocations()
    used, size = heap.heap_usage()
    base = heap_base(allocs[0][0] if allocs else None)
    names = named_arrays()
    allocs, omitted = _listed(allocs, names, budget)
    arrays: dict[str, dict[str, Any]]
    blocks: list[dict[str, Any]]
    arrays, blocks = {}, []
    for address, nbytes in allocs:
        entries = names.get(address, [])
        offset = address - base if base is not None else None
        blocks.append(
            {
                "offset": offset,
                "address": address,
                "bytes": nbytes,
                "name": entries[0][0] if entries else None,
                "aliases": [n for n, _, _ in entries[1:]],
            }
        )
        if entries:
            name, a, declared = entries[0]
            arrays[name] = {
                "name": name,
                "dtype": a.dtype.name,
                "shape": tuple(a.shape),
                "bytes": int(a.nbytes),
                "offset": offset,
                "address": address,
                "declared": declared,
                "aliases": blocks[-1]["aliases"],
                "_array": a,
            }
    spend = int(budget * 0.98) - PE_OVERHEAD - BLOCK_OVERHEAD * len(blocks)  # 2 % slack for pickling
    plan = _plan({n: info["_array"] for n, info in arrays.items()}, spend)
    for name, info in arrays.items():
        a = info.pop("_array")
        info["exact"] = plan[name] is None
        info["values"] = np.array(a) if plan[name] is None else None
        info["summary"] = None if plan[name] is None else summarise(a, cast("int", plan[name]))
    state = dict(this_pe.last_cell)
    state.pop("started", None)
    return {
        "pe": shmem.my_pe(),
        "pid": os.getpid(),
        "host": socket.gethostname(),
        "rss": psutil.Process().memory_info().rss,
        "last_cell": state,
        "heap": {"base": base, "size": size, "used": used, "free": size - used},
        "blocks": blocks,
        "arrays": arrays,
        "omitted": omitted,
    }


def _listed(
    allocs: list[tuple[int, int]], names: Container[int], budget: int
) -> tuple[list[tuple[int, int]], dict[str, int]]:
    """The allocations listed within half the budget (named ones first), and a count of the rest."""
    room = max(8, (budget // 2) // BLOCK_OVERHEAD)
    if len(allocs) <= room:
        return allocs, {"count": 0, "bytes": 0}
    ranked = sorted(allocs, key=lambda a: (a[0] not in names, a[0]))
    kept, rest = sorted(ranked[:room]), ranked[room:]
    return kept, {"count": len(rest), "bytes": sum(n for _, n in rest)}
