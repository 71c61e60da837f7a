"""Start to ready: ``%shmem start``/``restart`` against ipyparallel's launchers and a bare ``oshrun``.

"Ready" means every PE/engine answered one round trip. Variants run interleaved
inside each repeat, so load from elsewhere hits them alike.
"""

import logging
import os
import time

import ipyparallel as ipp

import profile_start
from common import (
    PYTHON,
    idle_cpu,
    launcher_environment,
    median,
    oversubscribe_args,
    rss_mib,
    run_cell,
    run_checked,
    shell,
    timed,
)
from profile_start import FLOOR
from shmem_notebook import current_job
from shmem_notebook.job.watchdog import remove_profile_files
from shmem_notebook.rc import rc

# name -> (engines, tuned): tuned = shmem_notebook's HeartMonitor.period and delay=0
IPP_VARIANTS = {
    "ipp_local_tuned": ("local", True),
    "ipp_local_default": ("local", False),
    "ipp_mpi_tuned": ("mpi", True),
    "ipp_mpi_default": ("mpi", False),
}


# -- the contenders --------------------------------------------------------
#: seconds between a job's first and second restart (``restart_again``; a job that restarted once starts
#: its fork server then, and forks the PEs of its later restarts: shmem_notebook.job.forks)
AGAIN_AFTER = 2.0


def shmem_notebook_start(n):
    """``%shmem start -n N``: seconds, and the job."""
    seconds, _ = timed(run_cell, f"%shmem start -n {n}")
    return seconds, current_job()


def shmem_notebook_stop():
    return timed(run_cell, "%shmem stop")[0]


def ipp_start(n, engines, tuned):
    """ipyparallel's own start_and_connect, plus one round trip: seconds, (cluster, client)."""
    kwargs = (
        dict(controller_ip=rc.ip, delay=0, controller_args=[f"--HeartMonitor.period={rc.heartbeat_ms}"])
        if tuned
        else {}
    )
    cluster = ipp.Cluster(engines=engines, n=n, log_level=logging.ERROR, **kwargs)
    launcher_kwargs = {}
    if engines == "mpi":
        launcher_kwargs = dict(mpi_args=oversubscribe_args(n), environment=launcher_environment())
    start = time.perf_counter()
    try:
        cluster.start_controller_sync()
        time.sleep(cluster.delay)  # exactly what start_cluster() does
        cluster.start_engines_sync(n, **launcher_kwargs)
        client = cluster.connect_client_sync()
        client.wait_for_engines(n, timeout=120, interactive=False)
        client[:].execute("pass", block=True)
    except BaseException:
        ipp_stop(cluster, None)
        raise
    return time.perf_counter() - start, (cluster, client)


def ipp_stop(cluster, client):
    """Stop an ipyparallel baseline and remove what its controller leaves in the profile
    (``engines<ID>.json``, which ipyparallel's own stop keeps)."""
    if client is not None:
        client.close()
    cluster.stop_cluster_sync()
    remove_profile_files(cluster.profile_dir, cluster.cluster_id)


def floor(n, code=FLOOR):
    """``oshrun -n N python -c CODE`` to completion."""
    return timed(run_checked, ["oshrun", "-n", str(n), *oversubscribe_args(n), PYTHON, "-c", code])[0]


# -- idle cost of a running job ---------------------------------------------
def idle(engine_pids, seconds):
    """CPU of all our descendants over ``seconds``, and median RSS of one engine."""
    time.sleep(min(1.0, seconds))  # let start-up settle
    return {"cpu_percent": idle_cpu(seconds), "engine_rss_mib": median(rss_mib(engine_pids))}


# -- the section ---------------------------------------------------------------
def run(ns, repeats, idle_seconds, profile_repeats=1, variants=tuple(IPP_VARIANTS)):
    """Every variant at every N, interleaved, ``repeats`` times; idle cost and a profile at the largest N.

    ``variants``: which ipyparallel baselines (those at ipyparallel's defaults run once at the smaller N);
    ``profile_repeats=0`` skips the profile's experiments. The oshrun baselines get the launcher's environment.
    """
    shell()
    big = max(ns)
    keys = ["shmem_notebook", "restart", "restart_again", "stop", "floor", *variants]
    samples = {n: {k: [] for k in keys} for n in ns}
    recorded = {"start": [], "restart": [], "stop": []}
    idle_stats = {}
    for rep in range(repeats):
        for n in ns:
            measure_idle = rep == 0 and n == big
            s = samples[n]
            with profile_start.recording() as calls:
                seconds, job = shmem_notebook_start(n)
            s["shmem_notebook"].append(seconds)
            if n == big:
                recorded["start"].append(calls)
            try:
                if measure_idle:
                    idle_stats["shmem_notebook"] = idle([job.pes[pe]["pid"] for pe in range(n)], idle_seconds)
                with profile_start.recording() as calls:
                    s["restart"].append(timed(run_cell, "%shmem restart")[0])
                if n == big:
                    recorded["restart"].append(calls)
                time.sleep(AGAIN_AFTER)  # a user reads the fresh job's first answer before restarting again
                s["restart_again"].append(timed(run_cell, "%shmem restart")[0])
            finally:
                with profile_start.recording() as calls:
                    s["stop"].append(shmem_notebook_stop())
                if n == big:
                    recorded["stop"].append(calls)
            s["floor"].append(floor(n))
            for name in variants:
                engines, tuned = IPP_VARIANTS[name]
                if not tuned and rep > 0 and n != big:  # defaults: 3+ s of fixed waits; once at small N
                    continue
                seconds, (cluster, client) = ipp_start(n, engines, tuned)
                s[name].append(seconds)
                try:
                    if measure_idle and name != "ipp_mpi_default":
                        idle_stats[name] = idle(client[:].apply_sync(os.getpid), idle_seconds)
                finally:
                    ipp_stop(cluster, client)
    rows = [{"n": n, **{k: median(v) for k, v in samples[n].items()}} for n in ns]
    return {
        "ns": list(ns),
        "repeats": repeats,
        "tuned": f"HeartMonitor.period={rc.heartbeat_ms} ms, Cluster.delay=0 (as shmem_notebook)",
        "default": "ipyparallel's defaults: HeartMonitor.period=3000 ms, Cluster.delay=1 s "
        "(one run below the largest N)",
        "rows": rows,
        "again_after": AGAIN_AFTER,
        "samples": {str(n): v for n, v in samples.items()},
        "idle": {"n": big, "seconds": idle_seconds, **idle_stats},
        "profile": {
            "n": big,
            **{
                what: profile_start.breakdown(recorded[what], samples[big][key])
                for what, key in (("start", "shmem_notebook"), ("restart", "restart"), ("stop", "stop"))
            },
            "plain_processes": profile_start.plain_processes(big, max(1, profile_repeats)),
            "experiments": profile_start.experiments(big, profile_repeats) if profile_repeats else {},
        },
    }
