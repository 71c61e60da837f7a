"""Labelled cells for the race detector, written from the OpenSHMEM 1.5 memory model.

Each case is a cell run with ``job.run(code, arrays=ARRAYS, race=True)`` on every
PE (2 and 4 PEs; PEs beyond 1 mostly watch). The two accesses a case is about
carry the markers ``# A`` and ``# B`` on their lines; ``race`` says whether they
race. A true positive names both lines. ``error`` cases must end in the named
error instead of a verdict. Lock cases run at 2 PEs only: at 4 PEs this OSHMEM's
``clear_lock`` sometimes never returns while the other PEs wait in ``barrier_all``
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
]

RESET = (
    "for _a in (remote, remote2, flag, counter, wide, src, dst):\n"
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

CASES = [
    # -- RMA vs local access ------------------------------------------------------------
    Case("put-load", "rma vs local", True, PRE + """if me == 0:
    shmem.put(remote, lb, 1)  # A
if me == 1:
    x = int(remote[0])  # B
shmem.barrier_all()
"""),
    Case("put-barrier-load", "rma vs local", False, PRE + """if me == 0:
    shmem.put(remote, lb, 1)  # A
shmem.barrier_all()
if me == 1:
    x = int(remote[0])  # B
"""),
    Case("put-store", "rma vs local", True, PRE + """if me == 0:
    shmem.put(remote, lb, 1)  # A
if me == 1:
    remote[0] = 5  # B
shmem.barrier_all()
"""),
    Case("get-load", "rma vs local", False, PRE + """if me == 0:
    shmem.get(lb, remote, 1)  # A
if me == 1:
    x = remote[0]  # B
shmem.barrier_all()
"""),
    Case("get-store", "rma vs local", True, PRE + """if me == 0:
    shmem.get(lb, remote, 1)  # A
if me == 1:
    remote[0] = 7  # B
shmem.barrier_all()
"""),
    Case("put-inplace-add", "rma vs local", True, PRE + """if me == 0:
    shmem.put(remote, lb, 1)  # A
if me == 1:
    remote[0] += 1  # B
shmem.barrier_all()
"""),
    Case("put-whole-print", "rma vs local", True, PRE + """if me == 0:
    shmem.put(remote, lb, 1)  # A
if me == 1:
    print(remote)  # B
shmem.barrier_all()
"""),
    Case("put-method-sum", "rma vs local", True, PRE + """if me == 0:
    shmem.put(remote[2:3], lb, 1)  # A
if me == 1:
    total = remote.sum()  # B
shmem.barrier_all()
"""),
    Case("put-copyto", "rma vs local", True, PRE + """if me == 0:
    shmem.put(remote, lb, 1)  # A
if me == 1:
    np.copyto(remote, np.arange(4, dtype=np.int32))  # B
shmem.barrier_all()
"""),
    Case("put-disjoint-store", "rma vs local", False, PRE + """if me == 0:
    shmem.put(remote[0:1], lb, 1)  # A
if me == 1:
    remote[1] = 9  # B
shmem.barrier_all()
"""),
    Case("private-only", "rma vs local", False, """buf = np.zeros(8)
shmem.barrier_all()
buf[0] = me  # A
y = buf[0] + 1  # B
shmem.barrier_all()
"""),
    Case("own-symmetric-only", "rma vs local", False, """shmem.barrier_all()
remote[me % 4] = me  # A
z = remote[me % 4]  # B
shmem.barrier_all()
"""),
    Case("put-blocking-source-reuse", "rma vs local", False, PRE + """if me == 0:
    shmem.put(remote, lb, 1)  # A
    lb[0] = 99  # B
shmem.barrier_all()
"""),
    Case("get-blocking-target-use", "rma vs local", False, PRE + """if me == 0:
    shmem.get(lb, remote, 1)  # A
    v = lb[0] * 2  # B
shmem.barrier_all()
"""),
    Case("declared-then-read", "rma vs local", False, """shmem.barrier_all()
v = remote[0]  # A
w = remote[1]  # B
"""),
    # -- nbi completion ------------------------------------------------------------------
    Case("put_nbi-load-source", "nbi completion", False, PRE + """if me == 0:
    shmem.put_nbi(remote, lb, 1)  # A
    x = lb[0]  # B
    shmem.quiet()
