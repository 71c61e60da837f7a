"""The shmem4py put/get loop, run unchanged from a ``%%pxshmem`` cell and as a plain ``oshrun`` script.

OSU style: a barrier before timing, a few warm-up operations, then ``iters``
operations from PE 0 to PE 1. A put is followed by ``shmem.quiet()`` (so its
data has arrived); a get blocks until it has. Only PE 0 times.
"""


def measure(shmem, src, dst, plan, repeats):
    """``plan``: [(size, iters), ...]. Returns, on PE 0, {"put"|"get": {size: [seconds per op, ...]}}."""
    import time

    me = shmem.my_pe()
    out = {"put": {}, "get": {}}
    for size, iters in plan:
        s, d = src[:size], dst[:size]
        for _ in range(repeats):
            for op in ("put", "get"):
                shmem.barrier_all()
                if me == 0:
                    for _ in range(max(1, iters // 10)):  # warm-up
                        shmem.put(d, s, 1) if op == "put" else shmem.get(s, d, 1)
                    shmem.quiet()
                    start = time.perf_counter()
                    if op == "put":
                        for _ in range(iters):
                            shmem.put(d, s, 1)
                            shmem.quiet()
                    else:
                        for _ in range(iters):
                            shmem.get(s, d, 1)
                    out[op].setdefault(str(size), []).append((time.perf_counter() - start) / iters)
                shmem.barrier_all()
    return out
