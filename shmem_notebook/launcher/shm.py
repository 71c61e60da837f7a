"""Shared memory launched processes hold, and its removal once they are gone (client side, Linux).

OSHMEM over UCX gives each PE SysV segments (the symmetric heap and UCX's
transport buffers, created then marked for removal, so they vanish with their
last process) and Open MPI's vader files ``/dev/shm/vader_segment.<host>.<job>.<rank>``,
which only a clean ``oshrun`` exit removes. When the whole job is SIGKILLed
(kernel death, a failed start) the files stay, and a PE killed between creating
a SysV segment and marking it would leak that segment. So does ``oshrun``'s session
directory (``<tmp>/ompi.<host>.<uid>/pid.<oshrun pid>``: PMIx's shared-memory store,
contact file), which only its own exit removes (:func:`session_dirs`).

A job's segments are found by its processes: :func:`segments_of` reads their
``/proc/PID/maps``; SysV segments are also matched by creator pid
(:func:`sysv_segments`); vader files also by the Open MPI job id the processes carry
(:func:`ompi_job`), which names the files a PE made after the last look and died before the next.
UCX's own files (``ucx_shm_posix_<random>``, removed by UCX once mapped) name no job: one that no
process holds open or maps is garbage whoever made it (:func:`orphan_ucx_files`).
:func:`release` removes what is left.
"""

import contextlib
import ctypes
import ctypes.util
import glob
import os
import re
import shutil
import subprocess
import threading
import time
from collections.abc import Iterable, Iterator
from typing import Any, Self

import psutil

from .proc_tree import descendants

__all__ = [
    "SHM_DIR",
    "transfer_prefix",
    "session_dirs",
    "segments_of",
    "ompi_job",
    "orphan_ucx_files",
    "sysv_mappings",
    "sysv_segments",
    "release",
    "Segments",
    "SharedMemoryOf",
]

SHM_DIR = "/dev/shm"
_IPC_RMID = 0


def transfer_prefix(token: str) -> str:
    """Path prefix of the files a job's PEs write to hand over data (``gather``): removed with
    the job's other shared memory should a PE or the kernel die before the client unlinked them."""
    return f"{SHM_DIR}/shmem_notebook-{token}-"


def session_dirs(pids: Iterable[int]) -> set[str]:
    """Open MPI's session directories of the launchers among ``pids`` that are gone (their
    ``pid.<pid>`` folders under ``ompi.<host>.<uid>`` in the temporary directory)."""
    tmps = {os.environ.get(name) for name in ("TMPDIR", "TMP", "TEMP")} | {"/tmp"}
    found: set[str] = set()
    for pid in pids:
        if psutil.pid_exists(pid):
            continue
        for tmp in filter(None, tmps):
            found |= set(glob.glob(os.path.join(glob.escape(tmp), f"ompi.*.{os.getuid()}", f"pid.{pid}")))
    return found


def _maps(pid: int) -> str:
    try:
        with open(f"/proc/{pid}/maps") as f:
            return f.read()
    except OSError:
        return ""


def segments_of(pids: Iterable[int]) -> tuple[set[str], set[int]]:
    """``(files, shmids)``: live ``/dev/shm`` files and SysV segment ids mapped by ``pids``."""
    files: set[str] = set()
    shmids: set[int] = set()
    for pid in pids:
        for line in _segment_lines(_maps(pid)):
            parts = line.split(None, 5)
            if len(parts) < 6:
                continue
            path = parts[5]
            if path.startswith("/SYSV"):
                shmids.add(int(parts[4]))  # the inode column of a SysV mapping is its shmid
            elif path.startswith(SHM_DIR + "/") and not path.endswith("(deleted)"):
                files.add(path)
    return files, shmids


def ompi_job(pid: int) -> int | None:
    """The Open MPI job id of a process ``oshrun`` or ``mpirun`` started (``OMPI_MCA_ess_base_jobid`` in
    its environment; it names the job's vader files in hex), or None."""
    try:
        with open(f"/proc/{pid}/environ", "rb") as f:
            match = _JOB_ID.search(f.read())
    except OSError:
        return None
    return int(match.group(1)) if match else None


