"""A Slurm batch job in the queue, seen from the kernel: the progress line while it waits.

The local :mod:`shmem_notebook.launcher.batchjob` process follows the job and
writes state lines to its output file; :class:`QueueProgress` reads the last one
and shows ``Slurm job 12: PENDING (Resources), 4 s`` on one line, rewritten in
place, until every PE registered. Interrupting the wait (the kernel's stop
button, Ctrl-C) ends in :meth:`Job.start`'s clean-up, which cancels the job.
"""

import sys
import time

from ..errors import InputError
from ..launcher.batchjob import parse_marks

__all__ = ["QueueProgress", "progress_text", "batch_options"]


def batch_options(slurm, ip, hostfile, partition, time, nodes, account, sbatch_args):
    """The launcher's batch-job options, checked; ``{}`` without ``slurm``. Raises :class:`InputError`."""
    given = {"partition": partition, "time": time, "nodes": nodes, "account": account, "sbatch_args": sbatch_args}
    if not slurm:
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
    if nodes is not None and (isinstance(nodes, bool) or not isinstance(nodes, int) or nodes < 1):
        raise InputError(f"nodes must be a positive integer, got {nodes!r}; e.g. nodes=2")
    if isinstance(sbatch_args, str):
        raise InputError(f"sbatch_args is a list of arguments, got the string {sbatch_args!r}; e.g. ['--qos=debug']")
    return {
        "slurm": True,
        "partition": partition or "",
        "time": str(time) if time else "",
        "nodes": nodes,
        "account": account or "",
        "sbatch_args": [str(a) for a in sbatch_args],
    }


def progress_text(mark, elapsed, registered, n):
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

    def __init__(self, output_file, n, interval=0.25, out=None):
        self.output_file, self.n, self.interval = output_file, n, interval
        self.out = out
        self.started = time.monotonic()
        self._shown, self._last = "", 0.0
        self.mark = None

    def read(self):
        """The batch job's last state line (a dict), or None before it was submitted."""
        try:
            with open(self.output_file, errors="replace") as f:
                self.mark = parse_marks(f.read()) or self.mark
        except FileNotFoundError:
            pass
        return self.mark

    @property
    def job_id(self):
        return (self.mark or {}).get("job")

    def update(self, registered):
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

    def done(self, registered=None):
        """End the progress line, redrawn first with ``registered`` PEs (when given)."""
        if registered is not None:
            self._last = 0.0
            self.update(registered)
        if self._shown:
            (self.out or sys.stdout).write("\n")
            self._shown = ""
