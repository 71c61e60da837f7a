"""A real, private Slurm on this machine for the tests: one slurmctld and several slurmd posing as nodes.

Debian's packages (slurmctld, slurmd, slurm-client; scripts/setup.sh installs
them). Everything lives in a temporary directory: the configuration (free ports,
``AuthType=auth/none``, so no munge daemon), state, spool, logs and each node's
``TmpFS`` (the pmix plugin needs its own per node). The daemons run in the
foreground as our children, so stopping them is exact. Nodes ``n1..nK`` all
have this host's address; each declares ``cpus`` CPUs
(``SlurmdParameters=config_overrides`` lets it declare more than there are).

Usage::

    with SlurmCluster(nodes=2) as cluster:     # SLURM_CONF points at it meanwhile
        cluster.run(["sinfo"])
"""

import contextlib
import getpass
import os
import shutil
import signal
import socket
import subprocess
import tempfile
import time

__all__ = ["SlurmCluster", "ShmWatch", "slurm_missing"]

DAEMONS = ("slurmctld", "slurmd", "sbatch", "salloc", "srun", "squeue", "scancel", "sinfo")


def slurm_missing():
    """Why a real Slurm cannot run here (a sentence), or None when it can."""
    missing = [cmd for cmd in DAEMONS if shutil.which(cmd) is None]
    if missing:
        return (
            f"Slurm is not installed ({', '.join(missing)} missing): scripts/setup.sh installs "
            "slurmctld slurmd slurm-client munge; Debian's packages could not be installed here"
        )
    return None


def _free_ports(count):
    socks = []
    try:
        for _ in range(count):
            s = socket.socket()
            s.bind(("127.0.0.1", 0))
            socks.append(s)
        return [s.getsockname()[1] for s in socks]
    finally:
        for s in socks:
            s.close()


def _consecutive_free_ports(count, tries=50):
    """``count`` consecutive free ports (slurm.conf gives slurmd ports as a range)."""
    for _ in range(tries):
        first = _free_ports(1)[0]
        if first + count >= 65535:
            continue
        ok = True
        for port in range(first, first + count):
            with socket.socket() as s:
                try:
                    s.bind(("127.0.0.1", port))
                except OSError:
                    ok = False
                    break
        if ok:
            return list(range(first, first + count))
    raise RuntimeError("no free port range for slurmd")


class ShmWatch:
    """The shared memory (/dev/shm files, SysV segments) of every process of a Slurm cluster
    (whatever carries its ``SLURM_CONF``: steps, PEs, the kernels that use it), sampled every
    50 ms in a thread, so that other jobs on the machine do not count. ``left()`` -> those
    that still exist."""

    def __init__(self, conf):
        import threading

        from shmem_notebook.launcher.shm import Segments

        self.conf, self.segments = conf, Segments()
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._sample, daemon=True)
        self._thread.start()

    def _sample(self):
        from shmem_notebook.job.watchdog import owned_processes

        while not self._stop.is_set():
            self.segments.note(p.pid for p in owned_processes(self.conf, "SLURM_CONF"))
            self._stop.wait(0.05)

    def left(self):
        self._stop.set()
        self._thread.join()
        files, shmids = self.segments.left()
        return sorted(files), sorted(shmids)


