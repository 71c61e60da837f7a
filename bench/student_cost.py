"""What one student's job costs: every process of a 2-PE job from ``start()`` to its first cell's answer.

    .venv/bin/python bench/student_cost.py --repeats 3 [--json OUT.json] [--library oshmem] [--before CHECKOUT]

(also the section ``student`` of ``bench/run.py``, whose goals table carries issue 46's three rows)

Per repeat, interleaved: (1) a fresh client process imports shmem_notebook, starts a 2-PE job (8M heap)
and runs one cell (``job.run("pass")``); at the cell's answer it sums, over itself and every process of
the job (its descendants: watchdog, controller and what it forked, oshrun, PEs, governor), the CPU
seconds (psutil: user + system, reaped children included) and the unique memory (USS), and counts the
processes (the client not counted). The client's CPU counts from just before ``import shmem_notebook``,
with what a notebook kernel has loaded already (``ipykernel``: IPython, zmq, tornado, jupyter_client):
what the tool costs a notebook kernel. (2) The floor: a plain ``oshrun -n 2`` of two Python PEs that
``import shmem4py`` (``shmem_init``) with the launcher's environment, summed the same way once both
PEs answered. Prints one row per measure (medians) and the goals of issue 46. ``--before CHECKOUT``
also measures another checkout's shmem_notebook (its PYTHONPATH), interleaved, against the same floors.
"""

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time

import psutil

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)

#: issue 46's goals for one 2-PE job to its first cell's answer
GOALS = {"cpu": 1.5, "processes": 6, "uss_mib": 120}

CLIENT = r"""
import json, os, sys, time, psutil
me = psutil.Process()
import ipykernel.ipkernel  # a notebook kernel's own modules (IPython, zmq, tornado, jupyter_client) are loaded
kernel_cpu = sum(me.cpu_times()[:4])
cpu0 = sum(me.cpu_times()[:4])
t0 = time.perf_counter()
import shmem_notebook
from shmem_notebook.launcher.stub_program import is_stub
imported = time.perf_counter()
cpu_import = sum(me.cpu_times()[:4]) - cpu0
job = shmem_notebook.start(2, heap="8M", library=sys.argv[1])
started = time.perf_counter()
job.run("pass")
answered = time.perf_counter()
t = me.cpu_times()
parts = {"client": sum(t[:4]) - cpu0}
procs, uss, rss = {}, {}, {}
LAUNCHERS = ("oshrun", "orterun", "mpirun", "mpiexec", "prterun", "hydra_pmi_proxy", "mpiexec.hydra")
for p in me.children(recursive=True):
    try:
        line, times, mem = " ".join(p.cmdline()), p.cpu_times(), p.memory_full_info()
    except psutil.Error:
        continue
    kind = ("oshrun" if p.name() in LAUNCHERS
            else "fork server" if "engine.forkserver" in line and p.ppid() == os.getpid()
            else "stub" if is_stub(line.split())
            else "PE" if "shmem_notebook.engine" in line else "controller" if "launcher.controller" in line
            else "watchdog" if "watchdog" in line else "governor" if "governor" in line
            else "oshrun" if "oshrun" in line or "prterun" in line or "mpiexec" in line or "hydra" in line
            else "other: " + line[:60])
    parts[kind] = parts.get(kind, 0.0) + sum(times[:4])
    procs[kind] = procs.get(kind, 0) + 1
    uss[kind] = uss.get(kind, 0) + mem.uss
    rss[kind] = rss.get(kind, 0) + mem.rss
client_mem = me.memory_full_info()
where = None
if os.environ.get("SHOW_WHERE"):
    where = job.run("import shmem_notebook; print(shmem_notebook.__file__)").stdout
job.stop()
print(json.dumps({"cpu": parts, "processes": procs, "uss": uss, "rss": rss, "client_uss": client_mem.uss,
                  "import_s": imported - t0, "import_cpu": cpu_import, "kernel_cpu": kernel_cpu,
                  "start_s": started - imported,
                  "first_cell_s": answered - started, "to_answer_s": answered - imported,
                  "here": shmem_notebook.__file__, "where": str(where)}))
"""

PE = r"""
import os, sys, time
import shmem4py.shmem as shmem
open(os.path.join(sys.argv[1], f"ready{shmem.my_pe()}"), "w").close()
while not os.path.exists(os.path.join(sys.argv[1], "go")):
    time.sleep(0.01)
"""


def job_row(library, tree=None):
    """One job's row; ``tree``: the checkout whose shmem_notebook the client and the job run (PYTHONPATH)."""
    env = {**os.environ, "PYTHONPATH": tree} if tree else None
    out = subprocess.run(
        [sys.executable, "-c", CLIENT, library],
        capture_output=True,
        text=True,
        timeout=300,
        start_new_session=True,
        env=env,
        cwd=tree,  # python -c and the PEs' python -m look in the working directory first
    )
    if out.returncode:
        raise RuntimeError(f"the client failed:\n{out.stderr[-3000:]}")
    return json.loads(out.stdout.strip().splitlines()[-1])


