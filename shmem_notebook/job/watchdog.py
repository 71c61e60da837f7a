"""Stop a job's processes when the notebook kernel dies, even by SIGKILL.

Each job gets a token, inherited by every process it starts (controller,
oshrun, PEs, nannies) through ``SHMEM_NOTEBOOK_OWNER``. A watchdog process
holds a pipe from the kernel: when the pipe closes (the kernel died, or the
job stopped) it cancels the job's Slurm batch jobs (by name, when it has one),
then terminates, then kills, whatever still carries the token, and removes the
shared memory those processes held (:mod:`.shm`) and the files the job left in its
ipyparallel profile (the job names its cluster through the pipe: :func:`tell_watchdog`).
The same process runs the job's governor (:mod:`.governor`) as a thread when the job asks for it
through the pipe: one helper process per job.

It is kept small, for it lives as long as the job: ``python -I -S`` (no ``site``, whose ``.pth``
hooks cost 2 MiB, and no working directory on the path) with the client's import path, its parent
packages standing in bare (:data:`_BOOT`), so that until the job ends it holds this module and the
governor, both of the standard library only; psutil and :mod:`..launcher.shm` load for the cleanup.
"""

from __future__ import annotations

import contextlib
import json
import os
import sys
import time
from typing import TYPE_CHECKING, Any, cast

if TYPE_CHECKING:
    import subprocess
    from collections.abc import Iterator
    from typing import IO

    import psutil

__all__ = [
    "OWNER",
    "owned_by",
    "start_watchdog",
    "tell_watchdog",
    "stop_watchdog",
    "owned_processes",
    "environment_values",
    "kill_owned",
    "cancel_batch_jobs",
    "remove_profile_files",
]

OWNER = "SHMEM_NOTEBOOK_OWNER"

#: the watchdog's ``-c`` code; argv: token, batch name or "", this package's folder, the import path
_BOOT = """\
import sys, types
token, batch, package, *sys.path[:] = sys.argv[1:]
for name, folder in (("shmem_notebook", package), ("shmem_notebook.job", package + "/job")):
    sys.modules[name] = types.ModuleType(name)
    sys.modules[name].__path__ = [folder]
from shmem_notebook.job.watchdog import main
main(token, batch or None)
"""


@contextlib.contextmanager
def owned_by(token: str) -> Iterator[None]:
    """Processes started inside this block carry ``token``."""
    old = os.environ.get(OWNER)
    os.environ[OWNER] = token
    try:
        yield
    finally:
        if old is None:
            os.environ.pop(OWNER, None)
        else:
            os.environ[OWNER] = old


def start_watchdog(token: str, batch_name: str | None = None) -> subprocess.Popen[bytes]:
    """A watchdog for ``token``'s processes (and Slurm batch jobs called ``batch_name``);
    it acts when its stdin closes."""
    import subprocess

    package = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    path = [folder for folder in sys.path if folder]  # not the working directory
    with owned_by(token):
        return subprocess.Popen(
            [sys.executable, "-I", "-S", "-c", _BOOT, token, batch_name or "", package, *path],
            stdin=subprocess.PIPE,
            start_new_session=True,  # a Ctrl-C in the kernel must not reach it
        )


def tell_watchdog(watchdog: subprocess.Popen[bytes], profile_dir: str, cluster_id: str) -> None:
    """Name the job's cluster: the watchdog removes its profile files too."""
    with contextlib.suppress(OSError, ValueError):
        cast("IO[bytes]", watchdog.stdin).write(
            json.dumps({"profile_dir": profile_dir, "cluster_id": cluster_id}).encode() + b"\n"
        )
        cast("IO[bytes]", watchdog.stdin).flush()


def remove_profile_files(profile_dir: str, cluster_id: str) -> None:
    """Remove what a job left in its ipyparallel profile: the controller's engines<ID>.json, the
    PEs' stack and exit notes, logs, connection files and the controller's sockets (all named by the cluster id)."""
    import glob

    for folder in ("log", "security"):
        for path in glob.glob(os.path.join(profile_dir, folder, f"*{glob.escape(cluster_id)}*")):
            with contextlib.suppress(OSError):
                os.remove(path)


