"""Where ``%shmem start`` / ``restart`` / ``stop`` spend their time.

:func:`recording` wraps the steps of the real code path (ipyparallel's Cluster
methods, the launcher's wait for the controller's connection files, and
shmem_notebook.job's own steps, whichever exist) with timers; nothing in
shmem_notebook is changed. :func:`plain_processes` times what the PEs do
without ipyparallel; :func:`experiments` times candidate changes side by side.
"""

import contextlib
import inspect
import logging
import time

import ipyparallel as ipp
import psutil
from ipyparallel.cluster.launcher import ControllerLauncher

import shmem_notebook.job.job as job_module
from common import PYTHON, median, oversubscribe_args, run_checked, timed
from shmem_notebook.launcher import OshrunEngineSetLauncher
from shmem_notebook.rc import rc

FLOOR = "from shmem4py import shmem; shmem.barrier_all()"
# what a shmem_notebook PE imports on top of the floor
ENGINE_IMPORTS = FLOOR + "; import shmem_notebook.engine.runtime, ipyparallel.engine.app"

# (owner, attribute, label); missing attributes are skipped
STEPS = [
    (job_module, "start_watchdog", "spawn watchdog"),
    (ipp.Cluster, "start_controller", "spawn controller"),
    (ControllerLauncher, "get_connection_info", "wait for controller files"),
    (ipp.Cluster, "connect_client", "connect client"),
    (ipp.Cluster, "start_engines", "spawn oshrun"),
    (job_module.Job, "_wait_for_pes", "PEs start, import, register"),
    (job_module.Job, "ask", "round trip to every PE"),
    (job_module.Job, "_stop_pes", "PEs exit"),
    (ipp.Cluster, "stop_cluster", "stop controller"),
    (job_module, "stop_watchdog", "stop watchdog"),
]


def _timer(fn, label, calls):
    if inspect.iscoroutinefunction(fn):

        async def wrapper(*args, **kwargs):
            start = time.perf_counter()
            try:
                return await fn(*args, **kwargs)
            finally:
                calls.append((label, time.perf_counter() - start))
    else:

        def wrapper(*args, **kwargs):
            start = time.perf_counter()
            try:
                return fn(*args, **kwargs)
            finally:
                calls.append((label, time.perf_counter() - start))

    return wrapper


@contextlib.contextmanager
def recording():
    """Yield a list that fills with (step, seconds) for every timed call inside the block."""
    calls, saved = [], []
    for owner, name, label in STEPS:
        fn = owner.__dict__.get(name)
        if fn is not None:
            saved.append((owner, name, fn))
            setattr(owner, name, _timer(fn, label, calls))
    try:
        yield calls
    finally:
        for owner, name, fn in saved:
            setattr(owner, name, fn)


def breakdown(recorded, totals):
    """Median seconds per step over runs; "rest" is the total minus the steps (nested steps excluded)."""
    steps = {}
    for calls in recorded:
        per_run = {}
        for label, seconds in calls:
            per_run[label] = per_run.get(label, 0.0) + seconds
        for label, seconds in per_run.items():
            steps.setdefault(label, []).append(seconds)
    out = {label: median(v) for label, v in steps.items()}
    nested = {"wait for controller files"}  # inside connect client / spawn oshrun
    out["rest (magic, checks, files)"] = max(0.0, median(totals) - sum(v for k, v in out.items() if k not in nested))
    out["total"] = median(totals)
    return out


def plain_processes(n, repeats):
    """The same PEs without ipyparallel: oshrun alone, Python, shmem_init, the engine's imports."""
    cmds = {
        "oshrun /bin/true": ["true"],
        "oshrun python -c pass": [PYTHON, "-c", "pass"],
        "oshrun python + shmem_init (the floor)": [PYTHON, "-c", FLOOR],
        "floor + a PE's imports": [PYTHON, "-c", ENGINE_IMPORTS],
    }
    samples = {k: [] for k in cmds}
    for _ in range(repeats):
        for name, cmd in cmds.items():
            samples[name].append(timed(run_checked, ["oshrun", "-n", str(n), *oversubscribe_args(n), *cmd])[0])
    return {k: median(v) for k, v in samples.items()}


def _start_like_job(n, overlap=False):
    """Controller, client, PEs as shmem_notebook does; seconds to ready. The candidate change:
    ``overlap`` starts oshrun without waiting for the controller's connection files (the PEs then wait
    for the file themselves). PEs run without ipyparallel's nanny process (see shmem_notebook.engine.runtime.main)."""
    cluster = ipp.Cluster(
        engines=OshrunEngineSetLauncher,
        n=n,
        controller_ip=rc.ip,
        delay=0,
        log_level=logging.ERROR,
        controller_args=[f"--HeartMonitor.period={rc.heartbeat_ms}"],
        send_engines_connection_env=not overlap,
    )
    client = None
    start = time.perf_counter()
    try:
        cluster.start_controller_sync()
        if overlap:
            cluster.start_engines_sync(n)
            client = cluster.connect_client_sync()
        else:
            client = cluster.connect_client_sync()
            cluster.start_engines_sync(n)
        while len(client.ids) < n:
            time.sleep(0.005)
        client[:].execute("pass", block=True)
        return time.perf_counter() - start
    finally:
        if client is not None:  # let the PEs finalize, as Job.stop() does
            client.shutdown(targets="all", block=False)
            engines = next(iter(cluster.engines.values()), None)
            if engines is not None and engines.process is not None:
                psutil.wait_procs([engines.process], timeout=3)
            client.close()
        cluster.stop_cluster_sync()


EXPERIMENTS = {
    "as job.py": {},
    "overlap controller and oshrun": {"overlap": True},
}


def experiments(n, repeats):
    """Start-to-ready with each candidate change, interleaved, side by side."""
    samples = {k: [] for k in EXPERIMENTS}
    for _ in range(repeats):
        for name, kwargs in EXPERIMENTS.items():
            samples[name].append(_start_like_job(n, **kwargs))
    return {k: median(v) for k, v in samples.items()}