def floor_row(library):
    """A plain oshrun of 2 Python PEs importing shmem4py, summed like a job once both answered."""
    from common import launcher_environment
    from shmem_notebook.launcher.library import library as library_named

    lib = library_named(library)
    env = {**os.environ, **launcher_environment(heap="8M")}
    env.update({k: v for k, v in lib.env.items() if k not in os.environ})
    with tempfile.TemporaryDirectory() as folder:
        cmd = lib.command(2, env, False, None) + [lib.python, "-c", PE, folder]
        t0 = time.perf_counter()
        proc = psutil.Popen(cmd, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, start_new_session=True)
        try:
            while not all(os.path.exists(os.path.join(folder, f"ready{pe}")) for pe in range(2)):
                if proc.poll() is not None:
                    raise RuntimeError(f"the floor's oshrun ended: {proc.stderr.read()[-2000:]}")
                time.sleep(0.005)
            ready = time.perf_counter() - t0
            cpu, uss, count = 0.0, 0, 0
            for p in [proc, *proc.children(recursive=True)]:
                try:
                    cpu += sum(p.cpu_times()[:4])
                    uss += p.memory_full_info().uss
                    count += 1
                except psutil.Error:
                    pass
            open(os.path.join(folder, "go"), "w").close()
            proc.wait(60)
        finally:
            if proc.poll() is None:
                os.killpg(proc.pid, 9)
                proc.wait()
    return {"cpu": cpu, "uss": uss, "processes": count, "ready_s": ready}


def summary(rows, floors):
    med = statistics.median
    total = [sum(r["cpu"].values()) for r in rows]
    uss = [sum(r["uss"].values()) / 2**20 for r in rows]
    procs = [sum(r["processes"].values()) for r in rows]
    kinds = sorted({k for r in rows for k in r["cpu"]})
    return {
        "cpu": med(total),
        "cpu_all": total,
        "uss_mib": med(uss),
        "processes": med(procs),
        "by_kind_cpu": {k: med([r["cpu"].get(k, 0.0) for r in rows]) for k in kinds},
        "by_kind_uss_mib": {k: med([r["uss"].get(k, 0) / 2**20 for r in rows]) for k in kinds if k != "client"},
        "by_kind_processes": {k: med([r["processes"].get(k, 0) for r in rows]) for k in kinds if k != "client"},
        "client_uss_mib": med([r["client_uss"] / 2**20 for r in rows]),
        "import_cpu": med([r["import_cpu"] for r in rows]),
        "to_answer_s": med([r["to_answer_s"] for r in rows]),
        "start_s": med([r["start_s"] for r in rows]),
        "floor_cpu": med([f["cpu"] for f in floors]),
        "floor_uss_mib": med([f["uss"] / 2**20 for f in floors]),
        "floor_processes": med([f["processes"] for f in floors]),
        "floor_ready_s": med([f["ready_s"] for f in floors]),
        "load": os.getloadavg()[0],
    }


def table(s):
    lines = [
        "| one 2-PE job, start() to the first cell's answer | job | plain oshrun | job / oshrun | goal |",
        "| --- | --- | --- | --- | --- |",
        f"| CPU seconds, every process (client included) | {s['cpu']:.2f} | {s['floor_cpu']:.2f} | "
        f"{s['cpu'] / s['floor_cpu']:.1f}x | <= {GOALS['cpu']} ({'met' if s['cpu'] <= GOALS['cpu'] else 'MISSED'}) |",
        f"| processes (the client not counted) | {s['processes']:g} | {s['floor_processes']:g} | | "
        f"<= {GOALS['processes']} ({'met' if s['processes'] <= GOALS['processes'] else 'MISSED'}) |",
        f"| unique memory (USS), MiB (the client not counted) | {s['uss_mib']:.0f} | {s['floor_uss_mib']:.0f} | "
        f"{s['uss_mib'] / s['floor_uss_mib']:.1f}x | <= {GOALS['uss_mib']} "
        f"({'met' if s['uss_mib'] <= GOALS['uss_mib'] else 'MISSED'}) |",
        f"| wall: start() to the first cell's answer, s | {s['to_answer_s']:.2f} | {s['floor_ready_s']:.2f} | "
        f"{s['to_answer_s'] / s['floor_ready_s']:.1f}x | |",
    ]
    by = ", ".join(f"{k} {v:.2f}" for k, v in s["by_kind_cpu"].items())
    mem = ", ".join(f"{k} {v:.0f}" for k, v in s["by_kind_uss_mib"].items())
    n = ", ".join(f"{k} {v:g}" for k, v in s["by_kind_processes"].items())
    lines.append("")
    lines.append(f"CPU s by process (medians): {by} (the client's import of shmem_notebook: {s['import_cpu']:.2f}).")
    lines.append(f"USS MiB: {mem}; the client {s['client_uss_mib']:.0f}. Processes: {n}.")
    lines.append(f"Total CPU per repeat: {', '.join(f'{c:.2f}' for c in s['cpu_all'])}; load average {s['load']:.1f}.")
    return "\n".join(lines)


def run(repeats=3, library="oshmem"):
    """The section of ``bench/run.py``: ``repeats`` jobs and floors, interleaved; their summary."""
    rows, floors = [], []
    for _ in range(repeats):
        rows.append(job_row(library))
        floors.append(floor_row(library))
    return {"summary": summary(rows, floors), "library": library, "rows": rows, "floors": floors}


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--library", default="oshmem")
    ap.add_argument("--json", help="write the rows and the summary here")
    ap.add_argument("--before", metavar="CHECKOUT", help="also measure this checkout's shmem_notebook, interleaved")
    args = ap.parse_args(argv)
    rows, floors, before = [], [], []
    for _ in range(args.repeats):
        if args.before:
            before.append(job_row(args.library, args.before))
        rows.append(job_row(args.library))
        floors.append(floor_row(args.library))
    s = summary(rows, floors)
    if before:
        b = summary(before, floors)
        print(f"before ({before[0]['here']}):")
        print(table(b))
        print()
    print(f"this checkout ({rows[0]['here']}):")
    print(table(s))
    if args.json:
        with open(args.json, "w") as f:
            out = {"rows": rows, "floors": floors, "summary": s}
            if before:
                out.update(before=before, before_summary=summary(before, floors))
            json.dump(out, f, indent=1)


if __name__ == "__main__":
    main()
