"""A class on one real JupyterHub: N students at once beside one student alone (issue 31; root only).

    .venv/bin/python bench/hub.py --update-docs        # make bench-hub: N = 1, 10, 20, 30 (about 15 min)
    .venv/bin/python bench/hub.py --ns 1,4 --out /tmp/b  # a quick look

Makes N system users (removed at the end), starts the hub of shmem_notebook/hub/jupyterhub_config.py
with a site policy (2 PEs, 16M heaps), then per round: every student at once logs in, starts their
server and runs notebook 01 with 2 PEs through the server's kernel API (shmem_notebook.hub.trial),
then their server is stopped. Each round is bounded (``--deadline``): a student not done by then
counts as a failure. Reports per N: time to ready (server asked for -> ``%shmem start`` done; and
the server alone), cell latency (the notebook's other cells), failures, and the server's CPU and
memory (system-wide, sampled every second) and /dev/shm at their peak. Writes OUT/hub.json and, with
``--update-docs``, the table in docs/classroom.md between its bench markers.
"""

import argparse
import asyncio
import json
import os
import secrets
import shutil
import socket
import statistics
import sys
import tempfile
import time

import psutil

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(HERE)
NOTEBOOK = os.path.join(REPO, "notebooks", "01-quickstart.ipynb")
DOC = os.path.join(REPO, "docs", "classroom.md")
MARKS = ("<!-- hub-bench:start -->", "<!-- hub-bench:end -->")
POLICY = {"max_pes": 2, "max_heap": "64M", "default_heap": "16M", "max_jobs": 1}


def _port():
    for _ in range(50):
        port = 20000 + secrets.randbelow(20000)
        try:
            for p in (port, port + 1, port + 2):
                with socket.socket() as s:
                    s.bind(("127.0.0.1", p))
            return port
        except OSError:
            continue
    raise RuntimeError("no three free ports in a row on 127.0.0.1")


class Sampler:
    """Every ``period`` seconds: the memory (RSS) of the class's processes (the students' and the hub's
    session), the CPU time they used so far (processes that ended keep their last reading), and
    /dev/shm's use; plus the whole machine's CPU use, which other work on the machine shares."""

    def __init__(self, uids, hub_pid, period=1.0):
        self.uids, self.hub_pid, self.period = uids, hub_pid, period
        self.memory, self.shm, self.machine, self.cpu_seconds, self.used = [], [], [], {}, []

    def processes(self):
        for proc in psutil.process_iter(["uids"]):
            try:
                if proc.info["uids"] and proc.info["uids"].real in self.uids or os.getsid(proc.pid) == self.hub_pid:
                    yield proc
            except (psutil.Error, OSError):
                continue

    def look(self):
        rss = 0
        for proc in self.processes():
            try:
                with proc.oneshot():
                    rss += proc.memory_info().rss
                    t = proc.cpu_times()
                    self.cpu_seconds[(proc.pid, proc.create_time())] = t.user + t.system
            except psutil.Error:
                continue
        self.memory.append(rss)
        vm = psutil.virtual_memory()
        self.used.append(vm.total - vm.available)  # the machine's, shared pages once (and others' work)
        self.shm.append(shutil.disk_usage("/dev/shm").used)

    async def run(self):
        psutil.cpu_percent(None)
        while True:
            await asyncio.sleep(self.period)
            self.machine.append(psutil.cpu_percent(None))
            self.look()

    def cpu(self):
        return sum(self.cpu_seconds.values())


async def student(hub, name, deadline):
    """One student's round: log in, server, notebook 01, server stopped; what it measured."""
    from shmem_notebook.hub.trial import lesson

    t0 = time.monotonic()
    out = {"name": name, "failure": None, "server": None, "ready": None, "cells": []}
    s = None
    try:
        s = await hub.login(name)
        out["server"] = await s.start_server(timeout=deadline)
        kernel = await s.kernel()
        for code in lesson(NOTEBOOK, 2):
            left = deadline - (time.monotonic() - t0)
            reply = await kernel.execute(code, timeout=max(left, 1.0))
            if reply.error:
                out["failure"] = reply.text[:400] + (" ... " + reply.text[-200:] if len(reply.text) > 600 else "")
                break
            if code.startswith("%shmem start"):
                out["ready"] = time.monotonic() - t0
            elif not code.startswith(("%load_ext", "%shmem stop")):
                out["cells"].append(reply.seconds)
        out["reconnects"] = kernel.reconnects
        await kernel.shutdown()
    except TimeoutError:
        out["failure"] = f"not done within {deadline:g} s"
    except Exception as e:  # a failure of this student, reported with the others
        out["failure"] = f"{type(e).__name__}: {e}"[:300]
    finally:
        if s is not None:
            try:
                await hub.api("DELETE", f"/users/{name}/server", timeout=120)
            except Exception as e:
                out["failure"] = out["failure"] or f"stopping the server: {e}"
    return out


async def server_stopped(hub, names, timeout=180.0):
    t0 = time.monotonic()
    while time.monotonic() - t0 < timeout:
        models = await asyncio.gather(*(hub.api("GET", f"/users/{n}") for n in names))
        if not any(m.get("servers") for m in models):
            return
        await asyncio.sleep(1)


