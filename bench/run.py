"""Benchmarks of shmem_notebook, side by side with their baselines, in one run.

    .venv/bin/python bench/run.py --update-docs   # full run (make bench): 6-9 min on 2 cores (+ 2-3: libraries)
    .venv/bin/python bench/run.py --quick --out /tmp/b   # tiny sizes/repeats: the test suite's smoke run

Sections (one module each): startup (start to ready, restart, idle cost, a profile),
dispatch, datapath (put/get: cell vs plain script vs C vs memcpy), inspector, memory,
races (the race check's cost: the same cells with and without race=True), scale
(1 to 32 PEs: start, restart, dispatch, gather, output, each beside its baseline),
slurm (--slurm submission to ready on 1 and 2 nodes of a private Slurm), libraries (Open MPI's
OSHMEM against Sandia OpenSHMEM: start, put/get, collectives, team sync native vs emulated;
a library not built is reported as such), polite (waiting PEs' CPU and what polite waiting
costs, on and off: bench/polite.py), student (one 2-PE job to its first cell's answer: every
process's CPU, unique memory and count against a plain oshrun: bench/student_cost.py).
Prints Markdown tables, writes OUT/results.json and OUT/results.png (OUT defaults
to bench/). Medians over repeats; every ratio compares numbers measured in this run.

Flags:
  --quick           tiny sizes and repeats (seconds, not minutes); numbers are meaningless
  --only A,B        run only these sections, keep the others from OUT/results.json
  --replot          measure nothing: redo table, plot (and docs page) from OUT/results.json
  --update-docs     rewrite docs/benchmarks.md between <!-- bench:start --> and <!-- bench:end -->
                    (make bench passes it; not with --quick, whose numbers are meaningless)
  --out DIR         where results.json and results.png go (default: bench/)
  --experiments N   also time start-up with the candidate change (overlapped start), N times each
"""

import argparse
import datetime
import json
import os
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)

import common  # noqa: E402
import goals  # noqa: E402
import report  # noqa: E402

SECTIONS = [
    "startup",
    "dispatch",
    "datapath",
    "inspector",
    "memory",
    "races",
    "scale",
    "slurm",
    "libraries",
    "polite",
    "student",
]

FULL = {
    "startup": dict(ns=[1, 2, 4], repeats=3, idle_seconds=5.0, profile_repeats=0),
    "dispatch": dict(ns=[1, 2, 4], cells=50),
    "datapath": dict(rounds=5, repeats=5, scale=1.0),
    "inspector": dict(n=4, sizes=[1 << 10, 8 << 20, 64 << 20], repeats=3),
    "memory": dict(n=4, cells=100),
    "races": dict(
        n=2,
        puts=10_000,
        size=100_000,
        sweeps=10,
        repeats=9,
        loops=dict(
            stencil_iterations=200,
            stencil_pes=4,
            scattered=(20_000, 60_000),
            big=1_000_000,
            stencil_repeats=21,
            wait_rounds=(500, 2000),
        ),
    ),
    "scale": dict(ns=[1, 4, 8, 16, 32], repeats=3, cells=20),
    "slurm": dict(n=4, nodes=[1, 2], repeats=3),
    "libraries": dict(
        ns=[2, 4],
        repeats=3,
        sizes=[8, 64, 512, 4096, 32768, 262144, 1 << 20],
        blocks=[8, 1024, 65536],
        iters=1000,
        coll_iters=300,
        budget=1.0,
    ),
    "polite": dict(repeats=5, iters=2000, wait_s=1.0),
    "student": dict(repeats=5),
}
QUICK = {
    "startup": dict(
        ns=[2], repeats=1, idle_seconds=0.5, profile_repeats=0, variants=["ipp_local_tuned", "ipp_mpi_tuned"]
    ),
    "dispatch": dict(ns=[2], cells=3),
    "datapath": dict(rounds=1, repeats=1, scale=0.01),
    "inspector": dict(n=2, sizes=[1 << 10, 1 << 20], repeats=1),
    "memory": dict(n=2, cells=5),
    "races": dict(
        n=2,
        puts=200,
        size=1000,
        sweeps=2,
        repeats=1,
        loops=dict(
            stencil_iterations=5,
            stencil_pes=2,
            scattered=(500,),
            big=0,
            repeats=1,
            stencil_repeats=1,
            wait_rounds=(20,),
        ),
    ),
    "scale": dict(ns=[2], repeats=1, cells=2, big_gather=1 << 20, curve_gather=1 << 16, detail_n=2),
    "slurm": dict(n=2, nodes=[1], repeats=1),
    "libraries": dict(ns=[2], repeats=1, sizes=[8, 1 << 20], blocks=[8], iters=20, coll_iters=10, budget=0.2),
    "polite": dict(repeats=1, iters=200, wait_s=0.3, libraries=("oshmem",)),
    "student": dict(repeats=1),
}


