"""Memory: RSS of idle PEs, and of a fresh client (an IPython shell) before and after 100 cells
(then after 100 more of the same cells through ``%%px``, for comparison).

Runs in a process of its own (``python memory.py N CELLS``, prints JSON) so the
client's RSS is that of a notebook kernel, not of the benchmark driver.
"""

import json
import os
import subprocess
import sys
import time

import psutil

from common import HERE, PYTHON, median, rss_mib

CELL = "A[:] = me\nshmem.barrier_all()\nprint(me, int(A.sum()))"


def measure(n, cells):
    from common import run_cell, shell

    shell()
    client = psutil.Process()
    before_start = client.memory_info().rss
    run_cell(f"%shmem start -n {n}")
    try:
        from shmem_notebook import current_job

        job = current_job()
        run_cell(f"%%pxshmem A=int64[1024]\n{CELL}")
        time.sleep(1.0)  # idle
        pes = rss_mib([job.pes[pe]["pid"] for pe in range(n)])
        after_start = client.memory_info().rss
        for _ in range(cells):
            run_cell(f"%%pxshmem\n{CELL}")
        after_cells = client.memory_info().rss
        view = job._client[list(range(n))]  # the same cells through %%px, for comparison
        view.block = True
        view.activate()
        for _ in range(cells):
            run_cell(f"%%px\n{CELL}")
        after_px = client.memory_info().rss
    finally:
        run_cell("%shmem stop")
    mib = 2**20
    return {
        "n": n,
        "cells": cells,
        "pe_rss_mib": pes,
        "pe_rss_median_mib": median(pes),
        "client_rss_before_start_mib": round(before_start / mib, 1),
        "client_rss_after_start_mib": round(after_start / mib, 1),
        "client_rss_after_cells_mib": round(after_cells / mib, 1),
        "client_growth_per_cell_kib": round((after_cells - after_start) / cells / 1024, 1),
        "px_growth_per_cell_kib": round((after_px - after_cells) / cells / 1024, 1),
    }


def run(n, cells, timeout=300):
    """Measure in a fresh process; its process group is killed if it hangs."""
    proc = subprocess.Popen(
        [PYTHON, os.path.join(HERE, "memory.py"), str(n), str(cells)],
        cwd=HERE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        start_new_session=True,
    )
    try:
        out, err = proc.communicate(timeout=timeout)
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, 9)
            proc.wait()
    if proc.returncode != 0:
        raise RuntimeError(f"memory.py exited with {proc.returncode}:\n{err[-2000:]}")
    return json.loads(out.strip().splitlines()[-1])


if __name__ == "__main__":
    print(json.dumps(measure(int(sys.argv[1]), int(sys.argv[2]))))
