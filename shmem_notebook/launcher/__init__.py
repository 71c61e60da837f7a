"""Start ipyparallel engines as one OpenSHMEM job under ``oshrun``.

Each engine is ``python -m shmem_notebook.engine``: it initialises OpenSHMEM first
and registers with the controller under its PE number, so engine id == PE.
Registered as the ipyparallel engine launcher ``oshrun``::

    ipp.Cluster(engines="oshrun", n=4)
    ipcluster start --engines=oshrun -n 4
"""

import os
import shutil
import sys

import psutil
from ipyparallel.cluster.launcher import MPIEngineSetLauncher
from traitlets import Bool, Unicode, default

from ..errors import LaunchError
from ..protocol import ENGINE_MODULE
from ..rc import rc
from ..specs import parse_size

__all__ = ["OshrunEngineSetLauncher", "check_oshrun", "platform_environment", "local_slots", "LOCAL_ONLY"]

INSTALL_HINT = "install Open MPI's OpenSHMEM: apt-get install openmpi-bin libopenmpi-dev"


def check_oshrun(cmd=None, hostfile=None):
    """Fail early, in one sentence, when ``oshrun`` or the hostfile is missing."""
    cmd = cmd or rc.oshrun
    if shutil.which(cmd) is None:
        raise LaunchError(f"{cmd!r} was not found on PATH; {INSTALL_HINT}")
    if hostfile and not os.path.isfile(hostfile):
        raise LaunchError(f"hostfile {hostfile!r} does not exist; pass the path of an Open MPI hostfile")


def local_slots():
    """Slots Open MPI gives this machine by default: its physical cores."""
    return psutil.cpu_count(logical=False) or os.cpu_count() or 1


#: single-node jobs: PEs talk through shared memory and open no TCP listener
LOCAL_ONLY = {
    "UCX_TLS": "self,sm",
    "OMPI_MCA_btl": "self,vader",
    "OMPI_MCA_oob_tcp_if_include": "lo",
}


def platform_environment(environ=None, heap=None, local_only=False):
    """Environment the PEs need on Open MPI 4.1.x OSHMEM (what the user set wins).

    - ``OMPI_MCA_osc=^rdma``: without it every PE segfaults in
      ``shmem_finalize`` on Open MPI < 4.1.6 (ompi#11604).
    - ``OMPI_ALLOW_RUN_AS_ROOT*`` when running as root.
    - ``SMA_SYMMETRIC_SIZE`` and ``SHMEM_SYMMETRIC_SIZE`` for the heap size
      (OSHMEM 4.1.4 reads the former, the OpenSHMEM 1.4 standard names the latter).
    - with ``local_only``, :data:`LOCAL_ONLY`: no PE listens on a network interface.
    """
    environ = os.environ if environ is None else environ
    env = {k: v for k, v in LOCAL_ONLY.items() if k not in environ} if local_only else {}
    if "OMPI_MCA_osc" not in environ and "OMPI_MCA_opal_common_ucx_opal_mem_hooks" not in environ:
        env["OMPI_MCA_osc"] = "^rdma"
    if hasattr(os, "geteuid") and os.geteuid() == 0:
        env["OMPI_ALLOW_RUN_AS_ROOT"] = "1"
        env["OMPI_ALLOW_RUN_AS_ROOT_CONFIRM"] = "1"
    if heap:
        nbytes = str(parse_size(heap))
        env["SMA_SYMMETRIC_SIZE"] = nbytes
        env["SHMEM_SYMMETRIC_SIZE"] = nbytes
    env["PYTHONUNBUFFERED"] = "1"
    for name, value in environ.items():  # our own settings reach PEs on every node
        if name.startswith("SHMEM_NOTEBOOK_") and name != "SHMEM_NOTEBOOK_OWNER":
            env[name] = value
    return env


class OshrunEngineSetLauncher(MPIEngineSetLauncher):
    """Launch ``n`` engines as one OpenSHMEM job with ``oshrun``."""

    heap = Unicode("", config=True, help="Symmetric heap per PE, e.g. 256M or 1G ('' = library default).")
    oversubscribe = Bool(
        None,
        allow_none=True,
        config=True,
        help="Pass --oversubscribe. None: only when n exceeds this machine's cores and no hostfile is given.",
    )
    hostfile = Unicode("", config=True, help="Open MPI hostfile for multi-node jobs.")
    local_only = Bool(
        True, config=True, help="Single node: PEs use shared memory only and listen on no network interface."
    )
    python = Unicode(sys.executable, config=True, help="Python that runs each PE.")

    @default("mpi_cmd")
    def _default_mpi_cmd(self):
        return [rc.oshrun]

    @property
    def program(self):
        return [self.python, "-m", ENGINE_MODULE]

    def needs_oversubscribe(self):
        """Whether ``--oversubscribe`` goes on the command line."""
        if self.oversubscribe is not None:
            return self.oversubscribe
        in_allocation = self.hostfile or "SLURM_JOB_ID" in os.environ
        return not in_allocation and self.n > local_slots()

    def get_env(self):
        env = super().get_env()
        local = self.local_only and not self.hostfile and "SLURM_JOB_ID" not in os.environ
        env.update(platform_environment(heap=self.heap, local_only=local))
        return env

    def find_args(self):
        """The full ``oshrun`` command line; spawns nothing."""
        args = list(self.mpi_cmd) + ["-n", str(self.n)]
        if self.needs_oversubscribe():
            args.append("--oversubscribe")
        if self.hostfile:
            args += ["--hostfile", self.hostfile]
        # forward our environment to PEs on other nodes as well
        for name in sorted(self.get_env()):
            args += ["-x", name]
        return args + list(self.mpi_args) + self.program + self.program_args

    def start(self, n):
        check_oshrun(self.mpi_cmd[0], self.hostfile)
        return super().start(n)
