"""Issue 48 items 1-3 for the race catalogue: racy and fixed twins in the shapes users write (partials,
classes, dict-held buffers, generators, ``ffi.from_buffer``; fancy-index, mask, ``np.put``/``np.add.at``/
``np.copyto(where=)``/``.flat`` footprints; ``wait_until_any/some`` ordering only what they return); and
from the held-out set (:mod:`race_heldout`), a put through a context quieted inside a lock; and for the
pattern hints of item 5, each with the one edit that fixes it: a lock taken by a ``with`` (a class's
``__enter__``/``__exit__``, a ``contextlib`` generator) with a read after the block (moved into it) or a
context's put not quieted inside it (``ctx.quiet()``), and a double buffer reused after a wait for the
acknowledgement of one round too early (the wait's count written anew). From a second blind set: stores
through a memoryview (``memoryview(a)[i]``, ``a.data.cast("B")[j]``), missed before, and stores by unpacking
and chained assignment (``a[i], (a[j], x) = ...``, ``a[i] = a[j] = v``), counted as writing the whole array.

Every fixed twin was a false race before (binding counted as a read; an index set counted as its bounding
range); every ``wait_until_any`` racy twin was a missed race (the wait ordered every producer). Markers as
in :mod:`race_catalogue`.
"""

#: PE 0 sends row 1 of ``board`` to PE 1, then raises PE 1's flag; PE 1 binds the row before waiting
SEND_ROW = """if me == 0:
    shmem.put(board[1], np.full(8, 7, dtype=np.int32), 1)  # A
    shmem.fence()
    shmem.atomic_set(flag, 1, 1)
"""
PARTIAL = (
    """import functools
def consume(row):
    return int(row.sum())
"""
    + SEND_ROW
    + """if me == 1:
    task = functools.partial(consume, board[1])
    later = lambda: int(board[1].max())
    shmem.wait_until(flag, shmem.CMP.EQ, 1)
    total = task() + later() + int(board[1, 0])  # B
shmem.barrier_all()
"""
)
CONSUMER = (
    """class Consumer:
    def __init__(self, buf, ready):
        self.buf, self.ready = buf, ready
"""
    + SEND_ROW
    + """if me == 1:
    c = Consumer(board[1], flag)
    shmem.wait_until(c.ready, shmem.CMP.EQ, 1)
    total = int(c.buf.sum())  # B
shmem.barrier_all()
"""
)
HELD = (
    SEND_ROW
    + """if me == 1:
    inbox = {"left": board[0], "right": board[1]}
    inbox.setdefault("spare", board[2])
    queue = []
    queue.append(board[1])
    pairs = dict(zip(("a", "b"), board[:2]))
    rows = (r for r in board[:2])
    address = int(shmem.ffi.cast("uintptr_t", shmem.ffi.from_buffer(board[1])))
    shmem.wait_until(flag, shmem.CMP.EQ, 1)
    total = int(queue[0].sum()) + int(pairs["b"].sum()) + sum(int(r.sum()) for r in rows)
    total += int(inbox["right"][0])  # B
shmem.barrier_all()
"""
)
GENERATOR = (
    """def rows_of(buf):
    for row in buf:
        yield row
"""
    + SEND_ROW
    + """if me == 1:
    gen = rows_of(board[:2])
    shmem.wait_until(flag, shmem.CMP.EQ, 1)
    total = sum(int(r.sum()) for r in gen) + int(board[1, 0])  # B
shmem.barrier_all()
"""
)


