"""What the library comparison times inside the PEs (its source is sent in a cell; shmem4py only).

OSU style (OMB-Py's methodology): a barrier before timing, warm-up calls, then each call timed
on its own and the median taken, which a PE losing its core for a time slice (more PEs than
cores, a shared machine) moves less than the mean. Collective calls run the same number of
times on every PE: a short calibration agrees on it (``max_reduce``) so that a slow library
gets fewer iterations instead of an endless run.
"""


def _stats(samples):
    """Median, fastest and 90th percentile of ``samples`` (seconds), in microseconds: a median far above
    the fastest call says the calls mostly waited (for a core, a progress thread), not the transfer."""
    samples = sorted(samples)
    k = len(samples) // 2
    middle = samples[k] if len(samples) % 2 else (samples[k - 1] + samples[k]) / 2
    return {
        "us": middle * 1e6,
        "min_us": samples[0] * 1e6,
        "p90_us": samples[int(0.9 * (len(samples) - 1))] * 1e6,
        "iters": len(samples),
    }


def putget(shmem, sizes, iters, budget):
    """PE 0 puts to / gets from PE 1 (the others wait in a barrier). Collective.

    A put is followed by ``shmem.quiet()`` (its data has arrived); a get returns when it has.
    Returns, on PE 0, ``{"put"|"get": {size: _stats}}`` (``{}`` elsewhere):
    ``iters`` calls per size at most, fewer when they would take more than ``budget`` seconds.
    """
    import time

    clock = time.perf_counter
    me = shmem.my_pe()
    big = max(sizes)
    src, dst = shmem.zeros(big, dtype="uint8"), shmem.zeros(big, dtype="uint8")
    out = {"put": {}, "get": {}}
    for size in sizes:
        s, d = src[:size], dst[:size]
        for op in ("put", "get"):
            shmem.barrier_all()
            if me == 0:
                call = (
                    (lambda d=d, s=s: (shmem.put(d, s, 1), shmem.quiet()))
                    if op == "put"
                    else (lambda d=d, s=s: shmem.get(s, d, 1))
                )
                for _ in range(max(2, iters // 20)):  # warm-up
                    call()
                samples, started = [], clock()
                for _ in range(iters):
                    t = clock()
                    call()
                    samples.append(clock() - t)
                    if t - started > budget and len(samples) >= 10:
                        break
                out[op][str(size)] = _stats(samples)
            shmem.barrier_all()
    shmem.free(src)
    shmem.free(dst)
    return out if me == 0 else {}


def _agree(shmem, seconds_per_call, iters, budget):
    """Iterations every PE runs: ``iters`` or fewer so that the slowest PE's estimate fits ``budget``. Collective."""
    import numpy as np

    mine, worst = shmem.zeros(1, dtype="float64"), shmem.zeros(1, dtype="float64")
    mine[0] = seconds_per_call
    shmem.barrier_all()
    shmem.max_reduce(worst, mine)
    per_call = float(worst[0])
    shmem.free(mine)
    shmem.free(worst)
    return int(np.clip(budget / per_call if per_call > 0 else iters, 10, iters))


def _timed(shmem, call, iters, budget, warmup=3):
    """:func:`_stats` of ``call()`` on this PE, every PE calling it the same number of times. Collective."""
    import time

    clock = time.perf_counter
    shmem.barrier_all()
    t = clock()
    for _ in range(warmup):
        call()
    n = _agree(shmem, (clock() - t) / warmup, iters, budget)
    shmem.barrier_all()
    samples = []
    for _ in range(n):
        t = clock()
        call()
        samples.append(clock() - t)
    return _stats(samples)


def collectives(shmem, sizes, iters, budget):
    """``barrier_all``, ``fcollect`` and ``alltoall`` on TEAM_WORLD (``sizes``: bytes per PE block), as a
    cell calls them. Collective. Returns this PE's ``{"barrier_all": {...}, "fcollect/SIZE": {...}, ...}``."""
    npes = shmem.n_pes()
    out = {"barrier_all": _timed(shmem, shmem.barrier_all, iters, budget)}
    for size in sizes:
        count = max(1, size // 8)
        src, dst = shmem.zeros(count * npes, dtype="int64"), shmem.zeros(count * npes, dtype="int64")
        out[f"fcollect/{size}"] = _timed(
            shmem, lambda dst=dst, src=src, count=count: shmem.fcollect(dst, src[:count]), iters, budget
        )
        out[f"alltoall/{size}"] = _timed(shmem, lambda dst=dst, src=src: shmem.alltoall(dst, src), iters, budget)
        shmem.barrier_all()
        shmem.free(src)
        shmem.free(dst)
    return out


def team_sync(shmem, iters, budget):
    """``Team.sync()`` on a copy of TEAM_WORLD (``split_strided(0, 1, npes)``), native or emulated as the
    job decided; ``sync_all()`` beside it. Collective. Returns this PE's ``{"team_sync": ..., "sync_all": ...}``."""
    team = shmem.TEAM_WORLD.split_strided(0, 1, shmem.n_pes())
    try:
        return {
            "team_sync": _timed(shmem, team.sync, iters, budget),
            "sync_all": _timed(shmem, shmem.sync_all, iters, budget),
        }
    finally:
        team.destroy()
        shmem.barrier_all()
