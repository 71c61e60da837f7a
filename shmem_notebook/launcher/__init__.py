"""Start ipyparallel engines as one OpenSHMEM job: processes and command lines only (client side).

- :mod:`.oshrun`: :class:`OshrunEngineSetLauncher`, the ipyparallel engine
  launcher ``oshrun`` (``ipp.Cluster(engines="oshrun", n=4)``); runs ``oshrun``
  here, inside a Slurm allocation, or submits a Slurm batch job (``slurm=True``).
- :mod:`.slurm`: the ``sbatch`` / ``squeue`` / ``scancel`` command lines.
- :mod:`.batch_proxy`: the small local process that submits a batch job and follows it.
- :mod:`.environment`: the platform environment the PEs need.
- :mod:`.controller`: the job's ``ipcontroller``, whose heart monitor registers PEs at once.
- :mod:`.listen`: where it listens: Unix sockets in the private profile on one host, else TCP.
- :mod:`.entry_points`: ipyparallel's look-ups of its launchers, once per process.
- :mod:`.bytecode`: the PEs' compiled bytecode, kept warm.
- :mod:`.proc_tree`: a process's children and descendants, without reading every process's parent.
- :mod:`.start_options`: every start option of a job declared once (the launcher's traits are read from it).
"""

from ..lazy_imports import lazy_names

__all__ = [
    "OshrunEngineSetLauncher",
    "check_oshrun",
    "check_shmem4py",
    "check_slurm",
    "platform_environment",
    "local_slots",
    "in_allocation",
    "LOCAL_ONLY",
    "listen_privately",
]

#: name -> module, imported on first use: ``python -m shmem_notebook.launcher.controller``
#: imports this package and must not pay for ipyparallel's client side (see :mod:`shmem_notebook.lazy_imports`)
_LAZY = {
    "OshrunEngineSetLauncher": "oshrun",
    "check_oshrun": "oshrun",
    "check_shmem4py": "oshrun",
    "check_slurm": "slurm",
    "platform_environment": "environment",
    "local_slots": "environment",
    "in_allocation": "environment",
    "LOCAL_ONLY": "environment",
    "listen_privately": "listen",
}

__getattr__ = lazy_names(__name__, _LAZY)
