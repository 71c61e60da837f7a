"""Runtime configuration, read before a job starts.

Like ``shmem4py.rc``: a small, strict object. Setting an unknown option raises
``TypeError``; environment variables ``SHMEM_NOTEBOOK_<OPTION>`` override the
defaults (e.g. ``SHMEM_NOTEBOOK_HEAP=1G``).
"""

import os
from typing import Any

__all__ = ["rc"]


class _RC:
    """Defaults for :func:`shmem_notebook.start` and the ``%shmem`` magics."""

    # the options' types, for the type checker (their defaults and meanings: _defaults)
    heap: str
    timeout: float | None
    ip: str
    heartbeat_ms: int
    start_timeout: float
    library: str
    oshrun: str
    slurm_runner: str
    gather: str
    polite_ms: int
    deadlock_ms: int
    dispatch: str
    race_pictures: int
    forkserver: str

    _defaults: dict[str, Any] = {
        # symmetric heap per PE (SIZE like 256M, 1G)
        "heap": "256M",
        # default timeout in seconds for every cell (None: wait forever)
        "timeout": None,
        # address the controller and engines listen on
        "ip": "127.0.0.1",
        # controller heartbeat period in ms once every PE answers (25 ms while PEs are missing,
        # see launcher.controller); 100 ms idles at ~3% of a core (250 ms: ~1.5%, 500 ms: ~0.8%)
        "heartbeat_ms": 250,
        # seconds to wait for all PEs to register before giving up
        "start_timeout": 60.0,
        # the OpenSHMEM library a job runs on: "oshmem" (Open MPI's), "sos", "oshmpi", or a site's own
        # (see shmem_notebook.launcher.library)
        "library": "oshmem",
        # Open MPI's oshrun command (the "oshmem" library's launcher)
        "oshrun": "oshrun",
        # what starts the PEs inside a Slurm batch job: "oshrun", or "srun" (srun --mpi=pmix,
        # for sites where Open MPI's oshrun cannot be used inside jobs)
        "slurm_runner": "oshrun",
        # how gather moves arrays of 1 MiB and more from PEs on this host: "shm" (copied
        # straight from the PEs' memory: their SysV heap attached, or process_vm_readv; else as "file"),
        # "file" (the PEs write them into one file in /dev/shm that the result maps) or "pickle"
        # (ipyparallel's messages)
        "gather": "shm",
        # milliseconds a PE of this host may wait in a barrier, wait_until, team sync or small
        # collective before it is let sleep: it then runs 0.4 ms of every 5 ms (about 8% of a core);
        # 0 lets waiting PEs poll at full speed (see job.governor)
        "polite_ms": 10,
        # milliseconds every PE of a cell must have waited in OpenSHMEM (or polled in a loop only
        # another PE can end), nothing changing, before the cell is ended as deadlocked (a second look
        # follows 0.3 s later, see cells.deadlock); 0: never (the timeout or the stop button ends it)
        "deadlock_ms": 500,
        # how cells reach the PEs: "direct" (the job's own channel, see cells.channel) or
        # "ipyparallel" (DirectView.execute, through the controller); read at start
        "dispatch": "direct",
        # races of a race-checked cell drawn under its report in a notebook (a space-time diagram each,
        # see analysis.race_picture); 0: none (race.show() still draws one)
        "race_pictures": 3,
        # "auto": a job on this host with Open MPI's OSHMEM whose PEs outnumber the cores forks them from
        # one process that imported the engine once, kept for restarts (see job.forks), and a smaller
        # such job forks them from its second restart on; "on": every such job from its start, whatever
        # its size; "off": every PE starts as its own process
        "forkserver": "auto",
    }

    def __init__(self) -> None:
        for name, value in self._defaults.items():
            object.__setattr__(self, name, value)
        self._read_environment()

    def _read_environment(self) -> None:
        for name, default in self._defaults.items():
            raw: Any = os.environ.get(f"SHMEM_NOTEBOOK_{name.upper()}")
            if raw is None:
                continue
            if isinstance(default, (int, float)) and not isinstance(default, bool):
                raw = type(default)(raw)
            elif name == "timeout":
                raw = float(raw) if raw.lower() not in ("", "none") else None
            object.__setattr__(self, name, raw)

    def __setattr__(self, name: str, value: Any) -> None:
        if name not in self._defaults:
            options = ", ".join(self._defaults)
            raise TypeError(f"unknown option {name!r}; options are: {options}")
        object.__setattr__(self, name, value)

    def __repr__(self) -> str:
        items = ", ".join(f"{k}={getattr(self, k)!r}" for k in self._defaults)
        return f"rc({items})"


rc = _RC()
