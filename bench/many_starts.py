"""Many jobs starting at once on this host, without a hub: where a class's start goes.

``python bench/many_starts.py --k 1,10`` starts K processes at once, each a student: ``start(2)``
with a 16M heap, one cell, ``stop``. Per K: the slowest and median time to ready, the CPU each
student's processes used (itself and its reaped descendants: controller, watchdog, oshrun, PEs),
and the machine's CPU over the round against what its cores could give. With the breakdown of one
start by process (``--breakdown``): the PEs, the client, the controller, the watchdog.
"""

import argparse
import json
import os
import subprocess
import sys
import time

import psutil

STUDENT = """
import json, resource, time
t0 = time.perf_counter()
import shmem_notebook
job = shmem_notebook.start(2, heap="16M")
ready = time.perf_counter() - t0
job.run("pass")
job.stop()
cpu = sum(getattr(resource.getrusage(who), f) for who in (resource.RUSAGE_SELF, resource.RUSAGE_CHILDREN)
          for f in ("ru_utime", "ru_stime"))
print(json.dumps({"ready": ready, "cpu": cpu}))
"""

BREAKDOWN = """
import json, psutil, shmem_notebook
me = psutil.Process()
job = shmem_notebook.start(2, heap="16M")
parts = {"client": sum(me.cpu_times()[:2])}
for p in me.children(recursive=True):
    try:
        line, cpu = " ".join(p.cmdline()), sum(p.cpu_times()[:2])
    except psutil.Error:
        continue
    kind = ("PEs" if "shmem_notebook.engine" in line else "controller" if "controller" in line
            else "watchdog" if "watchdog" in line else "oshrun")
    parts[kind] = parts.get(kind, 0.0) + cpu
job.stop()
print(json.dumps(parts))
"""


def _machine_cpu_seconds():
    return sum(psutil.cpu_times()[:3])  # user, nice, system


def round_of(k):
    """K students at once: their ready times and CPU, the machine's CPU and the wall time."""
    cpu0, t0 = _machine_cpu_seconds(), time.perf_counter()
    procs = [
        subprocess.Popen([sys.executable, "-c", STUDENT], stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
        for _ in range(k)
    ]
    students = []
    for proc in procs:
        out, _ = proc.communicate(timeout=600)
        lines = [line for line in out.splitlines() if line.startswith("{")]
        students.append(json.loads(lines[-1]) if proc.returncode == 0 and lines else None)
    wall, cpu = time.perf_counter() - t0, _machine_cpu_seconds() - cpu0
    done = [s for s in students if s]
    ready = sorted(s["ready"] for s in done)
    return {
        "k": k,
        "failures": k - len(done),
        "ready_median": ready[len(ready) // 2] if ready else None,
        "ready_max": ready[-1] if ready else None,
        "cpu_per_student": sum(s["cpu"] for s in done) / max(1, len(done)),
        "machine_cpu": cpu,
        "machine_cpu_available": wall * os.cpu_count(),
        "wall": wall,
        "load1": os.getloadavg()[0],
    }


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--k", default="1,10", help="students at once, comma-separated (default 1,10)")
    parser.add_argument("--breakdown", type=int, default=2, help="single starts broken down by process")
    args = parser.parse_args(argv)
    for _ in range(args.breakdown):
        out = subprocess.run([sys.executable, "-c", BREAKDOWN], capture_output=True, text=True, timeout=300).stdout
        parts = json.loads(out.splitlines()[-1])
        print("one start, CPU s by process: " + ", ".join(f"{k} {v:.2f}" for k, v in parts.items()), end="")
        print(f"; total {sum(parts.values()):.2f}")
    alone = None
    for k in (int(x) for x in args.k.split(",")):
        r = round_of(k)
        alone = alone or (r["ready_max"] if k == 1 else None)
        versus = f" ({r['ready_max'] / alone:.1f}x one alone)" if alone and k > 1 else ""
        print(
            f"K={k}: ready median {r['ready_median']:.1f} s, slowest {r['ready_max']:.1f} s{versus}; failures "
            f"{r['failures']}; CPU per student {r['cpu_per_student']:.2f} s; machine CPU {r['machine_cpu']:.0f} s "
            f"of {r['machine_cpu_available']:.0f} s available in {r['wall']:.1f} s; load {r['load1']:.1f}"
        )


if __name__ == "__main__":
    main()
