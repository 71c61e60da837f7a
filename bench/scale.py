"""Scale: what a job costs from 1 to 32 PEs, each beside its baseline measured in the same run.

Per N (interleaved, medians): ``%shmem start``, ``%shmem restart`` on a healthy job and after a
PE crashed, the same two restarts of a job started with ``--spare`` (once its spare PEs wait), the
bare ``oshrun`` floor (Python + ``shmem_init`` + a barrier) and ipyparallel's MPI
launcher (same heartbeat); the CPU a PE used to ready against the floor's CPU per PE; a no-op
``%%pxshmem`` against ``DirectView.execute`` on the same engines; ``%shmem gather`` of a 4 MiB array
per PE against ``DirectView.pull`` of the same array.
At 4 PEs also: ``%shmem gather`` of 64 MiB per PE against NumPy's copy bandwidth, and a cell
printing 2,000 lines per PE under ``%%pxshmem`` and ``%%px`` (5 each, interleaved; every line
checked, in order per PE).
"""

import contextlib
import io
import re
import resource
import time

import numpy as np
import psutil

from common import median, run_cell, shell
from startup import floor, ipp_start, ipp_stop

CRASH = "%%pxshmem\nimport os\nif me == 0:\n    os._exit(3)\nshmem.barrier_all()"
LINES = 2000
PRINT = f"for i in range({LINES}):\n    print('line', me, i)"
PRINT_REPEATS = 5


def _job():
    from shmem_notebook import current_job

    return current_job()


def _timed_cell(code, out=None):
    """Seconds of a cell run in the shell; what it prints goes to ``out`` (else nowhere)."""
    start = time.perf_counter()
    run_cell(code, out)
    return time.perf_counter() - start


def _pe_cpu(job):
    """Median CPU seconds (user + system) a PE of ``job`` used so far."""
    return median([sum(psutil.Process(info["pid"]).cpu_times()[:2]) for info in job.pes.values()])


def _children_cpu():
    """CPU seconds of every child process waited for so far (oshrun and its PEs included)."""
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def _crash_then_restart():
    with contextlib.suppress(Exception):
        run_cell(CRASH)  # PEDiedError
    return _timed_cell("%shmem restart")


def _spare_restarts(n):
    """Seconds of ``%shmem restart`` of a job started with ``--spare``, healthy and after a crash, each
    once its spare PEs wait."""
    from shmem_notebook.job.processes import wait

    run_cell(f"%shmem start -n {n} --heap 32M --spare")
    try:
        times = []
        for restart in (lambda: _timed_cell("%shmem restart"), _crash_then_restart):
            if not wait(lambda: _job().spares.waiting() == n, 120):
                raise RuntimeError(f"the spare PEs did not all wait within 120 s ({_job().spares.waiting()} of {n})")
            times.append(restart())
        return times
    finally:
        run_cell("%shmem stop")


def _dispatch(job, cells):
    view = job._client[list(range(job.n))]
    view.block = True
    ways = {"pxshmem": lambda: run_cell("%%pxshmem\npass"), "view_execute": lambda: view.execute("pass")}
    samples = {k: [] for k in ways}
    for fn in ways.values():
        fn()
    for _ in range(cells):
        for k, fn in ways.items():
            t = time.perf_counter()
            fn()
            samples[k].append(time.perf_counter() - t)
    return {f"{k}_ms": median(v) * 1e3 for k, v in samples.items()}


def _gather(job, nbytes, repeats, routes=("shm",), fresh=None):
    """Seconds of job.gather (per rc.gather route in ``routes``: (seconds, route taken)) and of
    view.pull + np.stack, same array. With a list ``fresh``: after each gather of the first route,
    the seconds of ``ndarray.copy()`` of as many bytes into new memory, appended to it.

    Each route's gathers, then the pulls, run in a row, each a fresh result: on this machine (a
    virtual machine) new memory is up to ten times slower to touch the first times after other
    large allocations were freed (measured: 0.45 against 6 GB/s, the same copy), so a gather taken
    between pulls of hundreds of MiB, or a copy timed minutes apart, compares other memory."""
    from shmem_notebook import rc

    n = nbytes // 8
    job.alloc(f"G=float64[{n}]")
    job.run("G[:] = me", stdout=io.StringIO())
    view = job._client[list(range(job.n))]
    ours, pull = {route: [] for route in routes}, []
    taken = {}
    source = np.ones(job.n * n) if fresh is not None else None
    try:
        for route in routes:
            rc.gather = route
            for _ in range(repeats):
                t = time.perf_counter()
                g = job.gather("G")
                ours[route].append(time.perf_counter() - t)
                taken[route] = job.last_gather
                assert g.shape == (job.n, n) and (g[:, 0] == np.arange(job.n)).all()
                del g
                if fresh is not None and route == routes[0]:
                    t = time.perf_counter()
                    copied = source.copy()
                    fresh.append(time.perf_counter() - t)
                    del copied
        for _ in range(repeats):
            t = time.perf_counter()
            p = np.stack(view.pull("G", block=True))
            pull.append(time.perf_counter() - t)
            assert p.shape == (job.n, n) and (p[:, 0] == np.arange(job.n)).all()
            del p
    finally:
        rc.gather = "shm"
    job.free("G")
    return {route: (median(v), taken[route]) for route, v in ours.items()}, median(pull)