shmem.barrier_all()
"""),
    Case("put_nbi-store-source", "nbi completion", True, PRE + """if me == 0:
    shmem.put_nbi(remote, lb, 1)  # A
    lb[0] = 5  # B
    shmem.quiet()
shmem.barrier_all()
"""),
    Case("put_nbi-quiet-store-source", "nbi completion", False, PRE + """if me == 0:
    shmem.put_nbi(remote, lb, 1)  # A
    shmem.quiet()
    lb[0] = 5  # B
shmem.barrier_all()
"""),
    Case("get_nbi-load", "nbi completion", True, PRE + """if me == 0:
    shmem.get_nbi(lb, remote, 1)  # A
    print(lb[0])  # B
    shmem.quiet()
shmem.barrier_all()
"""),
    Case("get_nbi-quiet-load", "nbi completion", False, PRE + """if me == 0:
    shmem.get_nbi(lb, remote, 1)  # A
    shmem.quiet()
    print(lb[0])  # B
shmem.barrier_all()
"""),
    Case("get_nbi-store", "nbi completion", True, PRE + """if me == 0:
    shmem.get_nbi(lb, remote, 1)  # A
    lb[0] = 3  # B
    shmem.quiet()
shmem.barrier_all()
"""),
    Case("get_nbi-barrier-load", "nbi completion", False, PRE + """if me == 0:
    shmem.get_nbi(lb, remote, 1)  # A
shmem.barrier_all()
if me == 0:
    print(lb[0])  # B
"""),
    Case("put_nbi-sync_all-load", "nbi completion", True, PRE + """if me == 0:
    shmem.put_nbi(remote, lb, 1)  # A
shmem.sync_all()
if me == 1:
    x = remote[0]  # B
shmem.barrier_all()
"""),
    Case("put_nbi-quiet-sync_all-load", "nbi completion", False, PRE + """if me == 0:
    shmem.put_nbi(remote, lb, 1)  # A
    shmem.quiet()
shmem.sync_all()
if me == 1:
    x = remote[0]  # B
shmem.barrier_all()
"""),
    Case("get_nbi-get_nbi-same-target", "nbi completion", True, PRE + """lb2 = np.zeros(1, dtype=np.int32)
if me == 0:
    shmem.get_nbi(lb, remote, 1)  # A
    shmem.get_nbi(lb, remote2, 1)  # B
    shmem.quiet()
shmem.barrier_all()
"""),
    # -- RMA vs RMA ----------------------------------------------------------------------
    Case("put-put", "rma vs rma", True, PRE + """if me == 0:
    shmem.put(remote, lb, 1)  # A
if me == 1:
    shmem.put(remote, lb, 1)  # B
shmem.barrier_all()
"""),
    Case("put-get", "rma vs rma", True, PRE + """if me == 0:
    shmem.put(remote, lb, 1)  # A
if me == 1:
    shmem.get(lb, remote, 1)  # B
shmem.barrier_all()
"""),
    Case("get-get", "rma vs rma", False, PRE + """if me == 0:
    shmem.get(lb, remote, 1)  # A
if me == 1:
    shmem.get(lb, remote, 1)  # B
shmem.barrier_all()
"""),
    Case("put-put-same-pe-no-fence", "rma vs rma", True, PRE + """other = np.array([2], dtype=np.int32)
if me == 0:
    shmem.put(remote, lb, 1)  # A
    shmem.put(remote, other, 1)  # B
shmem.barrier_all()
"""),
    Case("put-fence-put-same-pe", "rma vs rma", False, PRE + """other = np.array([2], dtype=np.int32)
if me == 0:
    shmem.put(remote, lb, 1)  # A
    shmem.fence()
    shmem.put(remote, other, 1)  # B
shmem.barrier_all()
"""),
    Case("get_nbi-fence-put", "rma vs rma", True, PRE + """other = np.array([2], dtype=np.int32)
if me == 0:
    shmem.get_nbi(lb, remote, 1)  # A
    shmem.fence()
    shmem.put(remote, other, 1)  # B
shmem.barrier_all()
"""),
    Case("put-quiet-put", "rma vs rma", False, PRE + """other = np.array([2], dtype=np.int32)
