"""Labelled cells for the race detector, written from the OpenSHMEM 1.5 memory model.

Each case is a cell run with ``job.run(code, arrays=ARRAYS, race=True)`` on every
PE (2 and 4 PEs; PEs beyond 1 mostly watch). The two accesses a case is about
carry the markers ``# A`` and ``# B`` on their lines; ``race`` says whether they
race. A true positive names both lines. ``error`` cases must end in the named
error instead of a verdict. Cases that ``need`` OpenSHMEM 1.5 (``put_signal``, ``signal_*``,
non-blocking atomics, contexts of teams) are scored on a 1.5 library (Sandia OpenSHMEM); on Open
MPI's OSHMEM 1.4 they must end in the one-line ``UnsupportedError`` instead. Lock cases run at 2 PEs
only: at 4 PEs this OSHMEM's ``clear_lock`` sometimes never returns while the other PEs wait in ``barrier_all``
(2 of 15 runs), which would hang the test, not test the detector. The arrays are zeroed (untraced) before every case.
"""

from dataclasses import dataclass

#: declared for every case (zeroed before each)
ARRAYS = [
    "remote=int32[4]",
    "remote2=int32[4]",
    "flag=int64[1]",
    "counter=int64[1]",
    "wide=int64[2]",
    "src=int32[4]",
    "dst=int32[16]",
    # the realistic programs
    "field=float64[18]",
    "board=int32[8,8]",
    "hist=int64[8]",
    "results=int64[16]",
    "bufs=float64[2,8]",
    "ack=int64[1]",
    "flags=int64[4]",
]

RESET = (
    "for _a in (remote, remote2, flag, counter, wide, src, dst, field, board, hist, results, bufs, ack, flags):\n"
    "    _a[...] = 0\n"
    "shmem.barrier_all()\n"
)


@dataclass
class Case:
    name: str
    category: str
    race: bool
    code: str
    error: str = None  # the error type the cell must end in instead
    max_pes: int = None  # run only up to this many PEs
    min_pes: int = None  # run only from this many PEs
    no_fix: str = None  # why the race's fix is not an edit of the cell (the hint says it in prose)
    pending: str = None  # why the case is run but not scored yet (a detector feature it needs)
    needs: str = None  # "1.5": OpenSHMEM 1.5 routines (a 1.4 library refuses them: UnsupportedError)
    refused_on: tuple = ()  # libraries on which the tool refuses a routine of the case (UnsupportedError)

    def error_on(self, spec):
        """The error the case must end in on a library implementing OpenSHMEM ``spec``, or None."""
        if self.needs and spec < self.needs:
            return "UnsupportedError"
        return self.error

    def runs_at(self, npes):
        return (self.max_pes is None or npes <= self.max_pes) and (self.min_pes is None or npes >= self.min_pes)

    @property
    def lines(self):
        """The cell lines marked ``# A`` and ``# B``."""
        found = {}
        for number, text in enumerate(self.code.splitlines(), 1):
            for mark in ("A", "B"):
                if text.rstrip().endswith(f"# {mark}") or f"# {mark} " in text:
                    found[mark] = number
        return found.get("A"), found.get("B")


PRE = "lb = np.array([1], dtype=np.int32)\nshmem.barrier_all()\n"

# -- realistic programs: racy and fixed twins -------------------------------------------------
HALO = """left, right = (me - 1) % npes, (me + 1) % npes
field[1:17] = me
shmem.barrier_all()
for it in range(20):
    shmem.put(field[17:18], field[1:2], left)  # A
    shmem.put(field[0:1], field[16:17], right)
    shmem.barrier_all()
    new = 0.5 * (field[0:16] + field[2:18])  # B
    shmem.barrier_all()
    field[1:17] = new
shmem.barrier_all()
"""

PIPELINE = """item = np.zeros(4, dtype=np.int32)
total = 0
shmem.barrier_all()
if me == 0:
    for k in range(1, 6):
        item[:] = k
        shmem.put(remote, item, 1)  # A
        shmem.fence()
        shmem.atomic_set(flag, k, 1)
        shmem.wait_until(ack, shmem.CMP.EQ, k)
if me == 1:
    for k in range(1, 6):
        shmem.wait_until(flag, shmem.CMP.EQ, k)
        total += int(remote.sum())  # B
        shmem.atomic_set(ack, k, 0)
shmem.barrier_all()
"""

QUEUE = """mine = np.zeros(1, dtype=np.int64)
shmem.barrier_all()
while True:
    t = int(shmem.atomic_fetch_inc(counter, 0))
    if t >= 12:
        break
    mine[0] = t * t
    shmem.put(results[t:t + 1], mine, 0)  # A
shmem.barrier_all()
if me == 0:
    total = int(results[:12].sum())  # B
shmem.barrier_all()
"""

HISTOGRAM = """values = (np.arange(24) * (me + 3)) % 8
shmem.barrier_all()
for v in values:
    shmem.atomic_inc(hist[v:v + 1], 0)  # A
shmem.barrier_all()
if me == 0:
    counts = hist.copy()  # B
shmem.barrier_all()
"""

DOUBLE_BUFFER = """chunk = np.zeros(8)
total = 0.0
shmem.barrier_all()
for it in range(6):
    cur = it % 2
    if me == 0:
        chunk[:] = it
        shmem.put(bufs[cur], chunk, 1)  # A
    if me == 1 and it > 0:
        total += bufs[1 - cur].sum()  # B
    shmem.barrier_all()
"""

BOARD = """up, down = (me - 1) % npes, (me + 1) % npes
board[1:7, :] = me + 1
shmem.barrier_all()
for gen in range(4):
    shmem.put(board[7], board[1], up)  # A
    shmem.put(board[0], board[6], down)
    shmem.barrier_all()
    around = board[0:6] + board[2:8]  # B
    shmem.barrier_all()
    board[1:7] = (around % 3).astype(np.int32)
shmem.barrier_all()
"""