async def round_of(hub, names, deadline):
    import pwd

    sampler = Sampler({pwd.getpwnam(n).pw_uid for n in names}, hub.process.pid)
    sampler.look()
    cpu_before = sampler.cpu()
    sampling = asyncio.ensure_future(sampler.run())
    t0 = time.monotonic()
    try:
        results = await asyncio.wait_for(asyncio.gather(*(student(hub, n, deadline) for n in names)), deadline + 300)
    finally:
        sampling.cancel()
    wall = time.monotonic() - t0
    await server_stopped(hub, names)
    ready = [r["ready"] for r in results if r["ready"] is not None]
    servers = [r["server"] for r in results if r["server"] is not None]
    cells = [c for r in results for c in r["cells"]]
    return {
        "n": len(names),
        "wall": wall,
        "failures": [r["failure"] for r in results if r["failure"]],
        "reconnects": sum(r.get("reconnects", 0) for r in results),  # websockets the server closed
        "server_median": statistics.median(servers) if servers else None,
        "ready_median": statistics.median(ready) if ready else None,
        "ready_max": max(ready) if ready else None,
        "cell_median": statistics.median(cells) if cells else None,
        "cell_max": max(cells) if cells else None,
        "cpu_cores": (sampler.cpu() - cpu_before) / wall,  # the class's CPU time over the round's wall time
        "machine_cpu": statistics.mean(sampler.machine) if sampler.machine else None,
        "memory_peak": max(sampler.memory) if sampler.memory else None,
        "used_peak": max(sampler.used) - sampler.used[0],  # above the round's start
        "shm_peak": max(sampler.shm) if sampler.shm else None,
    }


def table(rounds):
    alone = next((r for r in rounds if r["n"] == 1), None)

    def s(v):
        return "-" if v is None else f"{v:.1f} s"

    def ratio(r):
        if not alone or not alone["ready_median"] or r["ready_max"] is None:
            return "-"
        return f"{r['ready_max'] / alone['ready_median']:.1f}x"

    lines = [
        "| students | server ready (median) | job ready: median | max | slowest vs alone | cell: median | max "
        "| failures | class CPU (cores, mean) | memory used (peak) | class RSS sum (peak) | /dev/shm (peak) |",
        "|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for r in rounds:
        mib = "-" if r["memory_peak"] is None else f"{r['memory_peak'] / 2**30:.1f} GiB"
        used = f"{r['used_peak'] / 2**30:.1f} GiB"
        shm = "-" if r["shm_peak"] is None else f"{r['shm_peak'] / 2**20:.0f} MiB"
        cpu = f"{r['cpu_cores']:.2f}"
        cell_med = "-" if r["cell_median"] is None else f"{r['cell_median'] * 1000:.0f} ms"
        lines.append(
            f"| {r['n']} | {s(r['server_median'])} | {s(r['ready_median'])} | {s(r['ready_max'])} | {ratio(r)} "
            f"| {cell_med} | {s(r['cell_max'])} | {len(r['failures'])}/{r['n']} | {cpu} | {used} | {mib} | {shm} |"
        )
    return "\n".join(lines)


def update_docs(text):
    with open(DOC) as fh:
        doc = fh.read()
    start, end = doc.index(MARKS[0]) + len(MARKS[0]), doc.index(MARKS[1])
    with open(DOC, "w") as fh:
        fh.write(doc[:start] + "\n" + text + "\n" + doc[end:])


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--ns", default="1,10,20,30", help="class sizes, comma-separated (1: one student alone)")
    parser.add_argument("--deadline", type=float, default=600.0, help="seconds a round may take per student")
    parser.add_argument("--out", default=HERE, help="where hub.json goes")
    parser.add_argument("--update-docs", action="store_true", help="write the table into docs/classroom.md")
    args = parser.parse_args(argv)
    if os.geteuid() != 0:
        sys.exit("bench/hub.py makes system users and spawns as them: run it as root")
    from shmem_notebook.hub import trial

    ns = [int(n) for n in args.ns.split(",")]
    names = [f"shnbbench{i}" for i in range(max(ns))]
    trial.remove_students(names)
    state = tempfile.mkdtemp(prefix="shnb-hub-bench-")
    os.chmod(state, 0o755)
    site = os.path.join(state, "site.json")
    with open(site, "w") as fh:
        json.dump(POLICY, fh)
    os.chmod(site, 0o644)
    hub = trial.Hub(state, _port(), "bench-password", secrets.token_hex(16), trial.class_python(state), site)
    trial.make_students(names, [NOTEBOOK])
    loop = asyncio.new_event_loop()
    asyncio.set_event_loop(loop)
    rounds = []
    try:
        hub.start()
        loop.run_until_complete(hub.add_students(names))
        for n in ns:
            print(f"== {n} student(s) at once", flush=True)
            result = loop.run_until_complete(round_of(hub, names[:n], args.deadline))
            rounds.append(result)
            print(json.dumps(result), flush=True)
    finally:
        hub.stop()
        trial.remove_students(names)
        shutil.rmtree(state, ignore_errors=True)
    cpu = f"{psutil.cpu_count()} cores"
    memory = f"{psutil.virtual_memory().total / 2**30:.0f} GiB"
    text = table(rounds) + (
        f"\n\nMeasured {time.strftime('%Y-%m-%d')} on this {cpu}, {memory} machine, shared with other "
        "work while it ran (noisy): each student notebook 01 with 2 PEs and a 16M heap."
    )
    print(text)
    with open(os.path.join(args.out, "hub.json"), "w") as fh:
        json.dump({"rounds": rounds, "policy": POLICY}, fh, indent=1)
    if args.update_docs:
        update_docs(text)
    return 0 if not any(r["failures"] for r in rounds) else 1


if __name__ == "__main__":
    sys.exit(main())
