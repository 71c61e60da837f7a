"""Issue 48's held-out set: 40 labelled cells (20 racy/fixed twin pairs) in the shapes users write.

Written blind: every program and label below was written from the OpenSHMEM 1.5 memory model (ordering
only by barriers and syncs, a wait on a flag set after a fence or quiet, atomics, locks, signals) before
reading the detector (``shmem_notebook/analysis/``, ``engine/record/``), so none is shaped to it. The
shapes: classes holding buffers, closures, generators, decorators, dict-held buffers, NumPy writes that
are not plain assignments (``+=``, ``np.add(out=)``, ``np.copyto``, ``fill``, views of views, ``.T``,
reshape views), locks taken through a context manager (a declared ``int64[1]`` is the lock), ``test``
polling loops, ``wait_until_all/any``, ``put_signal`` slots, parity double buffers, counters used as
flags, reused buffers and helpers defined earlier in the cell.

Cases as in :mod:`race_catalogue` (markers ``# A`` / ``# B``, the arrays of ``race_catalogue.ARRAYS``
zeroed by ``RESET`` before each); each racy twin has exactly the race its markers name, each fixed twin
is correct by the specification. Every program ends on 2 and 4 PEs (PEs beyond 1 mostly watch); lock
cases run at 2 PEs only (see :mod:`race_catalogue`). Scored by ``bench/race_heldout.py``, not in CI.
"""

from race_catalogue import ARRAYS, RESET, Case, _twin

__all__ = ["ARRAYS", "CASES", "RESET"]

# -- a class holding its buffers: the mailbox fences its data before raising the flag ----------
MAILBOX = """class Mailbox:
    def __init__(self, data, ready):
        self.data, self.ready = data, ready
    def send(self, values, pe):
        shmem.put(self.data, values, pe)  # A
        shmem.fence()
        shmem.atomic_set(self.ready, 1, pe)
    def receive(self):
        shmem.wait_until(self.ready, shmem.CMP.EQ, 1)
        return int(self.data.sum())  # B
box = Mailbox(remote, flag)
shmem.barrier_all()
if me == 0:
    box.send(np.full(4, 3, dtype=np.int32), 1)
if me == 1:
    got = box.receive()
shmem.barrier_all()
"""

# -- closures over a buffer: send and receive made by one helper --------------------------------
CHANNEL = """def make_channel(buf, peer):
    def send(v):
        shmem.put(buf, np.full(4, v, dtype=np.int32), peer)  # A
    def recv():
        return int(buf.sum())  # B
    return send, recv
send, recv = make_channel(remote, 1)
shmem.barrier_all()
if me == 0:
    send(4)
shmem.barrier_all()
if me == 1:
    got = recv()
shmem.barrier_all()
"""

# -- a generator reading rows lazily: made before the wait, consumed after it --------------------
ROWS = """def row_sums(buf, n):
    for k in range(n):
        yield int(buf[k].sum())  # B
shmem.barrier_all()
if me == 0:
    for k in range(3):
        shmem.put(board[k], np.full(8, k + 1, dtype=np.int32), 1)  # A
    shmem.fence()
    shmem.atomic_set(flag, 1, 1)
if me == 1:
    sums = row_sums(board, 3)
    shmem.wait_until(flag, shmem.CMP.EQ, 1)
    total = sum(sums)
shmem.barrier_all()
"""

# -- a decorator that publishes what the function put --------------------------------------------
DECORATED = """def then_signal(fn):
    def wrapper(*args):
        fn(*args)
        shmem.fence()
        shmem.atomic_set(flag, 1, 1)
    return wrapper
@then_signal
def publish(values):
    shmem.put(remote, values, 1)  # A
shmem.barrier_all()
if me == 0:
    publish(np.full(4, 6, dtype=np.int32))
if me == 1:
    shmem.wait_until(flag, shmem.CMP.EQ, 1)
    got = int(remote.sum())  # B
shmem.barrier_all()
"""

