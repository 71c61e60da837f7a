"""The trace of a PE that did not finish its cell, read from its spool (client side).

A PE blocked for good never answers ``trace_stop``; its recording
(:mod:`shmem_notebook.trace.recording`) appended what it had recorded to a spool file
right before each call that can block. :func:`read_spool` makes of that file the data a
``trace_stop`` answer has, its lane ending in the call the PE is still in (``open``: that call's
event lasts until ``now``).
"""

from __future__ import annotations

import pickle
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    import os

__all__ = ["read_spool"]


def read_spool(path: str | os.PathLike[str], now: int) -> dict[str, Any] | None:
    """The trace data PE's spool at ``path`` holds (as ``trace_stop`` sends it, ``stopped`` = ``now``,
    ns on this host's clock, plus ``open``: the call it is in, or None), or None when it holds none."""
    parts: list[dict[str, Any]] = []
    try:
        with open(path, "rb") as f:
            while True:
                try:
                    parts.append(pickle.load(f))
                except EOFError:
                    break
                except (pickle.UnpicklingError, ValueError, AttributeError, IndexError):
                    break  # a part cut short: the PE was stopped while writing it
    except OSError:
        return None
    if not parts or "pe" not in parts[0]:
        return None
    data = dict(parts[0], events=[], snapshots=[], dropped=0, stopped=now, open=None)
    for part in parts[1:]:
        data["events"] += part.get("events", [])
        data["snapshots"] += part.get("snapshots", [])
        data["dropped"] = part.get("dropped", data["dropped"])
        data["open"] = part.get("open")
    call = data["open"]
    if call is not None:  # the call it is in, lasting until now
        seq = data["events"][-1]["seq"] + 1 if data["events"] else 1
        data["events"].append(
            {
                "pe": data["pe"],
                "seq": seq,
                "t0": call["t0"],
                "t": max(now, call["t0"]),
                "line": call["line"],
                "op": call["op"],
                "target": None,
                "bytes": None,
                "array": None,
                "indices": None,
                "epoch": len(data["snapshots"]) - 1,  # a heap state at the start and after each world barrier
                "label": None,
                "values": None,
                "open": True,
            }
        )
    if not data["snapshots"]:
        return None
    return data
