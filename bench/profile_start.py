"""Where ``%shmem start`` / ``restart`` / ``stop`` spend their time.

:func:`recording` wraps the steps of the real code path (ipyparallel's Cluster
methods, the launcher's wait for the controller's connection files, and
shmem_notebook.job's own steps, whichever exist) with timers; nothing in
shmem_notebook is changed. :func:`plain_processes` times what the PEs do
without ipyparallel; :func:`experiments` times the PE's start as it is and as it was
(imports after ``shmem_init``, bytecode compiled in every PE) side by side.
"""

import contextlib
import inspect
import time

import ipyparallel as ipp
import psutil
from ipyparallel.cluster.launcher import ControllerLauncher

import shmem_notebook.job.job as job_module
from common import PYTHON, median, oversubscribe_args, run_checked, timed
from shmem_notebook.job import Job
from shmem_notebook.launcher import OshrunEngineSetLauncher

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


#: the PE's program before issue 36: no preloading thread, and (``cold``) shmem_notebook's modules compiled
#: from source in every PE, as when no current .pyc exists (PYTHONDONTWRITEBYTECODE, a tree edited since)
_COLD = """
import importlib._bootstrap_external as be, importlib.util
root = importlib.util.find_spec("shmem_notebook").submodule_search_locations[0]
get_code = be.SourceFileLoader.get_code
be.SourceFileLoader.get_code = lambda self, name: (
    compile(self.get_data(self.path), self.path, "exec", dont_inherit=True)
    if self.path.startswith(root) else get_code(self, name))
"""
_SEQUENTIAL = "from shmem_notebook.engine.runtime import main\nmain()\n"

#: variant -> the PE's program after ``python``: None = as the launcher runs it
EXPERIMENTS = {
    "PE now (imports overlap shmem_init, warm bytecode)": None,
    "PE imports after shmem_init": ["-c", _SEQUENTIAL],
    "PE imports after shmem_init, cold bytecode": ["-c", _COLD + _SEQUENTIAL],
}


@contextlib.contextmanager
def _program(args):
    """The launcher runs ``python ARGS`` on each PE (``None``: its own program) inside the block."""
    saved = OshrunEngineSetLauncher.__dict__["program"]
    if args is not None:
        OshrunEngineSetLauncher.program = property(lambda self: [self.python, *args])
    try:
        yield
    finally:
        OshrunEngineSetLauncher.program = saved


def _start_with(n, args):
    """Start-to-ready of a job whose PEs run ``python ARGS``; (seconds, median CPU seconds per PE to ready)."""
    with _program(args):
        seconds, job = timed(Job(n).start)
    try:
        return seconds, median([sum(psutil.Process(i["pid"]).cpu_times()[:2]) for i in job.pes.values()])
    finally:
        job.stop()


def experiments(n, repeats):
    """Start-to-ready (and CPU per PE to ready) with each PE program, interleaved, side by side."""
    samples = {k: [] for k in EXPERIMENTS}
    cpu = {k: [] for k in EXPERIMENTS}
    for _ in range(repeats):
        for name, args in EXPERIMENTS.items():
            seconds, per_pe = _start_with(n, args)
            samples[name].append(seconds)
            cpu[name].append(per_pe)
    return {
        **{k: median(v) for k, v in samples.items()},
        **{f"{k}: CPU per PE": median(v) for k, v in cpu.items()},
    }
