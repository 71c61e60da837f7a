"""Ports of RMARaceBench's OpenSHMEM tests: one shmem4py cell per C test whose calls shmem4py offers.

RMARaceBench (https://github.com/RWTH-HPC/RMARaceBench; its LICENSE: BSD 3-Clause, copyright 2023 RWTH
Aachen University) is a suite of microbenchmarks for RMA race detectors. Each cell below is our own
program for the scenario of one test of its ``SHMEM/`` folder (read from an index of public
repositories): the same operations in the same order, the same synchronisation and the same race or its
absence. No C code or comment is copied. A case's name is the test file's name stem; ``yes`` / ``no``
in it is the suite's label, kept as ``race``.

The cells follow :mod:`race_catalogue` (markers ``# A`` / ``# B`` on the two racing lines, the arrays of
``race_catalogue.ARRAYS`` zeroed by ``RESET`` before each). The C ``static int remote`` is ``remote[0:1]``
(PE 1's, the target, unless the test says otherwise), ``localbuf`` a private ``lb = np.ones(1, np.int32)``;
PE 2 of a 3-PE test is PE 2 (``min_pes=3``), tests of 4 PEs run from 4 PEs; PEs beyond
the test's count watch. 1.5 routines (``put_signal``, ``signal_fetch``, non-blocking AMOs, contexts of teams) have
``needs="1.5"``. A lock test's ``sleep`` (it lets PE 1 take the lock first, which makes the race seen by
a tool that orders lock holders) is kept. ``atomic/001`` puts PE 2's AMO through a context of a team
split from the world (PEs 1-2), not of ``TEAM_SHARED``: Sandia OpenSHMEM here leaves each PE alone in
``TEAM_SHARED`` (``translate_pe`` of PE 1 fails on PE 2); on a 1.4 library the split team is emulated and
its context refused with a ``TeamError`` (:func:`for_library`).

Skipped: ``hybrid/`` (22 tests: OpenMP threads inside a PE; a PE here is one Python thread);
``conflict/036-039`` (``shmem_g`` / ``shmem_p``: shmem4py has no single-element routines). Tests stored
under two numbers (the suite renumbered ``sync/`` and ``misc/``) are ported once, under the name of the
newest version read: ``sync/003-barrierall-remote-yes`` = ``007``, ``007/009-quiet-sync-remote-no`` =
``009``, ``008/010-quiet-sync-remote-yes`` = ``010``, ``009/011-fence-put-put-remote-no`` = ``011``,
``013/015-waituntil-remote-yes`` = ``015``, ``017/019-ctx-remote-no`` = ``019``,
``019/020-collective-reduce`` = ``021/022``, ``021/022-team-sync`` = ``023/024`` (the newer pair: a put to
a PE outside the team); ``misc/`` as numbered 001-018 in its newest version. Scored by
``bench/race_rmaracebench.py``, not in CI.
"""

from dataclasses import replace

from race_catalogue import ARRAYS, RESET, Case

__all__ = ["ARRAYS", "CASES", "RESET", "for_library"]

PRE = "lb = np.ones(1, dtype=np.int32)\nshmem.barrier_all()\n"
END = "shmem.barrier_all()\n"
SIG = "sig = shmem.new_signal()\nsig2 = shmem.new_signal()\nlb = np.ones(1, dtype=np.int32)\nshmem.barrier_all()\n"
SIG_END = "shmem.barrier_all()\nshmem.del_signal(sig2)\nshmem.del_signal(sig)\n"