# -- dict-held slots on PE 0, reset with fill before the peers write into them -------------------
SLOTS = """slots = {p: dst[4 * p:4 * p + 4] for p in range(npes)}
if me == 0:
    for s in slots.values():
        s.fill(-1)  # A
shmem.barrier_all()
if me > 0:
    shmem.put(slots[me], np.full(4, me, dtype=np.int32), 0)  # B
shmem.barrier_all()
"""

# -- `+=` on a slice of PE 0's field while PE 1 puts into another part of it --------------------
PLUS_EQ = """ones = np.ones(4)
shmem.barrier_all()
if me == 1:
    shmem.put(field[4:8], ones, 0)  # A
if me == 0:
    field[8:16] += 2.0  # B
shmem.barrier_all()
"""

# -- np.add(..., out=) into a view that a peer reads with get ------------------------------------
ADD_OUT = """acc = field[0:8]
tmp = np.zeros(8)
shmem.barrier_all()
if me == 1:
    shmem.get(tmp, field[0:8], 0)  # A
shmem.barrier_all()
if me == 0:
    np.add(acc, 1.0, out=acc)  # B
shmem.barrier_all()
"""

# -- np.copyto into part of remote2 while a peer gets another part ------------------------------
COPYTO = """stage = np.arange(4, dtype=np.int32)
got = np.zeros(2, dtype=np.int32)
shmem.barrier_all()
if me == 0:
    np.copyto(remote2[2:4], stage[:2])  # A
if me == 1:
    shmem.get(got, remote2[0:2], 0)  # B
shmem.barrier_all()
"""

# -- a reshape view: grid[1] is board rows 2 and 3 -----------------------------------------------
RESHAPED = """grid = board.reshape(4, 16)
shmem.barrier_all()
if me == 1:
    shmem.put(board[2], np.full(8, 5, dtype=np.int32), 0)  # A
if me == 0:
    grid[1, 8:] = 3  # B
shmem.barrier_all()
"""

# -- a column read through .T after the flag that says the row arrived --------------------------
TRANSPOSED = """col = np.zeros(8, dtype=np.int32)
shmem.barrier_all()
if me == 1:
    shmem.put(board[5], np.arange(8, dtype=np.int32), 0)  # A
    shmem.quiet()
    shmem.atomic_set(flag, 1, 0)
if me == 0:
    shmem.wait_until(flag, shmem.CMP.EQ, 1)
    col[:] = board.T[3]  # B
shmem.barrier_all()
"""

# -- a view of a view: evens is results[4], [6], [8], [10] ---------------------------------------
EVENS = """window = results[4:12]
evens = window[::2]
shmem.barrier_all()
if me == 1:
    shmem.put(results[9:10], np.array([1], dtype=np.int64), 0)  # A
if me == 0:
    evens[:] = 2  # B
shmem.barrier_all()
"""

# -- a lock taken through a context manager; PE 1 reads the total inside the lock ----------------
LOCKED = """import contextlib
@contextlib.contextmanager
def locked(word):
    shmem.set_lock(word)
    try:
        yield
    finally:
        shmem.clear_lock(word)
t = np.zeros(1, dtype=np.int64)
peek = np.zeros(1, dtype=np.int64)
shmem.barrier_all()
if me < 2:
    with locked(ack):
        shmem.get(t, counter, 0)
        t[0] += 10 ** me
        shmem.put(counter, t, 0)  # A
        if me == 1:
            shmem.get(peek, counter, 0)  # B
shmem.barrier_all()
"""

# -- a lock class guarding a put made through a context: the context is quieted before unlocking --
LOCKED_CTX = """class Lock:
    def __init__(self, word):
        self.word = word
    def __enter__(self):
        shmem.set_lock(self.word)
        return self
    def __exit__(self, *exc):
        shmem.clear_lock(self.word)
ctx = shmem.TEAM_WORLD.create_ctx()
guard = Lock(ack)
x = 0
shmem.barrier_all()
if me == 0:
    with guard:
        shmem.put(remote, np.full(4, 9, dtype=np.int32), 1, ctx=ctx)  # A
        ctx.quiet()
if me == 1:
    while x != 9:
        with guard:
            x = int(remote[0])  # B
shmem.barrier_all()
ctx.destroy()
"""