def stop_watchdog(watchdog: subprocess.Popen[bytes] | None, timeout: float = 15.0) -> bool:
    """Close the pipe: the watchdog cleans up what is left and exits. False when it had to be
    killed after ``timeout`` s (what it had left to do is the caller's); True otherwise."""
    import subprocess

    if watchdog is None:
        return True
    with contextlib.suppress(OSError):
        cast("IO[bytes]", watchdog.stdin).close()
    try:
        watchdog.wait(timeout)
    except subprocess.TimeoutExpired:
        watchdog.kill()
        watchdog.wait()
        return False
    return True


def environment_values(variable: str, uid: int | None = None) -> dict[int, str]:
    """``{pid: value}`` of ``variable`` in the environments of the live processes (of user ``uid``) that have
    it, this one excepted. One read of each process's ``/proc/PID/environ`` (other users' are refused at
    once, a zombie's is empty): a login node's thousands of processes cost milliseconds."""
    key = b"\0" + variable.encode() + b"="
    found: dict[int, str] = {}
    for name in os.listdir("/proc"):
        if not name.isdigit() or int(name) == os.getpid():
            continue
        try:
            if uid is not None and os.stat(f"/proc/{name}").st_uid != uid:
                continue
            with open(f"/proc/{name}/environ", "rb") as f:
                env = b"\0" + f.read() + b"\0"
        except OSError:
            continue
        if (at := env.find(key)) >= 0:
            start = at + len(key)
            found[int(name)] = env[start : env.index(b"\0", start)].decode(errors="replace")
    return found


def owned_processes(token: str, variable: str = OWNER) -> list[psutil.Process]:
    """Live processes whose environment has ``variable=token``, except this one."""
    import psutil

    found: list[psutil.Process] = []
    for pid, value in environment_values(variable).items():
        if value == token:
            with contextlib.suppress(psutil.Error):
                found.append(psutil.Process(pid))
    return found


def kill_owned(token: str, grace: float = 1.0, procs: list[psutil.Process] | None = None) -> None:
    """SIGTERM every process carrying ``token`` (``procs``, when just found), SIGKILL what is left after
    ``grace`` s and what appeared meanwhile."""
    import psutil

    procs = owned_processes(token) if procs is None else procs
    for proc in procs:
        with contextlib.suppress(psutil.Error):
            proc.terminate()
    _, alive = psutil.wait_procs(procs, timeout=grace)
    for proc in alive + owned_processes(token):
        with contextlib.suppress(psutil.Error):
            proc.kill()


def cancel_batch_jobs(name: str | None) -> None:
    """``scancel`` every Slurm job called ``name`` (a job's batch jobs carry its token in their name)."""
    import shutil
    import subprocess

    if name and shutil.which("scancel"):
        with contextlib.suppress(OSError, subprocess.SubprocessError):
            subprocess.run(["scancel", f"--name={name}"], capture_output=True, timeout=60)


def main(token: str, batch_name: str | None = None) -> None:
    """The watchdog's process: serve the pipe until it closes, then clean up."""
    from .governor import Governed

    started = time.time()

    told: list[Any]
    told, governed = [], Governed()
    for line in iter(sys.stdin.buffer.readline, b""):  # ends when the kernel is gone or the job stopped
        with contextlib.suppress(ValueError, KeyError, TypeError, AttributeError, OSError):
            request = json.loads(line)
            if not governed.request(request):
                told.append(request)
    governed.end_all()  # each wakes the PEs it stopped
    import psutil

    from ..launcher.shm import Segments

    time.sleep(0.1)
    cancel_batch_jobs(batch_name)
    segments = Segments(token, since=started - 1.0)  # and UCX's files its processes may have left since the start
    owned = owned_processes(token)
    segments.note(p.pid for p in owned)
    kill_owned(token, procs=owned)
    psutil.wait_procs([p for p in map(_process, segments.pids) if p], timeout=2.0)
    segments.release()
    for cluster in told:
        with contextlib.suppress(KeyError, TypeError):
            remove_profile_files(cluster["profile_dir"], cluster["cluster_id"])


def _process(pid: int) -> psutil.Process | None:
    import psutil

    try:
        return psutil.Process(pid)
    except psutil.Error:
        return None
