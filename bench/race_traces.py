"""Synthetic race traces, as the PEs send them (events of ``operations.EVENT_FIELDS``): the
analysis alone can be timed and tested without PEs (bench/races.py, tests/test_race_analysis.py).

Shapes copied from real recordings (``job.ask("race_stop")`` after the same cells).
"""

__all__ = ["ARR", "scattered_puts", "stencil", "names", "ping_pong", "credit_ring", "without_conditions"]

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
        traces[pe] = {
            "pe": pe,
            "npes": npes,
            "events": events,
            "names": names(),
            "ops": len(events),
            "truncated": None,
            "cap": None,
        }
    return traces


def stencil(iterations, npes=4, n=1000):
    """The halo exchange of bench/races.py's stencil cell as recorded: per sweep two halo puts
    (lines 8, 9), a barrier, the update reading ``u`` and writing ``new`` (line 11), a barrier,
    ``u[1:-1] = new[1:-1]`` (line 13), a barrier."""
    u, new = 2 << 40, 3 << 40
    traces = {}
    for pe in range(npes):
        left, right = (pe - 1) % npes, (pe + 1) % npes
        ev = [
            ["sync", "alloc", 2, 0, None],
            ["mem", "store", 4, "write", "sym", u + 8, u + 8 * (n + 1), "<f8"],
            ["sync", "barrier_all", 6, 0, None],
        ]
        for _ in range(iterations):
            ev += [
                ["rma", "put", 8, left, u + 8 * (n + 1), u + 8 * (n + 2), "<f8", "sym", u + 8, u + 16, 0, [0.0]],
                ["rma", "put", 9, right, u, u + 8, "<f8", "sym", u + 8 * n, u + 8 * (n + 1), 0, [0.0]],
                ["sync", "barrier_all", 10, 0, None],
                ["mem", "load", 11, "read", "sym", u, u + 8 * (n + 2), "<f8"],
                ["mem", "store", 11, "write", "priv", new + 8, new + 8 * (n + 1), "<f8"],
                ["sync", "barrier_all", 12, 0, None],
                ["mem", "load", 13, "read", "priv", new + 8, new + 8 * (n + 1), "<f8"],
                ["mem", "store", 13, "write", "sym", u + 8, u + 8 * (n + 1), "<f8"],
                ["sync", "barrier_all", 14, 0, None],
            ]
        ev.append(["sync", "free", 15, 0, None])
        nm = [["u", "sym", u, u + 8 * (n + 2), 8, 1], ["new", "priv", new, new + 8 * (n + 2), 8, 1]]
        traces[pe] = {"pe": pe, "npes": npes, "events": ev, "names": nm, "ops": len(ev), "truncated": None, "cap": None}
    return traces


def _two(e0, e1, arrays):
    end = ["sync", "barrier_all", 20, 0, None]
    names = [[name, "sym", lo, hi, 8, 0] for name, lo, hi in arrays]
    return {0: {"events": e0 + [end], "names": names}, 1: {"events": e1 + [end], "names": names}}


def ping_pong(rounds):
    """Notebook 03's flag protocol, ``rounds`` times: PE 0 puts 4 elements into PE 1's ``data``,
    fences, sets PE 1's ``flag`` to the round and waits for ``ack == round``; PE 1 waits for the
    flag, reads the data and sets PE 0's ``ack``. Race-free."""
    e0, e1 = [], []
    for k in range(1, rounds + 1):
        e0 += [
            ["rma", "put", 3, 1, 0, 32, "<i8", "priv", SRC, SRC + 32, 0, None, None, None],
            ["sync", "fence", 4, 0, None],
            ["rma", "atomic_set", 5, 1, 64, 72, "<i8", None, None, None, 0, [k], None, None],
            ["wait", "wait_until", 6, 128, 136, "<i8", [k], "==", k, 0],
        ]
        e1 += [
            ["wait", "wait_until", 9, 64, 72, "<i8", [k], "==", k, 0],
            ["mem", "load", 10, "read", "sym", 0, 8, "<i8", None],
            ["rma", "atomic_set", 11, 0, 128, 136, "<i8", None, None, None, 0, [k], None, None],
        ]
    return _two(e0, e1, [("data", 0, 32), ("flag", 64, 72), ("ack", 128, 136)])


def credit_ring(rounds):
    """Notebook 03's counter queue, ``rounds`` items through PE 1's two slots: PE 0 waits for
    ``freed >= k - 1`` before reusing a slot, puts, fences and increments ``filled``; PE 1 waits for
    ``filled >= k + 1``, reads the slot and increments ``freed``. Race-free."""
    e0, e1 = [], []
    for k in range(rounds):
        if k >= 2:
            e0.append(["wait", "wait_until", 3, 128, 136, "<i8", [k - 1], ">=", k - 1, 0])
        lo = 32 * (k % 2)
        e0 += [
            ["rma", "put", 4, 1, lo, lo + 32, "<i8", "priv", SRC, SRC + 32, 0, None, None, None],
            ["sync", "fence", 5, 0, None],
            ["rma", "atomic_inc", 6, 1, 64, 72, "<i8", None, None, None, 0, [1], None, None],
        ]
        e1 += [
            ["wait", "wait_until", 9, 64, 72, "<i8", [k + 1], ">=", k + 1, 0],
            ["mem", "load", 10, "read", "sym", lo, lo + 8, "<i8", None],
            ["rma", "atomic_inc", 11, 0, 128, 136, "<i8", None, None, None, 0, [1], None, None],
        ]
    return _two(e0, e1, [("slots", 0, 64), ("filled", 64, 72), ("freed", 128, 136)])


def without_conditions(traces):
    """The same traces with the waits' conditions left out: the analysis falls back to the writes
    whose values each wait saw (the rule before the condition rule; a baseline)."""
    return {pe: dict(t, events=[e[:7] if e[0] == "wait" else e for e in t["events"]]) for pe, t in traces.items()}
