"""A Slurm batch job seen from the kernel: its options, the script ``%shmem export --slurm`` writes
(:func:`sbatch_script`), and the progress line while it waits in the queue.

The local :mod:`shmem_notebook.launcher.batch_proxy` process follows the job and
writes state lines to its output file; :class:`QueueProgress` reads the last one
and shows ``Slurm job 12: PENDING (Resources), 4 s`` on one line, rewritten in
place, until every PE registered. Interrupting the wait (the kernel's stop
button, Ctrl-C) ends in :meth:`Job.start`'s clean-up, which cancels the job.
"""

from __future__ import annotations

import os
import shlex
import sys
import time
from typing import TYPE_CHECKING, Any

from ..errors import InputError
from ..launcher.batch_proxy import parse_marks
from ..launcher.environment import platform_environment
from ..rc import rc
from ..words import plural
from .options import JobOptions, declared, launcher_settings

if TYPE_CHECKING:
    from collections.abc import Mapping, Sequence
    from typing import TextIO

__all__ = ["QueueProgress", "progress_text", "batch_options", "prologue_lines", "sbatch_script", "AS_ROOT"]


def batch_options(options: JobOptions, ip: str | None) -> dict[str, Any]:
    """The launcher's batch-job options of the start options ``options`` (a
    :class:`~shmem_notebook.job.options.JobOptions` whose values passed their own checks,
    :func:`~shmem_notebook.job.options.check`), checked together; ``{}`` without ``slurm``; ``ip``: where the
    controller listens. Raises :class:`InputError`. ``sbatch_prologue``: shell lines the batch job runs before
    it starts the PEs (a string or a list), e.g. ``"module load openmpi/4.1"``."""
    given = {f.name: getattr(options, f.name) for f, _ in declared(batch=True)}
    hostfile, sbatch_args = options.hostfile, options.sbatch_args
    if not options.slurm:
        named = [name for name, value in given.items() if value]
        if named:
            raise InputError(
                f"{', '.join(named)} only apply to a Slurm batch job; add slurm=True (`--slurm`) or leave them out"
            )
        return {}
    if ip is None:
        raise InputError(
            "a Slurm batch job's PEs must reach the controller in this kernel, which listens on 127.0.0.1 "
            "by default; pass ip='0.0.0.0' (`--ip 0.0.0.0`) or this host's address on the cluster network"
        )
    if hostfile:
        raise InputError("hostfile and slurm=True exclude each other: Slurm chooses the nodes; drop one of them")
    if isinstance(sbatch_args, str):
        raise InputError(f"sbatch_args is a list of arguments, got the string {sbatch_args!r}; e.g. ['--qos=debug']")
    prologue = prologue_lines(options.sbatch_prologue)
    settings = launcher_settings(options)  # as the launcher takes them: '' for None, lists
    return {"slurm": True, **{name: settings.get(name) for name in given}, "sbatch_prologue": prologue}


def prologue_lines(prologue: str | Sequence[str] | None) -> list[str]:
    """``"module load a\nmodule load b"`` or a list of lines -> the list of non-empty lines."""
    if not prologue:
        return []
    if isinstance(prologue, str):
        prologue = [prologue]
    if not all(isinstance(line, str) for line in prologue):
        raise InputError(
            f"sbatch_prologue is shell lines (a string or a list of strings), got {prologue!r}; "
            "e.g. 'module load openmpi/4.1'"
        )
    return [line for text in prologue for line in text.splitlines() if line.strip()]


#: what Open MPI wants to run as root; the batch script sets it only when its job runs as root
AS_ROOT = ("OMPI_ALLOW_RUN_AS_ROOT", "OMPI_ALLOW_RUN_AS_ROOT_CONFIRM")