#: PE 1 writes the odd elements of PE 0's results[0:8] with a strided put; PE 0 writes or reads the even
#: ones through an index set, a mask or a NumPy call: disjoint, no race (the racy twins touch an odd one)
ODD = """odd = np.full(4, 5, dtype=np.int64)
if me == 1:
    shmem.iput(results[1:8], odd, tst=2, sst=1, size=4, pe=0)  # A
"""
EVEN = {
    "fancy-store": ("results[[0, 2, 4, 6]] = 7", "results[[0, 3]] = 7"),
    "mask-store": ("results[:8][np.arange(8) % 2 == 0] = 7", "results[:8][np.arange(8) < 2] = 7"),
    "fancy-read": ("x = int(results[[0, 6]].sum())", "x = int(results[[0, 5]].sum())"),
    "fancy-add": ("results[[2, 6]] += 1", "results[[2, 7]] += 1"),
    "np-put": ("np.put(results[:8], [0, 4, 6], 3)", "np.put(results[:8], [0, 1], 3)"),
    "ndarray-put": ("results[:8].put([2, 4], 3)", "results[:8].put([2, 3], 3)"),
    "np-place": ("np.place(results[:8], np.arange(8) % 2 == 0, [9])", "np.place(results[:8], np.arange(8) > 5, [9])"),
    "np-add-at": ("np.add.at(results, [0, 0, 6], 1)", "np.add.at(results, [0, 1], 1)"),
    "copyto-where": (
        "np.copyto(results[:8], np.ones(8, dtype=np.int64), where=np.arange(8) % 2 == 0)",
        "np.copyto(results[:8], np.ones(8, dtype=np.int64), where=np.arange(8) >= 6)",
    ),
    "flat": ("results.flat[[0, 4]] = 2", "y = int(results.flat[[4, 5]].sum())"),
}
#: the same in the shapes users write: a histogram class whose method bumps bins with np.add.at
BINS = """class Bins:
    def __init__(self, counts):
        self.counts = counts
    def bump(self, which):
        np.add.at(self.counts, which, 1)  # B
{odd}bins = Bins(results[:8])
if me == 0:
    bins.bump([0, 2, 2, {last}])
shmem.barrier_all()
"""

#: every PE (PE 0 too) puts its item into PE 0's results[me], fences, raises flags[me]; PE 0 takes the items
#: as wait_until_any returns them (status marks those taken). A wait orders only the producer it returned:
#: the racy twin sums every slot after each return.
ANY = """mine = np.array([10 + me], dtype=np.int64)
shmem.put(results[me:me + 1], mine, 0)  # A
shmem.fence()
shmem.atomic_set(flags[me:me + 1], 1, 0)
if me == 0:
    taken = np.zeros(npes, dtype=np.int32)
    total = 0
    while not taken.all():
        i = shmem.wait_until_any(flags[:npes], shmem.CMP.EQ, 1, status=taken)
        taken[i] = 1
        total += int(results[i])  # B
shmem.barrier_all()
"""
SOME = """mine = np.array([10 + me], dtype=np.int64)
shmem.put(results[me:me + 1], mine, 0)  # A
shmem.fence()
shmem.atomic_set(flags[me:me + 1], 1, 0)
if me == 0:
    taken = np.zeros(npes, dtype=np.int32)
    total = 0
    while not taken.all():
        for i in shmem.wait_until_some(flags[:npes], shmem.CMP.EQ, 1, status=taken):
            taken[i] = 1
            total += int(results[i])  # B
shmem.barrier_all()
"""
#: the same taken by polling: test_any returns a word that holds, or None
POLL = ANY.replace(
    "        i = shmem.wait_until_any(flags[:npes], shmem.CMP.EQ, 1, status=taken)\n",
    "        i = shmem.test_any(flags[:npes], shmem.CMP.EQ, 1, status=taken)\n"
    "        if i is None:\n"
    "            continue\n",
)
#: PE 0 puts through a context inside a lock; PE 1 reads under the same lock until it sees the data.
#: clear_lock completes the default context only: the put is inside the lock when ctx.quiet() comes
#: before clear_lock (the racy twin quiets after it)
LOCKED_CTX = """ctx = shmem.TEAM_WORLD.create_ctx()
lock = shmem.new_lock()
seen = 0
shmem.barrier_all()
if me == 0:
    shmem.set_lock(lock)
    shmem.put(remote, np.full(4, 2, dtype=np.int32), 1, ctx=ctx)  # A
    ctx.quiet()
    shmem.clear_lock(lock)
if me == 1:
    while seen != 2:
        shmem.set_lock(lock)
        seen = int(remote[0])  # B
        shmem.clear_lock(lock)
shmem.barrier_all()
ctx.destroy()
"""
#: every PE adds to PE 0's results[0] under a lock a class takes in __enter__ and releases in __exit__;
#: PE 1 reads the total back inside the block (the racy twin: after it, outside the lock)
HELD_LOCK = """class Held:
    def __init__(self, lock):
        self.lock = lock
    def __enter__(self):
        shmem.set_lock(self.lock)
    def __exit__(self, *exc):
        shmem.clear_lock(self.lock)
held = Held(shmem.new_lock())
mine = np.zeros(1, dtype=np.int64)
shmem.barrier_all()
with held:
    shmem.get(mine, results[0:1], 0)
    mine[0] += me + 1
    shmem.put(results[0:1], mine, 0)  # A
    if me == 1:
        shmem.get(mine, results[0:1], 0)  # B
shmem.barrier_all()
"""
#: the lock taken by a contextlib generator; PE 0's put goes through a context, quieted inside the block
HOLDING_CTX = """import contextlib
@contextlib.contextmanager
def holding(lock):
    shmem.set_lock(lock)
    yield
    shmem.clear_lock(lock)
ctx = shmem.TEAM_WORLD.create_ctx()
lock = shmem.new_lock()
got = 0
shmem.barrier_all()
if me == 0:
    with holding(lock):
        shmem.put(remote2, np.full(4, 5, dtype=np.int32), 1, ctx=ctx)  # A
        ctx.quiet()
if me == 1:
    while got != 5:
        with holding(lock):
            got = int(remote2[1])  # B
shmem.barrier_all()
ctx.destroy()
"""
#: PE 0 sends 5 items through PE 1's two slots (data, fence, flag k + 1); PE 1 reads item k, then acknowledges
#: it with ack = k + 1. Before item k reuses slot k % 2, PE 0 waits until ack > k - 2, the acknowledgement of item
#: k - 2 (the racy twin: ack > k - 3, one item too early)
TWO_SLOTS = """items = [np.full(8, float(k)) for k in range(5)]
got = []
shmem.barrier_all()
for k, item in enumerate(items):
    slot = bufs[k % 2]
    if me == 0:
        if k >= 2:
            shmem.wait_until(ack, shmem.CMP.GT, k - 2)
        shmem.put(slot, item, 1)  # A
        shmem.fence()
        shmem.atomic_set(flag, k + 1, 1)
    if me == 1:
        shmem.wait_until(flag, shmem.CMP.GE, k + 1)
        got.append(float(slot[3]))  # B
        shmem.atomic_set(ack, k + 1, 0)
shmem.barrier_all()
"""
#: a store through a memoryview of PE 0's remote2 (a view made by memoryview(), or by ``.data`` cast to bytes),
#: then PE 1's get of it: a second blind set found both missed (the hooks took only arrays)
VIEWED = """shmem.barrier_all()
got = np.zeros(4, dtype=np.int32)
if me == 0:
    {store}  # A
shmem.barrier_all()
if me == 1:
    shmem.get(got, remote2, 0)  # B
shmem.barrier_all()
"""
VIEWED_STORES = {"memoryview": "memoryview(remote2)[1] = 9", "data-cast": 'remote2.data.cast("B")[12] = 1'}
#: stores into elements 1 and 5 of PE 0's dst by unpacking and by a chained assignment, while PE 1 puts into
#: 8-11: disjoint (an unpacking counted the whole array as written: a false race)
UNPACKED = """shmem.barrier_all()
if me == 1:
    shmem.put(dst[8:12], np.array([1, 2, 3, 4], dtype=np.int32), 0)  # A
if me == 0:
    dst[1], (dst[5], spare) = 3, (4, 0)
    dst[6] = dst[7] = 2
shmem.barrier_all()
"""
UNPACKED_OVERLAP = "(dst[9], spare) = 3, (4, 0)  # B"  # the racy twin: element 9 is in PE 1's put
#: OSHMPI aborts the job on the multi-word waits: the tool refuses them there (deviation multi_waits)
MULTI_WAITS_REFUSED = ("oshmpi",)


