"""What ``oshrun`` starts in a PE's place when the job has a fork server (:mod:`.forkserver`) and
``fork_stub.c``, the same in C, could not be compiled (:mod:`shmem_notebook.launcher.stub_program`).

Run as ``python -I -S fork_stub.py ADDRESS <engine args>``: the standard library only, started in a few
milliseconds. It hands the server its standard streams and how many words of its command line are its own
(the server reads the PE's arguments, environment, working directory and cores from ``/proc``), and the
server forks the PE. The stub then stands for the PE before ``oshrun``: it forwards the signals
``oshrun`` sends, and ends as the PE ended (its exit status, or the same signal). Killed, it takes the
PE with it (the server kills a PE whose stub's connection closed).
"""

import os
import resource
import select
import signal
import socket
import sys

FORWARDED = (signal.SIGTERM, signal.SIGINT, signal.SIGHUP, signal.SIGUSR1, signal.SIGUSR2, signal.SIGCONT,
             signal.SIGQUIT, signal.SIGTSTP)  # fmt: skip


def _stat(pid: int) -> list[str]:
    """The fields of ``/proc/PID/stat`` from the third (the state) on; [] when the PE is gone."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rpartition(")")[2].split()  # the command's name may hold spaces and parentheses
    except OSError:
        return []


def _status(pid: int) -> int:
    """The wait status of the PE, a zombie the server has not reaped yet (field 52)."""
    fields = _stat(pid)
    return int(fields[49]) if len(fields) > 49 and fields[49].isdigit() else 9  # gone already: as if killed


def _ended(pid: int) -> bool:
    """Whether the PE ended (a zombie) or is gone, where there is no pidfd to tell."""
    fields = _stat(pid)
    return not fields or fields[0] in ("Z", "X")


def _forward(pid: int, sig: int) -> None:
    try:
        os.kill(pid, sig)
    except ProcessLookupError:
        pass  # it ended: the loop below sees it


def main() -> None:
    server = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    address = sys.argv[1]
    try:
        server.connect("\0" + address[1:] if address.startswith("@") else address)  # "@name": an abstract socket
    except OSError as e:
        sys.exit(
            f"shmem_notebook: cannot reach the job's fork server ({e.strerror}); set SHMEM_NOTEBOOK_FORKSERVER=off "
            "to start PEs without the job's fork server"
        )
    own = len(sys.orig_argv) - len(sys.argv) + 2  # python, its options, this file and ADDRESS
    socket.send_fds(server, [str(own).encode()], [0, 1, 2])
    pid = int(server.recv(32) or 0)
    if not pid:
        sys.exit(
            "shmem_notebook: the job's fork server ended before it could start this PE (its error is in the "
            "kernel's log); set SHMEM_NOTEBOOK_FORKSERVER=off to start PEs without it"
        )
    for sig in FORWARDED:
        signal.signal(sig, lambda sig, _: _forward(pid, sig))
    try:
        ended: int | None = os.pidfd_open(pid)
    except (AttributeError, OSError):  # a kernel without it (before Linux 5.3), or the PE gone: /proc tells
        ended = None
    watched = [server.fileno()] + ([ended] if ended is not None else [])
    while True:
        try:
            ready, _, _ = select.select(watched, [], [], None if ended is not None else 0.05)
        except InterruptedError:
            continue
        if (ended in ready) if ended is not None else _ended(pid):
            break
        if ready and not server.recv(1):  # the server is gone, and the PE with it
            break
    status = _status(pid)
    server.sendall(b"ended")
    server.close()
    if status & 0x7F:  # killed by a signal: end the same way, without a core file
        resource.setrlimit(resource.RLIMIT_CORE, (0, 0))
        if status & 0x7F != signal.SIGKILL:
            signal.signal(status & 0x7F, signal.SIG_DFL)
        os.kill(os.getpid(), status & 0x7F)
    os._exit(status >> 8)


if __name__ == "__main__":
    main()
