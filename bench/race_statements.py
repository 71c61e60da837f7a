"""Where a race-checked loop spends its time: the CPU of one statement, untraced, recorded in C and
recorded in Python, side by side in one job.

Each statement of the stencil of ``bench/races.py`` (and its whole iteration) runs ``iters`` times in
a cell's loop, timed by the PE's own ``time.thread_time`` (CPU, not wall: steady on a busy machine);
the three ways are run in turns in one job of ``n`` PEs (``--pes``, default 1: no PE waits for
another), ``repeats`` times, and the medians per statement are kept. The Python recording is the C
module switched off on the PEs for that cell, as ``tests/test_native_record.py`` does.

``python bench/race_statements.py [--quick] [--pes N] [--update-docs]`` prints the table, writes
bench/race_statements.json and bench/race_statements.png, and (``--update-docs``) the table of
docs/races.md.
"""

import argparse
import io
import json
import os
import statistics
import sys
import time

import shmem_notebook
from common import update_between
from shmem_notebook.words import plural

HERE = os.path.dirname(os.path.abspath(__file__))
#: name -> the statement (the loop's body); ``peer`` is the next PE, ``n`` the array's length
STATEMENTS = {
    "slice of a symmetric array": "v = u[1:2]",
    "stencil line": "new[1:-1] = 0.5 * (u[:-2] + u[2:])",
    "copy back": "u[1:-1] = new[1:-1]",
    "barrier_all": "shmem.barrier_all()",
    "put of one element": "shmem.put(u[n + 1:n + 2], u[1:2], peer)",
    "stencil iteration": "\n    ".join(
        [
            "shmem.put(u[n + 1:n + 2], u[1:2], peer)",
            "shmem.put(u[0:1], u[n:n + 1], peer)",
            "shmem.barrier_all()",
            "new[1:-1] = 0.5 * (u[:-2] + u[2:])",
            "shmem.barrier_all()",
            "u[1:-1] = new[1:-1]",
            "shmem.barrier_all()",
        ]
    ),
}
WAYS = ("untraced", "C", "Python")
_CELL = """import time as _t
n = 1000
u = shmem.zeros(n + 2, dtype=np.float64)
new = np.zeros(n + 2)
peer = (me + 1) % npes
shmem.barrier_all()
_t0 = _t.thread_time()
for _ in range({iters}):
    {statement}
_cpu = _t.thread_time() - _t0
shmem.barrier_all()
shmem.free(u)
print("CPU", _cpu)
"""
_BUILT = """import shmem_notebook.engine.record
from shmem_notebook.engine.record import in_c as _in_c
print("C recording:", "yes" if _in_c.module() is not None else "no")
"""
_SWITCH = """import shmem_notebook.engine.record.in_c as _in_c
if not hasattr(_in_c, "_bench_module"):
    _in_c._bench_module = _in_c.module
_in_c.module = _in_c._bench_module if {c} else (lambda: None)
"""


def _cpu_us(job, statement, way, iters):
    """The median over the PEs of one statement's CPU per iteration, in µs, recorded ``way``."""
    job.run(_SWITCH.format(c=way != "Python"), stdout=io.StringIO())
    out = io.StringIO()
    job.run(_CELL.format(iters=iters, statement=statement), stdout=out, race=way != "untraced", timeout=600)
    job.race_reset()
    if "in what was checked" in out.getvalue():  # the trace reached its cap: the rest went unrecorded, cheaply
        raise SystemExit(f"{statement!r} x {iters:,} filled the race trace: run fewer iterations")
    cpus = [float(line.split()[-1]) for line in out.getvalue().splitlines() if " CPU " in f" {line}"]
    return statistics.median(cpus) / iters * 1e6


def run(pes=1, iters=2_000, repeats=5):
    """``{statement: {way: median µs}}`` (see the module docstring). Collective jobs of ``pes`` PEs.
    ``iters`` stays under the trace's cap (the iteration makes 7 events): past it, nothing is
    recorded and the cost per iteration would fall."""
    samples = {name: {way: [] for way in WAYS} for name in STATEMENTS}
    with shmem_notebook.start(n=pes, heap="16M") as job:
        out = io.StringIO()
        job.run(_BUILT, stdout=out)
        if "C recording: no" in out.getvalue():
            raise SystemExit("the race recording's C module is not built on the PEs: both columns would be Python's")
        for statement in STATEMENTS.values():  # warm-up: both recordings built and loaded
            for way in WAYS:
                _cpu_us(job, statement, way, max(1, iters // 20))
        for _ in range(repeats):
            for name, statement in STATEMENTS.items():
                for way in WAYS:
                    samples[name][way].append(_cpu_us(job, statement, way, iters))
        job.run(_SWITCH.format(c=True), stdout=io.StringIO())
    return {name: {way: statistics.median(v) for way, v in ways.items()} for name, ways in samples.items()}


def table(result):
    """Markdown: per statement, its CPU untraced, recorded in C and in Python, and what each recording adds."""
    rows = [
        "| statement | untraced, µs | recorded in C | recorded in Python | C adds | Python adds |",
        "| --- | ---: | ---: | ---: | ---: | ---: |",
    ]
    for name, t in result.items():
        plain = t["untraced"]
        rows.append(
            f"| {name} | {plain:.2f} | {t['C']:.2f} ({t['C'] / plain:.2f}x) | {t['Python']:.2f} "
            f"({t['Python'] / plain:.2f}x) | {t['C'] - plain:.2f} | {t['Python'] - plain:.2f} |"
        )
    return "\n".join(rows)


def plot(result, path):
    """Bars per statement: what each recording adds to the untraced statement's CPU."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    names = list(result)
    fig, ax = plt.subplots(figsize=(8, 3.6))
    width = 0.38
    for k, (way, colour) in enumerate((("C", "tab:blue"), ("Python", "tab:orange"))):
        added = [result[n][way] - result[n]["untraced"] for n in names]
        rows = [i + (k - 0.5) * width for i in range(len(names))]
        ax.barh(rows, added, width, label=f"recorded in {way}", color=colour)
    ax.set_yticks(range(len(names)), names)
    ax.invert_yaxis()
    ax.set_xlabel("CPU the recording adds per execution, µs (thread_time, medians)")
    ax.legend(loc="upper right")
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--quick", action="store_true", help="a short run (smoke test): numbers mean nothing")
    parser.add_argument("--pes", type=int, default=1)
    parser.add_argument("--out", default=os.path.join(HERE, "race_statements.json"))
    parser.add_argument("--update-docs", action="store_true", help="write the table into docs/races.md")
    args = parser.parse_args(argv)
    params = dict(pes=args.pes, iters=200, repeats=1) if args.quick else dict(pes=args.pes)
    result = run(**params)
    text = table(result)
    print(text)
    load = os.getloadavg()[0]
    with open(args.out, "w") as fh:
        json.dump({"result": result, "params": params, "load_average_1min_end": load}, fh, indent=1)
    plot(result, os.path.splitext(args.out)[0] + ".png")
    if args.update_docs and not args.quick:
        stamp = time.strftime("%Y-%m-%d", time.localtime())
        note = f"({stamp}, {plural(params['pes'], 'PE')}, load average {load:.2f} at the end)"
        update_between(os.path.join(HERE, "..", "docs", "races.md"), "race-statements", f"{text}\n\n{note}")
    return result


if __name__ == "__main__":
    sys.exit(main() and 0)
