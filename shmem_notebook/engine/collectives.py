"""Collectives step by step, one-sided, for teaching (PE side; bound as ``collectives`` in cells).

The algorithms the seed papers compare, built from puts and signals (a put, a
fence, an atomic add on the receiver's step counter, :func:`.teams.signal`):

==============  ======================================================
``broadcast``   ``binomial``, ``linear``
``fcollect``    ``ring``, ``recursive_doubling``, ``bruck``
``reduce``      ``recursive_doubling``, ``rabenseifner`` (reduce-scatter + allgather)
``alltoall``    ``pairwise`` (exchange), ``linear`` (round robin)
==============  ======================================================

Each takes the shmem4py call's arguments plus ``algorithm=`` (``"library"``
calls shmem4py's own) and leaves the same result. Every call is collective over
``team`` (default TEAM_WORLD): it starts and ends with a team sync, so a call's
puts never meet the previous or the next call's. Non-power-of-two PE counts fold
the extra PEs in (first step) and out (last step). Reductions stage what they
receive in a symmetric scratch reserved at start (:data:`SCRATCH_BYTES`), in
chunks when the vector is larger. While a step runs, ``this_pe.collective_label`` says which
(``--trace`` records it with every put, for the replay).

Longer than 400 lines: the teaching algorithms are kept side by side on purpose, so a
student reads them together.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import numpy as np

from ..errors import InputError
from . import heap, teams
from .context import this_pe

if TYPE_CHECKING:
    from collections.abc import Callable
    from typing import Protocol, TypeAlias

    import numpy.typing as npt

    _Ufunc: TypeAlias = Callable[[npt.NDArray[Any], npt.NDArray[Any]], npt.NDArray[Any]]

    class _Reduction(Protocol):
        def __call__(
            self,
            target: npt.NDArray[Any],
            source: npt.NDArray[Any],
            size: int | None = None,
            team: Any = None,
            algorithm: str | None = None,
        ) -> Any: ...


__all__ = [
    "ALGORITHMS",
    "SCRATCH_BYTES",
    "install",
    "broadcast",
    "fcollect",
    "reduce",
    "allreduce",
    "sum_reduce",
    "prod_reduce",
    "max_reduce",
    "min_reduce",
    "and_reduce",
    "or_reduce",
    "xor_reduce",
    "alltoall",
]

#: collective -> its algorithms (the first is the default); "library" is shmem4py's own call
ALGORITHMS = {
    "broadcast": ("binomial", "linear", "library"),
    "fcollect": ("ring", "recursive_doubling", "bruck", "library"),
    "reduce": ("recursive_doubling", "rabenseifner", "library"),
    "alltoall": ("pairwise", "linear", "library"),
}
#: symmetric scratch per PE for the reductions' incoming partial vectors
SCRATCH_BYTES = 256 << 10
_FOLD_OUT = teams.STEPS - 1  # the step counter of the fold out


def install(shmem_module: Any) -> None:
    """Reserve the scratch. Collective: every PE at engine start (after teams.install)."""
    this_pe.scratch = heap.reserve(shmem_module.zeros(SCRATCH_BYTES, dtype="u1"), "collectives: scratch")


def _algorithm(collective: str, algorithm: str | None) -> str:
    this_pe.collective_calls += 1  # numbers the calls in a trace
    choices = ALGORITHMS[collective]
    algorithm = choices[0] if algorithm is None else str(algorithm).lower().replace(" ", "_").replace("-", "_")
    if algorithm not in choices:
        raise InputError(f"collectives.{collective}: unknown algorithm {algorithm!r}; use one of {', '.join(choices)}")
    return algorithm


def _step(collective: str, algorithm: str, step: int, of: int, text: str) -> None:
    this_pe.collective_label = {"collective": collective, "algorithm": algorithm, "step": step, "of": of, "text": text}


def _done(m: teams.Members) -> None:
    this_pe.collective_label = None
    teams.team_sync(m)


def _put(t: npt.NDArray[Any], s: npt.NDArray[Any], pe: int) -> None:
    """Put the local ``s`` into the symmetric ``t`` on world PE ``pe`` (also to itself, so that a
    trace sees every write of the result). A put to oneself is complete only at ``quiet``, as any
    put is (Sandia OpenSHMEM delivers it through the network): later steps read what it wrote."""
    if s.size:
        this_pe.shmem.put(t, s, pe)
        if pe == this_pe.shmem.my_pe():
            this_pe.shmem.quiet()


def _log2(n: int) -> int:
    return n.bit_length() - 1


def _fold(n: int) -> tuple[int, int]:
    """(p, r): the largest power of two <= n and the PEs beyond it."""
    p = 1 << _log2(n)
    return p, n - p


# --- broadcast -------------------------------------------------------------------


def broadcast(
    target: npt.NDArray[Any],
    source: npt.NDArray[Any],
    root: int,
    size: int | None = None,
    team: Any = None,
    algorithm: str | None = None,
) -> Any:
    """Collective over ``team``: ``source`` of team PE ``root`` into ``target`` on every member.

    ``linear``: the root puts to each member in turn. ``binomial``: in round k the
    2^k PEs that have the data each put to one that has not.
    """
    algorithm = _algorithm("broadcast", algorithm)
    if algorithm == "library":
        return this_pe.shmem.broadcast(target, source, root, size=size, team=team)
    m = teams.members(team, "collectives.broadcast")
    t, s = teams.flat_pair(target, source, "collectives.broadcast")
    size = teams.checked_size(size, min(t.size, s.size), "collectives.broadcast")
    n, rank = len(m.pes), m.rank
    if not 0 <= root < n:
        raise InputError(f"collectives.broadcast: root={root} is not a PE of this team of {n}")
    t, s = t[:size], s[:size]
    teams.team_sync(m)
    if rank == root:
        _put(t, s, m.pes[rank])
    v = (rank - root) % n  # rank relative to the root
    if algorithm == "linear":
        if rank == root:
            for k in range(1, n):
                dest = (root + k) % n
                _step("broadcast", "linear", k, n - 1, f"linear, step {k} of {n - 1}: the root puts to PE {dest}")
                _put(t, s, m.pes[dest])
                teams.signal(m, 0, m.pes[dest])
        elif n > 1:
            teams.wait_signal(m, 0)
    else:
        rounds = (n - 1).bit_length()
        for k in range(rounds):
            d = 1 << k
            if d <= v < 2 * d:
                teams.wait_signal(m, k)  # my data arrives in this round
            if v < d and v + d < n:
                dest = (v + d + root) % n
                _step(
                    "broadcast",
                    "binomial",
                    k + 1,
                    rounds,
                    f"binomial tree, step {k + 1} of {rounds}: the {d} PE(s) holding the data put to PE i+{d}",
                )
                _put(t, t, m.pes[dest])
                teams.signal(m, k, m.pes[dest])
    _done(m)


# --- fcollect ----------------------------------------------------------------------


def fcollect(
    target: npt.NDArray[Any],
    source: npt.NDArray[Any],
    size: int | None = None,
    team: Any = None,
    algorithm: str | None = None,
) -> Any:
    """Collective over ``team``: every member's ``size`` elements, concatenated in team order.

    ``ring``: n-1 steps, each PE forwards to its right neighbour the block it got
    last. ``recursive_doubling``: log2 n steps, PE i swaps everything it has with
    PE i XOR 2^k. ``bruck``: ceil(log2 n) steps, PE i sends what it has to PE i-2^k.
    """
    algorithm = _algorithm("fcollect", algorithm)
    if algorithm == "library":
        return this_pe.shmem.fcollect(target, source, size=size, team=team)
    m = teams.members(team, "collectives.fcollect")
    t, s = teams.flat_pair(target, source, "collectives.fcollect")
    size = teams.checked_size(size, s.size, "collectives.fcollect")
    n, rank = len(m.pes), m.rank
    if size * n > t.size:
        raise InputError(f"collectives.fcollect: target has {t.size} elements, needs {size} x {n} PEs")

    def block(j: int) -> npt.NDArray[Any]:
        return t[(j % n) * size : (j % n + 1) * size]

    teams.team_sync(m)
    _put(block(rank), s[:size], m.pes[rank])
    if algorithm == "ring":
        right = m.pes[(rank + 1) % n]
        for k in range(n - 1):
            if k:
                teams.wait_signal(m, (k - 1) % _FOLD_OUT)
            which = "its own block" if k == 0 else f"block i-{k} (received in step {k})"
            _step("fcollect", "ring", k + 1, n - 1, f"ring, step {k + 1} of {n - 1}: PE i puts {which} to PE i+1")
            _put(block(rank - k), block(rank - k), right)
            teams.signal(m, k % _FOLD_OUT, right)
        if n > 1:
            teams.wait_signal(m, (n - 2) % _FOLD_OUT)
    elif algorithm == "bruck":
        rounds = (n - 1).bit_length()
        for k in range(rounds):
            d = 1 << k
            count = min(d, n - d)  # blocks rank .. rank+count-1 go to rank-d
            _step(
                "fcollect",
                "bruck",
                k + 1,
                rounds,
                f"Bruck, step {k + 1} of {rounds}: PE i puts "
                f"{'its own block' if count == 1 else f'blocks i..i+{count - 1}'} to PE i-{d}",
            )
            dest = m.pes[(rank - d) % n]
            for j in range(rank, rank + count):
                _put(block(j), block(j), dest)
            teams.signal(m, k, dest)
            teams.wait_signal(m, k)
    else:
        _recursive_doubling_fcollect(m, block)
    _done(m)


def _recursive_doubling_fcollect(m: teams.Members, block: Callable[[int], npt.NDArray[Any]]) -> None:
    n, rank = len(m.pes), m.rank
    p, r = _fold(n)
    steps = _log2(p)
    of = steps + (2 if r else 0)
    if r:
        _step(
            "fcollect",
            "recursive_doubling",
            1,
            of,
            f"recursive doubling, fold in: PE i >= {p} puts its block to PE i-{p}",
        )
        if rank >= p:
            _put(block(rank), block(rank), m.pes[rank - p])
            teams.signal(m, 0, m.pes[rank - p])
        elif rank < r:
            teams.wait_signal(m, 0)
    if rank < p:
        for k in range(steps):
            d = 1 << k
            partner = rank ^ d
            base = rank - rank % d
            _step(
                "fcollect",
                "recursive_doubling",
                k + 1 + bool(r),
                of,
                f"recursive doubling, step {k + 1} of {steps}: PE i exchanges with PE i XOR {d}",
            )
            for j in range(base, base + d):
                for owner in (j, j + p):
                    if owner < n:
                        _put(block(owner), block(owner), m.pes[partner])
            teams.signal(m, 1 + k, m.pes[partner])
            teams.wait_signal(m, 1 + k)
    if r:
        _step(
            "fcollect",
            "recursive_doubling",
            of,
            of,
            f"recursive doubling, fold out: PE i < {r} puts everything to PE i+{p}",
        )
        if rank < r:
            for j in range(n):
                _put(block(j), block(j), m.pes[rank + p])
            teams.signal(m, _FOLD_OUT, m.pes[rank + p])
        elif rank >= p:
            teams.wait_signal(m, _FOLD_OUT)


# --- reduce (allreduce) --------------------------------------------------------------


def reduce(
    target: npt.NDArray[Any],
    source: npt.NDArray[Any],
    op: str = "sum",
    size: int | None = None,
    team: Any = None,
    algorithm: str | None = None,
) -> Any:
    """Collective over ``team``: ``op`` of every member's ``source`` into ``target`` (an allreduce).

    ``recursive_doubling``: log2 n steps, PE i swaps its whole partial result with
    PE i XOR 2^k. ``rabenseifner``: a reduce-scatter by recursive halving (each PE
    ends owning 1/n of the vector, reduced), then an allgather by recursive doubling.
    """
    algorithm = _algorithm("reduce", algorithm)
    if algorithm == "library":
        return this_pe.shmem.reduce(target, source, op, size=size, team=team)
    m = teams.members(team, "collectives.reduce")
    t, s = teams.flat_pair(target, source, "collectives.reduce")
    name = teams.check_reduce(op, t.dtype, "collectives.reduce")
    size = teams.checked_size(size, min(t.size, s.size), "collectives.reduce")
    ufunc = teams.REDUCE_UFUNCS[name]
    p, _ = _fold(len(m.pes))
    regions = _log2(p) + 1
    cap = max(1, SCRATCH_BYTES // regions // 16 * 16 // t.itemsize)  # elements per region
    work: npt.NDArray[Any] | None
    for lo in range(0, max(size, 1), cap):  # one run per chunk of the scratch's size
        hi = min(size, lo + cap)
        work = np.array(s[lo:hi])
        teams.team_sync(m)
        region = [
            this_pe.scratch[k * cap * t.itemsize : (k * cap + hi - lo) * t.itemsize].view(t.dtype)
            for k in range(regions)
        ]
        if algorithm == "recursive_doubling":
            work = _recursive_doubling_reduce(m, work, region, ufunc)
            if work is not None:
                _put(t[lo:hi], work, m.pes[m.rank])
        else:
            _rabenseifner(m, work, region, ufunc, t[lo:hi])
        _fold_out(m, t[lo:hi], algorithm)
        _done(m)


allreduce = reduce


def _combine(
    ufunc: _Ufunc, mine: npt.NDArray[Any], theirs: npt.NDArray[Any], rank: int, partner: int
) -> npt.NDArray[Any]:
    """Lower rank's partial first, so both partners compute bit-identical results."""
    return ufunc(mine, theirs) if rank < partner else ufunc(theirs, mine)


