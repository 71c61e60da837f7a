"""Where a job's controller listens (shmem_notebook.launcher.listen, issue 31): on one host, Unix
sockets in the profile's private security folder, which another user cannot reach and no other job
can take (a TCP port picked before it is bound can be); with a hostfile, TCP as before."""

import glob
import json
import os
import shutil
import socket
import stat
import subprocess

import ipyparallel as ipp
import psutil
import pytest

import shmem_notebook
from conftest import job_fixture
from shmem_notebook.launcher.listen import (
    SOCKET_PATH_MAX,
    ephemeral_ports,
    holds_sockets,
    listen_privately,
    socket_prefix,
    unclaimed_tcp_ports,
)

job = job_fixture(2, heap="8M")


@pytest.fixture
def short_path():
    """A folder of a short path: where pytest's ``tmp_path`` is long (a deep ``--basetemp``, pytest-xdist's
    ``.../popen-gw0/...``) a Unix socket in its security folder is too long, and the controller rightly
    listens on TCP there."""
    import pathlib
    import tempfile

    path = tempfile.mkdtemp(prefix="listen-")
    yield pathlib.Path(path)
    shutil.rmtree(path, ignore_errors=True)


def _cluster(profile_dir):
    return ipp.Cluster(profile_dir=str(profile_dir), controller_ip="127.0.0.1", controller_args=["--nodb"])


def _connection(cluster, kind):
    path = os.path.join(cluster.profile_dir, "security", f"ipcontroller-{cluster.cluster_id}-{kind}.json")
    with open(path) as fh:
        return json.load(fh)


def _controller_processes(job):
    controller = psutil.Process(job._cluster.controller.process.pid)
    return [controller, *controller.children(recursive=True)]  # its schedulers and heart monitor


def test_one_host_listens_on_sockets_in_the_security_folder(short_path):
    tmp_path = short_path
    cluster = _cluster(tmp_path)
    assert listen_privately(cluster, one_host=True)
    assert cluster.controller_ip == str(tmp_path / "security" / f"controller-{cluster.cluster_id}")
    assert cluster.controller_args == ["--nodb", "--IPController.transport=ipc"]


@pytest.mark.parametrize("why", ["other hosts", "inside an allocation", "a path too long", "a folder without sockets"])
def test_tcp_stays_where_pes_may_be_elsewhere_or_sockets_cannot_be(short_path, monkeypatch, why):
    tmp_path = short_path
    profile = tmp_path / ("p" * SOCKET_PATH_MAX if why == "a path too long" else "p")
    if why == "a folder without sockets":
        profile = "/proc/self/profile"  # procfs makes no files (nor folders), not even for root
    if why == "inside an allocation":
        monkeypatch.setenv("SLURM_JOB_ID", "7")
    cluster = _cluster(profile)
    assert not listen_privately(cluster, one_host=why != "other hosts")
    assert (cluster.controller_ip, cluster.controller_args) == ("127.0.0.1", ["--nodb"])
    assert (socket_prefix(profile, cluster.cluster_id) is None) == (why == "a path too long")
    assert holds_sockets(tmp_path / "security") and not holds_sockets("/proc/self")
    assert os.listdir(tmp_path / "security") == []  # the probe is gone


def test_a_local_jobs_controller_listens_on_no_tcp_port(job):
    cluster = job._cluster
    prefix = os.path.join(cluster.profile_dir, "security", f"controller-{cluster.cluster_id}")
    for kind in ("engine", "client"):
        assert _connection(cluster, kind)["interface"] == f"ipc://{prefix}", kind
    assert stat.S_IMODE(os.stat(os.path.dirname(prefix)).st_mode) == 0o700
    sockets = glob.glob(glob.escape(prefix) + ":*")
    assert len(sockets) >= 10 and all(stat.S_ISSOCK(os.stat(s).st_mode) for s in sockets), sockets
    listening = [c for p in _controller_processes(job) for c in p.net_connections("tcp") if c.status == "LISTEN"]
    assert listening == []
    job.run("x = me")
    assert job.pull("x").tolist() == [0, 1]


