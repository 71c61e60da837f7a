"""Start ipyparallel engines as one OpenSHMEM job: processes and command lines only (client side).

- :mod:`.oshrun`: :class:`OshrunEngineSetLauncher`, the ipyparallel engine
  launcher ``oshrun`` (``ipp.Cluster(engines="oshrun", n=4)``); runs ``oshrun``
  here, inside a Slurm allocation, or submits a Slurm batch job (``slurm=True``).
- :mod:`.slurm`: the ``sbatch`` / ``squeue`` / ``scancel`` command lines.
- :mod:`.batchjob`: the small local process that submits a batch job and follows it.
- :mod:`.environment`: the platform environment the PEs need.
- :mod:`.controller`: the job's ``ipcontroller``, whose heart monitor registers PEs at once.
"""

from .environment import LOCAL_ONLY, in_allocation, local_slots, platform_environment
from .oshrun import OshrunEngineSetLauncher, check_oshrun, check_shmem4py
from .slurm import check_slurm

__all__ = [
    "OshrunEngineSetLauncher",
    "check_oshrun",
    "check_shmem4py",
    "check_slurm",
    "platform_environment",
    "local_slots",
    "in_allocation",
    "LOCAL_ONLY",
]