#: one RMA or memory operation on PE 1's ``remote[0]`` (the origin's own buffer is ``lb``)
OPS = {
    "put": "shmem.put(remote[0:1], lb, 1)",
    "get": "shmem.get(lb, remote[0:1], 1)",
    "putnbi": "shmem.put_nbi(remote[0:1], lb, 1)",
    "getnbi": "shmem.get_nbi(lb, remote[0:1], 1)",
    "iput": "shmem.iput(remote[0:1], lb, 1, tst=1, sst=1, size=1)",
    "iget": "shmem.iget(lb, remote[0:1], 1, tst=1, sst=1, size=1)",
    "atomicfetch": "v = shmem.atomic_fetch(remote[0:1], 1)",
    "atomicset": "shmem.atomic_set(remote[0:1], 2, 1)",
    "atomicfetchinc": "v = shmem.atomic_fetch_inc(remote[0:1], 1)",
    "atomicfetchnbi": "shmem.atomic_fetch_nbi(lb, remote[0:1], 1)",
    "atomicfetchincnbi": "shmem.atomic_fetch_inc_nbi(lb, remote[0:1], 1)",
    "atomiccompareswapnbi": "shmem.atomic_compare_swap_nbi(lb, remote[0:1], 0, 42, 1)",
    "put_signal": "shmem.put_signal(remote[0:1], lb, 1, sig, 1, shmem.SIGNAL_SET)",
    "put_signal2": "shmem.put_signal(remote[0:1], lb, 1, sig2, 1, shmem.SIGNAL_SET)",
    "put_signal_nbi": "shmem.put_signal_nbi(remote[0:1], lb, 1, sig, 1, shmem.SIGNAL_SET)",
    "load": "x = int(remote[0])",
    "store": "remote[0] = 42",
}
NEEDS_15 = (
    "atomic_fetch_nbi",
    "atomic_fetch_inc_nbi",
    "atomic_compare_swap_nbi",
    "put_signal",
    "signal_fetch",
    "create_ctx",
)


def _mark(text, mark):
    return f"{text}  # {mark}" if mark else text


def _local(name, race, op, then):
    """PE 0 starts ``op`` and then touches its own ``lb`` (``then``): a local race or none."""
    code = (
        PRE + f"if me == 0:\n    {_mark(OPS[op], 'A' if race else '')}\n    {_mark(then, 'B' if race else '')}\n" + END
    )
    return _case(name, "local", race, code)


def _remote(name, race, first, second):
    """PE 0 does ``first`` on PE 1's ``remote[0]``; ``second`` is PE 1's own load or store, else PE 2's
    operation on it (a 3-PE test): unordered by anything."""
    other = 1 if second in ("load", "store") else 2
    second_op = OPS["put_signal2"] if (first, second) == ("put_signal", "put_signal") else OPS[second]
    if other == 2:
        second_op = "lb[0] = 2\n    " + second_op
    code = (
        PRE
        + f"if me == 0:\n    {_mark(OPS[first], 'A' if race else '')}\n"
        + f"if me == {other}:\n    {_mark(second_op, 'B' if race else '')}\n"
        + END
    )
    return _case(name, "conflict", race, code, min_pes=3 if other == 2 else None)


def _case(name, category, race, code, **kw):
    if "put_signal" in code or "signal_fetch" in code:
        code = code.replace(PRE, SIG, 1) + SIG_END[len(END) :] if code.startswith(PRE) else code
    if any(t in code for t in NEEDS_15):
        kw.setdefault("needs", "1.5")
    return Case(name, category, race, code, **kw)


def _c(n):
    return f"{n:03d}-shmem-conflict-"


