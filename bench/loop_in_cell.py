"""Does anything on a PE slow a Python loop in a cell? The same timed loop (pure Python, then a
shmem4py put/wait pipeline of the NumPy 1 era's style) inside a cell and in a plain ``oshrun``
script, 2 PEs, medians; ``python bench/loop_in_cell.py [--repeats 5]``; writes bench/loop_in_cell.json."""

import argparse
import io
import json
import os
import re
import statistics
import subprocess
import sys
import tempfile

import shmem_notebook
from shmem_notebook.launcher import local_slots, platform_environment

HERE = os.path.dirname(os.path.abspath(__file__))
LOOP = (
    "import time\nt0 = time.perf_counter()\nfor i in range(3_000_000):\n    pass\n"
    "print('seconds', time.perf_counter() - t0)\n"
)
PIPE = """import time, numpy
n = 4000
data = shmem.zeros(n, dtype='d'); flag = shmem.zeros(n, dtype='i'); one = shmem.zeros(1, dtype='i'); one[0] = 1
shmem.barrier_all()
t0 = time.perf_counter()
for j in range(n):
    if me > 0:
        shmem.wait_until(flag[j:j+1], shmem.CMP.EQ, 1)
    if me < npes - 1:
        shmem.put(data[j:j+1], data[j:j+1] + 1, me + 1); shmem.fence(); shmem.put(flag[j:j+1], one, me + 1)
shmem.barrier_all()
print('seconds', time.perf_counter() - t0)
shmem.free(data); shmem.free(flag); shmem.free(one)
"""
CASES = {"python loop (3e6 iterations)": LOOP, "put/wait pipeline (4000 steps)": PIPE}


def seconds(outputs):
    """The slowest PE's time (each PE prints ``seconds X``)."""
    return max(float(x) for text in outputs for x in re.findall(r"seconds\s*([0-9.eE+-]+)", text))


def plain(code):
    with tempfile.NamedTemporaryFile("w", suffix=".py", delete=False) as f:
        f.write("from shmem4py import shmem\nme, npes = shmem.my_pe(), shmem.n_pes()\n" + code)
    env = {**os.environ, **platform_environment(heap="32M", local_only=True)}
    over = ["--oversubscribe"] if 2 > local_slots() else []
    out = subprocess.run(
        ["oshrun", "-n", "2", *over, sys.executable, f.name],
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
        check=True,
    ).stdout
    os.unlink(f.name)
    return seconds([out])


def main(repeats):
    rows = {}
    with shmem_notebook.Job(2, heap="32M").start() as job:
        for name, code in CASES.items():
            cell = [seconds(job.run(code, stdout=io.StringIO()).stdout.values()) for _ in range(repeats)]
            script = [plain(code) for _ in range(repeats)]
            rows[name] = {"cell_s": statistics.median(cell), "script_s": statistics.median(script)}
            rows[name]["ratio"] = rows[name]["cell_s"] / rows[name]["script_s"]
            print(
                f"{name:<32} cell {rows[name]['cell_s']:.3f} s  script {rows[name]['script_s']:.3f} s  "
                f"ratio {rows[name]['ratio']:.2f}",
                flush=True,
            )
    with open(os.path.join(HERE, "loop_in_cell.json"), "w") as f:
        json.dump({"repeats": repeats, "rows": rows}, f, indent=1)


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=5)
    main(parser.parse_args().repeats)
