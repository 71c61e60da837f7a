"""Where a job's controller listens (client side).

On one host it listens on Unix sockets (ZeroMQ ``ipc://``) in its profile's security folder, which
IPython keeps private (0700): no other user can reach them, and no TCP port is picked before it is
bound. ipyparallel picks a TCP controller's ports (``select_random_ports``) before its scheduler
processes bind them, so among thirty controllers starting at once one may take another's port and
leave it without a scheduler or a heart monitor (a job whose PEs never register). PEs on other hosts
(a hostfile, Slurm, an allocation) reach the controller over TCP on the job's ``ip``, as does a
controller whose profile's path is too long for a socket or on a file system that holds none (AFS, SMB).
"""

import contextlib
import os
import secrets
import socket
from typing import Any

from .environment import in_allocation

__all__ = ["SOCKET_PATH_MAX", "holds_sockets", "listen_privately", "socket_prefix"]

#: the longest path of a Unix socket (``sun_path`` less its NUL)
SOCKET_PATH_MAX = 107


def socket_prefix(profile_dir: str, cluster_id: str) -> str | None:
    """The path the controller's sockets start with (each ends in ``:<number>``), or None where it
    would be too long for a Unix socket."""
    prefix = os.path.join(os.path.abspath(profile_dir), "security", f"controller-{cluster_id}")
    return prefix if len(os.fsencode(prefix)) + len(":999") <= SOCKET_PATH_MAX else None


def holds_sockets(folder: str) -> bool:
    """Whether a Unix socket can be made in ``folder`` (created 0700 if missing)."""
    probe = os.path.join(folder, f".socket-probe-{secrets.token_hex(6)}")
    try:
        os.makedirs(folder, mode=0o700, exist_ok=True)
        with socket.socket(socket.AF_UNIX) as s:
            s.bind(probe)
        return True
    except OSError:
        return False
    finally:
        with contextlib.suppress(OSError):
            os.unlink(probe)


def listen_privately(cluster: Any, one_host: bool) -> bool:  # cluster: an ipp.Cluster (untyped)
    """Make ``cluster``'s controller (an ``ipp.Cluster`` not started) listen on Unix sockets when the
    PEs all run on this host (``one_host``, and not inside a Slurm allocation, where ``oshrun`` may
    spread them) and its profile's folder can hold them; else leave TCP. Returns whether it did."""
    here = one_host and not in_allocation()
    prefix = socket_prefix(cluster.profile_dir, cluster.cluster_id) if here else None
    if prefix is None or not holds_sockets(os.path.dirname(prefix)):
        return False
    cluster.controller_ip = prefix
    cluster.controller_args = [*cluster.controller_args, "--IPController.transport=ipc"]
    return True
