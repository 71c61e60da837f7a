"""Sandia OpenSHMEM's polling waits (built with shared heaps, ``scripts/sos-cma.patch``) under their knobs,
``barrier_all`` in C (``bench/barrier.c``), Open MPI's OSHMEM beside, interleaved.

Each setting: ``SHMEM_WAIT_SPINS`` (polls between two ``sched_yield``) / ``SHMEM_WAIT_YIELDS`` (yields
before a wait sleeps instead; -1: never), the PEs bound to cores (``-bind-to core``, two to a core with more
PEs than cores) and the default 16/64 unbound too. Each run: 7 samples of 200 barriers, its median; the
table gives the median of the runs and their range.

``SHMEM_NOTEBOOK_SOS_DIR=/path/to/a/shared-heaps/build python bench/sos_waits.py [--rounds 3] [--pes 2 4]``
prints the table and writes bench/sos_waits.json. Needs both libraries' ``oshcc``.
"""

import json
import os
import statistics
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)

from common import launcher_environment, local_slots, run_checked  # noqa: E402
from shmem_notebook.launcher.library import library as library_named  # noqa: E402

#: (SHMEM_WAIT_SPINS, SHMEM_WAIT_YIELDS, bound): the patch's default first
SETTINGS = [(16, 64, True), (16, 64, False), (1, -1, True), (16, -1, True), (64, -1, True), (256, -1, True)]
SETTINGS += [(1024, -1, True), (16, 256, True), (64, 64, True)]


def _build(oshcc, out):
    run_checked([oshcc, "-O2", "-o", out, os.path.join(HERE, "barrier.c")])
    return out


def _median_of(cmd, env):
    return statistics.median(float(x) for x in run_checked(cmd, timeout=300, env=env).split())


def run(rounds=3, ns=(2, 4)):
    sos = library_named("sos")
    if not sos.shares_heaps:
        raise SystemExit("this needs Sandia OpenSHMEM built with shared heaps: SOS_SHARED_HEAPS=1 scripts/build_sos.sh")
    base = {**os.environ, **launcher_environment(heap="16M")}
    with tempfile.TemporaryDirectory() as tmp:
        ours = _build(os.path.join(os.path.dirname(sos.oshrun), "oshcc"), os.path.join(tmp, "barrier_sos"))
        theirs = _build("oshcc", os.path.join(tmp, "barrier_oshmem"))
        found = {}
        for _ in range(rounds):
            for n in ns:
                over = n > local_slots()
                cmd = ["oshrun", "-n", str(n), *(["--oversubscribe"] if over else []), "--bind-to", "none", theirs]
                found.setdefault(f"{n} oshmem, unbound", []).append(_median_of(cmd, base))
                for spins, yields, bound in SETTINGS:
                    env = {**base, **sos.env, "SHMEM_SYMMETRIC_SIZE": "16M"}
                    env.update(SHMEM_WAIT_SPINS=str(spins), SHMEM_WAIT_YIELDS=str(yields))
                    cmd = [sos.oshrun, "-n", str(n), "-bind-to", "core" if bound else "none", ours]
                    key = f"{n} sos {spins}/{yields}{'' if bound else ', unbound'}"
                    found.setdefault(key, []).append(_median_of(cmd, env))
    return {
        "measured": time.strftime("%Y-%m-%d %H:%M"),
        "load_average_1min": round(os.getloadavg()[0], 2),
        "rounds": rounds,
        "us": found,
    }


def table(out):
    lines = [
        f"barrier_all in C, us: the median of {out['rounds']} runs (their range), load {out['load_average_1min']}",
        "",
        "| PEs | library, SPINS/YIELDS | us | range | / oshmem |",
        "| ---: | --- | ---: | --- | ---: |",
    ]
    for key, runs in out["us"].items():
        n, what = key.split(" ", 1)
        ref = statistics.median(out["us"][f"{n} oshmem, unbound"])
        m = statistics.median(runs)
        lines.append(f"| {n} | {what} | {m:.2f} | {min(runs):.2f}-{max(runs):.2f} | {m / ref:.2f}x |")
    return "\n".join(lines)


if __name__ == "__main__":
    import argparse

    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--pes", nargs="+", type=int, default=[2, 4])
    args = parser.parse_args()
    result = run(args.rounds, args.pes)
    print(table(result))
    with open(os.path.join(HERE, "sos_waits.json"), "w") as fh:
        json.dump(result, fh, indent=1)