def _fold_in(
    m: teams.Members, work: npt.NDArray[Any], region: list[npt.NDArray[Any]], ufunc: _Ufunc, algorithm: str, of: int
) -> npt.NDArray[Any]:
    n, rank = len(m.pes), m.rank
    p, r = _fold(n)
    if not r:
        return work
    _step(
        "reduce", algorithm, 1, of, f"{algorithm.replace('_', ' ')}, fold in: PE i >= {p} puts its vector to PE i-{p}"
    )
    if rank >= p:
        _put(region[0], work, m.pes[rank - p])
        teams.signal(m, 0, m.pes[rank - p])
    elif rank < r:
        teams.wait_signal(m, 0)
        work = ufunc(work, region[0])
    return work


def _fold_out(m: teams.Members, t: npt.NDArray[Any], algorithm: str) -> None:
    n, rank = len(m.pes), m.rank
    p, r = _fold(n)
    if not r:
        return
    of = _log2(p) * (2 if algorithm == "rabenseifner" else 1) + 2
    _step(
        "reduce", algorithm, of, of, f"{algorithm.replace('_', ' ')}, fold out: PE i < {r} puts the result to PE i+{p}"
    )
    if rank < r:
        _put(t, t, m.pes[rank + p])
        teams.signal(m, _FOLD_OUT, m.pes[rank + p])
    elif rank >= p:
        teams.wait_signal(m, _FOLD_OUT)