CONFLICT = [
    _local(_c(1) + "putnbi-load-local-no", False, "putnbi", "x = int(lb[0])"),
    _local(_c(2) + "putnbi-store-local-yes", True, "putnbi", "lb[0] = 2"),
    _case(
        _c(3) + "putnbi-putnbi-local-no",
        "local",
        False,
        PRE + "if me == 0:\n    shmem.put_nbi(remote[0:1], lb, 1)\n    shmem.put_nbi(remote[0:1], lb, 0)\n" + END,
    ),
    _local(_c(4) + "getnbi-load-local-yes", True, "getnbi", "x = int(lb[0])"),
    _local(_c(5) + "getnbi-store-local-yes", True, "getnbi", "lb[0] = 2"),
    _local(_c(6) + "getnbi-putnbi-local-yes", True, "getnbi", OPS["putnbi"]),
    _local(_c(7) + "getnbi-getnbi-local-yes", True, "getnbi", OPS["getnbi"]),
    _local(_c(8) + "put_signal_nbi-store-local-yes", True, "put_signal_nbi", "lb[0] = 2"),
    _local(_c(9) + "put_signal_nbi-load-local-no", False, "put_signal_nbi", "x = int(lb[0])"),
    _local(_c(10) + "atomicfetchnbi-store-local-yes", True, "atomicfetchnbi", "lb[0] = 2"),
    _local(_c(11) + "atomicfetchnbi-load-local-yes", True, "atomicfetchnbi", "x = int(lb[0])"),
    _local(_c(12) + "atomicfetchincnbi-store-local-yes", True, "atomicfetchincnbi", "lb[0] = 2"),
    _local(_c(13) + "atomicfetchincnbi-load-local-yes", True, "atomicfetchincnbi", "x = int(lb[0])"),
    _local(_c(14) + "atomiccompareswapnbi-load-local-yes", True, "atomiccompareswapnbi", "x = int(lb[0])"),
    _local(_c(15) + "atomiccompareswapnbi-store-local-yes", True, "atomiccompareswapnbi", "lb[0] = 2"),
] + [
    _remote(_c(n) + f"{a}-{b}-remote-{'yes' if race else 'no'}", race, a, b)
    for n, a, b, race in [
        (16, "get", "load", False),
        (17, "get", "get", False),
        (18, "get", "store", True),
        (19, "get", "put", True),
        (20, "get", "atomicfetch", False),
        (21, "get", "atomicset", True),
        (22, "put", "load", True),
        (23, "put", "store", True),
        (24, "put", "put", True),
        (25, "put", "atomicfetch", True),
        (26, "put", "atomicset", True),
        (27, "atomicset", "load", True),
        (28, "atomicset", "store", True),
        (29, "atomicset", "atomicset", False),
        (30, "atomicset", "atomicfetch", False),
        (31, "atomicfetch", "atomicfetch", False),
        (32, "atomicfetch", "load", False),
        (33, "atomicfetch", "store", True),
        (34, "put_signal", "store", True),
        (35, "put_signal", "put_signal", True),
        (40, "iput", "store", True),
        (41, "iput", "put", True),
        (42, "iget", "store", True),
        (43, "iget", "put", True),
        (44, "atomicfetchnbi", "atomicfetchnbi", False),
        (45, "atomicfetchnbi", "load", False),
        (46, "atomicfetchinc", "atomicfetchinc", False),
        (47, "atomicfetchnbi", "store", True),
        (48, "atomiccompareswapnbi", "store", True),
        (49, "atomiccompareswapnbi", "atomicfetchnbi", False),
    ]
]


def _atomic(name, race, first, second, same_pe=False, pre="", post="", category="atomic"):
    """Two AMOs on one location of PE 1: from PE 0 and PE 2 (from PE 0 twice when ``same_pe``)."""
    a, b = _mark(first, "A" if race else ""), _mark(second, "B" if race else "")
    body = f"if me == 0:\n    {a}\n    {b}\n" if same_pe else f"if me == 0:\n    {a}\nif me == 2:\n    {b}\n"
    code = pre + "shmem.barrier_all()\n" + body + END + post
    return _case(name, category, race, code, min_pes=None if same_pe else 3)