# -- a test polling loop, the data read once the flag holds --------------------------------------
POLLING = """shmem.barrier_all()
if me == 0:
    shmem.put(remote2, np.arange(4, dtype=np.int32), 1)  # A
    shmem.fence()
    shmem.atomic_set(flag, 1, 1)
if me == 1:
    polls = 0
    while not shmem.test(flag, shmem.CMP.EQ, 1):
        polls += 1
    seen = int(remote2[3])  # B
shmem.barrier_all()
"""

# -- wait_until_all over the producers' flags (PE 0's own excluded by status) --------------------
GATHER_ALL = """mine = np.full(2, me, dtype=np.int64)
skip = np.zeros(npes, dtype=np.int32)
skip[0] = 1
shmem.barrier_all()
if me > 0:
    shmem.put(results[2 * me:2 * me + 2], mine, 0)  # A
    shmem.fence()
    shmem.atomic_set(flags[me:me + 1], 1, 0)
if me == 0:
    shmem.wait_until_all(flags[:npes], shmem.CMP.EQ, 1, status=skip)
    total = int(results[:2 * npes].sum())  # B
shmem.barrier_all()
"""

# -- wait_until_any serving producers that reuse their slot once acknowledged ---------------------
SERVE_ANY = """item = np.zeros(1, dtype=np.int64)
done = np.zeros(npes, dtype=np.int32)
done[0] = 1
shmem.barrier_all()
if me > 0:
    item[0] = 100 + me
    shmem.put(results[me:me + 1], item, 0)
    shmem.fence()
    shmem.atomic_set(flags[me:me + 1], 1, 0)
    shmem.wait_until(ack, shmem.CMP.EQ, 1)
    item[0] = 200 + me
    shmem.put(results[me:me + 1], item, 0)  # A
if me == 0:
    got = []
    for _ in range(npes - 1):
        i = shmem.wait_until_any(flags[:npes], shmem.CMP.EQ, 1, status=done)
        done[i] = 1
        got.append(int(results[i]))  # B
        shmem.atomic_set(ack, 1, i)
shmem.barrier_all()
"""

# -- put_signal into two slots, each with its own signal -----------------------------------------
SIGNAL_SLOTS = """sigs = [shmem.new_signal() for _ in range(2)]
shmem.barrier_all()
if me == 0:
    for k in range(2):
        shmem.put_signal(dst[4 * k:4 * k + 4], np.full(4, k + 1, dtype=np.int32), 1, sigs[k], 1, shmem.SIGNAL_SET)  # A
if me == 1:
    for s in sigs:
        shmem.signal_wait_until(s, shmem.CMP.EQ, 1)
    total = int(dst[0:8].sum())  # B
shmem.barrier_all()
for s in sigs:
    shmem.del_signal(s)
"""

# -- parity double buffer: round r uses bufs[r % 2], the producer waits for the reader's ack ------
PARITY = """chunk = np.zeros(8)
total = 0.0
shmem.barrier_all()
for r in range(6):
    b = r % 2
    if me == 0:
        if r >= 2:
            shmem.wait_until(ack, shmem.CMP.GE, r - 1)
        chunk[:] = r
        shmem.put(bufs[b], chunk, 1)  # A
        shmem.fence()
        shmem.atomic_set(flag, r + 1, 1)
    if me == 1:
        shmem.wait_until(flag, shmem.CMP.GE, r + 1)
        total += bufs[b].sum()  # B
        shmem.atomic_set(ack, r + 1, 0)
shmem.barrier_all()
"""

# -- a counter used as a flag: each producer's data, a fence, then its increment -----------------
COUNTED = """mine = np.array([me * 7], dtype=np.int64)
shmem.barrier_all()
if me > 0:
    shmem.put(results[me:me + 1], mine, 0)  # A
    shmem.fence()
    shmem.atomic_inc(counter, 0)
if me == 0:
    shmem.wait_until(counter, shmem.CMP.EQ, npes - 1)
    total = int(results[1:npes].sum())  # B
shmem.barrier_all()
"""

