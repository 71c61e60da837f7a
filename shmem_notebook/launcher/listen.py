"""Where a job's controller listens (client side).

On one host it listens on Unix sockets (ZeroMQ ``ipc://``) in its profile's security folder, which
IPython keeps private (0700): no other user can reach them, and no TCP port is picked before it is
bound. ipyparallel picks a TCP controller's ports (``select_random_ports``) before its scheduler
processes bind them, so among thirty controllers starting at once one may take another's port and
leave it without a scheduler or a heart monitor (a job whose PEs never register). PEs on other hosts
(a hostfile, Slurm, an allocation) reach the controller over TCP on the job's ``ip``, as does a
controller whose profile's path is too long for a socket or on a file system that holds none (AFS, SMB).

A TCP controller takes its ports below the kernel's ephemeral range (:func:`unclaimed_tcp_ports`). ipyparallel
picks free ones from that range and binds them later, some in threads; meanwhile any connection made on the host
(a PE's to this very controller among them) may get one as its local port, and the thread that then fails
to bind leaves a controller without a heart monitor: PEs that never register.
"""

import contextlib
import os
import random
import secrets
import socket
from typing import Any

__all__ = [
    "LOOPBACK",
    "SOCKET_PATH_MAX",
    "controller_ports",
    "ephemeral_ports",
    "holds_sockets",
    "listen_privately",
    "socket_prefix",
    "unclaimed_tcp_ports",
]

#: addresses that keep a job on this host (a controller listening on one of them serves local PEs only)
LOOPBACK = ("127.0.0.1", "localhost", "::1")

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
    from .environment import in_allocation  # here: the controller imports this module, and not NumPy

    here = one_host and not in_allocation()
    prefix = socket_prefix(cluster.profile_dir, cluster.cluster_id) if here else None
    if prefix is None or not holds_sockets(os.path.dirname(prefix)):
        return False
    cluster.controller_ip = prefix
    cluster.controller_args = [*cluster.controller_args, "--IPController.transport=ipc"]
    return True


#: ports this process handed out (never twice: ipyparallel binds them only later)
_handed_out: set[int] = set()


def ephemeral_ports() -> range:
    """The ports the kernel gives connections as their local end (Linux's ``ip_local_port_range``)."""
    try:
        with open("/proc/sys/net/ipv4/ip_local_port_range") as fh:
            low, high = (int(field) for field in fh.read().split())
        return range(low, high + 1)
    except (OSError, ValueError):
        return range(32768, 61000)  # Linux's default


def controller_ports() -> range:
    """The ports a TCP controller takes its own from: the 16384 below the ephemeral range (16384-32767 on
    Linux's default), or all of them where there is no room below it. A class's servers stay below these
    (``hub/jupyterhub_config.py``)."""
    low = ephemeral_ports().start
    return range(max(1024, low - 16384), low) if low > 2048 else range(1024, 65536)


def unclaimed_tcp_ports(n: int) -> list[int]:
    """``n`` free TCP ports of :func:`controller_ports`, below the ephemeral range (no connection is given
    one as its local end while it waits to be bound), each bound once to check it is free and never handed
    out twice by this process. Takes the place of ipyparallel's ``select_random_ports`` in the controller."""
    pool = controller_ports()
    ports: list[int] = []
    tries = 200 * n
    while len(ports) < n:
        if tries == 0:
            raise OSError(f"no {n} free TCP ports in {pool.start}-{pool.stop - 1} for the controller")
        tries -= 1
        port = random.choice(pool)
        if port in _handed_out:
            continue
        with socket.socket() as probe:
            try:
                probe.bind(("", port))
            except OSError:
                continue
        _handed_out.add(port)
        ports.append(port)
    return ports
