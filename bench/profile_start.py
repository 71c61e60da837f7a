"""Where ``%shmem start`` / ``restart`` / ``stop`` spend their time.

:func:`recording` wraps the steps of the real code path (ipyparallel's Cluster
methods, the launcher's wait for the controller's connection files, and
shmem_notebook.job's own steps, whichever exist) with timers; nothing in
shmem_notebook is changed. :func:`plain_processes` times what the PEs do
without ipyparallel; :func:`experiments` times the PE's start as it is and as it was
(imports after ``shmem_init``, bytecode compiled in every PE) side by side.
:func:`importtimes` runs every PE of real jobs (and of the bare floor) under ``-X importtime``;
:func:`flame_stacks` samples PE 0 of real jobs with py-spy from its start to ready. Run as a script
it prints both and writes the flame graph (docs/benchmarks.md, *A PE's start, profiled per PE*).
"""

import contextlib
import inspect
import time

import ipyparallel as ipp
import psutil
from ipyparallel.cluster.launcher import ControllerLauncher

import shmem_notebook.job.job as job_module
from common import PYTHON, load_average, median, oversubscribe_args, run_checked, timed
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
    """The launcher runs ``python ARGS`` on each PE (``None``: its own program; a callable: the
    command line it returns for the launcher's python) inside the block."""
    saved = OshrunEngineSetLauncher.__dict__["program"]
    if callable(args):  # python -> the whole command line
        OshrunEngineSetLauncher.program = property(lambda self: args(self.python))
    elif args is not None:
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


# -- a PE's start, profiled: -X importtime per PE, a flame graph of one PE -------------------------
#: the PE's imports one after the other: the engine's (those ``python -m shmem_notebook.engine``
#: preloads, in its order), then shmem_init; -X importtime's nesting and self times hold only with one
#: importing thread, and it times ``import`` statements only (not ``importlib.import_module``)
_ONE_THREAD = """
from shmem_notebook import lazy_imports
lazy_imports.install()
lazy_imports.hold_back("debugpy")
for name in {preload!r}:
    exec("import " + name)
from shmem_notebook.engine.runtime import main
main()
"""
#: runs shmem_notebook's engine as ``python -m`` does, PE 0 under ``py-spy record`` (started, and
#: sampling, before the engine's first import); py-spy's pid goes to OUT.pid. ``--nonblocking``: py-spy
#: pausing the PE to sample it made threads waiting in epoll count as running (measured: 11% of the
#: samples of a script whose second thread only waits); not pausing, it finds them idle
_SPIED = """
import os, runpy, subprocess, sys
if os.environ.get("OMPI_COMM_WORLD_RANK", os.environ.get("PMI_RANK")) == "0":
    cmd = [{pyspy!r}, "record", "--pid", str(os.getpid()), "--rate", "{rate}", "--function", "--nonblocking"]
    cmd += ["--format", "raw", "-o", {out!r}]
    spy = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    for line in spy.stdout:
        if "Sampling" in line:
            break
    open({out!r} + ".pid", "w").write(str(spy.pid))
runpy.run_module("shmem_notebook.engine", run_name="__main__", alter_sys=True)
"""


def _preload():
    """The engine's PRELOAD list (the engine package imports no shmem4py)."""
    from shmem_notebook.engine import PRELOAD

    return PRELOAD


def _importtime_cmd(directory, prefix):
    """``sh -c`` running ``python -X importtime ARGS`` with its stderr in DIRECTORY/PREFIX-PID.txt."""
    return ["sh", "-c", f'exec "$0" -X importtime "$@" 2>"{directory}/{prefix}-$$.txt"']


def _read_all(directory, prefix):
    import glob

    import importtime

    found = sorted(glob.glob(f"{directory}/{prefix}-*.txt"))
    return [importtime.parse(open(p).read()) for p in found]


def importtimes(n=4, repeats=1, heap="8M"):
    """``{"floor": [imports of one PE, ...], "pe": [...]}``: ``-X importtime`` of every PE of ``repeats``
    bare floor jobs and of ``repeats`` real jobs (``Job(n).start()``, imports one thread at a time)."""
    import tempfile

    program = ["-c", _ONE_THREAD.format(preload=_preload())]
    out = {"floor": [], "pe": []}
    for _ in range(repeats):
        with tempfile.TemporaryDirectory() as tmp:
            run_checked(
                ["oshrun", "-n", str(n), *oversubscribe_args(n), *_importtime_cmd(tmp, "floor"), PYTHON, "-c", FLOOR]
            )
            with _program(lambda python: [*_importtime_cmd(tmp, "pe"), python, *program]):
                job = Job(n, heap=heap).start()
            job.stop()
            out["floor"] += _read_all(tmp, "floor")
            out["pe"] += _read_all(tmp, "pe")
    return out


