"""Synthetic race traces, as the PEs send them (events of ``operations.EVENT_FIELDS``): the
analysis alone can be timed and tested without PEs (bench/races.py, tests/test_race_analysis.py).

Shapes copied from real recordings (``job.ask("record_stop")`` after the same cells).
"""

__all__ = ["ARR", "scattered_puts", "stencil", "names"]

#: the symmetric array ``arr=int64[100003]`` at symmetric offset 0; a private 8-byte source
ARR, SRC = 0, 1 << 40


def names():
    return [["arr", "sym", ARR, ARR + 8 * 100003, 8, 0], ["src", "priv", SRC, SRC + 8, 8, 1]]


def scattered_puts(per_pe, npes=2, race_at=None):
    """``shmem.put(arr[j:j + 1], src, (me + 1) % npes)`` for ``j = (i * 7919) % 100003``, ``per_pe``
    times on each PE (line 5), then ``shmem.barrier_all()`` (line 6). ``race_at``: PE 1 also loads
    ``arr[race_at]`` at line 7 before the barrier (a race with PE 0's put there, if it made one)."""
    traces = {}
    for pe in range(npes):
        other = (pe + 1) % npes
        events = []
        for i in range(per_pe):
            lo = ARR + 8 * ((i * 7919) % 100003)
            events.append(["rma", "put", 5, other, lo, lo + 8, "<i8", "priv", SRC, SRC + 8, 0, [1]])
        if race_at is not None and pe == 1:
            lo = ARR + 8 * race_at
            events.append(["mem", "load", 7, "read", "sym", lo, lo + 8, "<i8"])
        events.append(["sync", "barrier_all", 6, 0, None])
        traces[pe] = {"pe": pe, "npes": npes, "events": events, "names": names(), "ops": len(events),
                      "truncated": None, "cap": None}
    return traces


def stencil(iterations, npes=4, n=1000):
    """The halo exchange of bench/races.py's stencil cell as recorded: per sweep two halo puts
    (lines 8, 9), a barrier, the update reading ``u`` and writing ``new`` (line 11), a barrier,
    ``u[1:-1] = new[1:-1]`` (line 13), a barrier."""
    u, new = 2 << 40, 3 << 40
    traces = {}
    for pe in range(npes):
        left, right = (pe - 1) % npes, (pe + 1) % npes
        ev = [["sync", "alloc", 2, 0, None], ["mem", "store", 4, "write", "sym", u + 8, u + 8 * (n + 1), "<f8"],
              ["sync", "barrier_all", 6, 0, None]]
        for _ in range(iterations):
            ev += [["rma", "put", 8, left, u + 8 * (n + 1), u + 8 * (n + 2), "<f8", "sym", u + 8, u + 16, 0, [0.0]],
                   ["rma", "put", 9, right, u, u + 8, "<f8", "sym", u + 8 * n, u + 8 * (n + 1), 0, [0.0]],
                   ["sync", "barrier_all", 10, 0, None],
                   ["mem", "load", 11, "read", "sym", u, u + 8 * (n + 2), "<f8"],
                   ["mem", "store", 11, "write", "priv", new + 8, new + 8 * (n + 1), "<f8"],
                   ["sync", "barrier_all", 12, 0, None],
                   ["mem", "load", 13, "read", "priv", new + 8, new + 8 * (n + 1), "<f8"],
                   ["mem", "store", 13, "write", "sym", u + 8, u + 8 * (n + 1), "<f8"],
                   ["sync", "barrier_all", 14, 0, None]]
        ev.append(["sync", "free", 15, 0, None])
        nm = [["u", "sym", u, u + 8 * (n + 2), 8, 1], ["new", "priv", new, new + 8 * (n + 2), 8, 1]]
        traces[pe] = {"pe": pe, "npes": npes, "events": ev, "names": nm, "ops": len(ev), "truncated": None,
                      "cap": None}
    return traces