_JOB_ID = re.compile(rb"(?:^|\0)OMPI_MCA_ess_base_jobid=(\d+)(?:\0|$)")


def orphan_ucx_files(since: float) -> set[str]:
    """UCX's shared-memory files of this user made since ``since`` (a ``time.time()``) that no process holds
    open or maps. UCX creates ``/dev/shm/ucx_shm_posix_<random>`` and removes it once it mapped it; a
    process killed in between leaves it, under a name that says nothing of its job. Until its removal its
    maker holds it open, then maps it, so a file neither open nor mapped is no one's."""
    found: dict[tuple[int, int], str] = {}
    for path in glob.glob(f"{SHM_DIR}/ucx_shm_posix_*"):
        with contextlib.suppress(OSError):
            st = os.stat(path)
            if st.st_uid == os.getuid() and st.st_mtime >= since:
                found[(st.st_dev, st.st_ino)] = path
    for pid in psutil.pids() if found else ():  # each process's open files and mappings
        if not found:
            break
        with contextlib.suppress(OSError):
            for fd in os.listdir(f"/proc/{pid}/fd"):
                with contextlib.suppress(OSError):
                    st = os.stat(f"/proc/{pid}/fd/{fd}")
                    found.pop((st.st_dev, st.st_ino), None)
        maps = _maps(pid)
        if "ucx_shm_posix_" in maps:
            found = {key: path for key, path in found.items() if path not in maps}
    return set(found.values())


def sysv_mappings(pid: int) -> list[tuple[int, int, int, int]]:
    """``[(lo, hi, shmid, offset)]``: the SysV segments ``pid`` maps, where and from which offset."""
    found: list[tuple[int, int, int, int]] = []
    for line in _segment_lines(_maps(pid)):
        parts = line.split(None, 5)
        if len(parts) == 6 and parts[5].startswith("/SYSV"):
            lo, hi = (int(x, 16) for x in parts[0].split("-"))
            found.append((lo, hi, int(parts[4]), int(parts[2], 16)))
    return found


def _segment_lines(maps: str) -> Iterator[str]:
    """The lines of ``maps`` that name a SysV segment or a ``/dev/shm`` file (a PE maps
    thousands of others: they are skipped at C speed, not split one by one)."""
    for marker in (" /SYSV", " " + SHM_DIR + "/"):
        at = maps.find(marker)
        while at >= 0:
            start, end = maps.rfind("\n", 0, at) + 1, maps.find("\n", at)
            end = len(maps) if end < 0 else end
            yield maps[start:end]
            at = maps.find(marker, end)


def sysv_segments() -> dict[int, dict[str, int]]:
    """shmid -> {'key', 'cpid', 'nattch', 'size', 'uid'} of every SysV segment this user can see."""
    found: dict[int, dict[str, int]] = {}
    try:
        with open("/proc/sysvipc/shm") as f:
            header, *rows = f.read().splitlines()
    except OSError:
        return found
    names = header.split()
    for row in rows:
        values = dict(zip(names, row.split()))
        with contextlib.suppress(KeyError, ValueError):
            found[int(values["shmid"])] = {
                "key": int(values["key"]),
                "cpid": int(values["cpid"]),
                "nattch": int(values["nattch"]),
                "size": int(values["size"]),
                "uid": int(values["uid"]),
            }
    return found


def _shmctl_rmid(shmid: int) -> bool:
    libc = ctypes.CDLL(ctypes.util.find_library("c"), use_errno=True)
    answer: int = libc.shmctl(ctypes.c_int(shmid), _IPC_RMID, None)  # ctypes' default restype: c_int
    return answer == 0


