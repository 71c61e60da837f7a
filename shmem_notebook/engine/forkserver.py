"""``python -m shmem_notebook.engine.forkserver FD``: a job's PEs, imported once and forked.

A PE spends most of its start importing the engine (IPython, ipykernel, zmq, tornado, NumPy): on a node
with more PEs than cores every PE pays it again (docs/benchmarks.md). The fork server imports all of that
once, before any OpenSHMEM, and waits on the listening Unix socket ``FD`` that the client made
(:mod:`shmem_notebook.job.forks`); it serves only processes of its own user. ``oshrun`` starts a small
stub in each PE's place (``fork_stub.c``, or :mod:`.fork_stub` where it could not be compiled); the stub hands
the server its standard streams and how many words of its command line are its own, and the server forks:
the child reads the stub's environment, working directory, arguments and cores from ``/proc``, takes them
over and runs the engine (``python -m shmem_notebook.engine``), ``shmem_init`` first, as that PE. The stub
forwards signals to it, mirrors how it ended and, killed itself, takes the PE down (the server kills the
child when the stub's connection closes). The server keeps running across restarts; killed, its children die with it
(``PR_SET_PDEATHSIG``). Like Python's ``multiprocessing`` fork server, it stays single-threaded.
"""

import ctypes
import gc
import importlib
import os
import selectors
import signal
import socket
import sys
import time
from typing import cast

__all__ = ["serve", "stub_state", "reap_due", "main"]

#: seconds an ended PE stays a zombie after its stub read how it ended, so that the client's watch of
#: the PEs (job.processes.LocalPEs) reads it too
KEEP_ENDED = 0.5
#: seconds between two looks at a PE that was due to be reaped but had not exited yet
REAP_AGAIN = 0.05
PR_SET_PDEATHSIG = 1


def _imports() -> None:
    """What every PE imports before it answers, OpenSHMEM excepted (shmem4py's library is loaded, not initialised)."""
    from .. import lazy_imports
    from . import PRELOAD

    lazy_imports.install()
    lazy_imports.hold_back("debugpy")  # until runtime.bind()
    for name in (*PRELOAD, "numpy", "shmem4py.api"):
        importlib.import_module(name)


def serve(listener: socket.socket) -> tuple[int, int, list[int]] | None:
    """Fork a PE for each stub that connects; return, in the child, the stub's pid, how many words of its
    command line are its own and its standard stream fds; never return in the server."""
    children: dict[socket.socket, int] = {}  # stub connection -> its PE
    ending: list[tuple[float, int]] = []  # (when, pid): ended PEs to reap
    selector = selectors.DefaultSelector()
    selector.register(listener, selectors.EVENT_READ)
    uid = os.getuid()
    while True:
        now = time.monotonic()
        reap_due(ending, now)
        timeout = min((when for when, _ in ending), default=now + 60.0) - now
        for key, _ in selector.select(max(0.0, timeout)):
            if key.fileobj is listener:
                conn, _ = listener.accept()
                stub, stub_uid = _peer(conn)
                if stub_uid != uid:  # an abstract socket: any user may connect; serve only ours
                    conn.close()
                    continue
                try:
                    message, fds, _, _ = socket.recv_fds(conn, 16, 3)
                except OSError:
                    conn.close()
                    continue
                if len(fds) != 3 or not message.isdigit():  # not a stub's: nothing of it is kept
                    for fd in fds:
                        os.close(fd)
                    conn.close()
                    continue
                own = int(message)
                pid = os.fork()
                if pid == 0:
                    selector.close()
                    listener.close()
                    for other in children:
                        other.close()
                    conn.close()
                    return stub, own, fds
                for fd in fds:
                    os.close(fd)
                conn.sendall(str(pid).encode())
                children[conn] = pid
                selector.register(conn, selectors.EVENT_READ)
            else:
                conn = cast(socket.socket, key.fileobj)
                pid = children.pop(conn)
                selector.unregister(conn)
                said = b""
                try:
                    said = conn.recv(16)
                except OSError:
                    pass
                conn.close()
                if said != b"ended":  # the stub was killed: so is its PE
                    _kill(pid)
                ending.append((time.monotonic() + (KEEP_ENDED if said == b"ended" else 0.0), pid))


