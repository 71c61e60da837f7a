"""Library against library: Open MPI's OSHMEM ("oshmem"), Sandia OpenSHMEM ("sos") and OSHMPI ("oshmpi",
OpenSHMEM over Open MPI's MPI), side by side.

Through real jobs started by the tool (``Job(n, library=...)``), interleaved per repeat so load
from elsewhere hits both alike:

- start to ready (``Job.start()``: every PE answered) and stop, beside each library's bare floor
  (its ``oshrun`` running ``python -c "from shmem4py import shmem; shmem.barrier_all()"``);
- inside the PEs (``libraries_kernel``, shmem4py only, the median of many calls): put/get
  latency PE 0 -> PE 1 at 2 PEs, 8 B to 1 MiB; ``barrier_all``, ``fcollect`` and ``alltoall``
  at every N (the mean over the PEs of each PE's median); in every repeat, the table taking the
  median of the repeats;
- team sync on a copy of TEAM_WORLD: emulated on OSHMEM and OSHMPI (OpenSHMEM 1.4), native on SOS, and on
  SOS once more with the emulation forced (``SHMEM_NOTEBOOK_TEAMS=emulated``), so native and
  emulated meet on the same library.

A library that is not built (its ``oshrun``, its PEs' Python or that Python's shmem4py missing)
is reported as such, not as an error; a measurement that fails is recorded with its error.
``python bench/libraries.py [--quick]`` runs this section alone and prints its tables.
"""

import datetime
import inspect
import io
import os
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)

import common  # noqa: E402
import libraries_kernel  # noqa: E402
import shmem_notebook  # noqa: E402
from common import launcher_environment, median  # noqa: E402
from shmem_notebook.errors import LaunchError  # noqa: E402
from shmem_notebook.launcher import local_slots  # noqa: E402
from shmem_notebook.launcher.library import library as library_named  # noqa: E402

#: the libraries compared, in table order
LIBRARIES = ["oshmem", "sos", "oshmpi"]
#: the configurations measured: key -> (library, SHMEM_NOTEBOOK_TEAMS or None = the job's own choice)
CONFIGS = {
    "oshmem": ("oshmem", None),
    "sos": ("sos", None),
    "oshmpi": ("oshmpi", None),
    "sos_emulated": ("sos", "emulated"),
}
HEAP = "64M"
FLOOR = "from shmem4py import shmem; shmem.barrier_all()"


def not_built(name):
    """Why library ``name`` cannot run here (None: it can): its oshrun, Python or shmem4py is missing."""
    try:
        lib = library_named(name)
        lib.check()
    except LaunchError as e:
        return str(e)
    if subprocess.run(
        [lib.python, "-c", "import importlib.util, sys; sys.exit(importlib.util.find_spec('shmem4py') is None)"],
        capture_output=True,
    ).returncode:
        return f"{lib.python} has no shmem4py; {lib.hint}"
    return None


def floor(name, n):
    """Seconds of the library's bare ``oshrun -n N python -c FLOOR``, with the environment its PEs get."""
    lib = library_named(name)
    added = {**launcher_environment(HEAP), **{k: v for k, v in lib.env.items() if k not in os.environ}}
    cmd = lib.command(n, added, oversubscribe=n > local_slots()) + [lib.python, "-c", FLOOR]
    t = time.perf_counter()
    proc = subprocess.run(
        cmd, env={**os.environ, **added}, capture_output=True, text=True, timeout=120, start_new_session=True
    )
    if proc.returncode:
        raise RuntimeError(f"{' '.join(cmd)} exited with {proc.returncode}: {proc.stderr[-500:]}")
    return time.perf_counter() - t


def _in_pes(job, call):
    """Run ``libraries_kernel.<call>`` in a cell; ``{pe: what it returned}``."""
    job.run(
        inspect.getsource(libraries_kernel) + f"\n_bench = {call}\n",
        stdout=io.StringIO(),
        stderr=io.StringIO(),
        timeout=600,
    )
    return job.pull("_bench", stack=False)


def _mean_over_pes(per_pe):
    """{case: {statistic: mean over the PEs}}: each PE's median, fastest call, 90th percentile (microseconds)."""
    return {
        case: {stat: sum(p[case][stat] for p in per_pe.values()) / len(per_pe) for stat in stats}
        for case, stats in per_pe[0].items()
    }


def measure_in_pes(job, sizes, blocks, iters, coll_iters, budget, teams_only=False):
    """What ``libraries_kernel`` measures in one running job."""
    out = {"library": job.pes[0]["library"], "spec": job.pes[0]["spec_version"], "teams": job.pes[0]["teams"]}
    if not teams_only:
        if job.n == 2:
            out["putget"] = _in_pes(job, f"putget(shmem, {sizes!r}, {iters}, {budget})")[0]
        out["collectives"] = _mean_over_pes(_in_pes(job, f"collectives(shmem, {blocks!r}, {coll_iters}, {budget})"))
    out["teams_sync"] = _mean_over_pes(_in_pes(job, f"team_sync(shmem, {coll_iters}, {budget})"))
    return out


