"""Will N symmetric heaps fit on a node? Checked before anything is launched (client side).

Each PE's heap is a shared-memory segment of the full size; the PEs of one
node together need ``PEs on the node x heap`` of memory that the node can
actually give (``MemAvailable``, and the kernel's SysV limit ``shmall``), plus
room for the PE processes themselves and Open MPI's transport files in
``/dev/shm``. Asking for more makes the PEs fill memory until the OOM killer
steps in, so :func:`check_heap_fits` refuses first.

With a hostfile or inside a Slurm allocation PEs are spread over nodes:
:func:`pes_per_node` maps them the way Open MPI does by default (fill each
node's slots in order) and the busiest node is checked against this node's
memory (other nodes cannot be measured from here); ``SHMEM_NOTEBOOK_HEAP_CHECK=off``
skips the check.
"""

from __future__ import annotations

import math
import os
import re
from typing import TYPE_CHECKING

from ..errors import LaunchError
from ..launcher.shm import SHM_DIR, sysv_segments
from ..specs import format_size

if TYPE_CHECKING:
    from collections.abc import Mapping
    from typing import TypeVar

    D = TypeVar("D", int, None)

__all__ = [
    "PE_OVERHEAD",
    "TRANSPORT_SHM",
    "node_memory",
    "pes_per_node",
    "largest_heap",
    "TOOL_RESERVE",
    "check_heap_fits",
]

#: memory a PE process needs beside its heap (Python, ipyparallel, OSHMEM; ~85 MiB measured)
PE_OVERHEAD = 128 << 20
#: /dev/shm space each PE's transports take (vader 4 MiB, UCX posix segments ~4 MiB)
TRANSPORT_SHM = 8 << 20


def _meminfo(field: str) -> int:
    with open("/proc/meminfo") as f:
        for line in f:
            if line.startswith(field + ":"):
                return int(line.split()[1]) * 1024
    raise LookupError(field)


def _read_int(path: str, default: D) -> int | D:
    try:
        with open(path) as f:
            return int(f.read().split()[0])
    except (OSError, ValueError, IndexError):
        return default


def _cgroup_room(cgroup_file: str = "/proc/self/cgroup", root: str = "/sys/fs/cgroup") -> int | None:
    """Memory this process's cgroup (a container's limit, e.g. binder's) still allows, or None."""
    try:
        with open(cgroup_file) as f:
            lines = f.read().splitlines()
    except OSError:
        return None
    for line in lines:
        _, controllers, path = line.split(":", 2)
        if controllers == "":  # cgroup v2
            base, limit_name, usage_name = os.path.join(root, path.lstrip("/")), "memory.max", "memory.current"
        elif "memory" in controllers.split(","):  # cgroup v1
            base, limit_name = os.path.join(root, "memory", path.lstrip("/")), "memory.limit_in_bytes"
            usage_name = "memory.usage_in_bytes"
        else:
            continue
        limit = _read_int(os.path.join(base, limit_name), None)
        if limit is None or limit >= 1 << 60:
            continue
        usage = _read_int(os.path.join(base, usage_name), 0)
        reclaimable = 0
        try:
            with open(os.path.join(base, "memory.stat")) as f:
                stats = dict(line.split() for line in f if len(line.split()) == 2)
            reclaimable = int(stats.get("total_inactive_file", stats.get("inactive_file", 0)))
        except (OSError, ValueError):
            pass
        return max(limit - usage + reclaimable, 0)
    return None


def node_memory() -> tuple[int | None, str]:
    """``(bytes, what)``: shared memory this node can give heaps now, and which limit that is."""
    limits = []
    try:
        limits.append((_meminfo("MemAvailable"), "available memory (MemAvailable)"))
    except (OSError, LookupError):
        pass
    shmall = _read_int("/proc/sys/kernel/shmall", 0) * os.sysconf("SC_PAGE_SIZE")
    if 0 < shmall < 1 << 62:
        used = sum(seg["size"] for seg in sysv_segments().values())
        limits.append((max(shmall - used, 0), "the SysV shared-memory limit (kernel.shmall)"))
    room = _cgroup_room()
    if room is not None:
        limits.append((room, "this container's memory limit (cgroup)"))
    if not limits:
        return None, "unknown"
    return min(limits)


