"""One PE raises, the others wait for it (issue 19): seconds from the exception to the error
shown in the notebook, and to the job ready for the next cell, at 2, 4, 8 and 16 PEs; and the CPU
the waiting PEs burn before and after they are paused.

Cases: ``barrier`` (the others wait in ``shmem.barrier_all()``: released, no restart),
``team_sync`` (they wait in an emulated sub-team's ``sync()``: released, no restart) and
``wait_until`` (a wait nobody will satisfy: the PEs are paused, the job restarts). The time of the
exception is PE 0's clock at the ``raise`` (same host). Prints a table; writes bench/stranded.json
and bench/stranded.png. ``python bench/stranded.py [--pes 2 4 8 16] [--repeats 5]``.
"""

import argparse
import io
import json
import os
import statistics
import time

import psutil

import shmem_notebook
from shmem_notebook import PEError

HERE = os.path.dirname(os.path.abspath(__file__))
CASES = {
    "barrier": "import time\nif me == 0:\n    raise ValueError(repr(time.time()))\nshmem.barrier_all()",
    "team_sync": "import time\nif me == 0:\n    raise ValueError(repr(time.time()))\nteam.sync()",
    "wait_until": "import time\nif me == 0:\n    raise ValueError(repr(time.time()))\n"
    "shmem.wait_until(W, shmem.CMP.EQ, 1)",
}
NEVER = "shmem.wait_until(W, shmem.CMP.EQ, 1)"  # what the CPU is measured on


def _quiet(job, code):
    return job.run(code, stdout=io.StringIO(), stderr=io.StringIO())


def one(job, code):
    """(seconds to the error shown, seconds to the job ready again, restarted?) of one stranded cell."""
    if job.state != "running":
        job.restart()
    _quiet(
        job,
        "W = shmem.zeros(1, dtype='int64')\nshmem.barrier_all()\n"
        "if 'team' not in globals():\n    team = shmem.TEAM_WORLD.split_strided(0, 1, npes)",
    )
    try:
        _quiet(job, code)
        raise RuntimeError("the cell did not raise")
    except PEError as exc:
        shown = time.time()
        raised = float(exc.errors[0][1])
    restarted = job.state != "running"
    if restarted:
        job.restart()
    _quiet(job, "pass")
    return shown - raised, time.time() - raised, restarted


def cpu_of_waiting_pes(job, seconds=1.0):
    """Mean CPU % of PEs 1..n-1 while they wait for good, before and after they are paused."""
    _quiet(job, "W = shmem.zeros(1, dtype='int64')\nshmem.barrier_all()")
    cell = job.send_cell(NEVER)
    procs = [psutil.Process(job.pes[pe]["pid"]) for pe in range(1, job.n)]

    def cpu():
        for p in procs:
            p.cpu_percent(None)
        time.sleep(seconds)
        return statistics.mean(p.cpu_percent(None) for p in procs)

    time.sleep(0.3)
    before = cpu()
    job.pause([pe for pe in range(job.n)])  # as the cell path does for PEs stranded for good
    after = cpu()
    assert cell.pending()
    job.restart()
    return before, after


def run(pes=(2, 4, 8, 16), repeats=5):
    rows = []
    for n in pes:
        with shmem_notebook.Job(n, heap="8M", timeout=120).start() as job:
            row = {"n": n}
            for case, code in CASES.items():
                samples = [one(job, code) for _ in range(repeats)]
                row[f"{case}_shown_s"] = statistics.median(s[0] for s in samples)
                row[f"{case}_ready_s"] = statistics.median(s[1] for s in samples)
                row[f"{case}_restarted"] = any(s[2] for s in samples)
            row["cpu_waiting_before_pct"], row["cpu_waiting_after_pct"] = cpu_of_waiting_pes(job)
            rows.append(row)
            print(_line(row), flush=True)
    return {"repeats": repeats, "rows": rows}


def _line(r):
    return (
        f"{r['n']:>4}  {r['barrier_shown_s']:>8.2f}  {r['barrier_ready_s']:>8.2f}  {r['team_sync_shown_s']:>8.2f}"
        f"  {r['team_sync_ready_s']:>8.2f}  {r['wait_until_shown_s']:>8.2f}"
        f"  {r['wait_until_ready_s']:>8.2f}  {r['cpu_waiting_before_pct']:>7.0f}%  {r['cpu_waiting_after_pct']:>6.0f}%"
    )


def plot(results, path):
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    rows = results["rows"]
    n = [r["n"] for r in rows]
    fig, ax = plt.subplots(figsize=(6, 3.5))
    for key, label in (
        ("barrier_shown_s", "barrier: error shown"),
        ("barrier_ready_s", "barrier: ready (no restart)"),
        ("team_sync_shown_s", "team sync: error shown"),
        ("team_sync_ready_s", "team sync: ready (no restart)"),
        ("wait_until_shown_s", "wait_until: error shown"),
        ("wait_until_ready_s", "wait_until: ready (restart)"),
    ):
        ax.plot(n, [r[key] for r in rows], marker="o", label=label)
    ax.axhline(2.0, color="grey", ls="--", lw=1, label="goal: error within 2 s")
    ax.set_xscale("log", base=2)
    ax.set_xticks(n, [str(x) for x in n])
    ax.set_xlabel("PEs")
    ax.set_ylabel("seconds after the exception (median)")
    ax.legend(fontsize=7)
    fig.tight_layout()
    fig.savefig(path, dpi=100)


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--pes", type=int, nargs="+", default=[2, 4, 8, 16])
    parser.add_argument("--repeats", type=int, default=5)
    args = parser.parse_args()
    heads = [
        ("PEs", ""),
        ("barrier", "shown s"),
        ("ready", "s"),
        ("team", "shown s"),
        ("ready", "s"),
        ("wait_un.", "shown s"),
        ("ready", "restart s"),
        ("CPU wait", "before"),
        ("paused", "after"),
    ]
    for row in zip(*heads):
        print("  ".join(f"{cell:>{4 if i == 0 else 6 if i == 8 else 8}}" for i, cell in enumerate(row)))
    results = run(args.pes, args.repeats)
    with open(os.path.join(HERE, "stranded.json"), "w") as f:
        json.dump(results, f, indent=1)
    plot(results, os.path.join(HERE, "stranded.png"))
    print(
        "goal: the error within 2 s of the exception at every N; medians of",
        args.repeats,
        "runs;",
        "wrote bench/stranded.json and bench/stranded.png",
    )