class Segments:
    """The shared memory of one job, noted while its processes live, released after."""

    def __init__(self, token: str | None = None, since: float | None = None) -> None:
        self.token = token
        self.pids: set[int] = set()
        self.files: set[str] = set()
        self.shmids: set[int] = set()
        self.jobs: set[int] = set()  # Open MPI job ids: their vader files, mapped when looked at or not
        self.jobless: set[int] = set()  # pids that showed no job id yet (one still starting): asked again
        self.since = time.time() - 1.0 if since is None else since  # UCX's files made since: orphan_ucx_files

    def note(self, pids: Iterable[int]) -> None:
        """Remember ``pids`` (the job's oshrun and PEs), their Open MPI job ids and what they map now."""
        pids = set(pids)
        for pid in (pids - self.pids) | (pids & self.jobless):
            job = ompi_job(pid)
            if job is None:
                self.jobless.add(pid)
            else:
                self.jobs.add(job)
                self.jobless.discard(pid)
        self.pids |= pids
        files, shmids = segments_of(pids)
        self.files |= files
        self.shmids |= shmids

    def left(self) -> tuple[set[str], set[int]]:
        """``(files, shmids)`` of this job that still exist (the files: in ``/dev/shm``, and the
        session directories of its launchers that are gone)."""
        segments = sysv_segments()
        shmids = {s for s in self.shmids if s in segments}
        shmids |= {s for s, seg in segments.items() if seg["cpid"] in self.pids}
        files = {p for p in self.files if os.path.exists(p)} | session_dirs(self.pids)
        for job in self.jobs:  # a PE's vader file made after the last look, its PE ended before the next
            files |= set(glob.glob(f"{SHM_DIR}/vader_segment.*.{job:x}.*"))
        if self.token:
            files |= set(glob.glob(glob.escape(transfer_prefix(self.token)) + "*"))
        return files, shmids

    def release(self) -> tuple[set[str], set[int]]:
        """Remove what is left (call once the job's processes are gone), and UCX's files no one holds made
        since this job began (:func:`orphan_ucx_files`); return what was removed."""
        files, shmids = self.left()
        left = release(files | orphan_ucx_files(self.since), shmids)
        self.pids, self.files, self.shmids, self.jobs, self.jobless = set(), set(), set(), set(), set()
        return left


def release(files: Iterable[str], shmids: Iterable[int]) -> tuple[set[str], set[int]]:
    """Unlink ``files`` (directories with what they hold) and remove SysV ``shmids`` (ignoring ones
    already gone); return what was removed."""
    removed_files: set[str] = set()
    removed_ids: set[int] = set()
    for path in files:
        with contextlib.suppress(FileNotFoundError):
            if os.path.isdir(path) and not os.path.islink(path):
                shutil.rmtree(path)
            else:
                os.unlink(path)
            removed_files.add(path)
    for shmid in shmids:
        if _shmctl_rmid(shmid):
            removed_ids.add(shmid)
    return removed_files, removed_ids


class SharedMemoryOf:
    """``with SharedMemoryOf(process):`` notes the shared memory a launched command's processes map
    while it runs (every 0.2 s), and removes what of it is left once they are gone: Open MPI's vader
    files outlive PEs that a Ctrl-C or a crash ended (the race runner's ``oshrun``)."""

    def __init__(self, process: subprocess.Popen[Any]) -> None:
        self.process, self.segments, self.done = process, Segments(), threading.Event()
        self.noting = threading.Thread(target=self._note, daemon=True)

    def _tree(self) -> list[int]:
        return [self.process.pid, *descendants(self.process.pid)]

    def _note(self) -> None:
        while not self.done.wait(0.2):
            self.segments.note(self._tree())

    def __enter__(self) -> Self:
        self.noting.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.done.set()
        self.noting.join()
        with contextlib.suppress(subprocess.TimeoutExpired):
            self.process.wait(5.0)  # killed by a Ctrl-C: reaped here, not counted as alive below
        deadline = time.monotonic() + 5.0
        while any(psutil.pid_exists(pid) for pid in self.segments.pids) and time.monotonic() < deadline:
            time.sleep(0.05)
        self.segments.release()
