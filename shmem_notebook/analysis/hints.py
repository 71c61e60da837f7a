"""The fix a race report proposes: the synchronisation that would order two racing accesses
(client side, for :mod:`.races`)."""

__all__ = ["hint"]


def hint(a, b, sim):
    """The synchronisation that would order ``a`` before ``b`` (``a`` issued first if either was)."""
    issued_before = b.point[a.pe] >= a.point[a.pe]
    if a.mode == "atomic" and b.mode == "atomic":
        return (f"atomics on one location must all use one datatype ({a.dtype} and {b.dtype} here); "
                "use the same dtype, or order them with shmem.barrier_all()")
    if a.locks or b.locks:
        return "hold the same lock around both (shmem.set_lock / shmem.clear_lock)"
    if issued_before:  # what is missing is completion
        if a.ctx:
            return (f"the {a.op} on a context is completed only by ctx.quiet() (shmem.quiet() and "
                    "shmem.barrier_all() complete the default context only): call ctx.quiet() before the synchronisation")
        if a.pe == b.pe:
            return f"the {a.op} may still be in flight: call shmem.quiet() between them"
        if _flag_path(a, b, sim):
            return (f"the {a.op} may arrive after the flag: put a shmem.fence() (or shmem.quiet()) between "
                    "the data and the flag write")
        return (f"the {a.op} is not complete when the other access runs (shmem.sync_all() completes nothing): "
                "call shmem.quiet() after it, before the synchronisation, or use shmem.barrier_all()")
    for first, second in ((a, b), (b, a)):
        if _flag_path(first, second, sim, before=True):
            return (f"PE {first.pe} writes the flag PE {second.pe} waits on before line {first.line}'s {first.op}: "
                    "do the data first, then shmem.fence(), then the flag")
    if a.mode == "atomic" or b.mode == "atomic":
        return ("use atomics for every access to this location (e.g. shmem.atomic_fetch / atomic_set), "
                "or a shmem.barrier_all() between them")
    return "a shmem.barrier_all() (or put + quiet + a flag the reader waits on) between them orders them"


def _flag_path(a, b, sim, before=False):
    """Is ``b`` after a wait that saw a write ``a``'s PE issued after ``a`` (``before``: before ``a``)?"""
    for (wpe, wi), cands in sim.waited.items():
        point = sim.points[wpe][wi]
        if point is None or b.point[wpe] < point[wpe]:
            continue
        if any(q == a.pe and (j < a.index if before else j > a.index) for q, j in cands):
            return True
    return False