def numpy_copy_gbps(nbytes, repeats=5):
    src = np.ones(nbytes // 8)
    dst = np.empty_like(src)
    times = []
    for _ in range(repeats):
        t = time.perf_counter()
        np.copyto(dst, src)
        times.append(time.perf_counter() - t)
    return nbytes / median(times) / 1e9


def _printing(job, repeats=PRINT_REPEATS):
    """Median seconds of the 2,000-line cell under %%pxshmem and %%px (interleaved, ``repeats`` each);
    whether %%pxshmem showed every line, in order per PE, every time; the fewest whole lines %%px showed."""
    view = job._client[list(range(job.n))]
    view.block = True
    view.activate()
    ours, px, complete, px_lines = [], [], True, []
    for _ in range(repeats):
        out = io.StringIO()
        ours.append(_timed_cell(f"%%pxshmem\n{PRINT}", out))
        got = {pe: [] for pe in range(job.n)}
        for line in out.getvalue().splitlines():
            m = re.match(r"\[PE [\d,\- ]+\] line (\d+) (\d+)$", line)
            if m:
                got[int(m.group(1))].append(int(m.group(2)))
        complete = complete and all(got[pe] == list(range(LINES)) for pe in got)
        out = io.StringIO()
        px.append(_timed_cell(f"%%px\n{PRINT}", out))
        px_lines.append(len(re.findall(r"^line \d+ \d+$", out.getvalue(), re.M)))  # whole lines
    return median(ours), median(px), complete, min(px_lines)


def run(ns, repeats, cells, big_gather=64 << 20, curve_gather=4 << 20, detail_n=4):
    shell()
    rows = []
    extra = {}
    for n in ns:
        try:
            rows.append(_scale_row(n, repeats, cells, big_gather, curve_gather, detail_n, extra))
        except Exception as exc:  # e.g. 32 PEs on a loaded 2-core node not ready within the start timeout
            with contextlib.suppress(Exception):
                run_cell("%shmem stop")
            rows.append({"n": n, "error": f"{type(exc).__name__}: {str(exc).splitlines()[0]}"})
        print(f"   scale {n} PEs: {rows[-1]}", flush=True)
    import datetime
    import os

    measured = f"{datetime.datetime.now():%Y-%m-%d %H:%M} (load average {os.getloadavg()[0]:.1f} at its end)"
    return {
        "measured": measured,
        "ns": list(ns),
        "repeats": repeats,
        "cells": cells,
        "curve_gather_bytes": curve_gather,
        "rows": rows,
        **extra,
    }


def _scale_row(n, repeats, cells, big_gather, curve_gather, detail_n, extra):
    if True:
        reps = repeats if n <= 4 else 2  # medians of 2 above 4 PEs: a 32-PE start takes ~12 s
        names = ("start", "restart", "restart_crash", "restart_spare", "restart_crash_spare", "floor", "ipp_mpi")
        s = {k: [] for k in names + ("pe_cpu", "floor_cpu")}
        row = {"n": n}
        for rep in range(reps):
            heap = f"{max(32, 5 * big_gather >> 20)}M" if n == detail_n and rep == 0 else "32M"
            s["start"].append(_timed_cell(f"%shmem start -n {n} --heap {heap}"))
            s["pe_cpu"].append(_pe_cpu(_job()))
            try:
                s["restart"].append(_timed_cell("%shmem restart"))
                s["restart_crash"].append(_crash_then_restart())
                if rep == 0:
                    job = _job()
                    row.update(_dispatch(job, cells if n <= 8 else max(5, cells // 2)))
                    ours, row["pull_s"] = _gather(job, curve_gather, 3)
                    row["gather_s"] = ours["shm"][0]
                    if n == detail_n:
                        fresh = []
                        ours, pull = _gather(job, big_gather, 5, routes=("shm", "file"), fresh=fresh)
                        (shm, route), (by_file, _) = ours["shm"], ours["file"]
                        extra["gather"] = {
                            "n": n,
                            "bytes_per_pe": big_gather,
                            "ours_s": shm,
                            "route": route,
                            "file_s": by_file,
                            "pull_s": pull,
                            "ours_gbps": n * big_gather / shm / 1e9,
                            "file_gbps": n * big_gather / by_file / 1e9,
                            "pull_gbps": n * big_gather / pull / 1e9,
                            "numpy_copy_gbps": numpy_copy_gbps(big_gather),
                            "numpy_fresh_copy_gbps": n * big_gather / median(fresh) / 1e9,
                        }
                        ours, px, complete, px_lines = _printing(job)
                        extra["output"] = {
                            "n": n,
                            "lines": LINES,
                            "repeats": PRINT_REPEATS,
                            "pxshmem_s": ours,
                            "px_s": px,
                            "complete": complete,
                            "px_fewest_lines": px_lines,
                        }
            finally:
                run_cell("%shmem stop")
            spare, crash_spare = _spare_restarts(n)
            s["restart_spare"].append(spare)
            s["restart_crash_spare"].append(crash_spare)
            cpu = _children_cpu()
            s["floor"].append(floor(n))
            s["floor_cpu"].append((_children_cpu() - cpu) / n)
            seconds, (cluster, client) = ipp_start(n, "mpi", True)
            s["ipp_mpi"].append(seconds)
            ipp_stop(cluster, client)
        row.update({k: median(v) for k, v in s.items()})
        return row
