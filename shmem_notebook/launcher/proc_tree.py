"""A process's children and descendants, asked of the process itself.

psutil finds a process's children by reading the parent of every process on the machine
(``/proc/*/stat``): 44 ms beside 2,000 other processes, 91 ms beside 4,000 (``bench/crowd.py``), paid
several times by each start, restart and stop. Linux lists each thread's children in ``/proc/<pid>/task/<tid>/children``
(3.5 and later, ``CONFIG_PROC_CHILDREN``), which costs a few reads whatever else runs; a kernel
without it gets psutil's way.
"""

import functools
import os

import psutil

__all__ = ["children", "descendants"]


@functools.cache
def _kernel_lists_children() -> bool:
    return os.path.exists(f"/proc/self/task/{os.getpid()}/children")


def children(pid: int) -> list[int]:
    """The pids of ``pid``'s children, zombies too; [] when ``pid`` is gone."""
    if not _kernel_lists_children():
        return _children_by_psutil(pid)
    for _ in range(3):  # a thread that ended while read hands its children to another: read again
        try:
            threads = os.listdir(f"/proc/{pid}/task")
        except OSError:
            return []
        found: list[int] = []
        try:
            for tid in threads:  # a child is listed under the thread that made it (or took it over)
                with open(f"/proc/{pid}/task/{tid}/children") as f:
                    found += map(int, f.read().split())
        except OSError:
            continue
        return found
    return _children_by_psutil(pid)


def descendants(pid: int) -> list[int]:
    """The pids of ``pid``'s children, their children and so on; [] when ``pid`` is gone."""
    if not _kernel_lists_children():
        return _children_by_psutil(pid, recursive=True)
    found: list[int] = []
    parents = [pid]
    while parents:
        parents = [child for parent in parents for child in children(parent)]
        found += parents
    return found


def _children_by_psutil(pid: int, recursive: bool = False) -> list[int]:
    try:
        return [p.pid for p in psutil.Process(pid).children(recursive=recursive)]
    except psutil.Error:
        return []