def one_job(config, n, params):
    """Start a job of ``config`` at ``n`` PEs, measure in it, stop it: a dict of seconds and results."""
    name, teams = CONFIGS[config]
    with common.env(**({"SHMEM_NOTEBOOK_TEAMS": teams} if teams else {})):
        t = time.perf_counter()
        job = shmem_notebook.Job(n, heap=HEAP, library=name).start()
        out = {"start": time.perf_counter() - t}
        try:
            out["pes"] = measure_in_pes(job, teams_only=teams is not None, **params)
        finally:
            t = time.perf_counter()
            job.stop()
            out["stop"] = time.perf_counter() - t
    return out


def median_of_runs(runs):
    """One measurement from several repeats of it: the median of each number, the first of anything else."""
    first = runs[0]
    if isinstance(first, dict):
        return {k: median_of_runs([r[k] for r in runs if isinstance(r, dict) and k in r]) for k in first}
    if isinstance(first, (int, float)) and not isinstance(first, bool):
        return median(runs)
    return first


def run(ns, repeats, sizes, blocks, iters, coll_iters, budget):
    """Every library at every N, interleaved, ``repeats`` times (start, stop, floor, the PEs' measurements,
    each number the median over the repeats); SOS with its teams emulated once per N (team sync only).

    ``sizes``: put/get bytes; ``blocks``: fcollect/alltoall bytes per PE; ``iters``/``coll_iters``: calls
    per measurement at most, fewer when they take more than ``budget`` seconds (run.py's FULL and QUICK)."""
    measured, load = datetime.datetime.now().strftime("%Y-%m-%d %H:%M"), round(os.getloadavg()[0], 2)
    params = dict(sizes=list(sizes), blocks=list(blocks), iters=iters, coll_iters=coll_iters, budget=budget)
    built = {name: not_built(name) for name in LIBRARIES}
    configs = [c for c, (name, _) in CONFIGS.items() if built[name] is None]
    samples = {c: {str(n): {"start": [], "stop": [], "floor": []} for n in ns} for c in configs}
    runs, errors = {c: {str(n): [] for n in ns} for c in configs}, {c: {} for c in configs}
    for rep in range(repeats):
        for n in ns:
            for config in configs:
                forced = CONFIGS[config][1] is not None
                if forced and rep > 0:
                    continue  # the forced emulation is measured for its team sync, once
                s = samples[config][str(n)]
                try:
                    got = one_job(config, n, params)
                    s["start"].append(got["start"])
                    s["stop"].append(got["stop"])
                    runs[config][str(n)].append(got["pes"])
                    if not forced:
                        s["floor"].append(floor(CONFIGS[config][0], n))
                except Exception as e:  # any failure is recorded, reported in the table
                    errors[config][str(n)] = f"{type(e).__name__}: {str(e).splitlines()[0] if str(e) else ''}"[:300]
                    print(f"  libraries: {config} at {n} PEs failed: {errors[config][str(n)]}", file=sys.stderr)
    return {
        "measured": measured,
        "load_average_1min": load,
        "cores": os.cpu_count(),
        "ns": list(ns),
        "repeats": repeats,
        "heap": HEAP,
        **params,
        "libraries": {
            name: (
                {"built": True, **_describe(name)} if built[name] is None else {"built": False, "reason": built[name]}
            )
            for name in LIBRARIES
        },
        "configs": configs,
        "start": {
            c: {n: {k: median(v) for k, v in per.items()} for n, per in by_n.items()} for c, by_n in samples.items()
        },
        "samples": samples,
        "pes": {c: {n: median_of_runs(r) for n, r in by_n.items() if r} for c, by_n in runs.items()},
        "pes_repeats": runs,
        "errors": {c: e for c, e in errors.items() if e},
    }


def _describe(name):
    lib = library_named(name)
    return {"oshrun": lib.oshrun, "python": lib.python, "shares_heaps": lib.shares_heaps}


if __name__ == "__main__":
    import argparse
    import json

    import report
    from run import FULL, QUICK

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="tiny sizes and iterations (seconds; numbers meaningless)")
    parser.add_argument("--json", help="also write the section's results here")
    args = parser.parse_args()
    section = run(**(QUICK if args.quick else FULL)["libraries"])
    if args.json:
        with open(args.json, "w") as fh:
            json.dump(section, fh, indent=1)
    print(report.libraries_tables(section))
