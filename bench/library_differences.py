"""What OSHMPI does differently from the other two libraries, measured (docs/oshmpi.md cites it).

Runs one program under each built library's own launcher, outside the tool (no polite waiting, no
cell), 2 PEs, ``repeats`` times, interleaved; prints one table of medians:

- ``shmem.ptr`` to the other PE and to itself (an array or None);
- progress without a call: PE 1 spins 2 s in Python making no OpenSHMEM call while PE 0 puts
  64 B + ``quiet``, then does an ``atomic_fetch_add``, to it (seconds each takes); on OSHMPI also
  with the hint ``OSHMPI_AMO_OPS=fadd`` and with Open MPI's ``pt2pt`` one-sided component;
- busy polling: the CPU seconds (every thread of the process) PE 1 spends waiting 2 s in
  ``wait_until``, then in ``barrier_all``, while PE 0 sleeps, beside what 2 s of spinning in Python
  got (on a loaded machine a poller gets no more than that);
- where the heap lives: the mapping that holds a symmetric array (``/dev/shm`` file, SysV
  segment, or private memory) and how ``/dev/shm``'s use grew while each PE allocated and zeroed
  64 MiB of heap.

``.venv/bin/python bench/library_differences.py [--repeats N]``
"""

import json
import os
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)

from libraries import LIBRARIES, not_built  # noqa: E402

from common import launcher_environment, median  # noqa: E402
from shmem_notebook.launcher import local_slots  # noqa: E402
from shmem_notebook.launcher.library import library as library_named  # noqa: E402

HEAP = "160M"
PROGRAM = r"""
import json, os, sys, time
from shmem4py import shmem

me, npes = shmem.my_pe(), shmem.n_pes()
out = {}
x = shmem.zeros(64, dtype="int64")
out["ptr_other"] = shmem.ptr(x, (me + 1) % npes) is not None
out["ptr_self"] = shmem.ptr(x, me) is not None
src = shmem.zeros(8, dtype="int64")
shmem.barrier_all()
if me == 1:  # computes 2 s, making no OpenSHMEM call: the CPU a spinning PE gets under this load
    t, c = time.monotonic(), time.process_time()
    while time.monotonic() - t < 2.0:
        pass
    out["spin_cpu_s"] = time.process_time() - c
else:
    time.sleep(0.1)
    t = time.monotonic(); shmem.put(x[:8], src, 1); shmem.quiet(); out["put_busy_target_s"] = time.monotonic() - t
    t = time.monotonic(); shmem.atomic_fetch_add(x[8:9], 1, 1); out["atomic_busy_target_s"] = time.monotonic() - t
shmem.barrier_all()
flag, one = shmem.zeros(1, dtype="int32"), shmem.ones(1, dtype="int32")
shmem.barrier_all()
if me == 1:  # waits 2 s for PE 0, in wait_until then in a barrier
    c = time.process_time(); shmem.wait_until(flag, shmem.CMP.EQ, 1); out["wait_until_cpu_s"] = time.process_time() - c
    c = time.process_time(); shmem.barrier_all(); out["barrier_cpu_s"] = time.process_time() - c
else:
    time.sleep(2.0); shmem.put(flag, one, 1); shmem.quiet()
    time.sleep(2.0); shmem.barrier_all()
shmem.barrier_all()
st = os.statvfs("/dev/shm"); before = (st.f_blocks - st.f_bfree) * st.f_frsize
shmem.barrier_all()
big = shmem.zeros(64 << 20, dtype="uint8")  # zeroed: touched
address = big.__array_interface__["data"][0]
for line in open("/proc/self/maps"):
    lo, hi = (int(v, 16) for v in line.split()[0].split("-"))
    if lo <= address < hi:
        path = line.split()[5] if len(line.split()) > 5 else ""
        out["heap_in"] = "/dev/shm file" if path.startswith("/dev/shm") else "SysV segment" if "SYSV" in path else (
            "private memory" if line.split()[1].endswith("p") else "shared memory " + path)
shmem.barrier_all()
st = os.statvfs("/dev/shm"); out["dev_shm_grew_mib"] = ((st.f_blocks - st.f_bfree) * st.f_frsize - before) / 2**20
shmem.barrier_all()
with open(os.path.join(sys.argv[1], f"{me}.json"), "w") as fh:  # not stdout: the PEs' lines interleave
    json.dump(out, fh)
"""