ATOMIC = [
    Case(
        "001-shmem-atomic-different-ctx-remote-yes",
        "contexts",
        True,
        """team = shmem.TEAM_WORLD.split_strided(1, 1, 2)
ctx_world = shmem.TEAM_WORLD.create_ctx()
ctx_team = team.create_ctx() if team else None
shmem.barrier_all()
if me == 0:
    shmem.atomic_add(remote[0:1], 1, 1, ctx=ctx_world)  # A
if me == 2:
    shmem.atomic_add(remote[0:1], 1, shmem.TEAM_WORLD.translate_pe(1, team), ctx=ctx_team)  # B
shmem.barrier_all()
if team:
    ctx_team.destroy()
    team.destroy()
ctx_world.destroy()
""",
        min_pes=3,
        needs="1.5",
    ),
    _atomic(
        "002-shmem-atomic-same-ctx-remote-no",
        False,
        "shmem.atomic_add(remote[0:1], 1, 1, ctx=ctx)",
        "shmem.atomic_add(remote[0:1], 1, 1, ctx=ctx)",
        pre="ctx = shmem.Ctx.create()\n",
        post="ctx.destroy()\n",
        category="contexts",
    ),
    _atomic(
        "003-shmem-atomic-same-domain-remote-no",
        False,
        "shmem.atomic_add(remote[0:1], 1, 1, ctx=ctx)",
        "shmem.atomic_add(remote[0:1], 1, 1, ctx=ctx2)",
        pre="ctx = shmem.Ctx.create()\nctx2 = shmem.Ctx.create()\n",
        post="ctx2.destroy()\nctx.destroy()\n",
        category="contexts",
    ),
    _atomic(
        "004-shmem-atomic-int-int-remote-no",
        False,
        "shmem.atomic_add(remote[0:1], 1, 1)",
        "shmem.atomic_add(remote[0:1], 1, 1)",
    ),
    _atomic(
        "005-shmem-atomic-int-int-sameorigin-remote-no",
        False,
        "shmem.atomic_add(remote[0:1], 1, 1)",
        "shmem.atomic_add(remote[0:1], 1, 1)",
        same_pe=True,
    ),
    _atomic(
        "006-shmem-atomic-double-long-remote-yes",
        True,
        "shmem.atomic_set(wide[0:1].view(np.float64), 2.0, 1)",
        "shmem.atomic_set(wide[0:1], 3, 1)",
    ),
    _atomic(
        "007-shmem-atomic-int-long-remote-yes",
        True,
        "shmem.atomic_add(wide[0:1].view(np.int32)[0:1], 1, 1)",
        "shmem.atomic_add(wide[0:1], 1, 1)",
    ),
    _atomic(
        "008-shmem-atomic-int-float-remote-yes",
        True,
        "shmem.atomic_set(remote[0:1], 1, 1)",
        "shmem.atomic_set(remote[0:1].view(np.float32), 2.1, 1)",
    ),
    _atomic(
        "009-shmem-atomic-int-float-sameorigin-remote-yes",
        True,
        "shmem.atomic_set(remote[0:1], 1, 1)",
        "shmem.atomic_set(remote[0:1].view(np.float32), 2.1, 1)",
        same_pe=True,
    ),
]


def _s(n, rest):
    return f"{n:03d}-shmem-sync-{rest}"


TEAM = """team = shmem.TEAM_WORLD.split_strided(0, 2, npes // 2)
shmem.barrier_all()
if team:
    if me == {origin}:
        lb[0] = 42
        shmem.put(remote[0:1], lb, {target}){a}
    shmem.quiet()
if team:
    team.sync()
if {reader_in}team:
    if me == {target}:
        x = int(remote[0]){b}
shmem.barrier_all()
if team:
    team.destroy()
"""