def measure(name, params):
    module = __import__({"student": "student_cost"}.get(name, name))
    try:
        return module.run(**params)
    finally:
        left = common.reap_leftovers()
        if left:
            print(f"  ({name}: ended {left} leftover processes)", file=sys.stderr)


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--quick", action="store_true")
    parser.add_argument("--only", default=",".join(SECTIONS))
    parser.add_argument("--replot", action="store_true")
    parser.add_argument("--update-docs", action="store_true")
    parser.add_argument("--out", default=HERE)
    parser.add_argument("--experiments", type=int, default=0, metavar="N")
    args = parser.parse_args(argv)
    os.makedirs(args.out, exist_ok=True)
    json_path, png_path = os.path.join(args.out, "results.json"), os.path.join(args.out, "results.png")

    if args.replot:
        with open(json_path) as fh:
            results = json.load(fh)
    else:
        only = [s for s in args.only.split(",") if s]
        unknown = set(only) - set(SECTIONS)
        if unknown:
            parser.error(f"unknown sections {', '.join(sorted(unknown))}; choose from {', '.join(SECTIONS)}")
        results = {}
        if set(only) != set(SECTIONS) and os.path.exists(json_path):
            with open(json_path) as fh:
                results = json.load(fh)
        params = QUICK if args.quick else FULL
        params["startup"]["profile_repeats"] = args.experiments
        started = time.perf_counter()
        machine = common.machine()
        for name in SECTIONS:
            if name in only:
                print(f"== {name} ...", file=sys.stderr, flush=True)
                t = time.perf_counter()
                results[name] = measure(name, params[name])
                print(f"   {time.perf_counter() - t:.0f} s", file=sys.stderr, flush=True)
        results["meta"] = {
            "date": datetime.datetime.now().strftime("%Y-%m-%d %H:%M"),
            "machine": machine,
            "quick": args.quick,
            "params": params,
            "sections": only if not results.get("meta") else sorted(set(only) | set(results["meta"]["sections"])),
            "seconds": time.perf_counter() - started,
            "only": only if set(only) != set(SECTIONS) else None,
            "load_average_1min_end": round(os.getloadavg()[0], 2),
        }
        results["goals"] = goals.evaluate(results)
        with open(json_path, "w") as fh:
            json.dump(results, fh, indent=1)
    results["goals"] = goals.evaluate(results)
    print(report.markdown(results))
    report.plot(results, png_path)
    print(f"wrote {json_path} and {png_path}")
    if args.update_docs and results["meta"].get("quick"):
        print("docs/benchmarks.md left as it was: --quick numbers are meaningless")
    elif args.update_docs:
        page = os.path.join(os.path.dirname(HERE), "docs", "benchmarks.md")
        report.update_page(page, report.page_block(results, os.path.relpath(png_path, os.path.dirname(page))))
        print(f"updated {os.path.relpath(page, os.path.dirname(HERE))}")


if __name__ == "__main__":
    main()