BOARD_PULL = """up, down = (me - 1) % npes, (me + 1) % npes
board[1:7, :] = me + 1
shmem.barrier_all()
for gen in range(4):
    shmem.get(board[0], board[6], up)  # A
    shmem.get(board[7], board[1], down)
    around = board[0:6] + board[2:8]
    shmem.barrier_all()
    board[1:7] = (around % 3).astype(np.int32)  # B
    shmem.barrier_all()
"""

COLUMNS = """col = np.full(8, me + 1, dtype=np.int32)
shmem.barrier_all()
if me == 0:
    shmem.iput(board.ravel()[0:], col, 0, tst=8, sst=1, size=8)  # A
if me == 1:
    shmem.iput(board.ravel()[1:], col, 0, tst=8, sst=1, size=8)  # B
shmem.barrier_all()
"""

#: why a case is not scored yet

LOCKED_LOG = """lock = shmem.new_lock()
t = np.zeros(1, dtype=np.int64)
entry = np.zeros(1, dtype=np.int64)
shmem.barrier_all()
for k in range(3):
    shmem.set_lock(lock)
    shmem.get(t, counter, 0)  # A
    entry[0] = 10 * me + k
    shmem.put(results[int(t[0]):int(t[0]) + 1], entry, 0)
    t[0] += 1
    shmem.put(counter, t, 0)  # B
    shmem.quiet()
    shmem.clear_lock(lock)
shmem.barrier_all()
"""


def _twin(text, old, new):
    """``text`` with ``old`` replaced once (the racy twin of a fixed program)."""
    assert text.count(old) == 1, old
    return text.replace(old, new)


REALISTIC = [
    # halo exchange, 20 iterations: two barriers per iteration (ghosts in, then interiors rewritten)
    Case("halo-exchange", "realistic", False, HALO),
    Case(
        "halo-no-barrier-before-reading-ghosts",
        "realistic",
        True,
        _twin(
            HALO,
            "    shmem.put(field[0:1], field[16:17], right)\n    shmem.barrier_all()\n",
            "    shmem.put(field[0:1], field[16:17], right)\n",
        ),
    ),
    # the next iteration's puts overwrite the ghosts a slower neighbour is still reading
    Case(
        "halo-no-barrier-after-reading-ghosts",
        "realistic",
        True,
        _twin(HALO, "    shmem.barrier_all()\n    field[1:17] = new\n", "    field[1:17] = new\n"),
    ),
    # a pipeline of 5 items through one slot: data, fence, flag; the consumer acknowledges after reading
    Case("pipeline-flags", "realistic", False, PIPELINE),
    Case("pipeline-no-fence", "realistic", True, _twin(PIPELINE, "        shmem.fence()\n", "")),
    # acknowledging before reading: the producer's next item overwrites the slot being read
    Case(
        "pipeline-ack-before-read",
        "realistic",
        True,
        _twin(
            PIPELINE,
            "        total += int(remote.sum())  # B\n        shmem.atomic_set(ack, k, 0)\n",
            "        shmem.atomic_set(ack, k, 0)\n        total += int(remote.sum())  # B\n",
        ),
    ),
    # a work queue: tasks handed out by an atomic counter on PE 0, results put to PE 0
    Case("queue-atomic-counter", "realistic", False, QUEUE),
    Case(
        "queue-results-read-early",
        "realistic",
        True,
        _twin(
            QUEUE,
            "    shmem.put(results[t:t + 1], mine, 0)  # A\nshmem.barrier_all()\n",
            "    shmem.put(results[t:t + 1], mine, 0)  # A\n",
        ),
    ),
    Case(
        "queue-plain-counter",
        "realistic",
        True,
        """c = np.zeros(1, dtype=np.int64)
shmem.barrier_all()
for _ in range(3):
    shmem.get(c, counter, 0)  # A
    c[0] += 1
    shmem.put(counter, c, 0)  # B
shmem.barrier_all()
""",
        no_fix="every PE reads, increments and writes back one counter: the fix replaces the get/put pair "
        "with one atomic (shmem.atomic_fetch_inc), which no inserted statement does",
    ),
    # histograms: bins on PE 0 counted with atomics, read after a barrier
    Case("histogram-atomic", "realistic", False, HISTOGRAM),
    Case(
        "histogram-read-before-barrier",
        "realistic",
        True,
        _twin(
            HISTOGRAM,
            "    shmem.atomic_inc(hist[v:v + 1], 0)  # A\nshmem.barrier_all()\n",
            "    shmem.atomic_inc(hist[v:v + 1], 0)  # A\n",
        ),
    ),
    Case(
        "histogram-get-put",
        "realistic",
        True,
        """values = (np.arange(24) * (me + 3)) % 8
one = np.zeros(1, dtype=np.int64)
shmem.barrier_all()
for v in values:
    shmem.get(one, hist[v:v + 1], 0)  # A
    one[0] += 1
    shmem.put(hist[v:v + 1], one, 0)  # B
shmem.barrier_all()
""",
        no_fix="a read-modify-write every PE does: the fix is shmem.atomic_inc instead of get + put, not an "
        "inserted statement",
    ),
    # bins spread over the PEs; the owner counts its own bins with plain `+=` while others use atomics
    Case(
        "histogram-owner-plain-increment",
        "realistic",
        True,
        """values = (np.arange(24) * (me + 3)) % (2 * npes)
shmem.barrier_all()
for v in values:
    owner, b = int(v) // 2, int(v) % 2
    if owner == me:
        hist[b] += 1  # B
    else:
        shmem.atomic_inc(hist[b:b + 1], owner)  # A
shmem.barrier_all()
""",
        no_fix="the owner's `hist[b] += 1` must become an atomic too (shmem.atomic_inc(hist[b:b+1], me)): "
        "a replaced statement, not an inserted one",
    ),
    Case(
        "histogram-owner-atomic",
        "realistic",
        False,
        """values = (np.arange(24) * (me + 3)) % (2 * npes)
shmem.barrier_all()
for v in values:
    owner, b = int(v) // 2, int(v) % 2
    shmem.atomic_inc(hist[b:b + 1], owner)  # A
shmem.barrier_all()
mine = hist[:2].copy()  # B
shmem.barrier_all()
""",
    ),
    # double buffering: PE 0 fills one buffer on PE 1 while PE 1 reads the other
    Case("double-buffer", "realistic", False, DOUBLE_BUFFER),
    Case(
        "double-buffer-reads-the-buffer-being-filled",
        "realistic",
        True,
        _twin(DOUBLE_BUFFER, "bufs[1 - cur].sum()", "bufs[cur].sum()"),
    ),
    Case(
        "double-buffer-nbi-sync_all",
        "realistic",
        True,
        _twin(
            _twin(DOUBLE_BUFFER, "shmem.put(bufs[cur], chunk, 1)", "shmem.put_nbi(bufs[cur], chunk, 1)"),
            "    shmem.barrier_all()\n",
            "    shmem.sync_all()\n",
        ),
    ),
    Case(
        "double-buffer-nbi-quiet-sync_all",
        "realistic",
        False,
        _twin(
            _twin(
                DOUBLE_BUFFER,
                "shmem.put(bufs[cur], chunk, 1)  # A\n",
                "shmem.put_nbi(bufs[cur], chunk, 1)  # A\n        shmem.quiet()\n",
            ),
            "    shmem.barrier_all()\n",
            "    shmem.sync_all()\n",
        ),
    ),
    # a 2-D board in rows: ghost rows 0 and 7 exchanged with the PEs above and below, 4 generations
    Case("board-rows", "realistic", False, BOARD),
    Case(
        "board-rows-no-barrier-before-reading",
        "realistic",
        True,
        _twin(
            BOARD,
            "    shmem.put(board[0], board[6], down)\n    shmem.barrier_all()\n",
            "    shmem.put(board[0], board[6], down)\n",
        ),
    ),
    # pulling the neighbours' rows with get: a PE must not rewrite its rows while the others read them
    Case("board-rows-pull", "realistic", False, BOARD_PULL),
    Case(
        "board-rows-pull-no-barrier-before-update",
        "realistic",
        True,
        _twin(BOARD_PULL, "    shmem.barrier_all()\n    board[1:7] = ", "    board[1:7] = "),
    ),
    # columns: PEs write different columns of PE 0's board with iput (strided footprints)
    Case("board-columns-disjoint-iput", "realistic", False, COLUMNS),
    Case("board-columns-same-column", "realistic", True, _twin(COLUMNS, "board.ravel()[1:]", "board.ravel()[0:]")),
    Case(
        "board-column-read-while-other-column-written",
        "realistic",
        False,
        """col = np.full(8, 7, dtype=np.int32)
shmem.barrier_all()
if me == 1:
    shmem.iput(board.ravel()[5:], col, 0, tst=8, sst=1, size=8)  # A
if me == 0:
    s = int(board[:, 3].sum())  # B
shmem.barrier_all()
""",
    ),
    Case(
        "board-column-read-while-same-column-written",
        "realistic",
        True,
        """col = np.full(8, 7, dtype=np.int32)
shmem.barrier_all()
if me == 1:
    shmem.iput(board.ravel()[3:], col, 0, tst=8, sst=1, size=8)  # A
if me == 0:
    s = int(board[:, 3].sum())  # B
shmem.barrier_all()
""",
    ),
    # a shared log on PE 0: the tail index and the entry updated under one lock
    Case("lock-log", "realistic", False, LOCKED_LOG, max_pes=2),
    Case(
        "lock-log-tail-read-outside",
        "realistic",
        True,
        _twin(
            LOCKED_LOG,
            "    shmem.set_lock(lock)\n    shmem.get(t, counter, 0)  # A\n",
            "    shmem.get(t, counter, 0)  # A\n    shmem.set_lock(lock)\n",
        ),
        max_pes=2,
    ),
]