SYNC = [
    Case(
        _s(1, "barrierall-local-yes"),
        "sync",
        True,
        PRE + "if me == 0:\n    shmem.get_nbi(lb, remote[0:1], 1)  # A\n    x = int(lb[0])  # B\n"
        "    shmem.barrier_all()\nelse:\n    shmem.barrier_all()\n" + END,
    ),
    Case(
        _s(2, "barrierall-local-no"),
        "sync",
        False,
        PRE + "if me == 0:\n    shmem.get_nbi(lb, remote[0:1], 1)\n    shmem.barrier_all()\n    x = int(lb[0])\n"
        "else:\n    shmem.barrier_all()\n" + END,
    ),
    Case(
        _s(3, "quiet-local-yes"),
        "sync",
        True,
        PRE
        + "if me == 0:\n    shmem.get_nbi(lb, remote[0:1], 1)  # A\n    x = int(lb[0])  # B\n    shmem.quiet()\n"
        + END,
    ),
    Case(
        _s(4, "quiet-local-no"),
        "sync",
        False,
        PRE + "if me == 0:\n    shmem.get_nbi(lb, remote[0:1], 1)\n    shmem.quiet()\n    x = int(lb[0])\n" + END,
    ),
    _case(
        _s(5, "waituntil-local-no"),
        "sync",
        False,
        SIG.replace(
            "sig = shmem.new_signal()\nsig2 = shmem.new_signal()\n", "sig = shmem.ffi.from_buffer('uint64_t[]', flag)\n"
        )
        + """if me == 0:
    lb[0] = 42
    shmem.put_signal_nbi(remote[0:1], lb, 1, sig, 1, shmem.SIGNAL_SET)
    shmem.wait_until(flag, shmem.CMP.EQ, 1)
    lb[0] = 1337
if me == 1:
    lb[0] = 1337
    shmem.wait_until(flag, shmem.CMP.EQ, 1)
    shmem.put_signal(remote[0:1], lb, 0, sig, 1, shmem.SIGNAL_SET)
shmem.barrier_all()
""",
    ),
    _case(
        _s(6, "waituntil-local-yes"),
        "sync",
        True,
        SIG.replace(
            "sig = shmem.new_signal()\nsig2 = shmem.new_signal()\n", "sig = shmem.ffi.from_buffer('uint64_t[]', flag)\n"
        )
        + """if me == 0:
    lb[0] = 42
    shmem.put_signal_nbi(remote[0:1], lb, 1, sig, 1, shmem.SIGNAL_SET)  # A
    shmem.wait_until(flag, shmem.CMP.EQ, 1)
    lb[0] = 1337  # B
if me == 1:
    lb[0] = 1337
    shmem.put_signal(remote[0:1], lb, 0, sig, 1, shmem.SIGNAL_SET)
shmem.barrier_all()
""",
    ),
    Case(
        _s(7, "barrierall-remote-yes"),
        "sync",
        True,
        PRE + "if me == 0:\n    mine = np.full(1, 42, dtype=np.int32)\n    shmem.put(remote[0:1], mine, 1)  # A\n"
        "    shmem.get(lb, remote[0:1], 1)  # B\n    shmem.barrier_all()\nelse:\n    shmem.barrier_all()\n" + END,
    ),
    Case(
        _s(4, "barrierall-remote-no"),
        "sync",
        False,
        PRE + "if me == 0:\n    mine = np.full(1, 42, dtype=np.int32)\n    shmem.put(remote[0:1], mine, 1)\n"
        "    shmem.barrier_all()\n    shmem.get(lb, remote[0:1], 1)\nelse:\n    shmem.barrier_all()\n" + END,
    ),
    Case(
        _s(9, "quiet-sync-remote-no"),
        "sync",
        False,
        PRE + "if me == 0:\n    mine = np.full(1, 42, dtype=np.int32)\n    shmem.put(remote[0:1], mine, 1)\n"
        "shmem.quiet()\nshmem.sync()\nif me == 1:\n    shmem.get(lb, remote[0:1], 1)\n" + END,
    ),
    Case(
        _s(10, "quiet-sync-remote-yes"),
        "sync",
        True,
        PRE + "if me == 0:\n    mine = np.full(1, 42, dtype=np.int32)\n    shmem.put(remote[0:1], mine, 1)  # A\n"
        "shmem.quiet()\nif me == 1:\n    shmem.get(lb, remote[0:1], 1)  # B\n" + END,
    ),
    Case(
        _s(11, "fence-put-put-remote-no"),
        "sync",
        False,
        PRE
        + "if me == 0:\n    shmem.put(remote[0:1], lb, 1)\n    shmem.fence()\n    shmem.put(remote[0:1], lb, 1)\n"
        + END,
    ),
    Case(
        _s(10, "fence-getnbi-put-remote-yes"),
        "sync",
        True,
        PRE + "if me == 0:\n    shmem.get_nbi(lb, remote[0:1], 1)  # A\n    shmem.fence()\n"
        "    lb2 = np.full(1, 42, dtype=np.int32)\n    shmem.put(remote[0:1], lb2, 1)  # B\n" + END,
    ),
    Case(
        _s(11, "lock-remote-no"),
        "sync",
        False,
        "lock = shmem.new_lock()\n"
        + PRE
        + """if me == 0:
    lb[0] = 42
    shmem.set_lock(lock)
    shmem.put(remote[0:1], lb, 1)
    shmem.clear_lock(lock)
if me == 1:
    lb[0] = 1337
    shmem.set_lock(lock)
    shmem.put(remote[0:1], lb, 1)
    shmem.clear_lock(lock)
shmem.barrier_all()
shmem.del_lock(lock)
""",
        max_pes=2,
    ),
    Case(
        _s(12, "lock-remote-yes"),
        "sync",
        True,
        "import time\nlock = shmem.new_lock()\n"
        + PRE
        + """if me == 0:
    time.sleep(0.5)  # the test's own delay: PE 1 most likely takes the lock first
    lb[0] = 42
    shmem.set_lock(lock)
    shmem.put(remote[0:1], lb, 1)  # A
    shmem.clear_lock(lock)
if me == 1:
    shmem.set_lock(lock)
    shmem.clear_lock(lock)
    lb[0] = 1337
    shmem.put(remote[0:1], lb, 1)  # B
shmem.barrier_all()
shmem.del_lock(lock)
""",
        max_pes=2,
    ),
    Case(
        _s(15, "waituntil-remote-yes"),
        "sync",
        True,
        PRE
        + """if me == 0:
    mine = np.full(1, 42, dtype=np.int32)
    shmem.put(remote[0:1], mine, 1)  # A
    shmem.fence()
    shmem.atomic_set(flag, 1, 1)
shmem.quiet()
if me == 1:
    x = int(remote[0])  # B
    shmem.wait_until(flag, shmem.CMP.EQ, 1)
"""
        + END,
    ),
    Case(
        _s(14, "waituntil-remote-no"),
        "sync",
        False,
        PRE
        + """if me == 0:
    mine = np.full(1, 42, dtype=np.int32)
    shmem.put(remote[0:1], mine, 1)
    shmem.fence()
    shmem.atomic_set(flag, 1, 1)
shmem.quiet()
if me == 1:
    shmem.wait_until(flag, shmem.CMP.EQ, 1)
    x = int(remote[0])
"""
        + END,
    ),
    _case(
        _s(15, "putsignal-remote-no"),
        "sync",
        False,
        SIG
        + """if me == 0:
    while shmem.signal_fetch(sig) != 1:
        pass
    seen = [int(v) for v in dst[0:npes]]
if me == 1:
    shmem.put_signal(dst[me:me + 1], np.full(1, me, dtype=np.int32), 0, sig, 1, shmem.SIGNAL_ADD)
"""
        + SIG_END,
    ),
    _case(
        _s(16, "putsignal-remote-yes"),
        "sync",
        True,
        "sig = shmem.ffi.from_buffer('uint64_t[]', flag)\n"
        + PRE
        + """if me == 0:
    while flag[0] < 1:  # A
        pass
    x = int(remote[0])
if me == 1:
    lb[0] = 2
    shmem.put_signal(remote[0:1], np.full(1, me, dtype=np.int32), 0, sig, 1, shmem.SIGNAL_ADD)  # B
"""
        + END,
    ),
    Case(
        _s(19, "ctx-remote-no"),
        "contexts",
        False,
        "ctx = shmem.Ctx.create()\n"
        + PRE
        + """if me == 0:
    lb[0] = 42
    shmem.put(remote[0:1], lb, 1, ctx=ctx)
    ctx.quiet()
    lb[0] = 1337
    shmem.put(remote[0:1], lb, 1, ctx=ctx)
shmem.barrier_all()
ctx.destroy()
""",
    ),
    Case(
        _s(18, "ctx-remote-yes"),
        "contexts",
        True,
        "ctx = shmem.Ctx.create()\n"
        + PRE
        + """if me == 0:
    lb[0] = 42
    shmem.put(remote[0:1], lb, 1, ctx=ctx)  # A
    shmem.quiet()
    lb[0] = 1337
    shmem.put(remote[0:1], lb, 1, ctx=ctx)  # B
shmem.barrier_all()
ctx.destroy()
""",
    ),
    Case(
        _s(21, "collective-reduce-remote-no"),
        "sync",
        False,
        """remote[0] = 1
shmem.barrier_all()
shmem.sum_reduce(remote2[0:1], remote[0:1])
shmem.barrier_all()
if me == 0:
    zero = np.zeros(1, dtype=np.int32)
    shmem.put(remote[0:1], zero, 1)
shmem.barrier_all()
""",
        min_pes=4,
    ),
    Case(
        _s(22, "collective-reduce-remote-yes"),
        "sync",
        True,
        """src[0] = 1
shmem.barrier_all()
shmem.sum_reduce(remote2[0:1], src[0:1])  # A
if me == 0:
    zero = np.zeros(1, dtype=np.int32)
    shmem.put(remote2[0:1], zero, 1)  # B
shmem.barrier_all()
""",
        min_pes=4,
    ),
    Case(
        _s(23, "team-sync-remote-yes"),
        "sync",
        True,
        PRE + TEAM.format(origin=2, target=3, a="  # A", b="  # B", reader_in="not "),
        min_pes=4,
    ),
    Case(
        _s(24, "team-sync-remote-no"),
        "sync",
        False,
        PRE + TEAM.format(origin=0, target=2, a="", b="", reader_in=""),
        min_pes=4,
    ),
]