def _peer(conn: socket.socket) -> tuple[int, int]:
    """The connected stub's pid and user id."""
    creds = conn.getsockopt(socket.SOL_SOCKET, socket.SO_PEERCRED, 12)
    return int.from_bytes(creds[:4], sys.byteorder), int.from_bytes(creds[4:8], sys.byteorder)


def stub_state(pid: int, own: int) -> tuple[dict[str, str], str, list[str], list[int]]:
    """What stub ``pid`` runs with, from ``/proc``: its environment, working directory, the arguments after
    the ``own`` first words of its command line, and its cores (where oshrun bound it, or every core)."""
    with open(f"/proc/{pid}/environ", "rb") as f:
        env: dict[str, str] = {}
        for entry in f.read().split(b"\0"):
            name, equals, value = entry.partition(b"=")
            if equals:
                env.setdefault(os.fsdecode(name), os.fsdecode(value))  # the first wins, as in os.environ
    with open(f"/proc/{pid}/cmdline", "rb") as f:
        argv = [os.fsdecode(word) for word in f.read().split(b"\0")[:-1]]
    return env, os.readlink(f"/proc/{pid}/cwd"), argv[own:], sorted(os.sched_getaffinity(pid))


def _kill(pid: int) -> None:
    try:
        os.kill(pid, signal.SIGKILL)
    except ProcessLookupError:
        pass


def reap_due(ending: list[tuple[float, int]], now: float) -> None:
    """Reap each PE of ``ending`` (when, pid) whose time came, if it exited; look again at one that did not
    in :data:`REAP_AGAIN` s. Never waits: a PE slow to die (in the kernel) would hold up every stub after it."""
    for entry in [e for e in ending if e[0] <= now]:
        ending.remove(entry)
        try:
            exited = os.waitpid(entry[1], os.WNOHANG)[0] != 0
        except ChildProcessError:
            exited = True
        if not exited:
            ending.append((now + REAP_AGAIN, entry[1]))


def _become(stub: int, own: int, fds: list[int]) -> None:
    """In the child: take over the stub's streams, environment, working directory, arguments and cores."""
    ctypes.CDLL(None, use_errno=True).prctl(PR_SET_PDEATHSIG, signal.SIGKILL)
    if os.getppid() == 1:  # the server died before prctl
        os._exit(1)
    try:
        env, cwd, argv, cpus = stub_state(stub, own)
    except OSError:  # the stub is gone (killed, its job stopped): so is this PE
        os._exit(1)
    os.setpgid(0, 0)  # its own process group, as oshrun gives each PE
    for target, fd in enumerate(fds):
        os.dup2(fd, target)
    for fd in fds:
        if fd > 2:
            os.close(fd)
    os.environ.clear()
    os.environ.update(env)
    os.chdir(cwd)
    os.sched_setaffinity(0, cpus)
    sys.argv = [sys.argv[0], *argv]
    if "numpy.random" in sys.modules:  # each PE its own seed, as when it was started apart
        sys.modules["numpy.random"].seed()
    for sig in (signal.SIGTERM, signal.SIGCHLD):
        signal.signal(sig, signal.SIG_DFL)
    signal.signal(signal.SIGINT, signal.default_int_handler)


def main() -> None:
    listener = socket.socket(fileno=int(sys.argv[1]))
    sys.argv = sys.argv[:1]
    signal.signal(signal.SIGTERM, lambda *_: os._exit(0))  # its PEs die with it (PR_SET_PDEATHSIG)
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # interrupts are for its PEs, which the client signals itself
    _imports()
    gc.freeze()  # the imported objects stay out of the PEs' collections: fewer pages copied (33 -> 28 MiB a PE)
    child = serve(listener)
    if child is None:
        return
    _become(*child)
    import runpy

    runpy.run_module("shmem_notebook.engine", run_name="__main__", alter_sys=True)


if __name__ == "__main__":
    main()