def _parse_hostfile(path: str) -> list[int]:
    slots = []
    with open(path) as f:
        for line in f:
            line = line.split("#", 1)[0].strip()
            if not line:
                continue
            match = re.search(r"\bslots\s*=\s*(\d+)", line)
            slots.append(int(match.group(1)) if match else (os.cpu_count() or 1))
    return slots


def _parse_slurm(text: str) -> list[int]:
    """``'2(x3),1'`` -> ``[2, 2, 2, 1]`` (SLURM_TASKS_PER_NODE)."""
    slots: list[int] = []
    for part in text.split(","):
        match = re.match(r"^\s*(\d+)(?:\(x(\d+)\))?\s*$", part)
        if match:
            slots += [int(match.group(1))] * int(match.group(2) or 1)
    return slots


def pes_per_node(n: int, hostfile: str | None = None, environ: Mapping[str, str] | None = None) -> int:
    """How many of ``n`` PEs the busiest node gets: all of them on one node; with a
    hostfile or Slurm allocation, each node's slots filled in order, the rest spread evenly."""
    environ = os.environ if environ is None else environ
    if hostfile:
        slots = _parse_hostfile(hostfile)
    elif environ.get("SLURM_TASKS_PER_NODE"):
        slots = _parse_slurm(environ["SLURM_TASKS_PER_NODE"])
    else:
        return n
    if not slots:
        return n
    placed, left = [], n
    for s in slots:
        placed.append(min(s, left))
        left -= placed[-1]
    for i in range(left):  # oversubscribed: the rest go round-robin
        placed[i % len(placed)] += 1
    return max(placed)


def largest_heap(per_node: int, memory: int) -> str | None:
    """The largest heap (a ``--heap`` string, whole MiB) that ``per_node`` PEs can each have."""
    mib = (memory - per_node * PE_OVERHEAD) // per_node >> 20
    if mib <= 0:
        return None
    return f"{mib >> 10}G" if mib >= 1024 and mib % 1024 == 0 else f"{mib}M"


#: what the tool keeps of every heap for itself (the teaching collectives' scratch, engine/collectives.py)
TOOL_RESERVE = 256 << 10


def check_heap_fits(
    n: int,
    heap_bytes: int,
    hostfile: str | None = None,
    environ: Mapping[str, str] | None = None,
    memory: int | None = None,
    shm_free: float | None = None,
) -> None:
    """Raise :class:`LaunchError` when the heaps of one node's PEs cannot fit in its memory."""
    environ = os.environ if environ is None else environ
    if environ.get("SHMEM_NOTEBOOK_HEAP_CHECK", "on").lower() in ("off", "0", "no", "false"):
        return
    per_node = pes_per_node(n, hostfile, environ)
    spread = "" if per_node == n and not (hostfile or environ.get("SLURM_TASKS_PER_NODE")) else " on its busiest node"
    where = "this node" if not spread else "a node (assumed to be like this one)"
    what = "its memory"
    if memory is None:
        memory, what = node_memory()
    if memory is not None:
        needed = per_node * (heap_bytes + PE_OVERHEAD)
        if needed > memory:
            fits = largest_heap(per_node, memory)
            most = max(0, memory // (heap_bytes + PE_OVERHEAD))
            advice = (
                f"the largest heap that fits is {fits} per PE: use `--heap {fits}` (heap={fits!r}), or at most "
                f"{most} PEs per node with this heap"
                if fits
                else f"at most {most} PEs per node fit with a heap of {format_size(heap_bytes)}: use -n {most} or fewer"
            )
            raise LaunchError(
                f"{per_node} PEs{spread} x heap {format_size(heap_bytes)} need {format_size(needed)} of shared memory "
                f"(with {format_size(PE_OVERHEAD)} per PE process) but {where} can give {format_size(memory)} "
                f"({what}); {advice}"
            )
    if shm_free is None:
        try:
            st = os.statvfs(SHM_DIR)
            shm_free = st.f_bavail * st.f_frsize
        except OSError:
            shm_free = math.inf
    if per_node * TRANSPORT_SHM > shm_free:
        raise LaunchError(
            f"{per_node} PEs need about {format_size(per_node * TRANSPORT_SHM)} in {SHM_DIR} for Open MPI's "
            f"shared-memory transports but it has {format_size(shm_free)} free; free space there "
            f"(or enlarge it, e.g. docker run --shm-size=1g) or use fewer PEs"
        )
