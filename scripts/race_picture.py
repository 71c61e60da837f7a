"""Draw docs/race-picture.png, the picture of a race in docs/races.md (``make docs`` runs it; no PEs).

The race is the one the race detector finds in :data:`CELL` (a flag raised after a put, no fence): the
events below are what 2 PEs recorded for it on Open MPI's OSHMEM (``job.run(CELL, race=True)``; the
heap offsets and the private buffer's address made small), and the analysis and the drawing are the
notebook's own. ``python scripts/race_picture.py [PATH]``.
"""

import os
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)

from shmem_notebook.analysis.happens_before import find_races  # noqa: E402
from shmem_notebook.analysis.race_drawing import draw  # noqa: E402

#: the cell (docs/races.md shows it), run as %%pxshmem --race data=int64[4] flag=int64[1]
CELL = """shmem.barrier_all()
if me == 0:
    shmem.put(data, np.arange(4), 1)
    shmem.atomic_set(flag, 1, 1)
if me == 1:
    shmem.wait_until(flag, shmem.CMP.EQ, 1)
    seen = int(data[2])
shmem.barrier_all()
"""
NAMES = [["data", "sym", 0, 32, 8, 0], ["flag", "sym", 32, 40, 8, 0], ["np.arange(4)", "priv", 4096, 4128, 8, 1]]
EVENTS = {
    0: [
        ["sync", "barrier_all", 1, 0, None],
        ["rma", "put", 3, 1, 0, 32, "<i8", "priv", 4096, 4128, 0, None, None, None],
        ["rma", "atomic_set", 4, 1, 32, 40, "<i8", None, None, None, 0, [1], None, None],
        ["sync", "barrier_all", 8, 0, None],
    ],
    1: [
        ["sync", "barrier_all", 1, 0, None],
        ["wait", "wait_until", 6, 32, 40, "<i8", [1], "==", 1, 0],
        ["mem", "load", 7, "read", "sym", 16, 24, "<i8", None, None],
        ["sync", "barrier_all", 8, 0, None],
    ],
}
PATH = os.path.join(ROOT, "docs", "race-picture.png")


def race():
    """The one race the detector finds in :data:`EVENTS`."""
    traces = {pe: {"events": events, "names": NAMES, "ops": len(events)} for pe, events in EVENTS.items()}
    (found,) = find_races(traces, 2)
    return found


def main(path=PATH):
    found = race()
    fig = draw(found.picture())
    fig.savefig(path, dpi=90, metadata={"Software": None})  # no version in the file: the same bytes each time
    print(f"{found}\n-> {os.path.relpath(path)}")


if __name__ == "__main__":
    main(*sys.argv[1:])