# -- a helper defined earlier that refills one private buffer for each non-blocking put -----------
SEND_ROWS = """row = np.zeros(8, dtype=np.int32)
def send_row(k, pe):
    row[:] = k + 1  # B
    shmem.put_nbi(board[k], row, pe)  # A
    shmem.quiet()
shmem.barrier_all()
if me == 0:
    for k in range(3):
        send_row(k, 1)
    shmem.quiet()
shmem.barrier_all()
"""

LOCK = {"max_pes": 2}
#: a lock and a context: OSHMPI creates no contexts (the catalogue's "contexts" cases end in UnsupportedError there)
LOCK_CTX = {"max_pes": 2, "refused_on": ("oshmpi",)}

CASES = [
    Case("class-mailbox", "class", False, MAILBOX),
    Case("class-mailbox-no-fence", "class", True, _twin(MAILBOX, "        shmem.fence()\n", "")),
    Case("closure-channel", "closure", False, CHANNEL),
    Case(
        "closure-channel-no-barrier",
        "closure",
        True,
        _twin(CHANNEL, "    send(4)\nshmem.barrier_all()\n", "    send(4)\n"),
    ),
    Case("generator-made-before-wait", "generator", False, ROWS),
    Case(
        "generator-advanced-before-wait",
        "generator",
        True,
        _twin(
            ROWS,
            "    sums = row_sums(board, 3)\n    shmem.wait_until(flag, shmem.CMP.EQ, 1)\n    total = sum(sums)\n",
            "    sums = row_sums(board, 3)\n    first = next(sums)\n    shmem.wait_until(flag, shmem.CMP.EQ, 1)\n"
            "    total = first + sum(sums)\n",
        ),
    ),
    Case("decorator-signal-after", "decorator", False, DECORATED),
    Case(
        "decorator-signal-before",
        "decorator",
        True,
        _twin(
            DECORATED,
            "        fn(*args)\n        shmem.fence()\n        shmem.atomic_set(flag, 1, 1)\n",
            "        shmem.atomic_set(flag, 1, 1)\n        fn(*args)\n",
        ),
    ),
    Case("dict-slots-reset-then-barrier", "dict", False, SLOTS),
    Case(
        "dict-slots-reset-no-barrier",
        "dict",
        True,
        _twin(SLOTS, "        s.fill(-1)  # A\nshmem.barrier_all()\n", "        s.fill(-1)  # A\n"),
    ),
    Case("numpy-iadd-disjoint", "numpy", False, PLUS_EQ),
    Case("numpy-iadd-overlap", "numpy", True, _twin(PLUS_EQ, "field[8:16] += 2.0", "field[6:16] += 2.0")),
    Case("numpy-add-out-after-barrier", "numpy", False, ADD_OUT),
    Case(
        "numpy-add-out-no-barrier",
        "numpy",
        True,
        _twin(
            ADD_OUT,
            "    shmem.get(tmp, field[0:8], 0)  # A\nshmem.barrier_all()\n",
            "    shmem.get(tmp, field[0:8], 0)  # A\n",
        ),
    ),
    Case("numpy-copyto-disjoint", "numpy", False, COPYTO),
    Case("numpy-copyto-overlap", "numpy", True, _twin(COPYTO, "remote2[0:2], 0)", "remote2[1:3], 0)")),
    Case("view-reshape-disjoint", "views", False, RESHAPED),
    Case("view-reshape-overlap", "views", True, _twin(RESHAPED, "grid[1, 8:] = 3", "grid[1, 4:] = 3")),
    Case("view-transpose-after-wait", "views", False, TRANSPOSED),
    Case(
        "view-transpose-before-wait",
        "views",
        True,
        _twin(
            TRANSPOSED,
            "    shmem.wait_until(flag, shmem.CMP.EQ, 1)\n    col[:] = board.T[3]  # B\n",
            "    col[:] = board.T[3]  # B\n    shmem.wait_until(flag, shmem.CMP.EQ, 1)\n",
        ),
    ),
    Case("view-of-view-disjoint", "views", False, EVENS),
    Case("view-of-view-overlap", "views", True, _twin(EVENS, "results[9:10]", "results[8:9]")),
    Case("lock-context-read-inside", "locks", False, LOCKED, **LOCK),
    Case(
        "lock-context-read-outside",
        "locks",
        True,
        _twin(
            LOCKED,
            "        if me == 1:\n            shmem.get(peek, counter, 0)  # B\n",
            "    if me == 1:\n        shmem.get(peek, counter, 0)  # B\n",
        ),
        **LOCK,
    ),
    Case("lock-ctx-quiet-before-unlock", "locks", False, LOCKED_CTX, **LOCK_CTX),
    Case(
        "lock-ctx-not-quieted",
        "locks",
        True,
        _twin(LOCKED_CTX, "        ctx.quiet()\n", ""),
        **LOCK_CTX,
    ),
    Case("test-poll-read-after", "polling", False, POLLING),
    Case(
        "test-poll-read-while-polling",
        "polling",
        True,
        _twin(
            POLLING,
            "    polls = 0\n    while not shmem.test(flag, shmem.CMP.EQ, 1):\n        polls += 1\n"
            "    seen = int(remote2[3])  # B\n",
            "    while True:\n        seen = int(remote2[3])  # B\n        if shmem.test(flag, shmem.CMP.EQ, 1):\n"
            "            break\n",
        ),
    ),
    Case("wait-all-gather", "wait_until_all", False, GATHER_ALL),
    Case(
        "wait-all-late-payload",
        "wait_until_all",
        True,
        _twin(
            GATHER_ALL,
            "    shmem.put(results[2 * me:2 * me + 2], mine, 0)  # A\n    shmem.fence()\n"
            "    shmem.atomic_set(flags[me:me + 1], 1, 0)\n",
            "    shmem.put(results[2 * me:2 * me + 1], mine[:1], 0)\n    shmem.fence()\n"
            "    shmem.atomic_set(flags[me:me + 1], 1, 0)\n"
            "    shmem.put(results[2 * me + 1:2 * me + 2], mine[1:], 0)  # A\n",
        ),
    ),
    Case("wait-any-read-then-ack", "wait_until_any", False, SERVE_ANY),
    Case(
        "wait-any-ack-then-read",
        "wait_until_any",
        True,
        _twin(
            SERVE_ANY,
            "        got.append(int(results[i]))  # B\n        shmem.atomic_set(ack, 1, i)\n",
            "        shmem.atomic_set(ack, 1, i)\n        got.append(int(results[i]))  # B\n",
        ),
    ),
    Case("signal-slots-wait-both", "put_signal", False, SIGNAL_SLOTS, needs="1.5"),
    Case(
        "signal-slots-wait-first-only",
        "put_signal",
        True,
        _twin(
            SIGNAL_SLOTS,
            "    for s in sigs:\n        shmem.signal_wait_until(s, shmem.CMP.EQ, 1)\n",
            "    shmem.signal_wait_until(sigs[0], shmem.CMP.EQ, 1)\n",
        ),
        needs="1.5",
    ),
    Case("parity-buffers-acked", "parity", False, PARITY),
    Case(
        "parity-buffers-ack-one-round-late",
        "parity",
        True,
        _twin(PARITY, "shmem.CMP.GE, r - 1)", "shmem.CMP.GE, r - 2)"),
    ),
    Case("counter-flag-fence-after-put", "counter", False, COUNTED),
    Case(
        "counter-flag-fence-before-put",
        "counter",
        True,
        _twin(
            COUNTED,
            "    shmem.put(results[me:me + 1], mine, 0)  # A\n    shmem.fence()\n",
            "    shmem.fence()\n    shmem.put(results[me:me + 1], mine, 0)  # A\n",
        ),
    ),
    Case("helper-reused-buffer-quiet", "helper", False, SEND_ROWS),
    Case(
        "helper-reused-buffer-no-quiet",
        "helper",
        True,
        _twin(
            SEND_ROWS,
            "    shmem.put_nbi(board[k], row, pe)  # A\n    shmem.quiet()\n",
            "    shmem.put_nbi(board[k], row, pe)  # A\n",
        ),
    ),
]
for _case in CASES:  # OSHMPI aborts the job on the multi-word waits: the tool refuses them there
    if "wait_until_all(" in _case.code or "wait_until_any(" in _case.code:
        _case.refused_on += ("oshmpi",)