def _m(n, rest):
    return f"{n:03d}-shmem-misc-{rest}"


DEEP = "".join(f"def deep{k}(rem, buf):\n    deep{k + 1}(rem, buf)\n" for k in range(1, 8))


def _deep_local(race):
    op = "shmem.get_nbi(buf, rem, 1)  # A" if race else "shmem.put_nbi(rem, buf, 1)"
    read = "x = int(buf[0])  # B" if race else "x = int(buf[0])"
    return (
        f"def deep8(rem, buf):\n    {op}\n"
        + DEEP
        + f"def rank0(rem, buf):\n    deep1(rem, buf)\n    {read}\n"
        + PRE
        + "if me == 0:\n    rank0(remote[0:1], lb)\n"
        + END
    )


def _deep_remote(race):
    other = "rem[0] = 42  # B" if race else "x = int(rem[0])"
    return (
        f"def deep8(rem, buf):\n    shmem.get(buf, rem, 1){'  # A' if race else ''}\n"
        + DEEP
        + "def rank0(rem, buf):\n    deep1(rem, buf)\n"
        + PRE
        + f"rem = remote[0:1]\nif me == 0:\n    rank0(rem, lb)\nelse:\n    {other}\n"
        + END
    )


def _alias_local(how, race):
    """An alias of ``lb`` made by ``how``; PE 0's nbi operation uses ``lb``, the read uses the alias."""
    makers = {
        "aliasing": "def alias_of(box):\n    box['alias'] = box['buf']\n",
        "retval": "def alias_of(buf):\n    return buf\n",
        "memcpy": "",
    }
    make = {
        "aliasing": "box = {'buf': lb}\nalias_of(box)\nlb_alias = box['alias']\n",
        "retval": "lb_alias = alias_of(lb)\n",
        "memcpy": "lb_alias = np.frombuffer(memoryview(lb), dtype=np.int32)\n",
    }[how]
    op = "shmem.get_nbi(lb, remote[0:1], 1)  # A" if race else "shmem.put_nbi(remote[0:1], lb, 1)"
    read = "x = int(lb_alias[0])  # B" if race else "x = int(lb_alias[0])"
    return makers[how] + PRE + make + f"if me == 0:\n    {op}\n    {read}\n" + END


