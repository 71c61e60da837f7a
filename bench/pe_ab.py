"""The PE side of two checkouts side by side: the race check's cost on the 4-PE stencil, old code against this.

    git worktree add /tmp/old COMMIT
    cd /tmp && /work/main/.venv/bin/python /work/main/bench/pe_ab.py /tmp/old [ROUNDS] [SWEEPS] [PES]

Starts two jobs at once: A's PEs import the package from the checkout given (``PYTHONPATH``; run it from a
directory that holds no ``shmem_notebook``, as ``python -m`` puts the working directory first), B's from
this one; the client is this checkout in both. Each round runs the stencil cell of :mod:`races` untraced and
traced in each job, the jobs in turns, and prints each job's ratio of medians and paired ratio (the goals'
measure), and the paired difference of what tracing adds, B - A. Machines drift within minutes; two jobs
measured in turns see the same drift, which one job measured after the other does not.
"""

from __future__ import annotations

import io
import os
import statistics
import sys
import time

import races

from shmem_notebook.job.job import Job


def _quartiles(values: list[float]) -> str:
    values = sorted(values)
    return f"{values[len(values) // 4]:.2f}-{values[3 * len(values) // 4]:.2f}"


def main(old: str, rounds: int = 40, sweeps: int = 200, n: int = 4) -> None:
    code = races.STENCIL.format(size=1000, sweeps=sweeps)
    os.environ["PYTHONPATH"] = old
    try:
        a = Job(n, heap="64M")
        a.start()
    finally:
        del os.environ["PYTHONPATH"]
    b = Job(n, heap="64M")
    try:
        b.start()
        jobs = {"A": a, "B": b}
        for name, job in jobs.items():
            where = job.run("import shmem_notebook as _p\nprint(_p.__file__)", stdout=io.StringIO()).stdout[0]
            print(f"{name}: PEs run {where.strip()}")
            for race in (False, True, False, True):
                job.run(code, race=race, stdout=io.StringIO())
        walls: dict[tuple[str, bool], list[float]] = {(j, t): [] for j in jobs for t in (False, True)}
        for r in range(rounds):
            for name in "AB" if r % 2 == 0 else "BA":
                for race in (False, True):
                    start = time.perf_counter()
                    jobs[name].run(code, race=race, stdout=io.StringIO())
                    walls[(name, race)].append(time.perf_counter() - start)
        median = statistics.median
        for name in jobs:
            plain, traced = walls[(name, False)], walls[(name, True)]
            paired = [t / p for p, t in zip(plain, traced)]
            print(
                f"{name}: untraced {median(plain) * 1e3:.1f} ms, traced {median(traced) * 1e3:.1f} ms"
                f" = {median(traced) / median(plain):.2f}x; paired {median(paired):.2f}x"
                f" (quartiles {_quartiles(paired)})"
            )
        added = [
            ((tb - ub) - (ta - ua)) * 1e3
            for ua, ta, ub, tb in zip(walls[("A", False)], walls[("A", True)], walls[("B", False)], walls[("B", True)])
        ]
        print(f"added by tracing, B - A: {median(added):+.2f} ms (quartiles {_quartiles(added)} ms)")
    finally:
        a.stop()
        b.stop()


if __name__ == "__main__":
    main(sys.argv[1], *(int(x) for x in sys.argv[2:5]))
