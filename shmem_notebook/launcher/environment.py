"""The environment the PEs need on this platform (Open MPI 4.1.x OSHMEM), in one place."""

import os
from collections.abc import Mapping

import psutil

from ..specs import parse_size

__all__ = ["platform_environment", "local_slots", "LOCAL_ONLY", "in_allocation"]


def local_slots() -> int:
    """Slots Open MPI gives this machine by default: its physical cores."""
    return psutil.cpu_count(logical=False) or os.cpu_count() or 1


def in_allocation(environ: Mapping[str, str] | None = None) -> str | None:
    """The Slurm job id when this process runs inside a Slurm allocation, else None."""
    environ = os.environ if environ is None else environ
    return environ.get("SLURM_JOB_ID") or None


#: single-node jobs: PEs talk through shared memory and open no TCP listener. ``OMPI_MCA_mtl``: Open MPI's
#: MTLs drive networks only (PSM, PSM2, libfabric); loading them loads ``libpsm2`` and ``libpsm_infinipath``
#: (with ``libinfinipath``), whose constructors sleep: 0.2-0.25 s of every PE's start here (docs/benchmarks.md).
#: ``OMPI_MCA_hwloc_base_binding_policy``: Open MPI binds up to 2 PEs to cores 0 and 1, every job the
#: same cores: two notebooks' one-PE jobs shared core 0 (each cell took twice as long) while core 1 idled.
#: Unbound, the kernel spreads the jobs (``bind_to`` binds a job that wants it)
LOCAL_ONLY = {
    "UCX_TLS": "self,sm",
    "OMPI_MCA_btl": "self,vader",
    "OMPI_MCA_mtl": "^psm,psm2,ofi",
    "OMPI_MCA_oob_tcp_if_include": "lo",
    "OMPI_MCA_hwloc_base_binding_policy": "none",
}


def platform_environment(
    environ: Mapping[str, str] | None = None, heap: str | int | None = None, local_only: bool = False
) -> dict[str, str]:
    """Environment the PEs need on Open MPI 4.1.x OSHMEM (what the user set wins).

    - ``OMPI_MCA_opal_common_ucx_opal_mem_hooks=0`` and ``OMPI_MCA_osc=^rdma``: on Open MPI < 4.1.6 a
      UCX component unloaded at start leaves its memory-release hook registered (ompi#10765, #11620): every
      PE then segfaults in ``shmem_finalize`` (ompi#11604; ``osc=^rdma`` avoids that one), and now and
      then one at start, under load, jumping to the stale hook. With the first no such hook exists.
    - ``OMPI_ALLOW_RUN_AS_ROOT*`` when running as root.
    - ``SMA_SYMMETRIC_SIZE`` and ``SHMEM_SYMMETRIC_SIZE`` for the heap size
      (OSHMEM 4.1.4 reads the former, the OpenSHMEM 1.4 standard names the latter).
    - with ``local_only``, :data:`LOCAL_ONLY`: no PE listens on a network interface.
    - ``PMIX_MCA_gds=hash``: PMIx keeps the job's data in the launcher's memory, not in a shared-memory
      store (``ds21``) that only ``oshrun`` maps here: 8 MiB less in ``oshrun`` and about 0.1 CPU-s less per
      start (``bench/student_cost.py``). Launchers without PMIx (Hydra) ignore it.
    - ``IPATH_NO_BACKTRACE=1``, ``HFI_NO_BACKTRACE=1``: libfabric (Sandia OpenSHMEM's, MPICH's for
      OSHMPI) loads its PSM providers even for sockets (QLogic's ``libinfinipath``, Intel's ``libpsm2``),
      whose crash handlers otherwise write ``python.80s-PID,HOST.btr`` into the working directory
      whenever a PE aborts: a file in the user's notebook folder that outlives the job.
    """
    environ = os.environ if environ is None else environ
    env = {k: v for k, v in LOCAL_ONLY.items() if k not in environ} if local_only else {}
    if "OMPI_MCA_osc" not in environ and "OMPI_MCA_opal_common_ucx_opal_mem_hooks" not in environ:
        env["OMPI_MCA_osc"] = "^rdma"
    if "OMPI_MCA_opal_common_ucx_opal_mem_hooks" not in environ:
        env["OMPI_MCA_opal_common_ucx_opal_mem_hooks"] = "0"
    if hasattr(os, "geteuid") and os.geteuid() == 0:
        env["OMPI_ALLOW_RUN_AS_ROOT"] = "1"
        env["OMPI_ALLOW_RUN_AS_ROOT_CONFIRM"] = "1"
    if heap:
        nbytes = str(parse_size(heap))
        env["SMA_SYMMETRIC_SIZE"] = nbytes
        env["SHMEM_SYMMETRIC_SIZE"] = nbytes
    if "PMIX_MCA_gds" not in environ:
        env["PMIX_MCA_gds"] = "hash"
    env.update({name: "1" for name in ("IPATH_NO_BACKTRACE", "HFI_NO_BACKTRACE") if name not in environ})
    env["PYTHONUNBUFFERED"] = "1"
    for name, value in environ.items():  # our own settings reach PEs on every node
        if name.startswith("SHMEM_NOTEBOOK_") and name != "SHMEM_NOTEBOOK_OWNER":
            env[name] = value
    return env
