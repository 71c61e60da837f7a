"""Inspector: one refresh of N PEs holding one array of 1 KiB / 8 MiB / 64 MiB each, against
``%shmem gather`` of the same array (what one would do without it): seconds and bytes moved.

"refresh" is the widget's ``Inspector.refresh()`` (gather + redraw), "gather_snapshot" the
data part alone, whose ``payload_bytes`` is what the PEs sent. This is where the inspector's
goals are measured (``inspector_refresh`` and ``inspector_payload`` in bench/goals.py, where their
limits are); tests/test_inspector.py only checks that the same refresh works.
"""

import time

from common import median, run_cell, shell
from shmem_notebook import current_job

SIZES = [1 << 10, 8 << 20, 64 << 20]


def available():
    """The inspector's snapshot API and its widget class (None where missing); None if there is no inspector."""
    try:
        from shmem_notebook import inspector

        gather = inspector.gather_snapshot
    except (ImportError, AttributeError):
        return None
    try:
        widget = inspector.Inspector
    except Exception:  # ipywidgets missing: measure the data part only
        widget = None
    return gather, widget


def _median_time(fn, repeats):
    samples, result = [], None
    for _ in range(repeats):
        start = time.perf_counter()
        result = fn()
        samples.append(time.perf_counter() - start)
    return median(samples), result


def run(n, sizes, repeats):
    api = available()
    if api is None:
        return {"available": False, "rows": []}
    gather, widget = api
    shell()
    heap = max(256 << 20, 2 * max(sizes) + (64 << 20))
    run_cell(f"%shmem start -n {n} --heap {heap}")
    rows = []
    try:
        job = current_job()
        for size in sizes:
            run_cell(f"%%pxshmem A=float64[{size // 8}]\nA[:] = np.random.default_rng(me).random(A.shape)")
            seconds, snap = _median_time(lambda: gather(job), repeats)
            row = {
                "n": n,
                "array_bytes": size,
                "gather_snapshot_s": seconds,
                "payload_bytes": snap.payload_bytes,
                "budget_bytes": snap.budget,
            }
            if widget is not None:
                view = widget(job, array="A")
                row["refresh_s"], _ = _median_time(view.refresh, repeats)
                view.close()
            row["gather_s"], values = _median_time(lambda: job.gather("A"), repeats)
            row["gather_bytes"] = values.nbytes
            rows.append(row)
            run_cell("%shmem free A")
    finally:
        run_cell("%shmem stop")
    return {"available": True, "widget": widget is not None, "n": n, "repeats": repeats, "rows": rows}
