"""The local process standing for a Slurm batch job of PEs (run as ``python -m``).

``python -m shmem_notebook.launcher.batch_proxy [--poll S] [--log PATH] -- sbatch ...``
submits the job, prints a :data:`MARK` line whenever its state or reason
changes, and exits when the job ended (0 if it completed), after printing the
job's own output (``--log``, with ``%j`` the job id) so that crash reports read
it like ``oshrun``'s. SIGTERM or SIGINT cancels the job (``scancel``) first.
So to ipyparallel and :class:`~shmem_notebook.job.Job` it is what ``oshrun`` is
for a local job: alive exactly while the PEs may run.
"""

import argparse
import os
import signal
import subprocess
import sys
import time
from collections.abc import Sequence
from types import FrameType
from typing import NoReturn

from .slurm import ENDED, OWNER_VARIABLE, query_job, scancel_command

__all__ = ["MARK", "parse_marks", "all_marks", "main"]

#: prefix of the state lines this process prints
MARK = "shmem_notebook-batch:"


def all_marks(text: str) -> list[dict[str, str]]:
    """Every state line in ``text``, as dicts (``job``, ``state``, ``reason``, ``nodes``, ``t``: epoch s)."""
    marks = []
    for line in text.splitlines():
        if line.startswith(MARK):
            fields = dict(word.split("=", 1) for word in line[len(MARK) :].split() if "=" in word)
            marks.append({k: v.replace("_", " ") if k == "reason" else v for k, v in fields.items()})
    return marks


def parse_marks(text: str) -> dict[str, str] | None:
    """The last state line in ``text`` (see :func:`all_marks`), or None."""
    marks = all_marks(text)
    return marks[-1] if marks else None


class _Cancel(Exception):
    pass


def _raise_cancel(signum: int, frame: FrameType | None) -> NoReturn:
    raise _Cancel()


def _mark(job_id: str, state: str, reason: str = "", nodes: str = "") -> None:
    reason = (reason or "None").replace(" ", "_")
    print(f"{MARK} job={job_id} state={state} reason={reason} nodes={nodes or '-'} t={time.time():.3f}", flush=True)


def _submit(sbatch: Sequence[str]) -> str:
    env = dict(os.environ)
    env.pop(OWNER_VARIABLE, None)
    out = subprocess.run(sbatch, capture_output=True, text=True, env=env, timeout=120)
    if out.returncode != 0:
        message = out.stderr.strip().replace("sbatch: error: ", "") or f"exit code {out.returncode}"
        print(f"sbatch refused the job: {message}", flush=True)
        sys.exit(2)
    return out.stdout.strip().split(";")[0]


def follow(job_id: str, poll: float) -> str:
    """Print state changes until the job ended; return its last state."""
    seen = None
    while True:
        info = query_job(job_id)
        key = (info["state"], info["reason"], info["nodes"])
        if key != seen:
            _mark(job_id, *key)
            seen = key
        if info["state"] in ENDED or info["state"] == "GONE":
            return info["state"]
        time.sleep(poll)


def cancel(job_id: str, poll: float, limit: float = 30.0) -> str:
    """scancel the job and wait (up to ``limit`` s) until Slurm says it ended."""
    subprocess.run(scancel_command(job_id), capture_output=True, timeout=60)
    deadline = time.monotonic() + limit
    while time.monotonic() < deadline:
        info = query_job(job_id)
        if info["state"] in ENDED or info["state"] == "GONE":
            _mark(job_id, info["state"], info["reason"], info["nodes"])
            return info["state"]
        time.sleep(min(poll, 0.2))
    return "CANCELLING"


def _print_log(path: str, job_id: str) -> None:
    path = path.replace("%j", str(job_id))
    for _ in range(20):  # a shared file system may show the file late
        if os.path.exists(path):
            with open(path, errors="replace") as f:
                sys.stdout.write(f.read())
            sys.stdout.flush()
            return
        time.sleep(0.1)


def main(argv: Sequence[str] | None = None) -> NoReturn:
    parser = argparse.ArgumentParser(prog="python -m shmem_notebook.launcher.batch_proxy")
    parser.add_argument("--poll", type=float, default=1.0, help="seconds between squeue queries")
    parser.add_argument("--log", default=None, help="the job's output file (%%j = job id)")
    parser.add_argument("sbatch", nargs=argparse.REMAINDER)
    args = parser.parse_args(argv)
    sbatch: list[str] = args.sbatch[1:] if args.sbatch[:1] == ["--"] else args.sbatch
    signal.signal(signal.SIGTERM, _raise_cancel)
    signal.signal(signal.SIGINT, _raise_cancel)
    job_id = None
    try:
        job_id = _submit(sbatch)
        _mark(job_id, "SUBMITTED")
        state = follow(job_id, args.poll)
    except _Cancel:
        signal.signal(signal.SIGTERM, signal.SIG_IGN)
        signal.signal(signal.SIGINT, signal.SIG_IGN)
        if job_id is None:  # sbatch may have submitted it already: cancel by name
            names = [a.split("=", 1)[1] for a in sbatch if a.startswith("--job-name=")]
            if names:
                subprocess.run(scancel_command(name=names[0]), capture_output=True, timeout=60)
            sys.exit(1)
        state = cancel(job_id, args.poll)
    if job_id is not None and args.log:
        _print_log(args.log, job_id)
    sys.exit(0 if state == "COMPLETED" else 1)


if __name__ == "__main__":
    main()