if me == 0:
    shmem.put(remote, lb, 1)  # A
    shmem.quiet()
    shmem.put(remote, other, 1)  # B
shmem.barrier_all()
"""),
    Case("put-get-same-pe", "rma vs rma", True, PRE + """mine = np.zeros(1, dtype=np.int32)
if me == 0:
    shmem.put(remote, lb, 1)  # A
    shmem.get(mine, remote, 1)  # B
shmem.barrier_all()
"""),
    Case("put-quiet-get-same-pe", "rma vs rma", False, PRE + """mine = np.zeros(1, dtype=np.int32)
if me == 0:
    shmem.put(remote, lb, 1)  # A
    shmem.quiet()
    shmem.get(mine, remote, 1)  # B
shmem.barrier_all()
"""),
    Case("iput-store", "rma vs rma", True, PRE + """pair = np.array([1, 2], dtype=np.int32)
if me == 0:
    shmem.iput(remote, pair, 1, tst=2, sst=1)  # A
if me == 1:
    remote[2] = 4  # B
shmem.barrier_all()
"""),
    Case("iget-store", "rma vs rma", True, PRE + """pair = np.zeros(2, dtype=np.int32)
if me == 0:
    shmem.iget(pair, remote, 1, tst=1, sst=2)  # A
if me == 1:
    remote[0] = 4  # B
shmem.barrier_all()
"""),
    Case("put-barrier-put", "rma vs rma", False, PRE + """if me == 0:
    shmem.put(remote, lb, 1)  # A
shmem.barrier_all()
if me == 1:
    shmem.put(remote, lb, 1)  # B
shmem.barrier_all()
"""),
    # -- atomics -------------------------------------------------------------------------
    Case("atomic-add-add", "atomics", False, """shmem.barrier_all()
if me == 0:
    shmem.atomic_add(counter, 1, 1)  # A
if me == 1:
    shmem.atomic_add(counter, 2, 1)  # B
shmem.barrier_all()
"""),
    Case("atomic-int32-int64", "atomics", True, """shmem.barrier_all()
narrow = wide.view(np.int32)[:1]
if me == 0:
    shmem.atomic_add(wide[:1], 1, 1)  # A
if me == 1:
    shmem.atomic_add(narrow, 1, 1)  # B
shmem.barrier_all()
"""),
    Case("atomic-int64-float64", "atomics", True, """shmem.barrier_all()
real = wide.view(np.float64)[:1]
if me == 0:
    shmem.atomic_add(wide[:1], 1, 1)  # A
if me == 1:
    shmem.atomic_set(real, 2.5, 1)  # B
shmem.barrier_all()
"""),
    Case("atomic-add-load", "atomics", True, """shmem.barrier_all()
if me == 0:
    shmem.atomic_add(counter, 1, 1)  # A
if me == 1:
    print(counter[0])  # B
shmem.barrier_all()
"""),
    Case("atomic-fetch-load", "atomics", False, """shmem.barrier_all()
if me == 0:
    v = shmem.atomic_fetch(counter, 1)  # A
if me == 1:
    w = counter[0]  # B
shmem.barrier_all()
"""),
    Case("atomic-fetch-store", "atomics", True, """shmem.barrier_all()
if me == 0:
    v = shmem.atomic_fetch(counter, 1)  # A
if me == 1:
    counter[0] = 3  # B
shmem.barrier_all()
"""),
    Case("atomic-fetch_add-fetch_add", "atomics", False, """shmem.barrier_all()
old = shmem.atomic_fetch_add(counter, 1, 1)  # A
if me == 0:
    old2 = shmem.atomic_fetch_add(counter, 5, 1)  # B
shmem.barrier_all()
"""),
    Case("atomic-cswap-fetch", "atomics", False, """shmem.barrier_all()
if me == 0:
    old = shmem.atomic_compare_swap(counter, 0, 7, 1)  # A
if me == 1:
    v = shmem.atomic_fetch(counter, 1)  # B
shmem.barrier_all()
"""),
    Case("atomic-set-put", "atomics", True, """one = np.ones(1, dtype=np.int64)
shmem.barrier_all()
if me == 0:
    shmem.atomic_set(counter, 3, 1)  # A
if me == 1:
    shmem.put(counter, one, 1)  # B