def sbatch_script(
    n: int,
    program_path: str,
    heap: str | int,
    options: Mapping[str, Any] | None = None,
    runner: str | None = None,
    python: str | None = None,
) -> str:
    """An sbatch script that runs ``program_path`` on ``n`` PEs with the launcher's environment;
    ``options``: ``partition``, ``time``, ``nodes``, ``account``, ``sbatch_args``, ``sbatch_prologue``
    (as ``Job.batch``). Open MPI's run-as-root variables are set only when the job runs as root."""
    options = dict(options or {})
    runner = runner or rc.slurm_runner
    python = python or sys.executable
    program_path = os.path.abspath(program_path)
    stem = os.path.splitext(os.path.basename(program_path))[0]
    lines = [
        "#!/bin/bash",
        f"# runs {os.path.basename(program_path)} as a Slurm batch job of {plural(n, 'PE')} "
        "(exported by shmem_notebook)",
        f"#SBATCH --job-name={stem}",
        f"#SBATCH --ntasks={n}",
    ]
    for key in ("nodes", "partition", "time", "account"):
        if options.get(key):
            lines.append(f"#SBATCH --{key}={options[key]}")
    lines += [f"#SBATCH {arg}" for arg in options.get("sbatch_args") or []]
    if not any(str(a).startswith(("--output", "-o")) for a in options.get("sbatch_args") or []):
        lines.append(f"#SBATCH --output={stem}-%j.out")
    prologue = prologue_lines(options.get("sbatch_prologue"))
    if prologue:
        lines += ["", "# the site's setup (--sbatch-prologue): the same Open MPI as where the notebook ran", *prologue]
    env = {k: v for k, v in platform_environment(environ={}, heap=heap).items() if k not in AS_ROOT}
    lines += [
        "",
        "# what shmem_notebook's launcher gives the PEs on this platform (Open MPI 4.1.x OSHMEM); "
        "what is set already wins",
    ]
    lines += [f'export {k}="${{{k}-{v}}}"' for k, v in env.items()]
    lines += ['if [ "$(id -u)" = 0 ]; then  # only a job that really runs as root: Open MPI refuses root unless told']
    lines += [f'    export {k}="${{{k}-1}}"' for k in AS_ROOT]
    lines += ["fi"]
    if runner == "srun":
        command = ["srun", "--mpi=pmix", "--kill-on-bad-exit=1", f"--ntasks={n}", python, program_path]
    else:
        command = [rc.oshrun, "-n", str(n)]
        for k in sorted(env):
            command += ["-x", k]
        command += [python, program_path]
    lines += ["", "exec " + shlex.join(command), ""]
    return "\n".join(lines)


def progress_text(mark: Mapping[str, str] | None, elapsed: float, registered: int, n: int) -> str:
    """One progress line from the last state line ``mark`` of the batch job."""
    if not mark or "job" not in mark:
        return f"Slurm: submitting the batch job, {elapsed:.0f} s"
    state = mark.get("state", "?")
    if n and registered == n:
        state = "RUNNING"  # the batch job's state line may come up to a poll later than the PEs
    text = f"Slurm job {mark['job']}: {state}"
    reason = mark.get("reason", "None")
    if state == "PENDING" and reason not in ("", "None"):
        text += f" ({reason})"
    nodes = mark.get("nodes", "-")
    if state == "RUNNING":
        text += f"{f' on {nodes}' if nodes not in ('', '-') else ''}, {registered}/{n} PEs registered"
    return f"{text}, {elapsed:.0f} s"


class QueueProgress:
    """Shows one line, rewritten in place, while a batch job waits and its PEs register."""

    mark: dict[str, str] | None

    def __init__(self, output_file: str, n: int, interval: float = 0.25, out: TextIO | None = None) -> None:
        self.output_file, self.n, self.interval = output_file, n, interval
        self.out = out
        self.started = time.monotonic()
        self._shown, self._last = "", 0.0
        self.mark = None

    def read(self) -> dict[str, str] | None:
        """The batch job's last state line (a dict), or None before it was submitted."""
        try:
            with open(self.output_file, errors="replace") as f:
                self.mark = parse_marks(f.read()) or self.mark
        except FileNotFoundError:
            pass
        return self.mark

    @property
    def job_id(self) -> str | None:
        return (self.mark or {}).get("job")

    def update(self, registered: int) -> None:
        """Redraw the line (at most every ``interval`` s)."""
        now = time.monotonic()
        if now - self._last < self.interval:
            return
        self._last = now
        text = progress_text(self.read(), now - self.started, registered, self.n)
        if text != self._shown:
            out = self.out or sys.stdout
            out.write("\r" + text.ljust(len(self._shown)))
            out.flush()
            self._shown = text

    def done(self, registered: int | None = None) -> None:
        """End the progress line, redrawn first with ``registered`` PEs (when given)."""
        if registered is not None:
            self._last = 0.0
            self.update(registered)
        if self._shown:
            (self.out or sys.stdout).write("\n")
            self._shown = ""
