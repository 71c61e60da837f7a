"""Dispatch: a no-op ``%%pxshmem`` cell against a no-op ``%%px`` cell on the same engines.

Both go through the same IPython shell's ``run_cell``; the raw API pair
(``job.run`` against ``DirectView.execute(block=True)``) is measured too.
"""

import io
import time

from common import median, run_cell, shell

NOOP = "pass"


def round_trips(job, cells):
    """Interleave the four ways of running a no-op cell ``cells`` times; seconds per way."""
    view = job._client[list(range(job.n))]  # a view of its own: %%px needs block=True
    view.block = True
    view.activate()  # registers %px / %%px on the shell
    ways = {
        "pxshmem": lambda: run_cell(f"%%pxshmem\n{NOOP}"),
        "px": lambda: run_cell(f"%%px\n{NOOP}"),
        "job_run": lambda: job.run(NOOP, stdout=io.StringIO(), stderr=io.StringIO()),
        "view_execute": lambda: view.execute(NOOP, block=True),
    }
    for fn in ways.values():  # warm up
        fn()
    samples = {name: [] for name in ways}
    for _ in range(cells):
        for name, fn in ways.items():
            start = time.perf_counter()
            fn()
            samples[name].append(time.perf_counter() - start)
    return samples


def run(ns, cells):
    shell()
    rows = []
    for n in ns:
        run_cell(f"%shmem start -n {n}")
        try:
            from shmem_notebook import current_job

            samples = round_trips(current_job(), cells)
        finally:
            run_cell("%shmem stop")
        ms = {name: median(v) * 1e3 for name, v in samples.items()}
        rows.append(
            {
                "n": n,
                **{f"{name}_ms": value for name, value in ms.items()},
                "ratio_magic": ms["pxshmem"] / ms["px"],
                "ratio_api": ms["job_run"] / ms["view_execute"],
            }
        )
    return {"ns": list(ns), "cells": cells, "rows": rows}
