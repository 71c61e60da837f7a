"""The ipyparallel engine launcher ``oshrun``: N engines as one OpenSHMEM job.

Each engine is ``python -m shmem_notebook.engine``: it initialises OpenSHMEM first
and registers with the controller under its PE number, so engine id == PE::

    ipp.Cluster(engines="oshrun", n=4)
    ipcluster start --engines=oshrun -n 4
    cluster.start_engines_sync(8, slurm=True, partition="debug")   # a Slurm batch job

Three places for the PEs: this host; the Slurm allocation this process runs in
(``oshrun`` asks Slurm for its nodes); a Slurm batch job (``slurm=True``), run by
the local process :mod:`.batch_proxy`, which stands for the job.
"""

import contextlib
import dataclasses
import importlib.machinery
import os
import signal
import sys
from typing import Any

import psutil
from ipyparallel.cluster.launcher import MPIEngineSetLauncher
from traitlets import Bool, Integer, Unicode, default

from .. import native_board, native_record
from ..errors import LaunchError
from ..protocol import ENGINE_MODULE, SPARE_ENV
from ..rc import rc
from . import bytecode, environment, stub_program
from .library import Library, library as library_named
from .proc_tree import descendants
from .slurm import sbatch_command
from .start_options import launcher_traits, oshrun_args

__all__ = ["OshrunEngineSetLauncher", "check_oshrun", "check_shmem4py"]


def check_oshrun(cmd: str | None = None, hostfile: str | None = None, library: str | None = None) -> None:
    """Fail early, in one sentence, when the library's ``oshrun`` (or ``cmd``), its PEs' Python or
    the hostfile is missing."""
    lib = library_named(library)
    (dataclasses.replace(lib, oshrun=cmd) if cmd else lib).check()
    if hostfile and not os.path.isfile(hostfile):
        raise LaunchError(f"hostfile {hostfile!r} does not exist; pass the path of an Open MPI hostfile")


SHMEM4PY_HINT = (
    "install it with `pip install 'shmem_notebook[pe]'` (or `pip install shmem4py`) in this environment; "
    "it builds against Open MPI's OpenSHMEM, so its compiler wrapper oshcc must be on PATH "
    "(apt-get install libopenmpi-dev)"
)


def check_shmem4py(python: str | None = None) -> None:
    """Fail early, in one sentence, when the PEs' Python cannot import shmem4py (found without
    importing it: importing shmem4py initialises OpenSHMEM)."""
    if python not in (None, sys.executable):
        return  # another interpreter: only oshrun's output can tell
    if importlib.machinery.PathFinder.find_spec("shmem4py") is None:  # what is installed, not imported
        raise LaunchError(f"the PEs need shmem4py, which is not installed for {sys.executable}; {SHMEM4PY_HINT}")