class SlurmCluster:
    """A private Slurm: ``nodes`` fake nodes of ``cpus`` CPUs each, on this host."""

    def __init__(self, nodes=2, cpus=4, name="nbtest"):
        self.nodes, self.cpus, self.name = nodes, cpus, name
        self.dir = None
        self.procs = []
        self._old_conf = None

    # -- configuration -----------------------------------------------------
    def node_names(self):
        return [f"n{i}" for i in range(1, self.nodes + 1)]

    def config(self):
        d, user = self.dir, getpass.getuser()
        ctld_port = _free_ports(1)[0]
        ports = _consecutive_free_ports(self.nodes)
        host = socket.gethostname()
        port_range = f"[{ports[0]}-{ports[-1]}]" if self.nodes > 1 else str(ports[0])
        names = f"n[1-{self.nodes}]" if self.nodes > 1 else "n1"
        return "\n".join(
            [
                f"ClusterName={self.name}",
                f"SlurmctldHost={host}(127.0.0.1)",
                f"SlurmctldPort={ctld_port}",
                f"SlurmUser={user}",
                f"SlurmdUser={user}",
                "AuthType=auth/none",
                "CredType=cred/none",
                f"StateSaveLocation={d}/state",
                f"SlurmdSpoolDir={d}/spool/%n",
                f"SlurmctldPidFile={d}/slurmctld.pid",
                f"SlurmdPidFile={d}/slurmd-%n.pid",
                f"SlurmctldLogFile={d}/log/slurmctld.log",
                f"SlurmdLogFile={d}/log/slurmd-%n.log",
                f"TmpFS={d}/tmp/%n",
                "ProctrackType=proctrack/linuxproc",
                "TaskPlugin=task/none",
                "SelectType=select/cons_tres",
                "SelectTypeParameters=CR_Core",
                "SlurmdParameters=config_overrides",
                "SchedulerParameters=batch_sched_delay=0",
                "MpiDefault=none",
                "ReturnToService=2",
                "KillWait=2",
                "InactiveLimit=0",
                "MinJobAge=300",
                "JobCompType=jobcomp/none",
                "AccountingStorageType=accounting_storage/none",
                f"NodeName={names} NodeHostname={host} NodeAddr=127.0.0.1 Port={port_range} "
                f"CPUs={self.cpus} State=UNKNOWN",
                f"PartitionName=debug Nodes={names} Default=YES MaxTime=INFINITE State=UP",
                "",
            ]
        )

    @property
    def conf(self):
        return os.path.join(self.dir, "slurm.conf")

    # -- life --------------------------------------------------------------
    def start(self, timeout=30.0):
        """Start slurmctld and one slurmd per node; return when every node is idle."""
        self.dir = tempfile.mkdtemp(prefix="shmem-slurm-")
        for sub in (
            ["state", "log"] + [f"spool/{n}" for n in self.node_names()] + [f"tmp/{n}" for n in self.node_names()]
        ):
            os.makedirs(os.path.join(self.dir, sub))
        with open(self.conf, "w") as f:
            f.write(self.config())
        self._old_conf = os.environ.get("SLURM_CONF")
        os.environ["SLURM_CONF"] = self.conf
        try:
            self._spawn(["slurmctld", "-D", "-i", "-f", self.conf], "slurmctld")
            for node in self.node_names():
                self._spawn(["slurmd", "-D", "-f", self.conf, "-N", node], f"slurmd-{node}")
            self.wait_idle(timeout)
        except BaseException:
            self.stop()
            raise
        return self

    def _spawn(self, args, label):
        log = open(os.path.join(self.dir, "log", f"{label}.out"), "wb")
        self.procs.append(subprocess.Popen(args, stdout=log, stderr=subprocess.STDOUT, start_new_session=True))
        log.close()

    def wait_idle(self, timeout=30.0):
        """Until every node reports idle (fails with the daemons' logs)."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            out = self.run(["sinfo", "--noheader", "--Node", "--format=%N %T"], check=False)
            states = dict(line.split() for line in out.splitlines() if len(line.split()) == 2)
            if len(states) == self.nodes and all(s == "idle" for s in states.values()):
                return
            for proc in self.procs:
                if proc.poll() is not None:
                    raise RuntimeError(f"{proc.args[0]} exited ({proc.returncode}):\n{self.logs()}")
            time.sleep(0.05)
        raise RuntimeError(f"the Slurm nodes were not idle within {timeout} s:\n{self.logs()}")

    def run(self, args, check=True, timeout=60):
        """A Slurm client command against this cluster; its stdout."""
        env = dict(os.environ, SLURM_CONF=self.conf)
        out = subprocess.run(args, capture_output=True, text=True, env=env, timeout=timeout)
        if check and out.returncode != 0:
            raise RuntimeError(f"{' '.join(args)} failed: {out.stderr.strip()}")
        return out.stdout

    def jobs(self):
        """Jobs in the queue that are not finished: list of (id, name, state)."""
        out = self.run(["squeue", "--noheader", "--format=%i %j %T"], check=False)
        return [tuple(line.split()) for line in out.splitlines() if line.strip()]

    def wait_no_jobs(self, timeout=20.0):
        """Until the queue is empty; returns what is left (empty when clean)."""
        deadline = time.monotonic() + timeout
        while (left := self.jobs()) and time.monotonic() < deadline:
            time.sleep(0.1)
        return left

    def logs(self, lines=30):
        text = []
        for path in sorted(os.listdir(os.path.join(self.dir, "log"))):
            with open(os.path.join(self.dir, "log", path), errors="replace") as f:
                tail = f.read().splitlines()[-lines:]
            text.append(f"== {path}\n" + "\n".join(tail))
        return "\n".join(text)

    def processes(self):
        """Live processes of this cluster: daemons, job steps, and whatever else carries its SLURM_CONF."""
        from shmem_notebook.job.watchdog import owned_processes

        return owned_processes(self.conf, "SLURM_CONF") if self.dir else []

    def stop(self):
        """Cancel every job, stop the daemons and remove the directory; leaves nothing behind."""
        if self.dir is None:
            return
        with contextlib.suppress(Exception):
            if self.jobs():
                self.run(["scancel", "--full", f"--user={getpass.getuser()}"], check=False)
                self.wait_no_jobs(15.0)
        for proc in reversed(self.procs):  # slurmd first, so it can end its steps
            with contextlib.suppress(OSError):
                proc.send_signal(signal.SIGTERM)
        for proc in self.procs:
            try:
                proc.wait(10)
            except subprocess.TimeoutExpired:
                with contextlib.suppress(OSError):
                    os.killpg(proc.pid, signal.SIGKILL)
                proc.wait(5)
        for proc in self.processes():  # steps outliving their slurmd
            with contextlib.suppress(Exception):
                proc.kill()
        self.procs = []
        if self._old_conf is None:
            os.environ.pop("SLURM_CONF", None)
        else:
            os.environ["SLURM_CONF"] = self._old_conf
        shutil.rmtree(self.dir, ignore_errors=True)
        self.dir = None

    def __enter__(self):
        return self.start()

    def __exit__(self, *exc):
        self.stop()
