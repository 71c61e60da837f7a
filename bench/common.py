"""Helpers shared by the benchmark modules: timing, environment, shells, processes."""

import contextlib
import io
import os
import platform
import re
import statistics
import subprocess
import sys
import time

import psutil

from shmem_notebook.launcher import local_slots, platform_environment

HERE = os.path.dirname(os.path.abspath(__file__))
PYTHON = sys.executable


def median(values):
    return statistics.median(values) if values else None


def timed(fn, *args, **kwargs):
    """(seconds, result) of one call."""
    start = time.perf_counter()
    result = fn(*args, **kwargs)
    return time.perf_counter() - start, result


def launcher_environment(heap=None, local_only=True):
    """What shmem_notebook's launcher adds for a single-node job (its transports too, where it sets them)."""
    try:
        return platform_environment(heap=heap, local_only=local_only)
    except TypeError:  # a launcher without the local_only option
        return platform_environment(heap=heap)


def mpi_env(heap=None, local_only=True):
    """This process's environment plus what the launcher gives the PEs; ``local_only=False``: Open MPI's
    own transport defaults (only what the platform needs to run at all)."""
    return {**os.environ, **launcher_environment(heap, local_only)}


def oversubscribe_args(n):
    """``--oversubscribe`` exactly when shmem_notebook's launcher would add it."""
    return ["--oversubscribe"] if n > local_slots() else []


def run_checked(cmd, timeout=120, env=None, **kwargs):
    """Run a command to completion; raise with its output if it fails."""
    try:
        proc = subprocess.run(
            cmd, env=env or mpi_env(), capture_output=True, text=True, timeout=timeout, start_new_session=True, **kwargs
        )
    except subprocess.TimeoutExpired as exc:
        raise RuntimeError(f"{' '.join(cmd)} did not finish within {timeout} s") from exc
    if proc.returncode != 0:
        raise RuntimeError(
            f"{' '.join(cmd)} exited with {proc.returncode}:\n{proc.stdout[-2000:]}\n{proc.stderr[-2000:]}"
        )
    return proc.stdout


def machine():
    """Cores, CPU model, memory, Open MPI and library versions."""
    import ipyparallel
    import numpy

    cpu = platform.processor() or platform.machine()
    try:
        with open("/proc/cpuinfo") as f:
            cpu = re.search(r"model name\s*:\s*(.*)", f.read()).group(1).strip()
    except (OSError, AttributeError):
        pass
    try:
        ompi = re.search(
            r"v?(\d+\.\d+\.\d+)", subprocess.run(["ompi_info", "--version"], capture_output=True, text=True).stdout
        ).group(1)
    except (OSError, AttributeError):
        ompi = "unknown"
    return {
        "cores": os.cpu_count(),
        "physical_cores": psutil.cpu_count(logical=False),
        "cpu": cpu,
        "memory_gib": round(psutil.virtual_memory().total / 2**30, 1),
        "openmpi": ompi,
        "python": platform.python_version(),
        "ipyparallel": ipyparallel.__version__,
        "numpy": numpy.__version__,
        "load_average_1min": round(os.getloadavg()[0], 2),
    }


_shell = None


def shell():
    """The one IPython shell of this process, with ``shmem_notebook`` loaded."""
    global _shell
    if _shell is None:
        from IPython.testing.globalipapp import start_ipython

        _shell = start_ipython()
        run_cell("%load_ext shmem_notebook")
    return _shell


def run_cell(code, out=None):
    """Run a cell in the shell, its stdout written to ``out`` (else swallowed); raise if it failed."""
    with contextlib.redirect_stdout(out or io.StringIO()), contextlib.redirect_stderr(io.StringIO()):
        result = _shell.run_cell(code)
    result.raise_error()
    return result


def descendants():
    """Every process this one started, directly or not."""
    return psutil.Process().children(recursive=True)


def idle_cpu(seconds):
    """CPU % (of one core) used by every descendant (controller, schedulers, launcher, engines) over ``seconds``."""
    procs = descendants()
    for p in procs:
        with contextlib.suppress(psutil.Error):
            p.cpu_percent(None)
    time.sleep(seconds)
    total = 0.0
    for p in procs:
        with contextlib.suppress(psutil.Error):
            total += p.cpu_percent(None)
    return round(total, 2)


def rss_mib(pids):
    """Resident set size of each pid, MiB."""
    return [round(psutil.Process(pid).memory_info().rss / 2**20, 1) for pid in pids]


def reap_leftovers(grace=3.0):
    """Terminate whatever this process started and is still running (returns how many)."""
    procs = descendants()
    for p in procs:
        with contextlib.suppress(psutil.Error):
            p.terminate()
    _, alive = psutil.wait_procs(procs, timeout=grace)
    for p in alive:
        with contextlib.suppress(psutil.Error):
            p.kill()
    return len(procs)


@contextlib.contextmanager
def env(**values):
    """``os.environ`` updated with ``values`` for the block, then as it was (the launcher passes
    ``SHMEM_NOTEBOOK_*`` and platform settings on to the PEs)."""
    old = {k: os.environ.get(k) for k in values}
    os.environ.update(values)
    try:
        yield
    finally:
        for k, v in old.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v


def update_between(path, name, text):
    """Put ``text`` between the ``<!-- NAME:start -->`` and ``<!-- NAME:end -->`` markers of the page at ``path``."""
    start, end = f"<!-- {name}:start -->", f"<!-- {name}:end -->"
    with open(path) as fh:
        page = fh.read()
    if start not in page or end not in page:
        raise SystemExit(f"{path} has no {start} ... {end} markers: add them where the table goes")
    head, rest = page.split(start, 1)
    with open(path, "w") as fh:
        fh.write(f"{head}{start}\n{text}\n{end}{rest.split(end, 1)[1]}")


def load_average():
    """The 1-, 5- and 15-minute load averages, as ``/proc/loadavg`` writes them."""
    with open("/proc/loadavg") as f:
        return f.read().split()[:3]


def main_over_pes(doc, name, run, table, plot, pes, repeats, argv=None):
    """A bench's command line: ``--pes``, ``--repeats``, ``--json`` and ``--plot`` (default
    ``bench/NAME.json`` and ``.png``), then :func:`measure_and_save` of ``run(pes, repeats)``."""
    import argparse

    parser = argparse.ArgumentParser(description=doc.splitlines()[0])
    parser.add_argument("--pes", type=int, nargs="+", default=pes)
    parser.add_argument("--repeats", type=int, default=repeats)
    parser.add_argument("--json", default=f"bench/{name}.json")
    parser.add_argument("--plot", default=f"bench/{name}.png")
    args = parser.parse_args(argv)
    measure_and_save(lambda: run(args.pes, args.repeats), table, plot, args.json, args.plot, args.repeats)


def measure_and_save(measure, table, plot, json_path, plot_path, repeats):
    """Rows of ``measure()``: printed as ``table(rows)`` with the load average before and after, saved to
    ``json_path`` (with ``repeats`` and the load before) and drawn by ``plot(rows, plot_path)``."""
    import json

    load = load_average()
    rows = measure()
    print(f"load average before: {' '.join(load)}, after: {' '.join(load_average())}")
    print(table(rows))
    with open(json_path, "w") as f:
        json.dump({"rows": rows, "repeats": repeats, "load_before": load}, f, indent=1)
    plot(rows, plot_path)
