"""Where PEs run: bound to cores (``bind_to='core'``, what Open MPI did by default for up to 2 PEs per job)
against unbound (the tool's default on one node since this change), side by side in one run.

- *Jobs side by side*: two one-PE jobs (two notebooks, two students) each running a CPU-bound cell at
  once, seconds per cell, against one such job alone. Bound, every job takes core 0.
- *Waits*: ``barrier_all`` and fcollect 8 B through the tool (``libraries_kernel``: each PE's median of up
  to 300 calls, the mean over the PEs) at 2 and 4 PEs, on OSHMEM and on Sandia OpenSHMEM when built
  (``SHMEM_NOTEBOOK_SOS_DIR`` picks the build: with shared heaps its waits poll and yield, and where they
  run matters most), each bound and unbound, interleaved.

``python bench/binding.py [--repeats 3]`` prints the tables and writes bench/binding.json and
bench/binding.png.
"""

import json
import os
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)

from libraries import measure_in_pes, not_built  # noqa: E402

import shmem_notebook  # noqa: E402
from common import median  # noqa: E402
from shmem_notebook.launcher.library import library as library_named  # noqa: E402

#: the CPU-bound cell of the jobs side by side (about 2 s of one core here)
SPIN = "x = 0\nfor i in range(20_000_000):\n    x += i\n"
#: one job of the pair: start, report ready, wait for the go, run SPIN, print its seconds
_ONE = """
import io, sys, time, shmem_notebook
with shmem_notebook.start(n=1, heap="8M", bind_to={bind!r}) as job:
    print("READY", flush=True)
    sys.stdin.readline()
    t = time.perf_counter()
    job.run({spin!r}, stdout=io.StringIO())
    print(time.perf_counter() - t, flush=True)
"""


def side_by_side(bind, jobs):
    """Seconds of SPIN in each of ``jobs`` one-PE jobs started with ``bind_to=bind``, run at once."""
    code = _ONE.format(bind=bind, spin=SPIN)
    procs = [
        subprocess.Popen([sys.executable, "-c", code], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
        for _ in range(jobs)
    ]
    try:
        for p in procs:
            while "READY" not in (line := p.stdout.readline()):
                if not line:
                    raise RuntimeError(f"a job ended before it was ready (exit {p.wait()})")
        for p in procs:
            p.stdin.write("go\n")
            p.stdin.flush()
        return [float(p.stdout.readline()) for p in procs]
    finally:
        for p in procs:
            p.stdin.close()
            p.wait(timeout=60)


def waits(library, n, bind):
    """barrier_all and fcollect 8 B (us, the mean over the PEs of each PE's median) in one job."""
    with shmem_notebook.Job(n, heap="16M", library=library, bind_to=bind) as job:
        job.start()
        got = measure_in_pes(job, sizes=[8], blocks=[8], iters=300, coll_iters=300, budget=1.0)["collectives"]
    return {"barrier_all": got["barrier_all"]["us"], "fcollect 8 B": got["fcollect/8"]["us"]}


def run(repeats=3, ns=(2, 4)):
    libraries = [name for name in ("oshmem", "sos") if not_built(name) is None]
    spin = {"alone": [], "core": [], "none": []}
    wait = {(lib, n, bind): [] for lib in libraries for n in ns for bind in ("core", "none")}
    for _ in range(repeats):
        spin["alone"] += side_by_side("none", 1)
        for bind in ("core", "none"):
            spin[bind] += side_by_side(bind, 2)
        for key in wait:
            wait[key].append(waits(*key))
    return {
        "measured": time.strftime("%Y-%m-%d %H:%M"),
        "load_average_1min": round(os.getloadavg()[0], 2),
        "cores": os.cpu_count(),
        "repeats": repeats,
        "sos_build": "shared heaps" if library_named("sos").shares_heaps else "libfabric's sockets",
        "side_by_side_s": {k: median(v) for k, v in spin.items()},
        "side_by_side_samples": spin,
        "waits_us": [
            {"library": lib, "pes": n, "bind_to": bind, **{k: median([s[k] for s in v]) for k in v[0]}}
            for (lib, n, bind), v in wait.items()
        ],
    }


def tables(out):
    s = out["side_by_side_s"]
    lines = [
        f"Two one-PE jobs at once, a CPU-bound cell each, seconds per cell (median of {out['repeats']} runs, "
        f"{out['cores']} cores, load {out['load_average_1min']}):",
        "",
        "| one job alone | two jobs, bound (bind_to='core') | two jobs, unbound (the default) | bound / unbound |",
        "| ---: | ---: | ---: | ---: |",
        f"| {s['alone']:.2f} | {s['core']:.2f} | {s['none']:.2f} | {s['core'] / s['none']:.2f}x |",
        "",
        f"Waits through the tool, us (SOS build: {out['sos_build']}):",
        "",
        "| library | PEs | barrier_all bound | unbound | fcollect 8 B bound | unbound |",
        "| --- | ---: | ---: | ---: | ---: | ---: |",
    ]
    rows = {(r["library"], r["pes"], r["bind_to"]): r for r in out["waits_us"]}
    for lib, n in dict.fromkeys((r["library"], r["pes"]) for r in out["waits_us"]):
        b, u = rows[(lib, n, "core")], rows[(lib, n, "none")]
        lines.append(
            f"| {lib} | {n} | {b['barrier_all']:.2f} | {u['barrier_all']:.2f} | "
            f"{b['fcollect 8 B']:.2f} | {u['fcollect 8 B']:.2f} |"
        )
    return "\n".join(lines)


def plot(out, path):
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, (left, right) = plt.subplots(1, 2, figsize=(10, 3.6))
    s = out["side_by_side_s"]
    left.bar(["one job alone", "two jobs, bound", "two jobs, unbound"], [s["alone"], s["core"], s["none"]])
    left.set_ylabel("seconds per cell")
    left.set_title("CPU-bound cells of one-PE jobs")
    labels = [f"{r['library']} {r['pes']} PEs\n{r['bind_to']}" for r in out["waits_us"]]
    right.bar(labels, [r["barrier_all"] for r in out["waits_us"]])
    right.set_yscale("log")
    right.set_ylabel("barrier_all, us")
    right.set_title("barrier_all through the tool")
    right.tick_params(axis="x", labelsize=7)
    fig.tight_layout()
    fig.savefig(path, dpi=100)


if __name__ == "__main__":
    import argparse

    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--repeats", type=int, default=3)
    args = parser.parse_args()
    result = run(args.repeats)
    print(tables(result))
    with open(os.path.join(HERE, "binding.json"), "w") as fh:
        json.dump(result, fh, indent=1)
    plot(result, os.path.join(HERE, "binding.png"))
