"""The fork stub in C against the Python one, side by side in one run.

    .venv/bin/python bench/fork_stub.py [--pes 2 4 16] [--repeats 4] [--json OUT.json] [--plot OUT.png]

A job with a fork server has ``oshrun`` start a stub per PE (``shmem_notebook/launcher/stub_program.py``).
Per PE count, jobs with the server (``rc.forkserver = "on"``) alternate between the C stub (the default
where a compiler is found) and the Python one (``SHMEM_NOTEBOOK_NATIVE=no-stub``, the baseline); each
job times its start and two restarts (8M heaps), and sums, right after its start, the unique memory
(USS) of its stubs and of all its processes. CPU is the whole machine's (``/proc/stat``) during the
start and during each restart, so the stubs that ended count too: run it on a quiet machine.
Prints the medians and saves them.
"""

import os
import time
from statistics import median

import psutil

import shmem_notebook
from common import main_over_pes
from shmem_notebook.launcher.stub_program import is_stub
from shmem_notebook.rc import rc

KINDS = {"c": None, "python": "no-stub"}  # SHMEM_NOTEBOOK_NATIVE


def machine_cpu():
    """CPU-seconds the machine spent so far (every process, user and system)."""
    with open("/proc/stat") as f:
        ticks = [int(x) for x in f.readline().split()[1:]]
    return (sum(ticks[:3]) + sum(ticks[5:8])) / os.sysconf("SC_CLK_TCK")


def timed(step):
    cpu, t0 = machine_cpu(), time.perf_counter()
    step()
    return time.perf_counter() - t0, machine_cpu() - cpu


def memory():
    """(the stubs' USS, all the job's processes' USS), MiB: this process's descendants."""
    stubs = every = 0
    for p in psutil.Process().children(recursive=True):
        try:
            uss = p.memory_full_info().uss
            stub = is_stub(p.cmdline())
        except psutil.Error:
            continue
        every += uss
        stubs += uss if stub else 0
    return stubs / 2**20, every / 2**20


def one_job(n, kind):
    """Start and restart (seconds, machine CPU-seconds) and memory of one job of ``n`` PEs."""
    if KINDS[kind]:
        os.environ["SHMEM_NOTEBOOK_NATIVE"] = KINDS[kind]
    else:
        os.environ.pop("SHMEM_NOTEBOOK_NATIVE", None)
    holder = {}
    start = timed(lambda: holder.setdefault("job", shmem_notebook.start(n=n, heap="8M")))
    job = holder["job"]
    try:
        stubs, every = memory()
        restarts = []
        for _ in range(2):
            time.sleep(1.0)
            restarts.append(timed(job.restart))
    finally:
        job.stop()
        os.environ.pop("SHMEM_NOTEBOOK_NATIVE", None)
    return dict(start=start, restarts=restarts, stubs=stubs, every=every)


def run(pes, repeats):
    saved, rc.forkserver = rc.forkserver, "on"
    rows = []
    try:
        for n in pes:
            runs = {kind: [] for kind in KINDS}
            for _ in range(repeats):
                for kind in KINDS:
                    runs[kind].append(one_job(n, kind))
            row = {"pes": n}
            for kind, jobs in runs.items():
                row[f"start_{kind}"] = median(j["start"][0] for j in jobs)
                row[f"start_cpu_{kind}"] = median(j["start"][1] for j in jobs)
                row[f"restart_{kind}"] = median(r[0] for j in jobs for r in j["restarts"])
                row[f"restart_cpu_{kind}"] = median(r[1] for j in jobs for r in j["restarts"])
                row[f"stubs_mib_{kind}"] = median(j["stubs"] for j in jobs)
                row[f"job_mib_{kind}"] = median(j["every"] for j in jobs)
            rows.append(row)
    finally:
        rc.forkserver = saved
    return rows


def table(rows):
    lines = [
        "| PEs | start, s | start, CPU-s | restart, s | restart, CPU-s | stubs' USS, MiB | the job's USS, MiB |",
        "| ---: | ---: | ---: | ---: | ---: | ---: | ---: |",
    ]
    for r in rows:
        cells = [
            f"{r[f'{key}_python']:.{digits}f} / {r[f'{key}_c']:.{digits}f}"
            for key, digits in (
                ("start", 2),
                ("start_cpu", 2),
                ("restart", 2),
                ("restart_cpu", 2),
                ("stubs_mib", 1),
                ("job_mib", 0),
            )
        ]
        lines.append(f"| {r['pes']} | " + " | ".join(cells) + " |")
    return "\n".join(lines) + "\n(each cell: the Python stub / the C stub; medians)"


def plot(rows, path):
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, (left, right) = plt.subplots(1, 2, figsize=(8, 3.5))
    pes = [r["pes"] for r in rows]
    for kind, style in (("python", "--"), ("c", "-")):
        left.plot(pes, [r[f"start_{kind}"] for r in rows], "o" + style, label=f"start, {kind} stub")
        left.plot(pes, [r[f"restart_{kind}"] for r in rows], "s" + style, label=f"restart, {kind} stub")
        right.plot(pes, [r[f"stubs_mib_{kind}"] for r in rows], "o" + style, label=f"stubs, {kind}")
    for ax, label in ((left, "seconds (median)"), (right, "unique memory, MiB (median)")):
        ax.set_xscale("log", base=2)
        ax.set_xlabel("PEs")
        ax.set_ylabel(label)
        ax.legend(fontsize=7)
    fig.tight_layout()
    fig.savefig(path)


def main(argv=None):
    main_over_pes(__doc__, "fork_stub", run, table, plot, pes=[2, 4, 16], repeats=4, argv=argv)


if __name__ == "__main__":
    main()
