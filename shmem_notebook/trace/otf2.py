"""A traced cell as an OTF2 archive, with the ``otf2`` package (client side): Vampir, Score-P tools.

The system tree is job -> node -> ``PE k`` (a process with one location). Each call is a
region (``barrier_all @ line 7``: one region per call and line, with the line as its
``begin_line_number``) entered and left; inside it RMA calls are ``RmaPut`` / ``RmaGet`` /
``RmaAtomic`` records on one window (the symmetric heap, over TEAM_WORLD) with their bytes and
target PE, completed by ``RmaOpCompleteBlocking`` (not the ``_nbi`` ones); barriers, team syncs
and collectives are ``RmaCollectiveBegin`` / ``RmaCollectiveEnd`` pairs; waits on memory are
``RmaWaitChange``. Timestamps are ns of each node's clock (see :mod:`.timeline`).
"""

from __future__ import annotations

import os
import shutil
from typing import TYPE_CHECKING, Any

from .timeline import lanes

__all__ = ["write_otf2", "COLLECTIVE_OPS"]

if TYPE_CHECKING:
    from .cell_trace import Trace

#: call -> the name of its otf2.CollectiveOp
COLLECTIVE_OPS = {
    "barrier_all": "BARRIER",
    "sync_all": "BARRIER",
    "sync": "BARRIER",
    "Team.sync": "BARRIER",
    "broadcast": "BCAST",
    "collect": "ALLGATHERV",
    "fcollect": "ALLGATHER",
    "alltoall": "ALLTOALL",
    "alltoalls": "ALLTOALL",
}
_UNDEFINED = 2**32 - 1  # OTF2_UNDEFINED_UINT32: no root


def _atomic_type(op: str) -> Any:
    import otf2

    kinds = otf2.RmaAtomicType
    if "compare_swap" in op:
        return kinds.COMPARE_AND_SWAP
    if "swap" in op:
        return kinds.SWAP
    if op.startswith("atomic_fetch_inc"):
        return kinds.FETCH_AND_INCREMENT
    if op == "atomic_inc":
        return kinds.INCREMENT
    if op.startswith("atomic_fetch_add"):
        return kinds.FETCH_AND_ADD
    return kinds.FETCH_AND_ACCUMULATE if "fetch" in op else kinds.ACCUMULATE


def _clear(directory: str, name: str) -> None:
    """Remove an earlier archive ``name`` in ``directory`` (its anchor, definitions and event folder)."""
    for suffix in (".otf2", ".def"):
        if os.path.exists(os.path.join(directory, name + suffix)):
            os.remove(os.path.join(directory, name + suffix))
    if os.path.isdir(os.path.join(directory, name)):
        shutil.rmtree(os.path.join(directory, name))


def write_otf2(trace: Trace, path: str | os.PathLike[str]) -> str | os.PathLike[str]:
    """Write ``trace`` as the OTF2 archive whose anchor file is ``path`` (``run.otf2``; also ``run.def``, ``run/``)."""
    import otf2
    from otf2.enums import GroupType, Paradigm, RegionRole, RmaSyncLevel

    from ..analysis.model import READS
    from ..operations import ATOMICS, TRANSFERS
    from .timeline import WAITING

    directory, name = os.path.split(os.path.abspath(path))
    name = name[: -len(".otf2")] if name.lower().endswith(".otf2") else name
    _clear(directory, name)
    by_pe = lanes(trace)
    with otf2.writer.open(directory, archive_name=name, timer_resolution=10**9) as archive:
        defs = archive.definitions
        job, library = trace.meta.get("job") or "shmem_notebook", trace.meta.get("library") or "?"
        root = defs.system_tree_node(f"job: {job} ({library})")
        nodes: dict[str, Any]
        locations: dict[int, Any]
        nodes, locations = {}, {}
        for pe in range(trace.npes):
            host = (trace.pe_info.get(pe) or {}).get("host") or "no trace"
            if host not in nodes:
                nodes[host] = defs.system_tree_node(host, class_name="node", parent=root)
            group = defs.location_group(f"PE {pe}", system_tree_parent=nodes[host])
            locations[pe] = defs.location(f"PE {pe}", group=group)
        members = [locations[pe] for pe in range(trace.npes)]
        world = defs.comm(
            "TEAM_WORLD",
            group=defs.group(
                "TEAM_WORLD", group_type=GroupType.COMM_LOCATIONS, paradigm=Paradigm.SHMEM, members=members
            ),
        )
        window = defs.rma_win("symmetric heap", comm=world)
        cell = str(trace.meta.get("cell") or "cell")
        regions: dict[tuple[str, int | None], Any]
        regions, matching = {}, 0

        def region(op: str, line: int | None) -> Any:
            if (op, line) not in regions:
                role = (
                    RegionRole.BARRIER
                    if COLLECTIVE_OPS.get(op) == "BARRIER"
                    else (
                        RegionRole.COLL_OTHER
                        if op in COLLECTIVE_OPS or op.endswith("reduce")
                        else RegionRole.DATA_TRANSFER
                        if op in TRANSFERS
                        else RegionRole.FUNCTION
                    )
                )
                regions[(op, line)] = defs.region(
                    f"{op} @ {trace.where(line)}" if line else op,
                    canonical_name=f"shmem_{op}",
                    region_role=role,
                    paradigm=Paradigm.SHMEM,
                    source_file=cell,
                    begin_line_number=int(line or 0) % 2**32,
                    end_line_number=int(line or 0) % 2**32,
                )
            return regions[(op, line)]

        for pe, lane in by_pe.items():
            writer, now = archive.event_writer_from_location(locations[pe]), 0
            for s in lane:
                start, end = max(s.start, now), max(s.end, s.start, now)
                now = end
                writer.enter(start, region(s.op, s.line))
                target, size = s.event.get("target"), int(s.event.get("bytes") or 0)
                if s.op in TRANSFERS and target is not None:
                    matching += 1
                    if s.op in ATOMICS:
                        fetches = "fetch" in s.op or "swap" in s.op
                        received = size if fetches else 0
                        writer.rma_atomic(start, window, target, _atomic_type(s.op), size, received, matching)
                    elif s.op in READS:
                        writer.rma_get(start, window, target, size, matching)
                    else:
                        writer.rma_put(start, window, target, size, matching)
                    if not s.op.endswith("_nbi"):
                        writer.rma_op_complete_blocking(end, window, matching)
                elif s.op in COLLECTIVE_OPS or s.op.endswith("reduce"):
                    kind = getattr(otf2.CollectiveOp, COLLECTIVE_OPS.get(s.op, "ALLREDUCE"))
                    writer.rma_collective_begin(start)
                    writer.rma_collective_end(end, kind, RmaSyncLevel.PROCESS, window, _UNDEFINED, 0, 0)
                elif s.op in WAITING and s.op.startswith(("wait_until", "signal_wait")):
                    writer.rma_wait_change(end, window)
                writer.leave(end, region(s.op, s.line))
    return path
