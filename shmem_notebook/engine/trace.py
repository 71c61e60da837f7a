"""Record one cell's RMA, AMO, sync and collective calls on this PE (PE side), for ``--trace``.

:func:`start` wraps shmem4py's functions (and so also the calls the teams
emulation and the teaching collectives make); :func:`stop` unwraps them and
returns plain data:

- ``events``: one dict per call: ``pe``, ``seq``, ``t`` (ns, this host's clock),
  ``line`` (of the cell), ``op``, ``target`` (the other PE, or None), ``array``
  (the symmetric array's name in the cell, ``"(scratch)"`` for the teaching
  collectives' staging area), ``indices`` (flat ``[start, stop, step]``),
  ``epoch`` (world barriers passed before it), ``label`` (the teaching
  collective's step, :data:`.collectives.label`) and ``values`` (what a put
  carried, when at most :data:`PAYLOAD` elements).
- ``snapshots``: the heap at the start, after every world barrier
  (``barrier_all``, ``sync_all``, ``sync`` on TEAM_WORLD) and at the end:
  (between that barrier and a second one the recorder adds, so no PE has
  started the next epoch) ``{name: ndarray}`` for arrays up to :data:`EXACT` elements, ``{name:
  {shape, dtype, min, max, mean}}`` beyond, within :data:`BUDGET` bytes.

The emulation's own synchronisation words are not recorded. Lighter than the race
detector's :mod:`.recorder` (no loads or stores, no AST rewriting); both may
record the same cell, each wrapping shmem4py's functions around the other's.
"""

import functools
import inspect
import sys
import time

import numpy as np

from . import collectives, heap, teams

__all__ = ["start", "stop", "MAX_EVENTS", "PAYLOAD", "EXACT", "BUDGET"]

MAX_EVENTS = 20000  #: events kept per PE per cell (the rest counted, not kept)
PAYLOAD = 64  #: elements of a put's values kept in its event
EXACT = 4096  #: arrays up to this many elements are snapshotted exactly
BUDGET = 1 << 20  #: bytes of snapshots per PE per cell; beyond it, summaries only

RMA = ("put", "get", "iput", "iget", "put_nbi", "get_nbi")
AMO = tuple(
    f"atomic_{name}"
    for name in ("set", "inc", "add", "and", "or", "xor", "fetch", "swap", "compare_swap", "fetch_inc",
                 "fetch_add", "fetch_and", "fetch_or", "fetch_xor", "op", "fetch_op")
)
SYNC = ("barrier_all", "sync_all", "sync", "quiet", "fence", "wait_until")
COLLECTIVES = ("broadcast", "collect", "fcollect", "alltoall", "alltoalls", "reduce")

_shmem = None
_state = None
_originals = {}


def _cell_line():
    """The line of the cell the PE is running (1-based), or None."""
    frame = sys._getframe(2)
    while frame is not None and frame.f_back is not None:
        back = frame.f_back
        if back.f_code.co_name == "run_code" and back.f_code.co_filename.endswith("interactiveshell.py"):
            return frame.f_lineno
        frame = back
    return None


def _known_arrays():
    """(start address, end address, name, array) of the symmetric arrays a cell can name."""
    found = [(teams._words, "(sync)"), (teams._exchange, "(sync)"), (collectives._scratch, "(scratch)")]
    for name, value in list(heap._namespace.items()) + list(heap.arrays.items()):
        if isinstance(value, np.ndarray) and not name.startswith("_") and value.size:
            found.append((value, name))
    spans = []
    for array, name in found:
        if array is not None:
            base = array.__array_interface__["data"][0]
            spans.append((base, base + array.nbytes, name, array))
    return sorted(spans, key=lambda span: span[0] - span[1])  # largest first: views lose to their base


def _locate(array):
    """(name, flat start index) of the symmetric array ``array`` points into."""
    if not isinstance(array, np.ndarray):
        return None, None
    address = array.__array_interface__["data"][0]
    for attempt in range(2):
        for lo, hi, name, known in _state["spans"]:
            if lo <= address < hi:
                return name, (address - lo) // max(known.itemsize, 1)
        if attempt == 0:
            _state["spans"] = _known_arrays()  # the cell allocated something new
    return "(private)", 0