TEAM_CTX = """ctx = shmem.TEAM_WORLD.create_ctx()
shmem.barrier_all()
if me == 0:
    shmem.put(remote, np.full(4, 5, dtype=np.int32), 1, ctx=ctx)  # A
    ctx.quiet()
shmem.barrier_all()
if me == 1:
    x = int(remote[0])  # B
shmem.barrier_all()
ctx.destroy()
"""
SIGNAL = "sig = shmem.new_signal()\nshmem.barrier_all()\n"
SIGNAL_END = "shmem.barrier_all()\nshmem.del_signal(sig)\n"

# -- OpenSHMEM 1.5: signals, non-blocking atomics (scored on SOS); contexts of TEAM_WORLD (both) ----
OPENSHMEM_15 = [
    Case(
        "put_signal-data-seen-after-signal",
        "1.5",
        False,
        SIGNAL
        + """if me == 0:
    shmem.put_signal(remote, np.full(4, 3, dtype=np.int32), 1, sig, 1, shmem.SIGNAL_SET)  # A
if me == 1:
    shmem.signal_wait_until(sig, shmem.CMP.EQ, 1)
    x = int(remote[0])  # B
"""
        + SIGNAL_END,
        needs="1.5",
    ),
    Case(
        "put-before-put_signal-not-covered",
        "1.5",
        True,
        SIGNAL
        + """if me == 0:
    shmem.put(remote2, np.full(4, 3, dtype=np.int32), 1)  # A
    shmem.put_signal(remote, np.full(4, 3, dtype=np.int32), 1, sig, 1, shmem.SIGNAL_SET)
if me == 1:
    shmem.signal_wait_until(sig, shmem.CMP.EQ, 1)
    x = int(remote2[0])  # B
"""
        + SIGNAL_END,
        needs="1.5",
    ),
    Case(
        "put-fence-put_signal-covered",
        "1.5",
        False,
        SIGNAL
        + """if me == 0:
    shmem.put(remote2, np.full(4, 3, dtype=np.int32), 1)  # A
    shmem.fence()
    shmem.put_signal(remote, np.full(4, 3, dtype=np.int32), 1, sig, 1, shmem.SIGNAL_SET)
if me == 1:
    shmem.signal_wait_until(sig, shmem.CMP.EQ, 1)
    x = int(remote2[0])  # B
"""
        + SIGNAL_END,
        needs="1.5",
    ),
    Case(
        "put_signal-read-without-waiting",
        "1.5",
        True,
        SIGNAL
        + """if me == 0:
    shmem.put_signal(remote, np.full(4, 3, dtype=np.int32), 1, sig, 1, shmem.SIGNAL_SET)  # A
if me == 1:
    x = int(remote[0])  # B
"""
        + SIGNAL_END,
        needs="1.5",
    ),
    Case(
        "put_signal_nbi-source-reused-before-quiet",
        "1.5",
        True,
        SIGNAL
        + PRE
        + """if me == 0:
    shmem.put_signal_nbi(remote[:1], lb, 1, sig, 1, shmem.SIGNAL_SET)  # A
    lb[0] = 5  # B
    shmem.quiet()
"""
        + SIGNAL_END,
        needs="1.5",
    ),
    Case(
        "signal_fetch-polling-then-read",
        "1.5",
        False,
        SIGNAL
        + """if me == 0:
    shmem.put_signal_nbi(remote, np.full(4, 3, dtype=np.int32), 1, sig, 1, shmem.SIGNAL_ADD)  # A
    shmem.quiet()
if me == 1:
    while shmem.signal_fetch(sig) == 0:
        pass
    x = int(remote[0])  # B
"""
        + SIGNAL_END,
        needs="1.5",
    ),
    Case(
        "nbi-atomic-fetch-read-before-quiet",
        "1.5",
        True,
        """out = np.zeros(1, dtype=np.int64)
shmem.barrier_all()
shmem.atomic_fetch_nbi(out, counter, (me + 1) % npes)  # A
v = int(out[0])  # B
shmem.quiet()
shmem.barrier_all()
""",
        needs="1.5",
    ),
    Case(
        "nbi-atomic-fetch-read-after-quiet",
        "1.5",
        False,
        """out = np.zeros(1, dtype=np.int64)
shmem.barrier_all()
shmem.atomic_fetch_nbi(out, counter, (me + 1) % npes)  # A
shmem.quiet()
v = int(out[0])  # B
shmem.barrier_all()
""",
        needs="1.5",
    ),
    Case(
        "nbi-atomic-add-against-plain-read",
        "1.5",
        True,
        """out = np.zeros(1, dtype=np.int64)
shmem.barrier_all()
if me == 0:
    shmem.atomic_fetch_add_nbi(out, counter, 1, 1)  # A
if me == 1:
    v = int(counter[0])  # B
shmem.barrier_all()
""",
        needs="1.5",
    ),
    Case("team-ctx-put-completed-by-default-quiet", "contexts", True, _twin(TEAM_CTX, "ctx.quiet()", "shmem.quiet()")),
    Case("team-ctx-put-completed-by-its-quiet", "contexts", False, TEAM_CTX),
]

