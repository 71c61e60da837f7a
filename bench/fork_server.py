"""Start and restart with the fork server and without it, side by side in one run.

    .venv/bin/python bench/fork_server.py [--pes 1 2 4 16] [--repeats 4] [--json OUT.json] [--plot OUT.png]

Per PE count, jobs with the fork server (``rc.forkserver = "on"``; by default, ``"auto"``, only jobs with
more PEs than cores have one) and without it (``"off"``: each PE its own process under ``oshrun``)
alternate; each job times its start and two restarts (8M heaps). Prints the medians, their ratios and
each kind's restart / start (issue 46's goal: < 0.7x), and saves them.
"""

import time
from statistics import median

import shmem_notebook
from common import main_over_pes
from shmem_notebook.rc import rc


def one_job(n, server):
    """(start, restart, second restart) seconds of one job of ``n`` PEs."""
    rc.forkserver = "on" if server else "off"
    t0 = time.perf_counter()
    job = shmem_notebook.start(n=n, heap="8M")
    times = [time.perf_counter() - t0]
    try:
        for _ in range(2):
            t0 = time.perf_counter()
            job.restart()
            times.append(time.perf_counter() - t0)
    finally:
        job.stop()
    return times


def run(pes, repeats):
    rows = []
    for n in pes:
        runs = {1: [], 0: []}
        for _ in range(repeats):
            for server in (1, 0):
                runs[server].append(one_job(n, server))
        row = {"pes": n}
        for server, name in ((1, "with"), (0, "without")):
            row[f"start_{name}"] = median(r[0] for r in runs[server])
            row[f"restart_{name}"] = median(x for r in runs[server] for x in r[1:])
        rows.append(row)
    rc.forkserver = "auto"
    return rows


def table(rows):
    lines = [
        "| PEs | start without / with, s | with / without | restart without / with, s | restart / start, with |",
        "| ---: | ---: | ---: | ---: | ---: |",
    ]
    for r in rows:
        faster = r["start_with"] / r["start_without"]
        lines.append(
            f"| {r['pes']} | {r['start_without']:.2f} / {r['start_with']:.2f} | {faster:.2f}x "
            f"| {r['restart_without']:.2f} / {r['restart_with']:.2f} | {r['restart_with'] / r['start_with']:.2f}x |"
        )
    return "\n".join(lines)


def plot(rows, path):
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(6, 3.5))
    pes = [r["pes"] for r in rows]
    for key, style in (
        ("start_without", "o--"),
        ("start_with", "o-"),
        ("restart_without", "s--"),
        ("restart_with", "s-"),
    ):
        ax.plot(pes, [r[key] for r in rows], style, label=key.replace("_", " ") + " the fork server")
    ax.set_xscale("log", base=2)
    ax.set_xlabel("PEs")
    ax.set_ylabel("seconds (median)")
    ax.legend(fontsize=7)
    fig.tight_layout()
    fig.savefig(path)


def main(argv=None):
    main_over_pes(__doc__, "fork_server", run, table, plot, pes=[1, 2, 4, 16], repeats=4, argv=argv)


if __name__ == "__main__":
    main()
