"""Deadlocks (issue 47 item 1): seconds from the moment the last PE came to its wait to the verdict
(the cell path begins to release the PEs) and to the report (the cell's error raised).

Cases: ``wait/barrier`` (PE 0 waits for a flag nobody sets, the others in barrier_all: paused),
``all wait`` (every PE waits for a flag: paused), ``poll/barrier`` (PE 0 polls its flag in Python,
the others in barrier_all: released, the job stays ready). Each PE prints ``time.monotonic()`` right
before its wait (one clock on one host). Medians of ``--repeats`` runs at each PE count, with
``--busy`` busy loops of their own beside (a loaded machine); a paused case restarts the job.
``python bench/deadlocks.py [--pes 2 4] [--repeats 5] [--busy 2] [--library oshmem]``.
"""

import argparse
import io
import multiprocessing
import statistics
import time

import shmem_notebook
from shmem_notebook.cells import stranded

CASES = {
    "wait/barrier": "if me == 0:\n    shmem.wait_until(flag, shmem.CMP.EQ, 1)\nshmem.barrier_all()",
    "all wait": "shmem.wait_until(flag, shmem.CMP.EQ, 1)",
    "poll/barrier": "if me == 0:\n    while flag[0] == 0:\n        pass\nshmem.barrier_all()",
}


def _spin():
    while True:
        pass


def measure(n, repeats, library):
    """``{case: (median s to the verdict, median s to the report)}``."""
    verdicts, times = [], {case: ([], []) for case in CASES}
    original = stranded.release

    def release(*args):
        verdicts.append(time.monotonic())
        return original(*args)

    stranded.release = release
    try:
        with shmem_notebook.Job(n, heap="8M", library=library).start() as job:
            for _ in range(repeats):
                for case, code in CASES.items():
                    if job.state != "running":
                        job.restart()
                    reset = "import time\nflag[0] = 0\nshmem.barrier_all()"
                    job.run(reset, arrays="flag=int64[1]", stdout=io.StringIO())
                    verdicts.clear()
                    try:
                        job.run("print(time.monotonic())\n" + code, stdout=io.StringIO(), timeout=60)
                    except shmem_notebook.CellStoppedError as error:
                        reported = time.monotonic()
                        came = max(float(text) for text in error.result.stdout.values())
                        assert "deadlocked" in str(error), str(error)
                        times[case][0].append(verdicts[0] - came)
                        times[case][1].append(reported - came)
    finally:
        stranded.release = original
    return {case: (statistics.median(v), statistics.median(r)) for case, (v, r) in times.items()}


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--pes", type=int, nargs="+", default=[2, 4])
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--busy", type=int, default=2)
    parser.add_argument("--library", default="oshmem")
    args = parser.parse_args()
    spinners = [multiprocessing.Process(target=_spin, daemon=True) for _ in range(args.busy)]
    for spinner in spinners:
        spinner.start()
    try:
        print("| PEs | " + " | ".join(f"{case}: s to verdict / report" for case in CASES) + " |")
        print("| --- | " + " | ".join("---" for _ in CASES) + " |")
        for n in args.pes:
            row = measure(n, args.repeats, args.library)
            print(f"| {n} | " + " | ".join(f"{row[case][0]:.2f} / {row[case][1]:.2f}" for case in CASES) + " |")
    finally:
        for spinner in spinners:
            spinner.terminate()
            spinner.join()


if __name__ == "__main__":
    main()