CASES = [
    # -- RMA vs local access ------------------------------------------------------------
    Case(
        "put-load",
        "rma vs local",
        True,
        PRE
        + """if me == 0:
    shmem.put(remote, lb, 1)  # A
if me == 1:
    x = int(remote[0])  # B
shmem.barrier_all()
""",
    ),
    Case(
        "put-barrier-load",
        "rma vs local",
        False,
        PRE
        + """if me == 0:
    shmem.put(remote, lb, 1)  # A
shmem.barrier_all()
if me == 1:
    x = int(remote[0])  # B
""",
    ),
    Case(
        "put-store",
        "rma vs local",
        True,
        PRE
        + """if me == 0:
    shmem.put(remote, lb, 1)  # A
if me == 1:
    remote[0] = 5  # B
shmem.barrier_all()
""",
    ),
    Case(
        "get-load",
        "rma vs local",
        False,
        PRE
        + """if me == 0:
    shmem.get(lb, remote, 1)  # A
if me == 1:
    x = remote[0]  # B
shmem.barrier_all()
""",
    ),
    Case(
        "get-store",
        "rma vs local",
        True,
        PRE
        + """if me == 0:
    shmem.get(lb, remote, 1)  # A
if me == 1:
    remote[0] = 7  # B
shmem.barrier_all()
""",
    ),
    Case(
        "put-inplace-add",
        "rma vs local",
        True,
        PRE
        + """if me == 0:
    shmem.put(remote, lb, 1)  # A
if me == 1:
    remote[0] += 1  # B
shmem.barrier_all()
""",
    ),
    Case(
        "put-whole-print",
        "rma vs local",
        True,
        PRE
        + """if me == 0:
    shmem.put(remote, lb, 1)  # A
if me == 1:
    print(remote)  # B
shmem.barrier_all()
""",
    ),
    Case(
        "put-method-sum",
        "rma vs local",
        True,
        PRE
        + """if me == 0:
    shmem.put(remote[2:3], lb, 1)  # A
if me == 1:
    total = remote.sum()  # B
shmem.barrier_all()
""",
    ),
    Case(
        "put-copyto",
        "rma vs local",
        True,
        PRE
        + """if me == 0:
    shmem.put(remote, lb, 1)  # A
if me == 1:
    np.copyto(remote, np.arange(4, dtype=np.int32))  # B
shmem.barrier_all()
""",
    ),
    Case(
        "put-disjoint-store",
        "rma vs local",
        False,
        PRE
        + """if me == 0:
    shmem.put(remote[0:1], lb, 1)  # A
if me == 1:
    remote[1] = 9  # B
shmem.barrier_all()
""",
    ),
    Case(
        "private-only",
        "rma vs local",
        False,
        """buf = np.zeros(8)
shmem.barrier_all()
buf[0] = me  # A
y = buf[0] + 1  # B
shmem.barrier_all()
""",
    ),
    Case(
        "own-symmetric-only",
        "rma vs local",
        False,
        """shmem.barrier_all()
remote[me % 4] = me  # A
z = remote[me % 4]  # B
shmem.barrier_all()
""",
    ),
    Case(
        "put-blocking-source-reuse",
        "rma vs local",
        False,
        PRE
        + """if me == 0:
    shmem.put(remote, lb, 1)  # A
    lb[0] = 99  # B
shmem.barrier_all()
""",
    ),
    Case(
        "get-blocking-target-use",
        "rma vs local",
        False,
        PRE
        + """if me == 0:
    shmem.get(lb, remote, 1)  # A
    v = lb[0] * 2  # B
shmem.barrier_all()
""",
    ),
    Case(
        "declared-then-read",
        "rma vs local",
        False,
        """shmem.barrier_all()
v = remote[0]  # A
w = remote[1]  # B
""",
    ),
    # -- nbi completion ------------------------------------------------------------------
    Case(
        "put_nbi-load-source",
        "nbi completion",
        False,
        PRE
        + """if me == 0:
    shmem.put_nbi(remote, lb, 1)  # A
    x = lb[0]  # B
    shmem.quiet()
shmem.barrier_all()
""",
    ),
    Case(
        "put_nbi-store-source",
        "nbi completion",
        True,
        PRE
        + """if me == 0:
    shmem.put_nbi(remote, lb, 1)  # A
    lb[0] = 5  # B
    shmem.quiet()
shmem.barrier_all()
""",
    ),
    Case(
        "put_nbi-quiet-store-source",
        "nbi completion",
        False,
        PRE
        + """if me == 0:
    shmem.put_nbi(remote, lb, 1)  # A
    shmem.quiet()
    lb[0] = 5  # B
shmem.barrier_all()
""",
    ),
    Case(
        "get_nbi-load",
        "nbi completion",
        True,
        PRE
        + """if me == 0:
    shmem.get_nbi(lb, remote, 1)  # A
    print(lb[0])  # B
    shmem.quiet()
shmem.barrier_all()
""",
    ),
    Case(
        "get_nbi-quiet-load",
        "nbi completion",
        False,
        PRE
        + """if me == 0:
    shmem.get_nbi(lb, remote, 1)  # A
    shmem.quiet()
    print(lb[0])  # B
shmem.barrier_all()
""",
    ),
    Case(
        "get_nbi-store",
        "nbi completion",
        True,
        PRE
        + """if me == 0:
    shmem.get_nbi(lb, remote, 1)  # A
    lb[0] = 3  # B
    shmem.quiet()
shmem.barrier_all()
""",
    ),
    Case(
        "get_nbi-barrier-load",
        "nbi completion",
        False,
        PRE
        + """if me == 0:
    shmem.get_nbi(lb, remote, 1)  # A
shmem.barrier_all()
if me == 0:
    print(lb[0])  # B
""",
    ),
    Case(
        "put_nbi-sync_all-load",
        "nbi completion",
        True,
        PRE
        + """if me == 0:
    shmem.put_nbi(remote, lb, 1)  # A
shmem.sync_all()
if me == 1:
    x = remote[0]  # B
shmem.barrier_all()
""",
    ),
    Case(
        "put_nbi-quiet-sync_all-load",
        "nbi completion",
        False,
        PRE
        + """if me == 0:
    shmem.put_nbi(remote, lb, 1)  # A
    shmem.quiet()
shmem.sync_all()
if me == 1:
    x = remote[0]  # B
shmem.barrier_all()
""",
    ),
    Case(
        "get_nbi-get_nbi-same-target",
        "nbi completion",
        True,
        PRE
        + """lb2 = np.zeros(1, dtype=np.int32)
if me == 0:
    shmem.get_nbi(lb, remote, 1)  # A
    shmem.get_nbi(lb, remote2, 1)  # B
    shmem.quiet()
shmem.barrier_all()
""",
    ),
    # -- RMA vs RMA ----------------------------------------------------------------------
    Case(
        "put-put",
        "rma vs rma",
        True,
        PRE
        + """if me == 0:
    shmem.put(remote, lb, 1)  # A
if me == 1:
    shmem.put(remote, lb, 1)  # B
shmem.barrier_all()
""",
    ),
    Case(
        "put-get",
        "rma vs rma",
        True,
        PRE
        + """if me == 0:
    shmem.put(remote, lb, 1)  # A
if me == 1:
    shmem.get(lb, remote, 1)  # B
shmem.barrier_all()
""",
    ),
    Case(
        "get-get",
        "rma vs rma",
        False,
        PRE
        + """if me == 0:
    shmem.get(lb, remote, 1)  # A
if me == 1:
    shmem.get(lb, remote, 1)  # B
shmem.barrier_all()
""",
    ),
    Case(
        "put-put-same-pe-no-fence",
        "rma vs rma",
        True,
        PRE
        + """other = np.array([2], dtype=np.int32)
if me == 0:
    shmem.put(remote, lb, 1)  # A
    shmem.put(remote, other, 1)  # B
shmem.barrier_all()
""",
    ),
    Case(
        "put-fence-put-same-pe",
        "rma vs rma",
        False,
        PRE
        + """other = np.array([2], dtype=np.int32)
if me == 0:
    shmem.put(remote, lb, 1)  # A
    shmem.fence()
    shmem.put(remote, other, 1)  # B
shmem.barrier_all()
""",
    ),
    Case(
        "get_nbi-fence-put",
        "rma vs rma",
        True,
        PRE
        + """other = np.array([2], dtype=np.int32)
if me == 0:
    shmem.get_nbi(lb, remote, 1)  # A
    shmem.fence()
    shmem.put(remote, other, 1)  # B
shmem.barrier_all()
""",
    ),
    Case(
        "put-quiet-put",
        "rma vs rma",
        False,
        PRE
        + """other = np.array([2], dtype=np.int32)
if me == 0:
    shmem.put(remote, lb, 1)  # A
    shmem.quiet()
    shmem.put(remote, other, 1)  # B
shmem.barrier_all()
""",
    ),
    Case(
        "put-get-same-pe",
        "rma vs rma",
        True,
        PRE
        + """mine = np.zeros(1, dtype=np.int32)
if me == 0:
    shmem.put(remote, lb, 1)  # A
    shmem.get(mine, remote, 1)  # B
shmem.barrier_all()
""",
    ),
    Case(
        "put-quiet-get-same-pe",
        "rma vs rma",
        False,
        PRE
        + """mine = np.zeros(1, dtype=np.int32)
if me == 0:
    shmem.put(remote, lb, 1)  # A
    shmem.quiet()
    shmem.get(mine, remote, 1)  # B
shmem.barrier_all()
""",
    ),
    Case(
        "iput-store",
        "rma vs rma",
        True,
        PRE
        + """pair = np.array([1, 2], dtype=np.int32)
if me == 0:
    shmem.iput(remote, pair, 1, tst=2, sst=1)  # A
if me == 1:
    remote[2] = 4  # B
shmem.barrier_all()
""",
    ),
    Case(
        "iget-store",
        "rma vs rma",
        True,
        PRE
        + """pair = np.zeros(2, dtype=np.int32)
if me == 0:
    shmem.iget(pair, remote, 1, tst=1, sst=2)  # A
if me == 1:
    remote[0] = 4  # B
shmem.barrier_all()
""",
    ),
    Case(
        "put-barrier-put",
        "rma vs rma",
        False,
        PRE
        + """if me == 0:
    shmem.put(remote, lb, 1)  # A
shmem.barrier_all()
if me == 1:
    shmem.put(remote, lb, 1)  # B
shmem.barrier_all()
""",
    ),
    # -- atomics -------------------------------------------------------------------------
    Case(
        "atomic-add-add",
        "atomics",
        False,
        """shmem.barrier_all()
if me == 0:
    shmem.atomic_add(counter, 1, 1)  # A
if me == 1:
    shmem.atomic_add(counter, 2, 1)  # B
shmem.barrier_all()
""",
    ),
    Case(
        "atomic-int32-int64",
        "atomics",
        True,
        """shmem.barrier_all()
narrow = wide.view(np.int32)[:1]
if me == 0:
    shmem.atomic_add(wide[:1], 1, 1)  # A
if me == 1:
    shmem.atomic_add(narrow, 1, 1)  # B
shmem.barrier_all()
""",
    ),
    Case(
        "atomic-int64-float64",
        "atomics",
        True,
        """shmem.barrier_all()
real = wide.view(np.float64)[:1]
if me == 0:
    shmem.atomic_add(wide[:1], 1, 1)  # A
if me == 1:
    shmem.atomic_set(real, 2.5, 1)  # B
shmem.barrier_all()
""",
    ),
    Case(
        "atomic-add-load",
        "atomics",
        True,
        """shmem.barrier_all()
if me == 0:
    shmem.atomic_add(counter, 1, 1)  # A
if me == 1:
    print(counter[0])  # B
shmem.barrier_all()
""",
    ),
    Case(
        "atomic-fetch-load",
        "atomics",
        False,
        """shmem.barrier_all()
if me == 0:
    v = shmem.atomic_fetch(counter, 1)  # A
if me == 1:
    w = counter[0]  # B
shmem.barrier_all()
""",
    ),
    Case(
        "atomic-fetch-store",
        "atomics",
        True,
        """shmem.barrier_all()
if me == 0:
    v = shmem.atomic_fetch(counter, 1)  # A
if me == 1:
    counter[0] = 3  # B
shmem.barrier_all()
""",
    ),
    Case(
        "atomic-fetch_add-fetch_add",
        "atomics",
        False,
        """shmem.barrier_all()
old = shmem.atomic_fetch_add(counter, 1, 1)  # A
if me == 0:
    old2 = shmem.atomic_fetch_add(counter, 5, 1)  # B
shmem.barrier_all()
""",
    ),
    Case(
        "atomic-cswap-fetch",
        "atomics",
        False,
        """shmem.barrier_all()
if me == 0:
    old = shmem.atomic_compare_swap(counter, 0, 7, 1)  # A
if me == 1:
    v = shmem.atomic_fetch(counter, 1)  # B
shmem.barrier_all()
""",
    ),
    Case(
        "atomic-set-put",
        "atomics",
        True,
        """one = np.ones(1, dtype=np.int64)
shmem.barrier_all()
if me == 0:
    shmem.atomic_set(counter, 3, 1)  # A
if me == 1:
    shmem.put(counter, one, 1)  # B
shmem.barrier_all()
""",
    ),
    Case(
        "atomic-add-barrier-load",
        "atomics",
        False,
        """shmem.barrier_all()
if me == 0:
    shmem.atomic_add(counter, 1, 1)  # A
shmem.barrier_all()
if me == 1:
    print(counter[0])  # B
""",
    ),
    Case(
        "atomic-add-sync_all-load",
        "atomics",
        True,
        """shmem.barrier_all()
if me == 0:
    shmem.atomic_add(counter, 1, 1)  # A
shmem.sync_all()
if me == 1:
    print(counter[0])  # B
shmem.barrier_all()
""",
    ),
    Case(
        "atomic-add-quiet-sync_all-load",
        "atomics",
        False,
        """shmem.barrier_all()
if me == 0:
    shmem.atomic_add(counter, 1, 1)  # A
    shmem.quiet()
shmem.sync_all()
if me == 1:
    print(counter[0])  # B
shmem.barrier_all()
""",
    ),
    Case(
        "atomic-counter-wait",
        "atomics",
        False,
        """shmem.barrier_all()
shmem.atomic_inc(counter, 0)  # A
if me == 0:
    shmem.wait_until(counter, shmem.CMP.EQ, npes)
    total = int(counter[0])  # B
shmem.barrier_all()
""",
    ),
    # -- synchronisation -----------------------------------------------------------------
    Case(
        "put-sync_all-load",
        "sync",
        True,
        PRE
        + """if me == 0:
    shmem.put(remote, lb, 1)  # A
shmem.sync_all()
if me == 1:
    x = remote[0]  # B
shmem.barrier_all()
""",
    ),
    Case(
        "put-quiet-sync_all-load",
        "sync",
        False,
        PRE
        + """if me == 0:
    shmem.put(remote, lb, 1)  # A
    shmem.quiet()
shmem.sync_all()
if me == 1:
    x = remote[0]  # B
shmem.barrier_all()
""",
    ),
    Case(
        "put-quiet-no-sync-get",
        "sync",
        True,
        PRE
        + """if me == 0:
    shmem.put(remote, lb, 1)  # A
shmem.quiet()
if me == 1:
    shmem.get(lb, remote, 1)  # B
shmem.barrier_all()
""",
    ),
    Case(
        "flag-after-fence",
        "sync",
        False,
        PRE
        + """if me == 0:
    shmem.put(remote, lb, 1)  # A
    shmem.fence()
    shmem.atomic_set(flag, 1, 1)
if me == 1:
    shmem.wait_until(flag, shmem.CMP.EQ, 1)
    print(remote[0])  # B
shmem.barrier_all()
""",
    ),
    Case(
        "flag-after-quiet",
        "sync",
        False,
        PRE
        + """if me == 0:
    shmem.put(remote, lb, 1)  # A
    shmem.quiet()
    shmem.atomic_set(flag, 1, 1)
if me == 1:
    shmem.wait_until(flag, shmem.CMP.EQ, 1)
    print(remote[0])  # B
shmem.barrier_all()
""",
    ),
    Case(
        "flag-without-fence",
        "sync",
        True,
        PRE
        + """if me == 0:
    shmem.put(remote, lb, 1)  # A
    shmem.atomic_set(flag, 1, 1)
if me == 1:
    shmem.wait_until(flag, shmem.CMP.EQ, 1)
    print(remote[0])  # B
shmem.barrier_all()
""",
    ),
    Case(
        "flag-before-data",
        "sync",
        True,
        PRE
        + """if me == 0:
    shmem.atomic_set(flag, 1, 1)
    shmem.quiet()
    shmem.put(remote, lb, 1)  # A
if me == 1:
    shmem.wait_until(flag, shmem.CMP.EQ, 1)
    print(remote[0])  # B
shmem.barrier_all()
""",
    ),
    Case(
        "flag-put-fence",
        "sync",
        False,
        PRE
        + """one = np.ones(1, dtype=np.int64)
if me == 0:
    shmem.put(remote, lb, 1)  # A
    shmem.fence()
    shmem.put(flag, one, 1)
if me == 1:
    shmem.wait_until(flag, shmem.CMP.EQ, 1)
    y = remote[0]  # B
shmem.barrier_all()
""",
    ),
    Case(
        "flag-test-loop",
        "sync",
        False,
        PRE
        + """if me == 0:
    shmem.put(remote, lb, 1)  # A
    shmem.quiet()
    shmem.atomic_set(flag, 1, 1)
if me == 1:
    while not shmem.test(flag, shmem.CMP.EQ, 1):
        pass
    y = remote[0]  # B
shmem.barrier_all()
""",
    ),
    Case(
        "lock-both",
        "sync",
        False,
        """lock = shmem.new_lock()
val = np.zeros(1, dtype=np.int32)
if me < 2:
    shmem.set_lock(lock)
    shmem.get(val, remote, 0)  # A
    val[0] += 1
    shmem.put(remote, val, 0)  # B
    shmem.clear_lock(lock)
shmem.barrier_all()
""",
        max_pes=2,
    ),
    Case(
        "lock-one-side",
        "sync",
        True,
        """lock = shmem.new_lock()
val = np.ones(1, dtype=np.int32)
if me == 0:
    shmem.set_lock(lock)
    shmem.put(remote, val, 1)  # A
    shmem.clear_lock(lock)
if me == 1:
    shmem.set_lock(lock)
    shmem.clear_lock(lock)
    shmem.put(remote, val, 1)  # B
shmem.barrier_all()
""",
        max_pes=2,
    ),
    Case(
        "reduce-then-read",
        "sync",
        False,
        """src[:] = me
shmem.barrier_all()
shmem.sum_reduce(dst[:4], src)  # A
s = int(dst[0])  # B
shmem.barrier_all()
""",
    ),
    Case(
        "reduce-then-put",
        "sync",
        True,
        """src[:] = 1
lone = np.zeros(4, dtype=np.int32)
shmem.barrier_all()
shmem.sum_reduce(dst[:4], src)  # A
if me == 0:
    shmem.put(dst[:4], lone, 1)  # B
shmem.barrier_all()
""",
    ),
    Case(
        "broadcast-then-read",
        "sync",
        False,
        """src[:] = 3
shmem.barrier_all()
shmem.broadcast(dst[:4], src, 0)  # A
b = int(dst[1])  # B
shmem.barrier_all()
""",
    ),
    Case(
        "fcollect-then-read",
        "sync",
        False,
        """src[:] = me
shmem.barrier_all()
shmem.fcollect(dst[:npes], src[:1])  # A
c = dst[:npes].sum()  # B
shmem.barrier_all()
""",
    ),
    Case(
        "store-before-barrier-get",
        "sync",
        False,
        """remote[0] = me + 1  # A
shmem.barrier_all()
mine = np.zeros(1, dtype=np.int32)
shmem.get(mine, remote, (me + 1) % npes)  # B
shmem.barrier_all()
""",
    ),
    Case(
        "store-then-get-no-barrier",
        "sync",
        True,
        """remote[0] = me + 1  # A
mine = np.zeros(1, dtype=np.int32)
shmem.get(mine, remote, (me + 1) % npes)  # B
shmem.barrier_all()
""",
    ),
    Case(
        "team-sync-without-quiet",
        "sync",
        True,
        PRE
        + """team = shmem.TEAM_WORLD.split_strided(0, 2, 2)
if team:
    if me == 0:
        shmem.put(remote, lb, 2)  # A
    team.sync()
    if me == 2:
        x = remote[0]  # B
    team.destroy()
shmem.barrier_all()
""",
        min_pes=4,
    ),
    Case(
        "team-sync-after-quiet",
        "sync",
        False,
        PRE
        + """team = shmem.TEAM_WORLD.split_strided(0, 2, 2)
if team:
    if me == 0:
        shmem.put(remote, lb, 2)  # A
        shmem.quiet()
    team.sync()
    if me == 2:
        x = remote[0]  # B
    team.destroy()
shmem.barrier_all()
""",
        min_pes=4,
    ),
    Case(
        "team-sync-other-pes-not-ordered",
        "sync",
        True,
        PRE
        + """team = shmem.TEAM_WORLD.split_strided(0, 2, 2)
if me == 1:
    shmem.put(remote, lb, 2)  # A
    shmem.quiet()
if team:
    team.sync()
    if me == 2:
        x = remote[0]  # B
    team.destroy()
shmem.barrier_all()
""",
        min_pes=4,
    ),
    # -- contexts --------------------------------------------------------------------------
    Case(
        "ctx-put-default-quiet",
        "contexts",
        True,
        PRE
        + """ctx = shmem.Ctx.create()
if me == 0:
    shmem.put(remote, lb, 1, ctx=ctx)  # A
    shmem.quiet()
shmem.sync_all()
if me == 1:
    x = remote[0]  # B
shmem.barrier_all()
""",
    ),
    Case(
        "ctx-put-ctx-quiet",
        "contexts",
        False,
        PRE
        + """ctx = shmem.Ctx.create()
if me == 0:
    shmem.put(remote, lb, 1, ctx=ctx)  # A
    ctx.quiet()
shmem.sync_all()
if me == 1:
    x = remote[0]  # B
shmem.barrier_all()
""",
    ),
    Case(
        "ctx-put-barrier",
        "contexts",
        True,
        PRE
        + """ctx = shmem.Ctx.create()
if me == 0:
    shmem.put(remote, lb, 1, ctx=ctx)  # A
shmem.barrier_all()
if me == 1:
    x = remote[0]  # B
shmem.barrier_all()
""",
    ),
    Case(
        "ctx-quiet-function",
        "contexts",
        False,
        PRE
        + """ctx = shmem.Ctx.create()
if me == 0:
    shmem.put(remote, lb, 1, ctx=ctx)  # A
    shmem.quiet(ctx)
shmem.sync_all()
if me == 1:
    x = remote[0]  # B
shmem.barrier_all()
""",
    ),
    # -- aliasing and indirection -------------------------------------------------------------
    Case(
        "alias-view",
        "aliasing",
        True,
        PRE
        + """view = remote[0:2]
if me == 0:
    shmem.put(remote, lb, 1)  # A
if me == 1:
    print(view[0])  # B
shmem.barrier_all()
""",
    ),
    Case(
        "alias-frombuffer",
        "aliasing",
        True,
        PRE
        + """raw = np.frombuffer(remote, dtype=np.int32)
if me == 0:
    shmem.put(remote, lb, 1)  # A
if me == 1:
    print(raw[0])  # B
shmem.barrier_all()
""",
    ),
    Case(
        "alias-list",
        "aliasing",
        True,
        PRE
        + """arrays = [remote, remote2]
if me == 0:
    shmem.put(remote, lb, 1)  # A
if me == 1:
    arrays[0][0] = 8  # B
shmem.barrier_all()
""",
    ),
    Case(
        "alias-dict",
        "aliasing",
        True,
        PRE
        + """bufs = {"r": remote}
if me == 0:
    shmem.put(bufs["r"], lb, 1)  # A
if me == 1:
    print(remote[0])  # B
shmem.barrier_all()
""",
    ),
    Case(
        "alias-helper-function",
        "aliasing",
        True,
        PRE
        + """def show(a):
    print(a[0])  # B
if me == 0:
    shmem.put(remote, lb, 1)  # A
if me == 1:
    show(remote)
shmem.barrier_all()
""",
    ),
    Case(
        "alias-function-variable",
        "aliasing",
        True,
        PRE
        + """def bump(a, i):
    a[i] += 1  # B
f = bump
if me == 0:
    shmem.put(remote, lb, 1)  # A
if me == 1:
    f(remote, 0)
shmem.barrier_all()
""",
    ),
    Case(
        "alias-private-view-get_nbi",
        "aliasing",
        True,
        PRE
        + """big = np.zeros(4, dtype=np.int32)
part = big[1:2]
if me == 0:
    shmem.get_nbi(part, remote, 1)  # A
    print(big[1])  # B
    shmem.quiet()
shmem.barrier_all()
""",
    ),
    Case(
        "alias-helper-quiet",
        "aliasing",
        False,
        PRE
        + """def fetch(buf):
    shmem.get_nbi(buf, remote, 1)  # A
    shmem.quiet()
fetch(lb)
v = lb[0]  # B
shmem.barrier_all()
""",
    ),
    Case(
        "alias-disjoint-views",
        "aliasing",
        False,
        PRE
        + """low, high = remote[:2], remote[2:]
if me == 0:
    shmem.put(low[:1], lb, 1)  # A
if me == 1:
    high[0] = 6  # B
shmem.barrier_all()
""",
    ),
    Case(
        "alias-deep-nesting",
        "aliasing",
        True,
        PRE
        + """def start(buf):
    shmem.get_nbi(buf, remote, 1)  # A
def middle(buf):
    start(buf)
def outer(buf):
    middle(buf)
    return buf[0]  # B
if me == 0:
    v = outer(lb)
    shmem.quiet()
shmem.barrier_all()
""",
    ),
    Case(
        "alias-return-value",
        "aliasing",
        True,
        PRE
        + """def buffer():
    return lb
if me == 0:
    shmem.get_nbi(lb, remote, 1)  # A
    w = buffer()[0]  # B
    shmem.quiet()
shmem.barrier_all()
""",
    ),
    Case(
        "alias-slice-copy-after-get_nbi",
        "aliasing",
        True,
        PRE
        + """copy = np.zeros(1, dtype=np.int32)
if me == 0:
    shmem.get_nbi(lb, remote, 1)  # A
    copy[:] = lb  # B
    shmem.quiet()
shmem.barrier_all()
""",
    ),
    Case(
        "alias-slice-copy-after-put_nbi",
        "aliasing",
        False,
        PRE
        + """copy = np.zeros(1, dtype=np.int32)
if me == 0:
    shmem.put_nbi(remote, lb, 1)  # A
    copy[:] = lb  # B
    shmem.quiet()
shmem.barrier_all()
""",
    ),
    *REALISTIC,
    *OPENSHMEM_15,
]

from race_shapes import cases as _shape_cases  # noqa: E402  (issue 48's twins, made of Case)

CASES += _shape_cases(Case, _twin)
