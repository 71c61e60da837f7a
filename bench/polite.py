"""Polite waiting (issue 29): what the governor costs and what it saves, side by side with it off.

Two jobs of 2 PEs per library that polls (Open MPI's OSHMEM; OSHMPI where it is built), one with
polite waiting (``rc.polite_ms = 10``, the default), one without (``SHMEM_NOTEBOOK_POLITE_MS=0``:
no board on the PEs, no governor), measured in turns, ``repeats`` times:

- ``barrier_us``: one ``barrier_all`` in a loop of ``10 * iters`` (both PEs arrive together: never governed);
- ``barrier_own_us``: the same with shmem4py's own ``barrier_all`` (what the board wraps), in the same
  cell, the two loops in turns 5 times (medians): the board's cost without the noise between two jobs;
- ``wait_us``: one ``wait_until`` already satisfied, in a loop of ``iters``;
- ``cpu_share``: the share of a core PE 1 uses while it waits ``wait_s`` seconds in ``barrier_all``
  for PE 0, which sleeps (from the PE's own /proc counters);
- ``late_ms``: how long after PE 0 arrived PE 1 left that barrier (one host: one clock).

Medians; ``python bench/polite.py [--quick] [--update-docs]`` prints the table, writes
bench/polite.json and (``--update-docs``) the table of docs/waiting.md.
"""

import argparse
import ast
import io
import json
import os
import statistics
import sys
import time

import psutil

import shmem_notebook
from common import update_between
from shmem_notebook import rc

HERE = os.path.dirname(os.path.abspath(__file__))
MEASURES = ("barrier_us", "barrier_own_us", "wait_us", "cpu_share", "late_ms")
_LOOP = (
    "import time\nt = time.perf_counter()\nfor _ in range({iters}):\n    {call}\n"
    "(time.perf_counter() - t) / {iters} * 1e6"
)
_BARRIERS = (
    "import statistics, time\n"
    "calls = {{'noted': shmem.barrier_all, 'own': getattr(shmem.barrier_all, '__wrapped__', shmem.barrier_all)}}\n"
    "took = {{name: [] for name in calls}}\n"
    "for _ in range(5):\n"
    "    for name, barrier in calls.items():\n"
    "        t = time.perf_counter()\n"
    "        for _ in range({iters}):\n"
    "            barrier()\n"
    "        took[name].append((time.perf_counter() - t) / {iters} * 1e6)\n"
    "statistics.median(took['noted']), statistics.median(took['own'])"
)
_WAIT = (
    "import time\nif me == 0:\n    time.sleep({wait_s})\n    arrived = time.monotonic()\nshmem.barrier_all()\n"
    "left = time.monotonic()\nshmem.barrier_all()\narrived if me == 0 else left"
)


def _job(library, polite):
    """A started job of 2 PEs; without ``polite`` its PEs keep no wait board."""
    saved = os.environ.get("SHMEM_NOTEBOOK_POLITE_MS")
    os.environ["SHMEM_NOTEBOOK_POLITE_MS"] = "10" if polite else "0"
    try:
        return shmem_notebook.Job(2, heap="16M", library=library).start()
    finally:
        if saved is None:
            os.environ.pop("SHMEM_NOTEBOOK_POLITE_MS", None)
        else:
            os.environ["SHMEM_NOTEBOOK_POLITE_MS"] = saved


def _value(result, pe):
    return float(result.results[pe])


def _once(job, polite, iters, wait_s):
    rc.polite_ms = 10 if polite else 0
    quiet = dict(stdout=io.StringIO(), stderr=io.StringIO(), timeout=120)
    noted, own = ast.literal_eval(job.run(_BARRIERS.format(iters=10 * iters), **quiet).results[1])
    row = {"barrier_us": noted, "barrier_own_us": own}
    row |= {
        "wait_us": _value(
            job.run(
                _LOOP.format(iters=iters, call="shmem.wait_until(F, shmem.CMP.GE, 0)"), arrays=["F=int64[1]"], **quiet
            ),
            1,
        ),
    }
    pe1 = psutil.Process(job.pes[1]["pid"])
    before = sum(pe1.cpu_times()[:2])
    started = time.monotonic()
    result = job.run(_WAIT.format(wait_s=wait_s), **quiet)
    row["cpu_share"] = (sum(pe1.cpu_times()[:2]) - before) / (time.monotonic() - started)
    row["late_ms"] = (_value(result, 1) - _value(result, 0)) * 1e3
    return row


def run(repeats=5, iters=2000, wait_s=1.0, libraries=("oshmem", "oshmpi")):
    """``{library: {"on": {measure: median}, "off": {...}}}`` for each library that polls and is built."""
    from shmem_notebook.launcher.library import known

    out = {}
    for name in libraries:
        library = known().get(name)
        if library is None or not library.polls:
            continue
        try:
            library.check()
        except shmem_notebook.ShmemNotebookError as exc:
            out[name] = {"skipped": str(exc)}
            continue
        rows = {"on": [], "off": []}
        jobs = {"on": _job(name, True), "off": _job(name, False)}
        try:
            for _ in range(repeats):
                for mode, job in jobs.items():  # in turns: the machine's load falls on both alike
                    rows[mode].append(_once(job, mode == "on", iters, wait_s))
        finally:
            for job in jobs.values():
                job.stop()
            rc.polite_ms = 10
        out[name] = {mode: {m: statistics.median(r[m] for r in rs) for m in MEASURES} for mode, rs in rows.items()}
    return out


def table(result):
    """Markdown: each measure with polite waiting on and off, and their ratio."""
    lines = ["| library | measure | polite (on) | off | on / off |", "| --- | --- | --- | --- | --- |"]
    for name, modes in result.items():
        if "skipped" in modes:
            lines.append(f"| {name} | not measured: {modes['skipped']} | | | |")
            continue
        for m in MEASURES:
            on, off = modes["on"][m], modes["off"][m]
            fmt = "{:.0%}" if m == "cpu_share" else "{:.2f}"
            ratio = f"{on / off:.2f}x" if off else "-"
            lines.append(f"| {name} | {m} | {fmt.format(on)} | {fmt.format(off)} | {ratio} |")
        noted, own = modes["on"]["barrier_us"], modes["on"]["barrier_own_us"]
        lines.append(f"| {name} | barrier_us / barrier_own_us, one job | {noted / own:.2f}x | | |")
    return "\n".join(lines)


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--quick", action="store_true", help="1 repeat, 200 iterations, 0.3 s waits")
    parser.add_argument("--out", default=os.path.join(HERE, "polite.json"))
    parser.add_argument("--update-docs", action="store_true", help="write the table into docs/waiting.md")
    args = parser.parse_args(argv)
    params = dict(repeats=1, iters=200, wait_s=0.3) if args.quick else {}
    result = run(**params)
    load = os.getloadavg()[0]
    print(table(result))
    print(f"(load average at the end: {load:.2f})", file=sys.stderr)
    with open(args.out, "w") as fh:
        json.dump({"result": result, "params": params, "load_average_1min_end": load}, fh, indent=1)
    if args.update_docs and not args.quick:
        stamp = f"{time.strftime('%Y-%m-%d')}, load average {load:.2f} at the end"
        update_between(os.path.join(HERE, "..", "docs", "waiting.md"), "polite", f"{table(result)}\n\n({stamp})")


if __name__ == "__main__":
    main()
