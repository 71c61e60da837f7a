"""Hangs where no PE raised (issue 29): seconds until the job is ready again, without a restart.

Cases: ``finished`` (PE 0 leaves its loop after 3 barriers, the others wait in the 4th: they are
released by PE 0 joining it) and ``polling`` (PE 1 raises before it sets PE 0's flag; PE 0 polls
it in a Python loop: interrupted). Before issue 29 both lasted until the cell's timeout (or for
ever). Medians of ``--repeats`` runs at each PE count; prints a table.
``python bench/hangs.py [--pes 2 4] [--repeats 3]``.
"""

import argparse
import io
import statistics
import time

import shmem_notebook

CASES = {
    "finished": "for i in range(3 if me == 0 else 100):\n    shmem.barrier_all()",
    "polling": "if me == 1:\n    raise ValueError('no flag')\nif me == 0:\n    while int(F[0]) == 0:\n        pass",
}


def measure(n, repeats):
    """``{case: median seconds}`` from ``job.run`` to its error, the job ready again (checked)."""
    times = {case: [] for case in CASES}
    with shmem_notebook.Job(n, heap="16M").start() as job:
        job.run("F = shmem.zeros(1, dtype='int64')\nshmem.barrier_all()", stdout=io.StringIO())
        for _ in range(repeats):
            for case, code in CASES.items():
                start = time.monotonic()
                try:
                    job.run(code, stdout=io.StringIO(), stderr=io.StringIO(), timeout=60)
                except shmem_notebook.ShmemNotebookError:
                    pass
                times[case].append(time.monotonic() - start)
                assert job.state == "running", f"{case} at {n} PEs left the job {job.state}"
    return {case: statistics.median(ts) for case, ts in times.items()}


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--pes", type=int, nargs="+", default=[2, 4])
    parser.add_argument("--repeats", type=int, default=3)
    args = parser.parse_args()
    print("| PEs | " + " | ".join(f"{case}: s to ready" for case in CASES) + " |")
    print("| --- | " + " | ".join("---" for _ in CASES) + " |")
    for n in args.pes:
        row = measure(n, args.repeats)
        print(f"| {n} | " + " | ".join(f"{row[case]:.2f}" for case in CASES) + " |")


if __name__ == "__main__":
    main()
