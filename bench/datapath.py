"""Data path, PE 0 -> PE 1 of 2 PEs: put/get from a ``%%pxshmem`` cell, the same code as a plain
``oshrun`` script, the same loop in C (``oshcc``), and memcpy / NumPy copies on this machine.

The script and C get the environment shmem_notebook's launcher gives its PEs (for a
single-node job it restricts UCX to shared memory); the script runs once more with
Open MPI's default transports, to show what that choice is worth.

Rounds alternate cell, script and C, so they share the machine's state; every
sample of all rounds goes into one median.
"""

import inspect
import json
import os
import subprocess
import tempfile
import time

import numpy as np

import putget_kernel
from common import HERE, PYTHON, median, mpi_env, oversubscribe_args, run_cell, run_checked, shell
from shmem_notebook import current_job

SIZES = [8, 64 << 10, 1 << 20, 8 << 20]
ITERS = {8: 2000, 64 << 10: 500, 1 << 20: 100, 8 << 20: 20}


def in_cell(plan, repeats):
    nbytes = max(size for size, _ in plan)
    code = inspect.getsource(putget_kernel) + (
        f"\n_r = measure(shmem, src, dst, {plan!r}, {repeats})\nif me == 0:\n    import json; print(json.dumps(_r))\n"
    )
    run_cell(f"%%pxshmem src=uint8[{nbytes}] dst=uint8[{nbytes}]\n{code}")
    return json.loads(current_job().last_result.stdout[0])


def script(plan, repeats, local_only=True):
    """The plain script with the PEs' environment, or (``local_only=False``) Open MPI's default transports."""
    out = run_checked(
        [
            "oshrun",
            "-n",
            "2",
            *oversubscribe_args(2),
            PYTHON,
            os.path.join(HERE, "putget_script.py"),
            json.dumps(plan),
            str(repeats),
        ],
        cwd=HERE,
        env=mpi_env(local_only=local_only),
    )
    return json.loads(out.strip().splitlines()[-1])


def build_c(workdir):
    exe = os.path.join(workdir, "put_get")
    subprocess.run(["oshcc", "-O2", "-o", exe, os.path.join(HERE, "put_get.c")], check=True, capture_output=True)
    return exe


def c_loop(exe, plan, repeats):
    out = run_checked(
        ["oshrun", "-n", "2", *oversubscribe_args(2), exe, str(repeats), *(f"{size}:{iters}" for size, iters in plan)]
    )
    return json.loads(out.strip().splitlines()[-1])


def numpy_copy(plan, repeats):
    a, b = np.ones(max(s for s, _ in plan), np.uint8), np.zeros(max(s for s, _ in plan), np.uint8)
    out = {}
    for size, iters in plan:
        src, dst = a[:size], b[:size]
        for _ in range(repeats):
            start = time.perf_counter()
            for _ in range(iters):
                np.copyto(dst, src)
            out.setdefault(str(size), []).append((time.perf_counter() - start) / iters)
    return {"copy": out}


def merge(into, result, prefix=""):
    for op, per_size in result.items():
        for size, values in per_size.items():
            into.setdefault(prefix + op, {}).setdefault(size, []).extend(values)


def _per_round(by_round, size, impl, base):
    """Per round, how fast ``impl`` ran against ``base`` at ``size`` (>1: faster), each the median of its round."""
    key = str(size)
    return {
        op: [median(r[f"{base}_{op}"][key]) / median(r[f"{impl}_{op}"][key]) for r in by_round] for op in ("put", "get")
    }


def run(rounds, repeats, scale=1.0):
    """``scale`` shrinks the iteration counts (the smoke test uses a tiny one)."""
    plan = [(size, max(2, int(ITERS[size] * scale))) for size in SIZES]
    shell()
    samples, by_round = {}, []
    with tempfile.TemporaryDirectory() as tmp:
        exe = build_c(tmp)
        run_cell("%shmem start -n 2")
        try:
            for _ in range(rounds):
                this_round = {}
                merge(this_round, in_cell(plan, repeats), "cell_")
                merge(this_round, script(plan, repeats), "script_")
                merge(this_round, script(plan, repeats, local_only=False), "ompidefault_")
                merge(this_round, c_loop(exe, plan, repeats), "c_")
                merge(this_round, numpy_copy(plan, repeats), "numpy_")
                merge(this_round, script(plan, repeats), "scriptagain_")  # the script against itself: the noise
                by_round.append(this_round)
                for impl, per_size in this_round.items():
                    merge(samples, {impl: per_size})
        finally:
            run_cell("%shmem stop")
    rows = []
    for size, iters in plan:
        seconds = {impl: median(per_size[str(size)]) for impl, per_size in samples.items()}
        rows.append(
            {
                "size": size,
                "iters": iters,
                "seconds": seconds,
                "gbps": {impl: size / s / 1e9 for impl, s in seconds.items()},
                "cell_vs_script_by_round": _per_round(by_round, size, "cell", "script"),
                "script_vs_itself_by_round": _per_round(by_round, size, "scriptagain", "script"),
            }
        )
    return {"plan": plan, "rounds": rounds, "repeats": repeats, "rows": rows, "samples": samples}
