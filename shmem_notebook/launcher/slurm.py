"""Slurm command lines: submit, query and cancel a batch job (pure builders, plus one query).

Nothing here spawns PEs: :mod:`.batch_proxy` runs these commands, :mod:`.oshrun`
puts them on its command line.
"""

import shlex
import shutil
import subprocess
from collections.abc import Iterable, Sequence

from ..errors import LaunchError

__all__ = [
    "check_slurm",
    "sbatch_command",
    "squeue_command",
    "scancel_command",
    "parse_queue_line",
    "query_job",
    "ENDED",
    "OWNER_VARIABLE",
]

SLURM_HINT = "run on a host with Slurm's client commands (Debian: apt-get install slurm-client)"

#: job states after which a job no longer runs (squeue --states=all)
ENDED = frozenset(
    "BOOT_FAIL CANCELLED COMPLETED DEADLINE FAILED NODE_FAIL OUT_OF_MEMORY PREEMPTED REVOKED SPECIAL_EXIT "
    "TIMEOUT".split()
)

#: the job token of shmem_notebook.job.watchdog: it marks processes on *this* host; a batch
#: job does not carry it, so Slurm (scancel), not the watchdog's kill, ends the batch job
OWNER_VARIABLE = "SHMEM_NOTEBOOK_OWNER"


def check_slurm() -> None:
    """Fail early, in one sentence, when Slurm's commands are missing."""
    missing = [cmd for cmd in ("sbatch", "squeue", "scancel") if shutil.which(cmd) is None]
    if missing:
        raise LaunchError(f"--slurm needs {', '.join(missing)} on PATH; {SLURM_HINT}")


def sbatch_command(
    n: int,
    command: Sequence[str],
    name: str,
    output: str,
    partition: str | None = None,
    time: str | None = None,
    nodes: int | str | None = None,
    account: str | None = None,
    extra: Iterable[str] = (),
    prologue: Iterable[str] = (),
) -> list[str]:
    """``sbatch`` submitting ``command`` (a list) as a batch job of ``n`` tasks; prints the job id.
    ``prologue``: shell lines the job's script runs first (``module load ...``)."""
    args = ["sbatch", "--parsable", f"--job-name={name}", f"--ntasks={n}", f"--output={output}"]
    if nodes:
        args.append(f"--nodes={nodes}")
    if partition:
        args.append(f"--partition={partition}")
    if time:
        args.append(f"--time={time}")
    if account:
        args.append(f"--account={account}")
    args += list(extra)
    return args + ["--wrap", "\n".join([*prologue, "exec " + shlex.join(command)])]


def squeue_command(job_id: int | str) -> list[str]:
    """``squeue`` printing one line ``STATE|REASON|ELAPSED|NODES`` for ``job_id``, whatever its state."""
    return ["squeue", "--noheader", f"--jobs={job_id}", "--states=all", "--format=%T|%r|%M|%N"]


def scancel_command(job_id: int | str | None = None, name: str | None = None) -> list[str]:
    """``scancel`` of one job by id, or of every job called ``name``."""
    return ["scancel", str(job_id)] if job_id is not None else ["scancel", f"--name={name}"]


def parse_queue_line(text: str) -> dict[str, str] | None:
    """``{"state", "reason", "elapsed", "nodes"}`` from :func:`squeue_command`'s output, None if empty."""
    for line in text.splitlines():
        parts = line.strip().split("|")
        if len(parts) == 4:
            state, reason, elapsed, nodes = parts
            return {"state": state, "reason": reason, "elapsed": elapsed, "nodes": nodes}
    return None


def query_job(job_id: int | str, timeout: float = 30.0) -> dict[str, str]:
    """The job's queue line (:func:`parse_queue_line`); ``{"state": "GONE"}`` once Slurm forgot it."""
    out = subprocess.run(squeue_command(job_id), capture_output=True, text=True, timeout=timeout)
    if out.returncode != 0:
        if "Invalid job id" in out.stderr:
            return {"state": "GONE", "reason": "", "elapsed": "", "nodes": ""}
        raise RuntimeError(f"squeue failed: {out.stderr.strip()}")
    return parse_queue_line(out.stdout) or {"state": "GONE", "reason": "", "elapsed": "", "nodes": ""}