def _alias_remote(how, race):
    """PE 0 gets PE 1's ``remote[0]``; the other PEs load or store it through an alias."""
    makers = {
        "aliasing": "def alias_of(box):\n    box['alias'] = box['buf']\n",
        "retval": "def alias_of(buf):\n    return buf\n",
        "memcpy": "",
    }
    make = {
        "aliasing": "box = {'buf': remote[0:1]}\nalias_of(box)\nrem_alias = box['alias']\n",
        "retval": "rem_alias = alias_of(remote[0:1])\n",
        "memcpy": "rem_alias = np.frombuffer(memoryview(remote[0:1]), dtype=np.int32)\n",
    }[how]
    other = "rem_alias[0] = 42  # B" if race else "x = int(rem_alias[0])"
    return (
        makers[how]
        + PRE
        + make
        + f"if me == 0:\n    shmem.get(lb, remote[0:1], 1){'  # A' if race else ''}\nelse:\n    {other}\n"
        + END
    )


def _funcpointer(race):
    other = "rem[0] = 42  # B" if race else "x = int(rem[0])"
    return (
        f"def rank0(rem, buf):\n    shmem.get(buf, rem, 1){'  # A' if race else ''}\n"
        + f"def rank1(rem, buf):\n    {other}\n"
        + PRE
        + "rankfunc = rank0 if me == 0 else rank1\nrankfunc(remote[0:1], lb)\n"
        + END
    )