class OshrunEngineSetLauncher(MPIEngineSetLauncher):  # type: ignore[misc]  # ipyparallel: untyped
    """Launch ``n`` engines as one OpenSHMEM job with ``oshrun`` (here, or in a Slurm batch job)."""

    #: its name among ipyparallel's engine launchers (pyproject.toml): named without a scan of them
    entrypoint_name = "oshrun"

    # every start option the launcher takes, as a trait of the same name (heap, oversubscribe, hostfile,
    # library; slurm=True and the batch job's partition, time, nodes, account, sbatch_args, sbatch_prologue):
    # declared once, in .start_options
    vars().update(launcher_traits())
    local_only = Bool(
        True, config=True, help="Single node: PEs use shared memory only and listen on no network interface."
    )
    spare = Unicode("", config=True, help="A spare set's lock file: the PEs wait on it before shmem_init (job.spare).")
    forkserver = Unicode("", config=True, help="The job's fork server's socket: each PE is forked from it (job.forks).")
    python = Unicode(config=True, help="Python that runs each PE (default: the library's).")
    batch_name = Unicode("shmem_notebook", config=True, help="Name of the batch job (sbatch --job-name).")
    batch_poll = Integer(1000, config=True, help="Milliseconds between queue queries while the batch job lives.")
    batch_runner = Unicode(config=True, help="What starts the PEs in the batch job: 'oshrun' or 'srun' (--mpi=pmix).")

    @default("batch_runner")
    def _default_batch_runner(self) -> str:
        return rc.slurm_runner

    @property
    def shmem_library(self) -> Library:
        """The :class:`~.library.Library` the PEs run on."""
        return library_named(self.library or None)

    @default("mpi_cmd")
    def _default_mpi_cmd(self) -> list[str]:
        return [self.shmem_library.oshrun]

    @default("python")
    def _default_python(self) -> str:
        return self.shmem_library.python

    @property
    def program(self) -> list[str]:
        if self.forkserver:  # a stub per PE, which the fork server's child replaces
            return stub_program.command(self.python, self.forkserver)
        return [self.python, "-m", ENGINE_MODULE]

    def needs_oversubscribe(self) -> bool:
        """Whether ``--oversubscribe`` goes on the command line."""
        if self.oversubscribe is not None:
            given: bool = self.oversubscribe  # a trait's value: Any to mypy, as every trait here
            return given
        elsewhere = self.hostfile or self.slurm or environment.in_allocation()
        return not elsewhere and self.n > environment.local_slots()

    def get_env(self) -> dict[str, str]:
        env: dict[str, str] = super().get_env()
        local = self.local_only and not (self.hostfile or self.slurm or environment.in_allocation())
        env.update(environment.platform_environment(heap=self.heap, local_only=local))
        env.update({k: v for k, v in self.shmem_library.env.items() if k not in os.environ})  # what the user set wins
        if self.spare:
            env[SPARE_ENV] = self.spare
        return env

    def oshrun_args(self) -> list[str]:
        """The ``oshrun`` command line that starts the PEs (here, or inside the batch job)."""
        # mpi_cmd may be set by hand (ipcluster --OshrunEngineSetLauncher.mpi_cmd=...)
        lib = dataclasses.replace(self.shmem_library, oshrun=self.mpi_cmd[0])
        oversubscribe, bind_to = self.needs_oversubscribe(), self.bind_to
        args = lib.command(self.n, self.get_env(), oversubscribe, self.hostfile, bind_to) + list(self.mpi_cmd[1:])
        program_args: list[str] = self.program_args
        return args + oshrun_args(self) + list(self.mpi_args) + self.program + program_args

    def batch_command(self) -> list[str]:
        """The command the batch job runs: ``oshrun ...``, or ``srun --mpi=pmix ...`` (Slurm's PMIx
        starts the PEs itself; the environment reaches them through sbatch and srun)."""
        if self.batch_runner == "oshrun":
            return self.oshrun_args()
        if self.batch_runner == "srun":
            program_args: list[str] = self.program_args
            srun = ["srun", "--mpi=pmix", "--kill-on-bad-exit=1", f"--ntasks={self.n}"]
            bind_to: str = self.bind_to or ""
            if bind_to:  # srun's words for oshrun's
                srun.append("--cpu-bind=" + {"core": "cores", "socket": "sockets"}.get(bind_to, bind_to))
            return srun + self.program + program_args
        raise LaunchError(
            f"unknown Slurm runner {self.batch_runner!r}; use 'oshrun' or 'srun' (SHMEM_NOTEBOOK_SLURM_RUNNER)"
        )

    def batch_log(self) -> str:
        """The batch job's output file (``%j``: its job id)."""
        return os.path.join(self.profile_dir, "log", f"shmem-batch-{self.cluster_id or 'default'}-%j.out")

    def find_args(self) -> list[str]:
        """The full command line of the local process; spawns nothing.

        ``oshrun ...`` itself, or with ``slurm`` the :mod:`.batch_proxy` process
        that submits ``oshrun ...`` with ``sbatch`` and follows the job.
        """
        if not self.slurm:
            return self.oshrun_args()
        sbatch = sbatch_command(
            self.n,
            self.batch_command(),
            name=self.batch_name,
            output=self.batch_log(),
            partition=self.partition,
            time=self.time,
            nodes=self.nodes,
            account=self.account,
            extra=self.sbatch_args,
            prologue=self.sbatch_prologue,
        )
        monitor = [sys.executable, "-m", "shmem_notebook.launcher.batch_proxy"]
        return monitor + ["--poll", str(self.batch_poll / 1000), "--log", self.batch_log(), "--"] + sbatch

    def kill_pes(self, launcher: bool = False) -> None:
        """End the PEs now: kill them under a local ``oshrun`` (and, ``launcher``, ``oshrun`` itself, which
        outlives PEs killed by 1-2 s); ``scancel`` a batch job."""
        if self.process is None:
            return
        if self.slurm:
            with _suppress():
                self.process.send_signal(signal.SIGTERM)  # the batch proxy cancels the job, then exits
            return
        # a PE blocked in a shmem call never runs a SIGTERM handler: kill the PEs, oshrun follows
        with _suppress():
            for pid in descendants(self.process.pid) + ([self.process.pid] if launcher else []):
                with _suppress():
                    psutil.Process(pid).kill()

    def start(self, n: int) -> Any:
        if not self.slurm:
            check_oshrun(self.mpi_cmd[0], self.hostfile, self.library or None)
        check_shmem4py(self.python)
        bytecode.warm()  # each PE would compile what has no current .pyc
        native_board.build()  # barrier_all's board bookkeeping in C (once per user)
        native_record.build()  # the race recording's hot path in C (once per user)
        if self.forkserver:
            stub_program.build()  # the stub oshrun starts in each forked PE's place, in C (once per user)
        return super().start(n)


def _suppress() -> contextlib.suppress:
    return contextlib.suppress(psutil.Error, OSError)
