"""A job's fork server (client side): PEs forked from one process that imported the engine once.

A PE's start is mostly its imports (docs/benchmarks.md, *What is left, and why*); with more PEs than
cores each pays them in turn. A job on this host with Open MPI's OSHMEM and more PEs than cores starts
:mod:`shmem_notebook.engine.forkserver` beside its controller: ``oshrun`` then starts a small stub per PE
and each PE is forked from the server, imports done, and calls ``shmem_init`` as that PE. The server
outlives restarts, so a restart pays none of the imports again. With no more PEs than cores the
imports run while ``shmem_init`` waits, on idle cores, and the server (and a stub per PE: 3 processes
and about 30 MiB for a 2-PE job) would cost a job that never restarts more than it saves. A job likely to
restart starts its server then, and its next restarts fork their PEs (about half a start's time instead of
all of it): a job whose PEs died or hung (the server imports while the user reads why), and a job that
restarted once (a user debugging restarts again). That is
``rc.forkserver = "auto"``; ``"on"`` forks every job's PEs from its start, ``"off"`` none
(``SHMEM_NOTEBOOK_FORKSERVER``). Jobs with ``--spare``, a hostfile, Slurm, or another library start
every PE as its own process.
"""

from __future__ import annotations

import contextlib
import os
import socket
import subprocess
import uuid
from typing import TYPE_CHECKING

from ..errors import InputError
from ..launcher import environment
from ..launcher.listen import LOOPBACK
from ..launcher.proc_tree import children
from ..protocol import FORKSERVER_MODULE
from ..rc import rc
from .processes import alive, process
from .watchdog import owned_by

if TYPE_CHECKING:
    from .job import Job

__all__ = ["ForkServer"]


class ForkServer:
    """The fork server of ``job`` (a :class:`~shmem_notebook.Job`) while it runs, if it can have one."""

    def __init__(self, job: Job) -> None:
        self.job = job
        self.process: subprocess.Popen[bytes] | None = None
        self.path = ""  # the socket the PEs' stubs connect to ("" without a server)

    def possible(self) -> bool:
        """Whether this job's PEs can be forked: on this host only, with Open MPI's OSHMEM, no spare set,
        and ``rc.forkserver`` not ``"off"``."""
        job, mode = self.job, rc.forkserver
        if mode not in ("auto", "on", "off"):
            raise InputError(f"rc.forkserver is {mode!r}; use 'auto', 'on' or 'off' (SHMEM_NOTEBOOK_FORKSERVER)")
        local = job.ip in LOOPBACK and not (job.slurm or job.hostfile)
        return mode != "off" and local and job.library.name == "oshmem" and not job.spares.wanted

    def wanted(self) -> bool:
        """Whether this job's PEs are forked from its start: :meth:`possible`, and (``rc.forkserver ==
        "auto"``) more PEs than cores, where every PE's imports would wait for a core."""
        return self.possible() and (rc.forkserver == "on" or self.job.n > environment.local_slots())

    def start(self, restart_likely: bool = False) -> None:
        """Start the server (it imports while the controller starts, or, ``restart_likely``, while the user
        reads why the job died or hung, or waits for the next cell after a restart: then a server that cannot
        start is none); nothing if not :meth:`wanted` (``restart_likely``: :meth:`possible`) or running already."""
        if self.process is not None or not (self.possible() if restart_likely else self.wanted()):
            return
        # an abstract socket: no file to leave behind; the server serves only this user (SO_PEERCRED)
        address = f"@shmem-notebook-forks-{uuid.uuid4().hex}"
        listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        try:
            listener.bind("\0" + address[1:])
            listener.listen(1024)  # stubs wait here while the server imports
            with owned_by(self.job._token):  # the watchdog ends it with the job's other processes
                env = os.environ | environment.platform_environment(heap=self.job.heap, local_only=True)
                env |= {k: v for k, v in self.job.library.env.items() if k not in os.environ}
                self.process = subprocess.Popen(
                    [self.job.library.python, "-m", FORKSERVER_MODULE, str(listener.fileno())],
                    pass_fds=(listener.fileno(),),
                    env=env,
                    stdin=subprocess.DEVNULL,
                    start_new_session=True,  # a Ctrl-C or a kernel interrupt (a signal to its group) is not for it
                )
        except OSError:
            if not restart_likely:
                raise
            return  # only speed is lost (the restart starts its PEs as processes of their own), not why a job died
        finally:
            listener.close()
        self.path = address

    def address(self) -> str:
        """The socket the PEs' stubs connect to ("@name": abstract), "" without a server; a server that
        died is started again first (its imports then cost that restart what they cost a start)."""
        if self.process is not None and not alive(process(self.process.pid)):
            self.stop()
            self.start()
        return self.path

    def pids(self) -> list[int]:
        """The PEs it forked that still exist (zombies too)."""
        return children(self.process.pid) if self.process is not None else []

    def stop(self) -> None:
        """End the server; PEs it forked that are still alive end with it."""
        server, self.process = self.process, None
        if server is not None:
            server.kill()  # its children have PR_SET_PDEATHSIG: SIGKILL
            with contextlib.suppress(subprocess.TimeoutExpired):
                server.wait(5.0)
        self.path = ""