shmem.barrier_all()
"""),
    Case("atomic-add-barrier-load", "atomics", False, """shmem.barrier_all()
if me == 0:
    shmem.atomic_add(counter, 1, 1)  # A
shmem.barrier_all()
if me == 1:
    print(counter[0])  # B
"""),
    Case("atomic-add-sync_all-load", "atomics", True, """shmem.barrier_all()
if me == 0:
    shmem.atomic_add(counter, 1, 1)  # A
shmem.sync_all()
if me == 1:
    print(counter[0])  # B
shmem.barrier_all()
"""),
    Case("atomic-add-quiet-sync_all-load", "atomics", False, """shmem.barrier_all()
if me == 0:
    shmem.atomic_add(counter, 1, 1)  # A
    shmem.quiet()
shmem.sync_all()
if me == 1:
    print(counter[0])  # B
shmem.barrier_all()
"""),
    Case("atomic-counter-wait", "atomics", False, """shmem.barrier_all()
shmem.atomic_inc(counter, 0)  # A
if me == 0:
    shmem.wait_until(counter, shmem.CMP.EQ, npes)
    total = int(counter[0])  # B
shmem.barrier_all()
"""),
    # -- synchronisation -----------------------------------------------------------------
    Case("put-sync_all-load", "sync", True, PRE + """if me == 0:
    shmem.put(remote, lb, 1)  # A
shmem.sync_all()
if me == 1:
    x = remote[0]  # B
shmem.barrier_all()
"""),
    Case("put-quiet-sync_all-load", "sync", False, PRE + """if me == 0:
    shmem.put(remote, lb, 1)  # A
    shmem.quiet()
shmem.sync_all()
if me == 1:
    x = remote[0]  # B
shmem.barrier_all()
"""),
    Case("put-quiet-no-sync-get", "sync", True, PRE + """if me == 0:
    shmem.put(remote, lb, 1)  # A
shmem.quiet()
if me == 1:
    shmem.get(lb, remote, 1)  # B
shmem.barrier_all()
"""),
    Case("flag-after-fence", "sync", False, PRE + """if me == 0:
    shmem.put(remote, lb, 1)  # A
    shmem.fence()
    shmem.atomic_set(flag, 1, 1)
if me == 1:
    shmem.wait_until(flag, shmem.CMP.EQ, 1)
    print(remote[0])  # B
shmem.barrier_all()
"""),
    Case("flag-after-quiet", "sync", False, PRE + """if me == 0:
    shmem.put(remote, lb, 1)  # A
    shmem.quiet()
    shmem.atomic_set(flag, 1, 1)
if me == 1:
    shmem.wait_until(flag, shmem.CMP.EQ, 1)
    print(remote[0])  # B
shmem.barrier_all()
"""),
    Case("flag-without-fence", "sync", True, PRE + """if me == 0:
    shmem.put(remote, lb, 1)  # A
    shmem.atomic_set(flag, 1, 1)
if me == 1:
    shmem.wait_until(flag, shmem.CMP.EQ, 1)
    print(remote[0])  # B
shmem.barrier_all()
"""),
    Case("flag-before-data", "sync", True, PRE + """if me == 0:
    shmem.atomic_set(flag, 1, 1)
    shmem.quiet()
    shmem.put(remote, lb, 1)  # A
if me == 1:
    shmem.wait_until(flag, shmem.CMP.EQ, 1)
    print(remote[0])  # B
shmem.barrier_all()
"""),
    Case("flag-put-fence", "sync", False, PRE + """one = np.ones(1, dtype=np.int64)
if me == 0:
    shmem.put(remote, lb, 1)  # A
    shmem.fence()
    shmem.put(flag, one, 1)
if me == 1:
    shmem.wait_until(flag, shmem.CMP.EQ, 1)
    y = remote[0]  # B
shmem.barrier_all()
"""),
    Case("flag-test-loop", "sync", False, PRE + """if me == 0:
    shmem.put(remote, lb, 1)  # A
    shmem.quiet()
    shmem.atomic_set(flag, 1, 1)
if me == 1:
    while not shmem.test(flag, shmem.CMP.EQ, 1):
        pass
    y = remote[0]  # B
shmem.barrier_all()
"""),
    Case("lock-both", "sync", False, """lock = shmem.new_lock()
