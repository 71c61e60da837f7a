"""Exact footprints of strided accesses: which bytes ``board[:, 3]``, ``A[::2]`` or an ``iput`` touch.

A footprint is plain data, carried by an event next to its bounding range ``[lo, hi)``:
``None`` when the access is that whole range, else ``(run, dims)``: blocks of ``run``
contiguous bytes starting at ``lo + sum(i_k * stride_k)`` for every ``0 <= i_k < count_k``,
``dims`` a tuple of ``(count, stride)`` with positive strides, largest first. Both sides use
it: the PEs build and merge footprints (:func:`of_view`, :func:`strided`, :func:`extend`), the
client intersects them (:func:`overlap`) and names the elements (:func:`flat_ranges`,
:func:`format_indices`). Plain Python, imports nothing.
"""

__all__ = ["of_view", "strided", "scattered", "extend", "overlap", "flat_ranges", "progressions", "format_indices"]

_Dims = tuple[tuple[int, int], ...]
Footprint = tuple[int, _Dims]
_Extent = tuple[int, int, Footprint | None]
_Shape = tuple[int, ...] | list[int]


def _normal(start: int, run: int, dims: "_Dims | zip[tuple[int, int]]") -> _Extent:
    """``(lo, hi, footprint)`` of blocks of ``run`` bytes at ``start + sum(i*s)`` over ``dims``."""
    kept: list[tuple[int, int]] = []
    for n, s in dims:
        if n == 0:
            return start, start, None
        if n == 1 or s == 0:
            continue
        if s < 0:
            start += (n - 1) * s
            s = -s
        kept.append((n, s))
    kept.sort(key=lambda d: -d[1])
    while kept and kept[-1][1] <= run:  # the innermost blocks touch: one longer block
        n, s = kept.pop()
        run += (n - 1) * s
    merged: list[tuple[int, int]] = []
    for n, s in kept:  # an outer progression continuing an inner one: one progression
        if merged and merged[-1][1] == n * s:
            merged[-1] = (merged[-1][0] * n, s)
        else:
            merged.append((n, s))
    while merged and merged[-1][1] <= run:
        n, s = merged.pop()
        run += (n - 1) * s
    hi = start + run + sum((n - 1) * s for n, s in merged)
    return start, hi, ((run, tuple(merged)) if merged else None)


def of_view(address: int, itemsize: int, shape: _Shape, strides: _Shape) -> _Extent:
    """``(lo, hi, footprint)`` of an array's bytes, from its ``__array_interface__`` address."""
    return _normal(address, itemsize, zip(shape, strides))


def strided(address: int, itemsize: int, count: int, stride: int) -> _Extent:
    """``(lo, hi, footprint)`` of ``count`` elements every ``stride`` elements (``iput``/``iget``)."""
    return _normal(address, itemsize, ((count, stride * itemsize),))


def scattered(offsets: _Shape, itemsize: int, limit: int = 64) -> list[_Extent] | None:
    """``[(lo, hi, footprint)]`` covering exactly the elements at byte ``offsets`` (sorted, distinct):
    fancy indexing, masks, ``np.put``. Each piece is one progression (``0, 2, 4, 6`` is one); None
    when more than ``limit`` pieces would be needed (the caller then takes the bounding range)."""
    spans: list[_Extent]
    spans, n, i = [], len(offsets), 0
    while i < n:
        start = offsets[i]
        j = i + 1
        if j < n:
            step = offsets[j] - start
            while j + 1 < n and offsets[j + 1] - offsets[j] == step:
                j += 1
            spans.append(_normal(start, itemsize, ((j - i + 1, step),)))
            i = j + 1
        else:
            spans.append((start, start + itemsize, None))
            i = j
        if len(spans) > limit:
            return None
    return spans


def _span(run: int, dims: _Dims) -> int:
    return run + sum((n - 1) * s for n, s in dims)


def extend(lo: int, hi: int, fp: Footprint | None, elo: int, ehi: int, efp: Footprint | None) -> _Extent | None:
    """The ``(lo, hi, footprint)`` of both accesses when it is exact and as small, else None:
    touching ranges join, and repeats of one shape form a progression (a loop over ``board[i, 3]``)."""
    if fp is None and efp is None and elo <= hi and ehi >= lo:
        return min(lo, elo), max(hi, ehi), None
    if fp == efp and elo == lo:
        return lo, hi, fp
    run, dims = fp if fp is not None else (hi - lo, ())
    erun, edims = efp if efp is not None else (ehi - elo, ())
    if erun != run:
        return None
    if dims == edims:  # two copies of one shape: a progression of 2
        return _normal(min(lo, elo), run, ((2, abs(elo - lo)), *dims))
    if dims[1:] == edims and dims:  # a progression of shapes, and one more at either end
        n, s = dims[0]
        if elo == lo + n * s:
            return lo, ehi, (run, ((n + 1, s), *edims))
        if elo == lo - s:
            return elo, hi, (run, ((n + 1, s), *edims))
    return None