def cases(Case, _twin):
    """The twins as :class:`race_catalogue.Case` s (given, as that module imports this one)."""

    def _early(code):
        """The racy twin: PE 1 peeks at the row before its wait (the later read no longer marked)."""
        wait = "    shmem.wait_until(flag, shmem.CMP.EQ, 1)\n"
        return _twin(code.replace("  # B\n", "\n"), wait, "    peek = int(board[1, 3])  # B\n" + wait)

    shapes = [
        Case("bind-partial-lambda", "shapes", False, PARTIAL),
        Case(
            "bind-partial-lambda-read-early",
            "shapes",
            True,
            _early(PARTIAL).replace("    total = task() + later() + int(board[1, 0])\n", ""),
        ),
        Case("bind-class-init", "shapes", False, CONSUMER),
        Case(
            "bind-class-init-read-early",
            "shapes",
            True,
            _twin(
                CONSUMER,
                "    c = Consumer(board[1], flag)\n",
                "    c = Consumer(board[1], flag)\n    peek = int(board[1, 3])  # B\n",
            ).replace("int(c.buf.sum())  # B", "int(c.buf.sum())"),
        ),
        Case("bind-dict-list-ffi-genexpr", "shapes", False, HELD),
        Case("bind-dict-list-ffi-genexpr-read-early", "shapes", True, _early(HELD)),
        Case("bind-generator", "shapes", False, GENERATOR),
        Case("bind-generator-read-early", "shapes", True, _early(GENERATOR)),
        *(
            case
            for name, (even, odd) in EVEN.items()
            for case in (
                Case(
                    f"footprint-{name}", "shapes", False, ODD + f"if me == 0:\n    {even}  # B\nshmem.barrier_all()\n"
                ),
                Case(
                    f"footprint-{name}-odd", "shapes", True, ODD + f"if me == 0:\n    {odd}  # B\nshmem.barrier_all()\n"
                ),
            )
        ),
        Case("footprint-class-add-at", "shapes", False, BINS.format(odd=ODD, last=6)),
        Case(
            "footprint-class-add-at-odd",
            "shapes",
            True,
            BINS.format(odd=ODD, last=5),
        ),
        Case("wait-any-each-slot", "shapes", False, ANY),
        Case(
            "wait-any-every-slot",
            "shapes",
            True,
            _twin(ANY, "        total += int(results[i])  # B\n", "        total = int(results[:npes].sum())  # B\n"),
        ),
        Case("wait-some-each-slot", "shapes", False, SOME),
        Case("test-any-each-slot", "shapes", False, POLL),
        Case(
            "test-any-every-slot",
            "shapes",
            True,
            _twin(POLL, "        total += int(results[i])  # B\n", "        total = int(results[:npes].sum())  # B\n"),
        ),
        # contexts: OSHMPI has none (UnsupportedError); locks: 2 PEs (race_catalogue's docstring)
        Case("lock-ctx-quiet-inside", "contexts", False, LOCKED_CTX, max_pes=2),
        Case(
            "lock-ctx-quiet-after-clear_lock",
            "contexts",
            True,
            _twin(
                LOCKED_CTX,
                "    ctx.quiet()\n    shmem.clear_lock(lock)\n",
                "    shmem.clear_lock(lock)\n    ctx.quiet()\n",
            ),
            max_pes=2,
        ),
        # item 5's pattern hints: the fix moves the read into the with block, adds ctx.quiet(), rewrites the count
        Case("lock-with-read-inside", "shapes", False, HELD_LOCK, max_pes=2),
        Case(
            "lock-with-read-after-the-block",
            "shapes",
            True,
            _twin(
                HELD_LOCK,
                "    if me == 1:\n        shmem.get(mine, results[0:1], 0)  # B\n",
                "if me == 1:\n    shmem.get(mine, results[0:1], 0)  # B\n",
            ),
            max_pes=2,
        ),
        Case("lock-contextmanager-ctx-quieted", "contexts", False, HOLDING_CTX, max_pes=2),
        Case(
            "lock-contextmanager-ctx-not-quieted",
            "contexts",
            True,
            _twin(HOLDING_CTX, "        ctx.quiet()\n", ""),
            max_pes=2,
        ),
        Case("unpacked-stores-disjoint", "shapes", False, UNPACKED),
        Case(
            "unpacked-stores-overlap", "shapes", True, _twin(UNPACKED, "(dst[5], spare) = 3, (4, 0)", UNPACKED_OVERLAP)
        ),
        Case("two-slots-acked", "shapes", False, TWO_SLOTS),
        Case("two-slots-ack-one-item-early", "shapes", True, _twin(TWO_SLOTS, "CMP.GT, k - 2)", "CMP.GT, k - 3)")),
    ]
    for name, store in VIEWED_STORES.items():
        fixed = VIEWED.format(store=store)
        shapes.append(Case(f"{name}-store", "shapes", False, fixed))
        shapes.append(
            Case(f"{name}-store-no-barrier", "shapes", True, _twin(fixed, "# A\nshmem.barrier_all()\n", "# A\n"))
        )
    for case in shapes:
        if "_any(" in case.code or "_some(" in case.code:
            case.refused_on = MULTI_WAITS_REFUSED
    return shapes


#: a cell with two races, each with its own fix: PE 0's put into a against PE 1's read of it (lines 4, 6),
#: and the other way round with b (7, 9); TWO_RACES_LINE is its %%pxshmem line's options
TWO_RACES_LINE = "--race a=int64[4] b=int64[4]"
TWO_RACES = """src = np.arange(4, dtype=np.int64)
shmem.barrier_all()
if me == 0:
    shmem.put(a, src, 1)
if me == 1:
    x = int(a[0])
    shmem.put(b, src, 0)
if me == 0:
    y = int(b[0])
shmem.barrier_all()
"""