def _recursive_doubling_reduce(
    m: teams.Members, work: npt.NDArray[Any], region: list[npt.NDArray[Any]], ufunc: _Ufunc
) -> npt.NDArray[Any] | None:
    n, rank = len(m.pes), m.rank
    p, r = _fold(n)
    steps = _log2(p)
    of = steps + (2 if r else 0)
    work = _fold_in(m, work, region, ufunc, "recursive_doubling", of)
    if rank >= p:
        return None  # the result comes at the fold out
    for k in range(steps):
        d = 1 << k
        partner = rank ^ d
        _step(
            "reduce",
            "recursive_doubling",
            k + 1 + bool(r),
            of,
            f"recursive doubling, step {k + 1} of {steps}: PE i exchanges with PE i XOR {d}",
        )
        _put(region[k + 1], work, m.pes[partner])
        teams.signal(m, 1 + k, m.pes[partner])
        teams.wait_signal(m, 1 + k)
        work = _combine(ufunc, work, region[k + 1], rank, partner)
    return work


def _rabenseifner(
    m: teams.Members, work: npt.NDArray[Any], region: list[npt.NDArray[Any]], ufunc: _Ufunc, t: npt.NDArray[Any]
) -> None:
    n, rank = len(m.pes), m.rank
    p, r = _fold(n)
    steps = _log2(p)
    of = 2 * steps + (2 if r else 0)
    work = _fold_in(m, work, region, ufunc, "rabenseifner", of)
    if rank >= p:
        return
    count = len(work)
    bounds = [j * count // p for j in range(p + 1)]  # chunk j = work[bounds[j]:bounds[j+1]]
    lo, hi = 0, p  # the chunks this PE still reduces
    for k in range(steps):
        d = p >> (k + 1)
        partner = rank ^ d
        mid = (lo + hi) // 2
        keep, send = ((mid, hi), (lo, mid)) if rank & d else ((lo, mid), (mid, hi))
        _step(
            "reduce",
            "rabenseifner",
            k + 1 + bool(r),
            of,
            f"Rabenseifner reduce-scatter, step {k + 1} of {steps}: PE i sends half of its part to PE i XOR {d}",
        )
        a, b = bounds[send[0]], bounds[send[1]]
        _put(region[k + 1][: b - a], work[a:b], m.pes[partner])
        teams.signal(m, 1 + k, m.pes[partner])
        teams.wait_signal(m, 1 + k)
        a, b = bounds[keep[0]], bounds[keep[1]]
        work[a:b] = _combine(ufunc, work[a:b], region[k + 1][: b - a], rank, partner)
        lo, hi = keep
    _put(t[bounds[lo] : bounds[hi]], work[bounds[lo] : bounds[hi]], m.pes[rank])
    for k in range(steps):
        d = 1 << k
        partner = rank ^ d
        _step(
            "reduce",
            "rabenseifner",
            steps + k + 1 + bool(r),
            of,
            f"Rabenseifner allgather, step {k + 1} of {steps}: PE i exchanges its reduced part with PE i XOR {d}",
        )
        a, b = bounds[lo], bounds[hi]
        _put(t[a:b], t[a:b], m.pes[partner])
        teams.signal(m, 1 + steps + k, m.pes[partner])
        teams.wait_signal(m, 1 + steps + k)
        width = hi - lo
        lo = lo - width if rank & d else lo
        hi = lo + 2 * width


def _reduction(op: str) -> _Reduction:
    def reduction(
        target: npt.NDArray[Any],
        source: npt.NDArray[Any],
        size: int | None = None,
        team: Any = None,
        algorithm: str | None = None,
    ) -> Any:
        return reduce(target, source, op, size=size, team=team, algorithm=algorithm)

    reduction.__name__ = f"{op}_reduce"
    reduction.__doc__ = f"Collective over ``team``: :func:`reduce` with op={op!r}."
    return reduction


sum_reduce, prod_reduce = _reduction("sum"), _reduction("prod")
max_reduce, min_reduce = _reduction("max"), _reduction("min")
and_reduce, or_reduce, xor_reduce = _reduction("and"), _reduction("or"), _reduction("xor")


# --- alltoall ---------------------------------------------------------------------------


def alltoall(
    target: npt.NDArray[Any],
    source: npt.NDArray[Any],
    size: int | None = None,
    team: Any = None,
    algorithm: str | None = None,
) -> Any:
    """Collective over ``team``: block j of my ``source`` goes to member j, into block my-rank.

    ``linear``: round robin, in step k PE i puts to PE i+k without waiting.
    ``pairwise``: in step k PE i exchanges with PE i XOR k (puts to i+k, hears
    from i-k when n is not a power of two) and waits for its partner's block.
    """
    algorithm = _algorithm("alltoall", algorithm)
    if algorithm == "library":
        return this_pe.shmem.alltoall(target, source, size=size, team=team)
    m = teams.members(team, "collectives.alltoall")
    t, s = teams.flat_pair(target, source, "collectives.alltoall")
    n, rank = len(m.pes), m.rank
    size = teams.alltoall_size(t, s, size, n, 1, 1, "collectives.alltoall")
    teams.team_sync(m)
    _put(t[rank * size : (rank + 1) * size], s[rank * size : (rank + 1) * size], m.pes[rank])
    power_of_two = n & (n - 1) == 0
    for k in range(1, n):
        if algorithm == "linear":
            dest = (rank + k) % n
            _step("alltoall", "linear", k, n - 1, f"linear, step {k} of {n - 1}: PE i puts its block for PE i+{k}")
        else:
            dest = rank ^ k if power_of_two else (rank + k) % n
            how = f"exchanges with PE i XOR {k}" if power_of_two else f"puts to PE i+{k}, hears from PE i-{k}"
            _step("alltoall", "pairwise", k, n - 1, f"pairwise exchange, step {k} of {n - 1}: PE i {how}")
        _put(t[rank * size : (rank + 1) * size], s[dest * size : (dest + 1) * size], m.pes[dest])
        step = 0 if algorithm == "linear" else k % _FOLD_OUT
        teams.signal(m, step, m.pes[dest])
        if algorithm == "pairwise":
            teams.wait_signal(m, step)
    if algorithm == "linear" and n > 1:
        teams.wait_signal(m, 0, n - 1)
    _done(m)