def _blocks(lo: int, fp: Footprint | None, x: int, y: int):  # type: ignore[no-untyped-def]  # may not import typing
    """The ``(start, stop)`` byte blocks of footprint ``(lo, fp)`` inside ``[x, y)``, in order."""
    if fp is None:
        return
    run, dims = fp
    yield from _walk(lo, run, dims, x, y)


def _walk(start: int, run: int, dims: _Dims, x: int, y: int):  # type: ignore[no-untyped-def]  # may not import typing
    if not dims:
        a, b = max(start, x), min(start + run, y)
        if a < b:
            yield a, b
        return
    (n, s), inner = dims[0], dims[1:]
    span = _span(run, inner)
    first = max(0, (x - start - span) // s + 1)
    last = min(n - 1, (y - 1 - start) // s)
    for i in range(first, last + 1):
        yield from _walk(start + i * s, run, inner, x, y)


def _count(fp: Footprint) -> int:
    total = 1
    for n, _ in fp[1]:
        total *= n
    return total


def overlap(a: _Extent, b: _Extent) -> list[tuple[int, int]]:
    """The byte ranges ``[(lo, hi), ...]`` two accesses ``(lo, hi, footprint)`` both touch, merged, in order."""
    (alo, ahi, afp), (blo, bhi, bfp) = a, b
    x, y = max(alo, blo), min(ahi, bhi)
    if x >= y:
        return []
    if afp is None and bfp is None:
        return [(x, y)]
    if afp is None:
        return _merged(_blocks(blo, bfp, x, y))
    if bfp is None:
        return _merged(_blocks(alo, afp, x, y))
    if _apart(alo, afp, blo, bfp):
        return []
    if _count(afp) > _count(bfp):
        (alo, afp), (blo, bfp) = (blo, bfp), (alo, afp)
    return _merged(c for p, q in _blocks(alo, afp, x, y) for c in _blocks(blo, bfp, p, q))


def _apart(alo: int, afp: Footprint, blo: int, bfp: Footprint) -> bool:
    """Two progressions of one stride whose shapes never meet within a period (disjoint columns
    of a tall array): known without walking their blocks."""
    (arun, adims), (brun, bdims) = afp, bfp
    if adims[0][1] != bdims[0][1]:
        return False
    s = adims[0][1]
    aspan, bspan = _span(arun, adims[1:]), _span(brun, bdims[1:])
    if aspan > s or bspan > s:
        return False
    d = (blo - alo) % s
    return aspan <= d and d + bspan <= s


def _merged(blocks) -> list[tuple[int, int]]:  # type: ignore[no-untyped-def]  # may not import typing
    out: list[tuple[int, int]] = []
    for p, q in blocks:
        if out and p <= out[-1][1]:
            out[-1] = (out[-1][0], max(out[-1][1], q))
        else:
            out.append((p, q))
    out.sort()
    return out


def flat_ranges(
    blocks: list[tuple[int, int]],
    origin: int,
    itemsize: int,
    shape: _Shape | None = None,
    strides: _Shape | None = None,
    limit: int = 100_000,
) -> tuple[range, ...]:
    """The array's elements (flat, in C order) that byte ``blocks`` touch, as ``range`` progressions.
    ``origin``: the address of element 0; ``shape``/``strides`` for an array that is not C-contiguous."""
    if not shape or _c_strides(shape, itemsize) == tuple(strides or ()):
        return progressions(range(max(0, (p - origin) // itemsize), -(-(q - origin) // itemsize)) for p, q in blocks)
    found: list[int]
    found, sizes = [], _c_strides(shape, 1)
    for p, q in blocks:
        for addr in range(p - (p - origin) % itemsize if p >= origin else origin, q, itemsize):
            index = _index_of(addr - origin, shape, strides)  # type: ignore[arg-type]  # given with shape
            if index is not None:
                found.append(sum(i * c for i, c in zip(index, sizes)))
            if len(found) >= limit:
                break
    return progressions(range(i, i + 1) for i in sorted(set(found)))


def _c_strides(shape: _Shape, itemsize: int) -> tuple[int, ...]:
    out: list[int]
    out, step = [], itemsize
    for n in reversed(shape):
        out.append(step)
        step *= n
    return tuple(reversed(out))


def _index_of(offset: int, shape: _Shape, strides: _Shape) -> tuple[int, ...] | None:
    """The index whose element starts at byte ``offset`` of a view (positive strides), or None."""
    order = sorted(range(len(shape)), key=lambda k: -abs(strides[k]))
    index = [0] * len(shape)
    for k in order:
        s = strides[k]
        if s <= 0:
            return None
        index[k], offset = divmod(offset, s)
        if index[k] >= shape[k]:
            return None
    return tuple(index) if offset == 0 else None


def progressions(ranges) -> tuple[range, ...]:  # type: ignore[no-untyped-def]  # may not import typing
    """Ranges as few ``range`` progressions: touching ranges join, single elements at a constant
    step form one stepped range (``0, 2, 4`` -> ``range(0, 5, 2)``)."""
    out: list[range] = []
    for r in sorted((r for r in ranges if len(r)), key=lambda r: r.start):
        last = out[-1] if out else None
        if last is not None and last.step == 1 and r.start <= last.stop:
            out[-1] = range(last.start, max(last.stop, r.stop))
        elif last is not None and len(r) == 1 and len(last) == 1 and r.start > last.start:
            out[-1] = range(last.start, r.start + 1, r.start - last.start)
        elif last is not None and len(r) == 1 and len(last) > 1 and r.start == last[-1] + last.step:
            out[-1] = range(last.start, r.start + 1, last.step)
        else:
            out.append(r)
    return tuple(range(r.start, r[-1] + 1, r.step) if r.step > 1 else r for r in out)


def _boxes(points: list[tuple[int, ...]], ndim: int) -> list[tuple[range, ...]]:
    """Index tuples (sorted) as boxes: tuples of one ``range`` per dimension."""
    if ndim == 0:
        return [()]
    groups: dict[int, list[tuple[int, ...]]] = {}
    for p in points:
        groups.setdefault(p[0], []).append(p[1:])
    rows = [(c, tuple(_boxes(rest, ndim - 1))) for c, rest in sorted(groups.items())]
    boxes: list[tuple[range, ...]] = []
    i = 0
    while i < len(rows):
        c, sub = rows[i]
        j, step = i + 1, None
        while j < len(rows) and rows[j][1] == sub and (step is None or rows[j][0] - rows[j - 1][0] == step):
            step = rows[j][0] - rows[j - 1][0]
            j += 1
        dim = range(c, rows[j - 1][0] + 1, step or 1)
        boxes += [(dim, *box) for box in sub]
        i = j
    return boxes


def _slice(r: range, n: int | None, whole: bool) -> str:
    if whole and r.start == 0 and r.step == 1 and r.stop == n and n > 1:
        return ":"
    if len(r) == 1:
        return f"{r.start}"
    return f"{r.start}:{r.stop}" if r.step == 1 else f"{r.start}:{r[-1] + 1}:{r.step}"


def _pairs(ranges: tuple[range, ...] | list[range]) -> list[range]:
    """Two elements at a step read better as two indices (``[0, 6]``) than as ``[0:7:6]``."""
    return [part for r in ranges for part in ((r[:1], r[1:]) if len(r) == 2 and r.step > 1 else (r,))]


def _split(box: tuple[range, ...]) -> list[tuple[range, ...]]:
    for k, r in enumerate(box):
        if len(r) == 2 and r.step > 1:
            return [split for part in _pairs([r]) for split in _split((*box[:k], part, *box[k + 1 :]))]
    return [box]


def format_indices(indices: tuple[range, ...], shape: _Shape | None = None, limit: int = 4) -> str:
    """Flat element ranges as the array's own indices: ``(range(0, 1),)`` -> ``'[0]'``; in a 10x10
    array the elements 43, 53, 63 -> ``'[4:7, 3]'``. Several boxes are joined by ``and`` at every
    rank, so a 1-D set never reads as N-D indexing: ``(range(2, 5), range(7, 8))`` -> ``'[2:5] and [7]'``
    (``A[2:5] and [7]`` after the array's name); past ``limit`` boxes, ``and more``."""
    if not indices:
        return ""
    if not shape or len(shape) < 2:
        n = shape[0] if shape else None
        parts = _pairs(indices)
        text = [f"[{_slice(r, n, False)}]" for r in parts[:limit]]
        return " and ".join(text) + (" and more" if len(parts) > limit else "")
    points: list[tuple[int, ...]]
    points, total = [], 0
    for r in indices:
        for flat in r:
            index = []
            for n in reversed(shape):
                flat, i = divmod(flat, n)
                index.append(i)
            points.append(tuple(reversed(index)))
            total += 1
            if total >= 100_000:
                break
    boxes = [split for box in _boxes(sorted(points), len(shape)) for split in _split(box)]
    text = [("[" + ", ".join(_slice(r, n, True) for r, n in zip(box, shape)) + "]") for box in boxes[:limit]]
    return " and ".join(text) + (" and more" if len(boxes) > limit else "")
