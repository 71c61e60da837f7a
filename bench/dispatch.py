"""Dispatch: a no-op ``%%pxshmem`` cell against a no-op ``%%px`` cell on the same engines.

Both go through the same IPython shell's ``run_cell``; the raw API pair
(``job.run`` against ``DirectView.execute(block=True)``) is measured too. Beside them, the limit:
a bare ZeroMQ ROUTER/DEALER round trip from this process to as many plain Python processes (each
answers at once), and the same with IPython's ``run_cell("pass")`` in each process before it answers.
"""

import io
import subprocess
import time

import zmq

from common import PYTHON, median, run_cell, shell

NOOP = "pass"

#: a process of the ZeroMQ baseline: a DEALER that answers every message (after ``run_cell`` with "ipython")
ANSWERER = """
import sys, zmq
socket = zmq.Context().socket(zmq.DEALER)
socket.connect(sys.argv[1])
run = lambda: None
if sys.argv[2] == "ipython":
    from IPython.core.interactiveshell import InteractiveShell
    shell = InteractiveShell.instance()
    run = lambda: shell.run_cell("pass")
socket.send(b"ready")
while (message := socket.recv()) != b"stop":
    run()
    socket.send(message)
"""


class Answerers:
    """``n`` processes, each a DEALER connected to this process's ROUTER (TCP on the loopback, as the
    job's cell channel); :meth:`round_trip` sends to all and waits for every answer."""

    def __init__(self, n, work="pass"):
        self.router = zmq.Context.instance().socket(zmq.ROUTER)
        port = self.router.bind_to_random_port("tcp://127.0.0.1")
        self.procs = [
            subprocess.Popen([PYTHON, "-c", ANSWERER, f"tcp://127.0.0.1:{port}", work], start_new_session=True)
            for _ in range(n)
        ]
        self.ids = [self.router.recv_multipart()[0] for _ in range(n)]

    def round_trip(self):
        for identity in self.ids:
            self.router.send_multipart([identity, b"cell"])
        for _ in self.ids:
            self.router.recv_multipart()

    def close(self):
        for identity in self.ids:
            self.router.send_multipart([identity, b"stop"])
        for proc in self.procs:
            try:
                proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                proc.kill()
        self.router.close(linger=0)


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
    baselines = {"zmq": Answerers(job.n), "zmq_ipython": Answerers(job.n, "ipython")}
    try:
        ways.update({name: answerers.round_trip for name, answerers in baselines.items()})
        for fn in ways.values():  # warm up
            fn()
        samples = {name: [] for name in ways}
        for _ in range(cells):
            for name, fn in ways.items():
                start = time.perf_counter()
                fn()
                samples[name].append(time.perf_counter() - start)
    finally:
        for answerers in baselines.values():
            answerers.close()
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
                "ratio_zmq": ms["pxshmem"] / ms["zmq"],
            }
        )
    return {"ns": list(ns), "cells": cells, "rows": rows}