#: the columns: label -> (library, environment added to the PEs'): the libraries as the tool runs
#: them, then OSHMPI's two ways out of atomics that wait (an MPI accumulate hint; another osc)
COLUMNS = {
    "`oshmem`": ("oshmem", {}),
    "`sos`": ("sos", {}),
    "`oshmpi`": ("oshmpi", {}),
    "`oshmpi`, `OSHMPI_AMO_OPS=fadd`": ("oshmpi", {"OSHMPI_AMO_OPS": "fadd"}),
    "`oshmpi`, `OMPI_MCA_osc=pt2pt`": ("oshmpi", {"OMPI_MCA_osc": "pt2pt"}),
}


def run_once(name, extra=None):
    """``{pe: {what: value}}`` of one 2-PE run of :data:`PROGRAM` under library ``name``'s launcher,
    with ``extra`` in the PEs' environment."""
    lib = library_named(name)
    added = {**launcher_environment(HEAP), **{k: v for k, v in lib.env.items() if k not in os.environ}, **(extra or {})}
    with tempfile.TemporaryDirectory() as tmp:
        script = os.path.join(tmp, "differences.py")
        with open(script, "w") as fh:
            fh.write(PROGRAM)
        cmd = lib.command(2, added, oversubscribe=2 > local_slots()) + [lib.python, script, tmp]
        proc = subprocess.run(
            cmd, env={**os.environ, **added}, capture_output=True, text=True, timeout=120, start_new_session=True
        )
        if proc.returncode:
            raise RuntimeError(f"{' '.join(cmd)} exited with {proc.returncode}: {proc.stderr[-500:]}")
        return {pe: json.load(open(os.path.join(tmp, f"{pe}.json"))) for pe in (0, 1)}


ROWS = [  # (label, PE, key)
    ("`shmem.ptr` to the other PE", 0, "ptr_other"),
    ("`shmem.ptr` to itself", 0, "ptr_self"),
    ("put 64 B + quiet to a PE computing 2 s without a call, s", 0, "put_busy_target_s"),
    ("`atomic_fetch_add` to a PE computing 2 s without a call, s", 0, "atomic_busy_target_s"),
    ("CPU of a PE spinning 2 s in Python (what one PE gets under this load), s", 1, "spin_cpu_s"),
    ("CPU of a PE waiting 2 s in `wait_until`, s", 1, "wait_until_cpu_s"),
    ("CPU of a PE waiting 2 s in `barrier_all`, s", 1, "barrier_cpu_s"),
    ("a symmetric array's mapping", 0, "heap_in"),
    ("`/dev/shm` grew while 2 PEs zeroed 64 MiB of heap each, MiB", 0, "dev_shm_grew_mib"),
]


def cell(values):
    if isinstance(values[0], bool):
        return "an array" if all(values) else "None" if not any(values) else "varies"
    if isinstance(values[0], str):
        return values[0] if len(set(values)) == 1 else " / ".join(sorted(set(values)))
    return f"{median(values):.3g} ({min(values):.3g}-{max(values):.3g})"


def main(repeats):
    built = [n for n in LIBRARIES if not_built(n) is None]
    names = [label for label, (name, _) in COLUMNS.items() if name in built]
    runs = {label: [] for label in names}
    for _ in range(repeats):
        for label in names:
            runs[label].append(run_once(*COLUMNS[label]))
    print(f"2 PEs, each library's own launcher, {repeats} runs interleaved, load average {os.getloadavg()[0]:.1f}:")
    print(f"median (range); not built: {', '.join(sorted(set(LIBRARIES) - set(built))) or 'none'}\n")
    print("| | " + " | ".join(names) + " |")
    print("| --- |" + " --- |" * len(names))
    for label, pe, key in ROWS:
        print(f"| {label} | " + " | ".join(cell([r[pe][key] for r in runs[n]]) for n in names) + " |")


if __name__ == "__main__":
    import argparse

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=3)
    main(parser.parse_args().repeats)