val = np.zeros(1, dtype=np.int32)
if me < 2:
    shmem.set_lock(lock)
    shmem.get(val, remote, 0)  # A
    val[0] += 1
    shmem.put(remote, val, 0)  # B
    shmem.clear_lock(lock)
shmem.barrier_all()
""", max_pes=2),
    Case("lock-one-side", "sync", True, """lock = shmem.new_lock()
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
""", max_pes=2),
    Case("reduce-then-read", "sync", False, """src[:] = me
shmem.barrier_all()
shmem.sum_reduce(dst[:4], src)  # A
s = int(dst[0])  # B
shmem.barrier_all()
"""),
    Case("reduce-then-put", "sync", True, """src[:] = 1
lone = np.zeros(4, dtype=np.int32)
shmem.barrier_all()
shmem.sum_reduce(dst[:4], src)  # A
if me == 0:
    shmem.put(dst[:4], lone, 1)  # B
shmem.barrier_all()
"""),
    Case("broadcast-then-read", "sync", False, """src[:] = 3
shmem.barrier_all()
shmem.broadcast(dst[:4], src, 0)  # A
b = int(dst[1])  # B
shmem.barrier_all()
"""),
    Case("fcollect-then-read", "sync", False, """src[:] = me
shmem.barrier_all()
shmem.fcollect(dst[:npes], src[:1])  # A
c = dst[:npes].sum()  # B
shmem.barrier_all()
"""),
    Case("store-before-barrier-get", "sync", False, """remote[0] = me + 1  # A
shmem.barrier_all()
mine = np.zeros(1, dtype=np.int32)
shmem.get(mine, remote, (me + 1) % npes)  # B
shmem.barrier_all()
"""),
    Case("store-then-get-no-barrier", "sync", True, """remote[0] = me + 1  # A
mine = np.zeros(1, dtype=np.int32)
shmem.get(mine, remote, (me + 1) % npes)  # B
shmem.barrier_all()
"""),
    Case("team-sync-without-quiet", "sync", True, PRE + """team = shmem.TEAM_WORLD.split_strided(0, 2, 2)
if team:
    if me == 0:
        shmem.put(remote, lb, 2)  # A
    team.sync()
    if me == 2:
        x = remote[0]  # B
    team.destroy()
shmem.barrier_all()
""", min_pes=4),
    Case("team-sync-after-quiet", "sync", False, PRE + """team = shmem.TEAM_WORLD.split_strided(0, 2, 2)
if team:
    if me == 0:
        shmem.put(remote, lb, 2)  # A
        shmem.quiet()
    team.sync()
    if me == 2:
        x = remote[0]  # B
    team.destroy()
shmem.barrier_all()
""", min_pes=4),
    Case("team-sync-other-pes-not-ordered", "sync", True, PRE + """team = shmem.TEAM_WORLD.split_strided(0, 2, 2)
if me == 1:
    shmem.put(remote, lb, 2)  # A
    shmem.quiet()
if team:
    team.sync()
    if me == 2:
        x = remote[0]  # B
    team.destroy()
shmem.barrier_all()
""", min_pes=4),
    # -- contexts --------------------------------------------------------------------------
    Case("ctx-put-default-quiet", "contexts", True, PRE + """ctx = shmem.Ctx.create()
if me == 0:
    shmem.put(remote, lb, 1, ctx=ctx)  # A
    shmem.quiet()
shmem.sync_all()
if me == 1:
    x = remote[0]  # B
shmem.barrier_all()
"""),
    Case("ctx-put-ctx-quiet", "contexts", False, PRE + """ctx = shmem.Ctx.create()
if me == 0:
    shmem.put(remote, lb, 1, ctx=ctx)  # A
    ctx.quiet()
shmem.sync_all()
if me == 1:
    x = remote[0]  # B
shmem.barrier_all()
"""),
    Case("ctx-put-barrier", "contexts", True, PRE + """ctx = shmem.Ctx.create()
if me == 0:
    shmem.put(remote, lb, 1, ctx=ctx)  # A
shmem.barrier_all()
if me == 1:
    x = remote[0]  # B
shmem.barrier_all()
"""),
    Case("ctx-quiet-function", "contexts", False, PRE + """ctx = shmem.Ctx.create()