def _snapshot():
    exact, budget = {}, _state
    for name, value in list(heap._namespace.items()):
        if not isinstance(value, np.ndarray) or name.startswith("_") or not value.size:
            continue
        try:
            if not _shmem.addr_accessible(value, _shmem.my_pe()):
                continue
        except Exception:
            continue
        if value.size <= EXACT and budget["bytes"] + value.nbytes <= BUDGET:
            exact[name] = np.array(value)
            budget["bytes"] += value.nbytes
        else:
            exact[name] = {
                "shape": list(value.shape),
                "dtype": str(value.dtype),
                "min": float(value.min()) if value.dtype.kind in "biuf" else None,
                "max": float(value.max()) if value.dtype.kind in "biuf" else None,
                "mean": float(value.mean()) if value.dtype.kind in "biuf" else None,
            }
    _state["snapshots"].append(exact)


def _record(op, target=None, array=None, indices=None, values=None):
    s = _state
    s["seq"] += 1
    if len(s["events"]) >= MAX_EVENTS:
        s["dropped"] += 1
        return
    label = collectives.label
    s["events"].append(
        {
            "pe": s["me"],
            "seq": s["seq"],
            "t": time.time_ns(),
            "line": _cell_line(),
            "op": op,
            "target": target,
            "array": array,
            "indices": indices,
            "epoch": s["epoch"],
            "label": dict(label, call=collectives._calls) if label else None,
            "values": values,
        }
    )


def _wrap(name, original):
    signature = inspect.signature(original)
    params = list(signature.parameters)

    @functools.wraps(original)
    def traced(*args, **kwargs):
        if _state is None or _state["inside"]:
            return original(*args, **kwargs)
        _state["inside"] = True
        try:
            return _traced_call(name, original, signature, params, args, kwargs)
        finally:
            _state["inside"] = False

    return traced


def _traced_call(name, original, signature, params, args, kwargs):
    bound = signature.bind_partial(*args, **kwargs).arguments
    if name in RMA or name in AMO:
        remote = bound.get("source") if name.startswith(("get", "iget")) or name == "atomic_fetch" else bound.get(params[0])
        array, start = _locate(remote)
        if array == "(sync)" or start is None:
            return original(*args, **kwargs)  # the emulation's own words: not recorded
        step = int(bound.get("tst" if name == "iput" else "sst", 1) or 1) if name in ("iput", "iget") else 1
        local = bound.get("source") if name.startswith(("put", "iput")) else bound.get("target")
        count = 1 if name in AMO else bound.get("size") or min(np.size(remote), np.size(local))
        count = int(count if name not in ("iput", "iget") else bound.get("size") or 1)
        result = original(*args, **kwargs)
        values = None
        if name in ("put", "put_nbi", "iput") and count <= PAYLOAD:
            flat = np.asarray(local).reshape(-1)
            sst = int(bound.get("sst", 1) or 1) if name == "iput" else 1
            values = flat[: count * sst : sst].tolist()
        elif name in ("atomic_set",):
            values = [bound.get("value")]
        _record(name, int(bound["pe"]), array, [int(start), int(start + count * step), step], values)
        return result
    if name in COLLECTIVES:
        array, start = _locate(bound.get("target"))
        result = original(*args, **kwargs)
        _record(name, None, array, None)
        return result
    if name == "wait_until" and _locate(bound.get("ivar"))[0] == "(sync)":
        return original(*args, **kwargs)
    result = original(*args, **kwargs)
    world = name in ("barrier_all", "sync_all") or (name == "sync" and bound.get("team") in (None, _shmem.TEAM_WORLD))
    _record(name)
    if world:
        _state["epoch"] += 1
        _snapshot()
        _originals["barrier_all"]()  # nobody writes the next epoch before every PE took its snapshot
    return result


def start(shmem_module=None):
    """Begin recording this PE's calls (the client sends it before the cell)."""
    global _shmem, _state
    from shmem4py import shmem

    _shmem = shmem_module or shmem
    _state = {"me": _shmem.my_pe(), "events": [], "snapshots": [], "bytes": 0, "seq": 0, "epoch": 0,
              "dropped": 0, "inside": False, "spans": []}
    _state["spans"] = _known_arrays()
    _snapshot()
    for name in RMA + AMO + SYNC + COLLECTIVES:
        if hasattr(_shmem, name) and name not in _originals:
            _originals[name] = getattr(_shmem, name)
            setattr(_shmem, name, _wrap(name, _originals[name]))
    return True


def stop():
    """Stop recording; the events and heap snapshots of this PE as plain data."""
    global _state
    for name, original in _originals.items():
        setattr(_shmem, name, original)
    _originals.clear()
    if _state is None:
        return {"pe": None, "events": [], "snapshots": [], "dropped": 0}
    _state["inside"] = True
    _snapshot()
    state, _state = _state, None
    return {"pe": state["me"], "events": state["events"], "snapshots": state["snapshots"], "dropped": state["dropped"]}
