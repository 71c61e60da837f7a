"""Start, restart and stop on a crowded machine: a process's children from the kernel's lists against psutil's scan.

    .venv/bin/python bench/crowd.py [--crowds 0 2000] [--pes 4] [--repeats 5] [--json OUT.json] [--plot OUT.png]

A login node runs thousands of processes. psutil finds a process's children by reading the parent of
every one of them; shmem_notebook asks ``/proc/<pid>/task/<tid>/children`` (``launcher/proc_tree.py``),
and takes psutil's way only on a kernel without those lists. Per crowd size (that many idle ``sleep``
processes of this user, started first), jobs of ``--pes`` PEs (8M heaps) alternate between the two ways
(the baseline is the same code with ``proc_tree`` switched to its psutil fallback); each job times its
start, a restart and its stop. Prints the medians side by side, and saves them.
"""

import argparse
import subprocess
import time
from statistics import median

import shmem_notebook
from common import measure_and_save
from shmem_notebook.launcher import proc_tree

WAYS = {"kernel": lambda: True, "psutil": lambda: False}


def one_job(n):
    """(start, restart, stop) seconds of one job of ``n`` PEs, and ms to look up its ``oshrun``'s descendants."""
    times = []
    t0 = time.perf_counter()
    job = shmem_notebook.start(n=n, heap="8M")
    times.append(time.perf_counter() - t0)
    try:
        job.run("pass")
        oshrun = job._engine_set().process.pid
        t0 = time.perf_counter()
        for _ in range(20):
            proc_tree.descendants(oshrun)
        lookup = (time.perf_counter() - t0) / 20 * 1e3
        t0 = time.perf_counter()
        job.restart()
        times.append(time.perf_counter() - t0)
        job.run("pass")
    finally:
        t0 = time.perf_counter()
        job.stop()
        times.append(time.perf_counter() - t0)
    return [*times, lookup]


def run(crowds, n, repeats):
    rows = []
    kept = proc_tree._kernel_lists_children
    try:
        for crowd in crowds:
            sleepers = [subprocess.Popen(["sleep", "3600"]) for _ in range(crowd)]
            try:
                time.sleep(1.0)
                runs = {way: [] for way in WAYS}
                for _ in range(repeats):
                    for way, lists in WAYS.items():
                        proc_tree._kernel_lists_children = lists
                        runs[way].append(one_job(n))
                row = {"crowd": crowd, "pes": n}
                for way in WAYS:
                    for i, what in enumerate(("start", "restart", "stop", "lookup_ms")):
                        row[f"{what}_{way}"] = median(r[i] for r in runs[way])
                rows.append(row)
            finally:
                for p in sleepers:
                    p.kill()
                for p in sleepers:
                    p.wait()
    finally:
        proc_tree._kernel_lists_children = kept
    return rows


def table(rows):
    lines = [
        "| other processes | PEs | start, kernel / psutil, s | restart, kernel / psutil, s | stop, kernel / psutil, s "
        "| the job's tree looked up, kernel / psutil, ms |",
        "| ---: | ---: | ---: | ---: | ---: | ---: |",
    ]
    for r in rows:
        cells = [
            f"{r[f'{what}_kernel']:.2f} / {r[f'{what}_psutil']:.2f} ({r[f'{what}_kernel'] / r[f'{what}_psutil']:.2f}x)"
            for what in ("start", "restart", "stop")
        ]
        lookup = f"{r['lookup_ms_kernel']:.2f} / {r['lookup_ms_psutil']:.2f}"
        lines.append(f"| {r['crowd']} | {r['pes']} | {' | '.join(cells)} | {lookup} |")
    return "\n".join(lines)


def plot(rows, path):
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(6, 3.5))
    crowds = [r["crowd"] for r in rows]
    for what, colour in (("start", "C0"), ("restart", "C1"), ("stop", "C2")):
        for way, style in (("kernel", "o-"), ("psutil", "s--")):
            ax.plot(crowds, [r[f"{what}_{way}"] for r in rows], style, color=colour, label=f"{what}, {way}")
    ax.set_xlabel("other processes on the machine")
    ax.set_ylabel("seconds (median)")
    ax.legend(fontsize=7)
    fig.tight_layout()
    fig.savefig(path)


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--crowds", type=int, nargs="+", default=[0, 2000])
    parser.add_argument("--pes", type=int, default=4)
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--json", default="bench/crowd.json")
    parser.add_argument("--plot", default="bench/crowd.png")
    args = parser.parse_args(argv)
    measure_and_save(lambda: run(args.crowds, args.pes, args.repeats), table, plot, args.json, args.plot, args.repeats)


if __name__ == "__main__":
    main()