MISC = [
    Case(_m(1, "putnbi-load-deep-nesting-local-no"), "misc", False, _deep_local(False)),
    Case(_m(2, "getnbi-load-deep-nesting-local-yes"), "misc", True, _deep_local(True)),
    Case(_m(3, "putnbi-load-aliasing-local-no"), "misc", False, _alias_local("aliasing", False)),
    Case(_m(4, "getnbi-load-aliasing-local-yes"), "misc", True, _alias_local("aliasing", True)),
    Case(_m(5, "putnbi-load-retval-local-no"), "misc", False, _alias_local("retval", False)),
    Case(_m(6, "getnbi-load-retval-local-yes"), "misc", True, _alias_local("retval", True)),
    Case(_m(7, "putnbi-load-memcpy-local-no"), "misc", False, _alias_local("memcpy", False)),
    Case(_m(8, "getnbi-load-memcpy-local-yes"), "misc", True, _alias_local("memcpy", True)),
    Case(_m(9, "get-load-deep-nesting-remote-no"), "misc", False, _deep_remote(False)),
    Case(_m(10, "get-store-deep-nesting-remote-yes"), "misc", True, _deep_remote(True)),
    Case(_m(11, "get-load-funcpointer-remote-no"), "misc", False, _funcpointer(False)),
    Case(_m(12, "get-store-funcpointer-remote-yes"), "misc", True, _funcpointer(True)),
    Case(_m(13, "get-load-aliasing-remote-no"), "misc", False, _alias_remote("aliasing", False)),
    Case(_m(14, "get-store-aliasing-remote-yes"), "misc", True, _alias_remote("aliasing", True)),
    Case(_m(15, "get-load-retval-remote-no"), "misc", False, _alias_remote("retval", False)),
    Case(_m(16, "get-store-retval-remote-yes"), "misc", True, _alias_remote("retval", True)),
    Case(_m(17, "get-load-memcpy-remote-no"), "misc", False, _alias_remote("memcpy", False)),
    Case(_m(18, "get-store-memcpy-remote-yes"), "misc", True, _alias_remote("memcpy", True)),
]

CASES = CONFLICT + ATOMIC + SYNC + MISC


#: cases with a context of a team split from the world (the tool emulates such teams on Open MPI's OSHMEM)
SPLIT_TEAM_CONTEXTS = {"001-shmem-atomic-different-ctx-remote-yes"}


def for_library(cases, library):
    """``cases`` as they must end on ``library``: on Open MPI's OSHMEM a context of a split team is refused
    with a TeamError (its teams are emulated), not the UnsupportedError of the other 1.5 routines."""
    if library != "oshmem":
        return list(cases)
    return [replace(c, needs=None, error="TeamError") if c.name in SPLIT_TEAM_CONTEXTS else c for c in cases]