def floor_cpu(n=4, repeats=3):
    """Median CPU seconds (user + system) per PE of the bare floor, each PE's own from start to exit."""
    import re

    code = FLOOR + "; import os; t = os.times(); print(f'cpu={t.user + t.system:.3f};')"
    cmd = ["oshrun", "-n", str(n), *oversubscribe_args(n), PYTHON, "-c", code]
    # oshrun may join the PEs' lines: "cpu=0.250;cpu=0.210;"
    return median([float(x) for _ in range(repeats) for x in re.findall(r"cpu=([\d.]+);", run_checked(cmd))])


def _wait_exit(proc, timeout=30):
    """Wait for another process's child to end (a zombie: its parent, the PE, does not reap it)."""
    deadline = time.monotonic() + timeout
    with contextlib.suppress(psutil.NoSuchProcess):
        while proc.status() != psutil.STATUS_ZOMBIE:
            if time.monotonic() > deadline:
                raise RuntimeError(f"py-spy (pid {proc.pid}) did not end within {timeout} s of SIGINT")
            time.sleep(0.05)


def flame_stacks(n=4, repeats=3, rate=400, heap="8M"):
    """Collapsed stacks of PE 0 from its start to ready (``Job(n).start()`` returned), sampled by py-spy
    (on-CPU samples only), merged over ``repeats`` jobs; and the median CPU seconds per PE to ready."""
    import os
    import shutil
    import signal
    import sys
    import tempfile

    import flame

    pyspy = shutil.which("py-spy", path=os.path.dirname(sys.executable)) or shutil.which("py-spy")
    if pyspy is None:
        raise RuntimeError("py-spy is not installed: pip install 'shmem_notebook[bench]' (or pip install py-spy)")
    runs, cpu = [], []
    for _ in range(repeats):
        with tempfile.TemporaryDirectory() as tmp:
            out = os.path.join(tmp, "pe0.txt")
            with _program(["-c", _SPIED.format(pyspy=pyspy, rate=rate, out=out)]):
                job = Job(n, heap=heap).start()
            try:
                cpu.append(median([sum(psutil.Process(i["pid"]).cpu_times()[:2]) for i in job.pes.values()]))
                spy = psutil.Process(int(open(out + ".pid").read()))
                spy.send_signal(signal.SIGINT)  # attached by pid: py-spy writes its file, the PE goes on
                _wait_exit(spy)
            finally:
                job.stop()
            runs.append(flame.parse_collapsed(open(out).read()))
    return flame.merge(*runs), median(cpu)


def main(argv=None):
    """``python bench/profile_start.py --flame docs/_static/pe_start_flame.svg [--importtime]``."""
    import argparse
    import os

    import flame
    import importtime

    parser = argparse.ArgumentParser(description="Profile one real PE's start to ready.")
    parser.add_argument("--flame", metavar="SVG", help="write a flame graph of PE 0's start to ready here")
    parser.add_argument("--importtime", action="store_true", help="print -X importtime per package, PE vs floor")
    parser.add_argument("-n", type=int, default=4, help="PEs in the job (default 4)")
    parser.add_argument("--repeats", type=int, default=3, help="jobs to merge or take medians over (default 3)")
    args = parser.parse_args(argv)
    print(f"load average before: {' '.join(load_average())}")
    if args.importtime:
        found = importtimes(args.n, args.repeats)
        titles = {f"floor (median of {len(found['floor'])} PEs)": "floor", f"PE (median of {len(found['pe'])})": "pe"}
        print(importtime.table({title: found[key] for title, key in titles.items()}))
        for key in ("floor", "pe"):
            cum = [importtime.cumulative(p) for p in found[key]]
            for name in ("shmem4py.shmem", "numpy", "ipyparallel.engine.app", "shmem_notebook.engine.runtime"):
                values = [c[name] for c in cum if name in c]
                if values:
                    print(f"{key}: {name} cumulative {median(values) / 1000:.0f} ms")
    if args.flame:
        stacks, cpu = flame_stacks(args.n, args.repeats)
        title = (
            f"PE 0 of a {args.n}-PE job (shmem_notebook's launcher), start to ready: py-spy samples of its threads "
            f"running or waiting for a core, {args.repeats} starts merged"
        )
        with open(args.flame, "w") as fh:
            fh.write(flame.render_svg(flame.without_importlib(stacks), title))
        print(f"{args.flame}: {os.path.getsize(args.flame) // 1024} KiB; CPU per PE to ready {cpu:.2f} s (median)")
        print(f"the floor's CPU per PE: {floor_cpu(args.n, args.repeats):.2f} s (median)")
        for group, share in flame.shares(stacks).items():
            print(f"  {group}: {share:.0%}")
    print(f"load average after: {' '.join(load_average())}")


if __name__ == "__main__":
    main()