@pytest.mark.skipif(os.geteuid() != 0 or shutil.which("runuser") is None, reason="needs root to act as nobody")
def test_another_user_cannot_reach_its_sockets(job):
    (sock, *_) = glob.glob(os.path.join(job._cluster.profile_dir, "security", "controller-*:*"))
    probe = "import socket, sys\ntry:\n    socket.socket(socket.AF_UNIX).connect(sys.argv[1])\nexcept OSError as e:\n"
    probe += "    print(type(e).__name__)\nelse:\n    print('connected')"
    said = subprocess.run(
        ["runuser", "-u", "nobody", "--", "/usr/bin/python3", "-c", probe, sock],
        capture_output=True,
        text=True,
        timeout=30,
    )
    assert said.stdout.strip() == "PermissionError", said


@pytest.mark.pe
def test_its_sockets_go_with_the_job():
    with shmem_notebook.Job(2, heap="8M").start() as started:
        cluster = started._cluster
    assert glob.glob(os.path.join(cluster.profile_dir, "security", f"*{glob.escape(cluster.cluster_id)}*")) == []


@pytest.mark.pe
def test_a_hostfile_job_listens_on_tcp(tmp_path):
    hostfile = tmp_path / "hosts"
    hostfile.write_text("localhost slots=2\n")
    with shmem_notebook.Job(2, heap="8M", hostfile=str(hostfile)).start() as started:
        assert _connection(started._cluster, "engine")["interface"] == "tcp://127.0.0.1"
        controller = _controller_processes(started)
        listening = {c.laddr.port for p in controller for c in p.net_connections("tcp") if c.status == "LISTEN"}
        assert len(listening) >= 10 and max(listening) < ephemeral_ports().start, sorted(listening)
        started.run("x = me")
        assert started.pull("x").tolist() == [0, 1]


def test_tcp_ports_are_free_and_below_the_ephemeral_range():
    """No connection on the host can take one as its local end before the controller binds it."""
    ports = unclaimed_tcp_ports(30)
    assert len(set(ports)) == 30 and max(ports) < ephemeral_ports().start and min(ports) >= 1024
    assert set(ports).isdisjoint(unclaimed_tcp_ports(30)), "a port was handed out twice"
    for port in ports:
        with socket.socket() as probe:
            probe.bind(("", port))  # free (the controller binds them itself)


def test_no_free_port_is_one_sentence(monkeypatch):
    from shmem_notebook.launcher import listen

    with socket.socket() as taken:
        taken.bind(("", unclaimed_tcp_ports(1)[0]))
        taken.listen()
        monkeypatch.setattr(listen.random, "choice", lambda pool: taken.getsockname()[1])  # every try meets it
        with pytest.raises(OSError, match=r"^no 2 free TCP ports in \d+-\d+ for the controller$"):
            unclaimed_tcp_ports(2)


def test_a_class_servers_ports_are_below_the_controllers(monkeypatch):
    """A student's server (the hub's fixed_port) never takes a port a TCP controller of a job may hold."""
    import types

    from shmem_notebook.hub import jupyterhub_config
    from shmem_notebook.launcher.listen import controller_ports

    monkeypatch.setattr(jupyterhub_config.pwd, "getpwnam", lambda name: types.SimpleNamespace(pw_uid=int(name)))

    def port(uid):
        spawner = types.SimpleNamespace(user=types.SimpleNamespace(name=str(uid)), port=0)
        jupyterhub_config.fixed_port(spawner)
        return spawner.port

    pool, ports = controller_ports(), {port(uid) for uid in range(100_000)}
    assert min(ports) == 10000 and max(ports) < pool.start and max(ports) < ephemeral_ports().start, (pool, max(ports))
    assert len({port(uid) for uid in range(1000, 7000)}) == 6000  # a class's consecutive uids: a port each