if me == 0:
    shmem.put(remote, lb, 1, ctx=ctx)  # A
    shmem.quiet(ctx)
shmem.sync_all()
if me == 1:
    x = remote[0]  # B
shmem.barrier_all()
"""),
    # -- aliasing and indirection -------------------------------------------------------------
    Case("alias-view", "aliasing", True, PRE + """view = remote[0:2]
if me == 0:
    shmem.put(remote, lb, 1)  # A
if me == 1:
    print(view[0])  # B
shmem.barrier_all()
"""),
    Case("alias-frombuffer", "aliasing", True, PRE + """raw = np.frombuffer(remote, dtype=np.int32)
if me == 0:
    shmem.put(remote, lb, 1)  # A
if me == 1:
    print(raw[0])  # B
shmem.barrier_all()
"""),
    Case("alias-list", "aliasing", True, PRE + """arrays = [remote, remote2]
if me == 0:
    shmem.put(remote, lb, 1)  # A
if me == 1:
    arrays[0][0] = 8  # B
shmem.barrier_all()
"""),
    Case("alias-dict", "aliasing", True, PRE + """bufs = {"r": remote}
if me == 0:
    shmem.put(bufs["r"], lb, 1)  # A
if me == 1:
    print(remote[0])  # B
shmem.barrier_all()
"""),
    Case("alias-helper-function", "aliasing", True, PRE + """def show(a):
    print(a[0])  # B
if me == 0:
    shmem.put(remote, lb, 1)  # A
if me == 1:
    show(remote)
shmem.barrier_all()
"""),
    Case("alias-function-variable", "aliasing", True, PRE + """def bump(a, i):
    a[i] += 1  # B
f = bump
if me == 0:
    shmem.put(remote, lb, 1)  # A
if me == 1:
    f(remote, 0)
shmem.barrier_all()
"""),
    Case("alias-private-view-get_nbi", "aliasing", True, PRE + """big = np.zeros(4, dtype=np.int32)
part = big[1:2]
if me == 0:
    shmem.get_nbi(part, remote, 1)  # A
    print(big[1])  # B
    shmem.quiet()
shmem.barrier_all()
"""),
    Case("alias-helper-quiet", "aliasing", False, PRE + """def fetch(buf):
    shmem.get_nbi(buf, remote, 1)  # A
    shmem.quiet()
fetch(lb)
v = lb[0]  # B
shmem.barrier_all()
"""),
    Case("alias-disjoint-views", "aliasing", False, PRE + """low, high = remote[:2], remote[2:]
if me == 0:
    shmem.put(low[:1], lb, 1)  # A
if me == 1:
    high[0] = 6  # B
shmem.barrier_all()
"""),
    Case("alias-deep-nesting", "aliasing", True, PRE + """def start(buf):
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
"""),
    Case("alias-return-value", "aliasing", True, PRE + """def buffer():
    return lb
if me == 0:
    shmem.get_nbi(lb, remote, 1)  # A
    w = buffer()[0]  # B
    shmem.quiet()
shmem.barrier_all()
"""),
    Case("alias-slice-copy-after-get_nbi", "aliasing", True, PRE + """copy = np.zeros(1, dtype=np.int32)
if me == 0:
    shmem.get_nbi(lb, remote, 1)  # A
    copy[:] = lb  # B
    shmem.quiet()
shmem.barrier_all()
"""),
    Case("alias-slice-copy-after-put_nbi", "aliasing", False, PRE + """copy = np.zeros(1, dtype=np.int32)
if me == 0:
    shmem.put_nbi(remote, lb, 1)  # A
    copy[:] = lb  # B
    shmem.quiet()
shmem.barrier_all()
"""),
    # -- what this OpenSHMEM lacks ---------------------------------------------------------------
    Case("nbi-atomic-unsupported", "unsupported", False, """out = np.zeros(1, dtype=np.int64)
shmem.atomic_fetch_nbi(out, counter, 0)
""", error="UnsupportedError"),
    Case("put_signal-unsupported", "unsupported", False, """sig = shmem.new_signal()
shmem.put_signal(remote, np.ones(4, dtype=np.int32), 0, sig, 1, shmem.SIGNAL_SET)
""", error="UnsupportedError"),
]
