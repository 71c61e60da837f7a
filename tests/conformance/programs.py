"""The conformance programs: idioms users write, as data (issue 43).

Each :class:`Program` is one cell's text, run on every PE (``shmem``, ``np``, ``me``, ``npes`` and
``collectives`` are defined there), that leaves its answer in ``result``; ``expected(me, npes)`` is
that answer on PE ``me``, computed here from ``me``/``npes`` or with NumPy, never by the library.
``refused`` names, per library, the one-sentence error the tool raises on purpose instead of running
the call (a routine the library lacks, a call it would crash on); ``races`` names the races a
deliberately racy program must report (none here: every program is correct). Programs that share a
shape are made by one function per shape (the atomics, the reductions), so each line of this file
still reads as the cell a user would write.
"""

import functools
import textwrap
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

import numpy as np

__all__ = ["Program", "PROGRAMS", "AREAS", "by_name"]


@dataclass(frozen=True)
class Program:
    """One cell, the ``result`` it must leave on each PE, and what the tool refuses where."""

    name: str
    area: str
    code: str
    expected: Callable[[int, int], Any]
    refused: Mapping[str, str] = field(default_factory=dict)  # library -> the error the tool raises there
    races: tuple[str, ...] = ()  # substrings of the races a deliberately racy program reports
    alloc: str = ""  # declarations job.alloc makes before the cell (job.alloc("D=int64[4]"))
    arrays: str = ""  # declarations the cell brings, as %%pxshmem D=int64[4] does (job.run(arrays=...))


PROGRAMS: list[Program] = []

#: the routines OpenSHMEM 1.5 added, refused on the OpenSHMEM 1.4 libraries (Open MPI 4.1.4's OSHMEM, OSHMPI)
LACKS_15 = {"oshmem": "UnsupportedError", "oshmpi": "UnsupportedError"}
#: a context on a team: the tool emulates teams on the 1.4 libraries, and says it cannot make one there
NO_TEAM_CTX = {"oshmem": "TeamError", "oshmpi": "TeamError"}
#: contexts: OSHMPI cannot create one (MPI has no endpoints), the tool says so
NO_CTX = {"oshmpi": "UnsupportedError"}
#: the multi-word waits and tests: OSHMPI aborts the job in them (OSHMPI_ASSERT(0)), the tool refuses them there
NO_MULTI_WAIT = {"oshmpi": "UnsupportedError"}


def program(name, area, code, expected, **options):
    """Add one program (the code is dedented; the ring neighbours are defined before it)."""
    PROGRAMS.append(Program(name, area, textwrap.dedent(code).strip("\n") + "\n", expected, **options))


def right(me, npes):
    return (me + 1) % npes


def left(me, npes):
    return (me - 1) % npes


# the programs are laid out as the cells they are, one call each: the formatter leaves them be
# fmt: off
# -- RMA: blocking put/get ---------------------------------------------------------------------
program("put_ring", "rma", """
    x = shmem.full(4, -1, dtype=np.int64)
    shmem.put(x, np.arange(4) + 10 * me, (me + 1) % npes)
    shmem.barrier_all()
    result = x.tolist()
    """, lambda me, n: (np.arange(4) + 10 * left(me, n)).tolist())
program("get_ring", "rma", """
    x = shmem.full(4, me, dtype=np.int64)
    got = np.zeros(4, dtype=np.int64)
    shmem.get(got, x, (me + 1) % npes)
    shmem.barrier_all()
    result = got.tolist()
    """, lambda me, n: [right(me, n)] * 4)
program("put_size", "rma", """
    x = shmem.full(4, -1, dtype=np.int64)
    shmem.put(x, np.array([7, 8, 9, 10]), (me + 1) % npes, size=2)
    shmem.barrier_all()
    result = x.tolist()
    """, lambda me, n: [7, 8, -1, -1])
program("put_into_slice", "rma", """
    x = shmem.full(6, -1, dtype=np.int64)
    shmem.put(x[2:5], np.full(3, me), (me + 1) % npes)
    shmem.barrier_all()
    result = x.tolist()
    """, lambda me, n: [-1, -1] + [left(me, n)] * 3 + [-1])
program("put_to_self", "rma", """
    x = shmem.full(3, -1, dtype=np.int64)
    shmem.put(x, np.array([me, me, me]), me)
    shmem.barrier_all()
    result = x.tolist()
    """, lambda me, n: [me] * 3)
program("put_gather_to_pe0", "rma", """
    slots = shmem.full(npes, -1, dtype=np.int64)
    shmem.put(slots[me:me + 1], np.array([me * me]), 0)
    shmem.barrier_all()
    result = slots.tolist() if me == 0 else None
    """, lambda me, n: [p * p for p in range(n)] if me == 0 else None)
program("get_from_every_pe", "rma", """
    x = shmem.full(2, me, dtype=np.int32)
    rows = np.zeros((npes, 2), dtype=np.int32)
    for pe in range(npes):
        shmem.get(rows[pe], x, pe)
    shmem.barrier_all()
    result = rows.tolist()
    """, lambda me, n: [[p, p] for p in range(n)])
program("put_float64", "rma", """
    x = shmem.full(3, np.nan)
    shmem.put(x, np.array([0.5, 1.25, -2.0]) * (me + 1), (me + 1) % npes)
    shmem.barrier_all()
    result = x.tolist()
    """, lambda me, n: (np.array([0.5, 1.25, -2.0]) * (left(me, n) + 1)).tolist())
program("put_int8", "rma", """
    x = shmem.full(5, 0, dtype=np.int8)
    shmem.put(x, np.arange(5, dtype=np.int8) - me, (me + 1) % npes)
    shmem.barrier_all()
    result = x.tolist()
    """, lambda me, n: (np.arange(5) - left(me, n)).tolist())
program("get_complex128", "rma", """
    z = shmem.full(2, complex(me, -me))
    got = np.zeros(2, dtype=np.complex128)
    shmem.get(got, z, (me + 1) % npes)
    shmem.barrier_all()
    result = [str(v) for v in got]
    """, lambda me, n: [str(complex(right(me, n), -right(me, n)))] * 2)
program("put_2d_row", "rma", """
    grid = shmem.full((npes, 3), -1, dtype=np.int64)
    for pe in range(npes):
        shmem.put(grid[me], np.array([me, pe, me + pe]), pe)
    shmem.barrier_all()
    result = grid.tolist()
    """, lambda me, n: [[p, me, p + me] for p in range(n)])
program("put_large", "rma", """
    big = shmem.full(50_000, -1.0)
    shmem.put(big, np.arange(50_000) * 0.5 + me, (me + 1) % npes)
    shmem.barrier_all()
    result = [float(big.sum()), float(big[-1])]
    """, lambda me, n: [float((np.arange(50_000) * 0.5 + left(me, n)).sum()), 49_999 * 0.5 + left(me, n)])

# -- RMA: non-blocking -------------------------------------------------------------------------
program("put_nbi_quiet", "rma", """
    x = shmem.full(4, -1, dtype=np.int64)
    src = np.arange(4) * me
    shmem.put_nbi(x, src, (me + 1) % npes)
    shmem.quiet()
    shmem.barrier_all()
    result = x.tolist()
    """, lambda me, n: (np.arange(4) * left(me, n)).tolist())
program("get_nbi_quiet", "rma", """
    x = shmem.full(4, 3 * me, dtype=np.int64)
    got = np.zeros(4, dtype=np.int64)
    shmem.get_nbi(got, x, (me + 1) % npes)
    shmem.quiet()
    result = got.tolist()
    shmem.barrier_all()
    """, lambda me, n: [3 * right(me, n)] * 4)
program("put_nbi_chunks", "rma", """
    x = shmem.full(16, -1, dtype=np.int64)
    src = np.arange(16) + 100 * me
    for k in range(0, 16, 4):
        shmem.put_nbi(x[k:k + 4], src[k:k + 4], (me + 1) % npes)
    shmem.quiet()
    shmem.barrier_all()
    result = x.tolist()
    """, lambda me, n: (np.arange(16) + 100 * left(me, n)).tolist())
program("get_nbi_from_every_pe", "rma", """
    x = shmem.full(1, me + 1, dtype=np.int64)
    got = np.zeros(npes, dtype=np.int64)
    for pe in range(npes):
        shmem.get_nbi(got[pe:pe + 1], x, pe)
    shmem.quiet()
    result = got.tolist()
    shmem.barrier_all()
    """, lambda me, n: list(range(1, n + 1)))

# -- RMA: ordering with a flag -----------------------------------------------------------------
program("put_fence_flag", "rma", """
    data = shmem.full(4, -1, dtype=np.int64)
    flag = shmem.full(1, 0, dtype=np.int64)
    shmem.put(data, np.full(4, me), (me + 1) % npes)
    shmem.fence()
    shmem.atomic_set(flag, 1, (me + 1) % npes)
    shmem.wait_until(flag, shmem.CMP.EQ, 1)
    result = data.tolist()
    shmem.barrier_all()
    """, lambda me, n: [left(me, n)] * 4)
program("put_quiet_flag", "rma", """
    data = shmem.full(4, -1, dtype=np.int64)
    flag = shmem.full(1, 0, dtype=np.int64)
    shmem.put(data, np.full(4, 2 * me), (me + 1) % npes)
    shmem.quiet()
    shmem.put(flag, np.array([1]), (me + 1) % npes)
    shmem.wait_until(flag, shmem.CMP.NE, 0)
    result = data.tolist()
    shmem.barrier_all()
    """, lambda me, n: [2 * left(me, n)] * 4)

# -- RMA: strided ------------------------------------------------------------------------------
program("iput_target_stride", "rma", """
    x = shmem.full(8, -1, dtype=np.int64)
    shmem.iput(x, np.arange(4) + 10 * me, (me + 1) % npes, tst=2, sst=1, size=4)
    shmem.barrier_all()
    result = x.tolist()
    """, lambda me, n: [10 * left(me, n) + k // 2 if k % 2 == 0 else -1 for k in range(8)])
program("iput_both_strides", "rma", """
    x = shmem.full(9, -1, dtype=np.int32)
    src = np.arange(6, dtype=np.int32) + 10 * me
    shmem.iput(x, src, (me + 1) % npes, tst=3, sst=2, size=3)
    shmem.barrier_all()
    result = x.tolist()
    """, lambda me, n: [10 * left(me, n) + 2 * (k // 3) if k % 3 == 0 else -1 for k in range(9)])
program("iget_source_stride", "rma", """
    x = shmem.array(np.arange(8) + 100 * me)
    got = np.zeros(4, dtype=x.dtype)
    shmem.iget(got, x, (me + 1) % npes, tst=1, sst=2, size=4)
    result = got.tolist()
    shmem.barrier_all()
    """, lambda me, n: (np.arange(0, 8, 2) + 100 * right(me, n)).tolist())
program("iget_column", "rma", """
    grid = shmem.array(np.arange(12, dtype=np.float64).reshape(4, 3) + me)
    column = np.zeros(4)
    shmem.iget(column, grid.reshape(-1)[1:], (me + 1) % npes, tst=1, sst=3, size=4)
    result = column.tolist()
    shmem.barrier_all()
    """, lambda me, n: (np.arange(12.0).reshape(4, 3)[:, 1] + right(me, n)).tolist())

# -- RMA: elemental p/g (shmem4py has none: the C routines through shmem.lib, or a 1-element slice) --
program("p_long", "rma", """
    x = shmem.full(4, -1, dtype=np.int64)
    address = shmem.ffi.from_buffer("long[]", x)
    shmem.lib.shmem_long_p(address + me % 4, 1000 + me, (me + 1) % npes)
    shmem.barrier_all()
    result = x.tolist()
    """, lambda me, n: [1000 + left(me, n) if k == left(me, n) % 4 else -1 for k in range(4)])
program("g_long", "rma", """
    x = shmem.array(np.arange(4) * (me + 1))
    address = shmem.ffi.from_buffer("long[]", x)
    result = shmem.lib.shmem_long_g(address + 3, (me + 1) % npes)
    shmem.barrier_all()
    """, lambda me, n: 3 * (right(me, n) + 1))
program("p_double", "rma", """
    x = shmem.full(2, 0.0)
    shmem.lib.shmem_double_p(shmem.ffi.from_buffer("double[]", x) + 1, me + 0.5, (me + 1) % npes)
    shmem.barrier_all()
    result = x.tolist()
    """, lambda me, n: [0.0, left(me, n) + 0.5])
program("g_int", "rma", """
    x = shmem.full(1, 7 * me, dtype=np.intc)
    result = shmem.lib.shmem_int_g(shmem.ffi.from_buffer("int[]", x), (me + 1) % npes)
    shmem.barrier_all()
    """, lambda me, n: 7 * right(me, n))
program("p_as_one_element_put", "rma", """
    x = shmem.full(npes, -1, dtype=np.int64)
    for pe in range(npes):
        shmem.put(x[me:me + 1], np.array([10 * me + pe]), pe)
    shmem.barrier_all()
    result = x.tolist()
    """, lambda me, n: [10 * p + me for p in range(n)])
program("g_as_one_element_get", "rma", """
    x = shmem.array(np.arange(npes) * 3 + me)
    one = np.zeros(1, dtype=x.dtype)
    shmem.get(one, x[me:me + 1], (me + 1) % npes)
    result = int(one[0])
    shmem.barrier_all()
    """, lambda me, n: 3 * me + right(me, n))


# -- atomics ------------------------------------------------------------------------------------
#: every integer dtype shmem4py's atomics take (NumPy's char picks the C type: i int, l long...)
STANDARD = ("int32", "int64", "uint32", "uint64")
#: what the tool refuses on Open MPI 4.1.4 (shims/pitfalls.py, LibraryBugError)
BUG_32 = {"oshmem": "LibraryBugError"}

for _dtype in STANDARD:
    # one word per atomic: each PE works on its right neighbour's words, or on everyone's
    program(f"atomics_{_dtype}", "atomics", f"""
        w = shmem.array([3 * me + 5, 0, me, 0, 0, 10 * me, 10 * me], dtype={_dtype!r})
        r = (me + 1) % npes
        fetched = shmem.atomic_fetch(w[0:1], r)
        shmem.atomic_set(w[1:2], me + 7, r)
        swapped = shmem.atomic_swap(w[2:3], me + 10, r)
        for pe in range(npes):
            shmem.atomic_inc(w[3:4], pe)
            shmem.atomic_add(w[4:5], me + 1, pe)
        first = shmem.atomic_fetch_inc(w[5:6], r)
        second = shmem.atomic_fetch_inc(w[5:6], r)
        added = shmem.atomic_fetch_add(w[6:7], me + 1, r)
        shmem.barrier_all()
        result = dict(fetch=fetched, set=w[1], swap=[swapped, w[2]], inc=w[3], add=w[4],
                      fetch_inc=[first, second, w[5]], fetch_add=[added, w[6]])
        """, lambda me, n: dict(
            fetch=3 * right(me, n) + 5, set=left(me, n) + 7, swap=[right(me, n), left(me, n) + 10], inc=n,
            add=n * (n + 1) // 2, fetch_inc=[10 * right(me, n), 10 * right(me, n) + 1, 10 * me + 2],
            fetch_add=[10 * right(me, n), 10 * me + left(me, n) + 1]))
    program(f"atomic_compare_swap_{_dtype}", "atomics", f"""
        x = shmem.full(1, me, dtype={_dtype!r})
        won = shmem.atomic_compare_swap(x, (me + 1) % npes, 100 + me, (me + 1) % npes)
        lost = shmem.atomic_compare_swap(x, (me + 1) % npes, 200 + me, (me + 1) % npes)
        shmem.barrier_all()
        result = [won, lost, x[0]]
        """, lambda me, n: [right(me, n), 100 + me, 100 + left(me, n)],
        refused=BUG_32 if _dtype.endswith("32") else {})

for _dtype in ("uint32", "uint64"):  # shmem4py has the bitwise atomics for unsigned types only
    program(f"atomic_and_or_xor_{_dtype}", "atomics", f"""
        w = shmem.array([0xFF, 0, 0b1010_0000], dtype={_dtype!r})
        for pe in range(npes):
            shmem.atomic_and(w[0:1], 0xFF & ~(1 << me), pe)
            shmem.atomic_or(w[1:2], 1 << me, pe)
            shmem.atomic_xor(w[2:3], 1 << me, pe)
        shmem.barrier_all()
        result = w.tolist()
        """, lambda me, n: [0xFF & ~((1 << n) - 1), (1 << n) - 1, 0b1010_0000 ^ ((1 << n) - 1)])
    program(f"atomic_fetch_and_or_xor_{_dtype}", "atomics", f"""
        w = shmem.full(3, 0b1100, dtype={_dtype!r})
        r = (me + 1) % npes
        old = [shmem.atomic_fetch_and(w[0:1], 0b1010, r), shmem.atomic_fetch_or(w[1:2], 0b0011, r),
               shmem.atomic_fetch_xor(w[2:3], 0b0110, r)]
        shmem.barrier_all()
        result = [old, w.tolist()]
        """, lambda me, n: [[0b1100] * 3, [0b1000, 0b1111, 0b1010]], refused=BUG_32 if _dtype == "uint32" else {})

for _dtype in ("float32", "float64"):  # fetch, set and swap: the atomics shmem4py also takes floats for
    program(f"atomics_{_dtype}", "atomics", f"""
        w = shmem.array([me + 0.5, 0.0, me + 0.5], dtype={_dtype!r})
        r = (me + 1) % npes
        fetched = shmem.atomic_fetch(w[0:1], r)
        shmem.atomic_set(w[1:2], me + 0.25, r)
        swapped = shmem.atomic_swap(w[2:3], -me - 0.75, r)
        shmem.barrier_all()
        result = [fetched, swapped, w.tolist()]
        """, lambda me, n: [right(me, n) + 0.5, right(me, n) + 0.5,
                            [me + 0.5, left(me, n) + 0.25, -left(me, n) - 0.75]])

# the C long long types (NumPy's longlong/ulonglong, not the same C type as int64/uint64)
program("atomics_longlong", "atomics", """
    w = shmem.full(2, -5, dtype="longlong")
    for pe in range(npes):
        shmem.atomic_add(w[0:1], 2**40 + me, pe)
    old = shmem.atomic_fetch_add(w[1:2], -me, (me + 1) % npes)
    shmem.barrier_all()
    result = [old, w.tolist()]
    """, lambda me, n: [-5, [-5 + n * 2**40 + n * (n - 1) // 2, -5 - left(me, n)]])
program("atomics_ulonglong", "atomics", """
    w = shmem.array([2**63 + me, 2**64 - 1], dtype="ulonglong")
    won = shmem.atomic_compare_swap(w[0:1], 2**63 + (me + 1) % npes, 7, (me + 1) % npes)
    old = shmem.atomic_fetch_xor(w[1:2], 2**63, (me + 1) % npes)
    shmem.barrier_all()
    result = [won, old, w.tolist()]
    """, lambda me, n: [2**63 + right(me, n), 2**64 - 1, [7, 2**63 - 1]])

# the generic forms, with the AMO names
program("atomic_op_add", "atomics", """
    x = shmem.full(1, 0, dtype=np.int64)
    for pe in range(npes):
        shmem.atomic_op(x, 2 * me, shmem.AMO_ADD, pe)
    shmem.barrier_all()
    result = x[0]
    """, lambda me, n: n * (n - 1))
program("atomic_fetch_op_xor", "atomics", """
    x = shmem.full(1, 0b1100, dtype=np.uint64)
    old = shmem.atomic_fetch_op(x, 0b0101, "xor", (me + 1) % npes)
    shmem.barrier_all()
    result = [old, x[0]]
    """, lambda me, n: [0b1100, 0b1001])

# the non-blocking fetching forms (OpenSHMEM 1.5): the values are there after shmem.quiet()
program("atomics_nbi_int64", "atomics", """
    w = shmem.array([4 * me, me, me, 0, 100, 1], dtype=np.int64)
    got = np.zeros(6, dtype=np.int64)
    r = (me + 1) % npes
    shmem.atomic_fetch_nbi(got[0:1], w[0:1], r)
    shmem.atomic_swap_nbi(got[1:2], w[1:2], 50 + me, r)
    shmem.atomic_compare_swap_nbi(got[2:3], w[2:3], r, 9, r)
    shmem.atomic_fetch_inc_nbi(got[3:4], w[3:4], r)
    shmem.atomic_fetch_add_nbi(got[4:5], w[4:5], me, r)
    shmem.atomic_fetch_op_nbi(got[5:6], w[5:6], 10, shmem.AMO_ADD, r)
    shmem.quiet()
    shmem.barrier_all()
    result = [got.tolist(), w.tolist()]
    """, lambda me, n: [[4 * right(me, n), right(me, n), right(me, n), 0, 100, 1],
                        [4 * me, 50 + left(me, n), 9, 1, 100 + left(me, n), 11]], refused=LACKS_15)
program("atomics_nbi_bitwise_uint64", "atomics", """
    w = shmem.full(3, 0b1100, dtype=np.uint64)
    got = np.zeros(3, dtype=np.uint64)
    r = (me + 1) % npes
    shmem.atomic_fetch_and_nbi(got[0:1], w[0:1], 0b1010, r)
    shmem.atomic_fetch_or_nbi(got[1:2], w[1:2], 0b0011, r)
    shmem.atomic_fetch_xor_nbi(got[2:3], w[2:3], 0b0110, r)
    shmem.quiet()
    shmem.barrier_all()
    result = [got.tolist(), w.tolist()]
    """, lambda me, n: [[0b1100] * 3, [0b1000, 0b1111, 0b1010]], refused=LACKS_15)
program("atomic_compare_swap_nbi_int32", "atomics", """
    x = shmem.full(1, me, dtype=np.int32)
    got = np.zeros(1, dtype=np.int32)
    shmem.atomic_compare_swap_nbi(got, x, (me + 1) % npes, 9, (me + 1) % npes)
    shmem.quiet()
    shmem.barrier_all()
    result = [got[0], x[0]]
    """, lambda me, n: [right(me, n), 9], refused=LACKS_15)
program("ticket_counter", "atomics", """
    counter = shmem.full(1, 0, dtype=np.int64)
    tickets = shmem.full(npes, -1, dtype=np.int64)
    ticket = shmem.atomic_fetch_inc(counter, 0)
    shmem.atomic_set(tickets[ticket:ticket + 1], me, 0)
    shmem.barrier_all()
    result = sorted(tickets.tolist()) if me == 0 else int(counter[0])
    """, lambda me, n: list(range(n)) if me == 0 else 0)

# -- signals (OpenSHMEM 1.5) -------------------------------------------------------------------
program("put_signal_set", "signals", """
    data = shmem.full(4, -1, dtype=np.int64)
    sig = shmem.new_signal()
    shmem.put_signal(data, np.full(4, me), (me + 1) % npes, sig, 1, shmem.SIGNAL_SET)
    shmem.signal_wait_until(sig, shmem.CMP.EQ, 1)
    result = data.tolist()
    shmem.barrier_all()
    shmem.del_signal(sig)
    """, lambda me, n: [left(me, n)] * 4, refused=LACKS_15)
program("put_signal_add_from_all", "signals", """
    slots = shmem.full(npes, -1, dtype=np.int64)
    sig = shmem.new_signal()
    shmem.put_signal(slots[me:me + 1], np.array([me + 1]), 0, sig, 1, shmem.SIGNAL_ADD)
    if me == 0:
        shmem.signal_wait_until(sig, shmem.CMP.EQ, npes)
    result = slots.tolist() if me == 0 else None
    shmem.barrier_all()
    shmem.del_signal(sig)
    """, lambda me, n: list(range(1, n + 1)) if me == 0 else None, refused=LACKS_15)
program("put_signal_nbi", "signals", """
    data = shmem.full(8, -1.0)
    sig = shmem.new_signal()
    shmem.put_signal_nbi(data, np.linspace(0, 1, 8) + me, (me + 1) % npes, sig, 5, shmem.SIGNAL_SET)
    shmem.quiet()
    shmem.signal_wait_until(sig, shmem.CMP.GE, 5)
    result = data.tolist()
    shmem.barrier_all()
    shmem.del_signal(sig)
    """, lambda me, n: (np.linspace(0, 1, 8) + left(me, n)).tolist(), refused=LACKS_15)
program("signal_fetch", "signals", """
    data = shmem.full(1, -1, dtype=np.int64)
    sig = shmem.new_signal()
    shmem.put_signal(data, np.array([me]), (me + 1) % npes, sig, 40 + me, shmem.SIGNAL_SET)
    shmem.barrier_all()
    result = [shmem.signal_fetch(sig), int(data[0])]
    shmem.barrier_all()
    shmem.del_signal(sig)
    """, lambda me, n: [40 + left(me, n), left(me, n)], refused=LACKS_15)
program("signal_ring_steps", "signals", """
    data = shmem.full(3, -1, dtype=np.int64)
    sig = shmem.new_signal()
    for step in range(3):
        if me == 0:
            shmem.put_signal(data[step:step + 1], np.array([step]), (me + 1) % npes, sig, 1, shmem.SIGNAL_ADD)
        if me == 1 % npes:
            shmem.signal_wait_until(sig, shmem.CMP.GE, step + 1)
    result = data.tolist() if me == 1 % npes else None
    shmem.barrier_all()
    shmem.del_signal(sig)
    """, lambda me, n: [0, 1, 2] if me == 1 else None, refused=LACKS_15)

# -- wait and test -----------------------------------------------------------------------------
program("wait_until_eq", "wait", """
    flag = shmem.full(1, 0, dtype=np.int64)
    shmem.atomic_set(flag, me + 1, (me + 1) % npes)
    shmem.wait_until(flag, shmem.CMP.EQ, (me - 1) % npes + 1)
    result = int(flag[0])
    shmem.barrier_all()
    """, lambda me, n: left(me, n) + 1)
program("wait_until_ge_counter", "wait", """
    count = shmem.full(1, 0, dtype=np.int32)
    for pe in range(npes):
        shmem.atomic_inc(count, pe)
    shmem.wait_until(count, shmem.CMP.GE, npes)
    result = int(count[0])
    shmem.barrier_all()
    """, lambda me, n: n)
program("wait_until_gt_lt_le", "wait", """
    a = shmem.full(3, 0, dtype=np.int64)
    shmem.atomic_set(a[0:1], 5, (me + 1) % npes)
    shmem.atomic_set(a[1:2], -5, (me + 1) % npes)
    shmem.atomic_set(a[2:3], 3, (me + 1) % npes)
    shmem.wait_until(a[0:1], shmem.CMP.GT, 4)
    shmem.wait_until(a[1:2], shmem.CMP.LT, -4)
    shmem.wait_until(a[2:3], shmem.CMP.GE, 3)
    result = a.tolist()
    shmem.barrier_all()
    """, lambda me, n: [5, -5, 3])
program("test_poll", "wait", """
    flag = shmem.full(1, 0, dtype=np.uint64)
    shmem.atomic_set(flag, 1, (me + 1) % npes)
    polls = 0
    while not shmem.test(flag, shmem.CMP.EQ, 1):
        polls += 1
    result = int(flag[0])
    shmem.barrier_all()
    """, lambda me, n: 1)
program("wait_until_all", "wait", """
    flags = shmem.full(npes, 0, dtype=np.int64)
    for pe in range(npes):
        shmem.atomic_set(flags[me:me + 1], 1, pe)
    shmem.wait_until_all(flags, shmem.CMP.EQ, 1)
    result = flags.tolist()
    shmem.barrier_all()
    """, lambda me, n: [1] * n, refused=NO_MULTI_WAIT)
program("wait_until_all_status", "wait", """
    flags = shmem.full(npes, 0, dtype=np.int64)
    for pe in range(npes):
        if pe != me:
            shmem.atomic_set(flags[me:me + 1], 1, pe)
    skip = [1 if i == me else 0 for i in range(npes)]
    shmem.wait_until_all(flags, shmem.CMP.EQ, 1, status=skip)
    result = flags.tolist()
    shmem.barrier_all()
    """, lambda me, n: [0 if i == me else 1 for i in range(n)], refused=NO_MULTI_WAIT)
program("wait_until_any", "wait", """
    flags = shmem.full(npes, 0, dtype=np.int64)
    shmem.atomic_set(flags[me:me + 1], 1, (me + 1) % npes)
    result = shmem.wait_until_any(flags, shmem.CMP.EQ, 1)
    shmem.barrier_all()
    """, lambda me, n: left(me, n), refused=NO_MULTI_WAIT)
program("wait_until_some", "wait", """
    flags = shmem.full(npes, 0, dtype=np.int64)
    for pe in range(npes):
        shmem.atomic_set(flags[me:me + 1], 1, pe)
    shmem.barrier_all()
    result = sorted(shmem.wait_until_some(flags, shmem.CMP.EQ, 1))
    shmem.barrier_all()
    """, lambda me, n: list(range(n)), refused=NO_MULTI_WAIT)
program("wait_until_all_vector", "wait", """
    words = shmem.full(npes, 0, dtype=np.int64)
    for pe in range(npes):
        shmem.atomic_set(words[me:me + 1], me + 10, pe)
    shmem.wait_until_all_vector(words, shmem.CMP.EQ, [i + 10 for i in range(npes)])
    result = words.tolist()
    shmem.barrier_all()
    """, lambda me, n: [i + 10 for i in range(n)], refused=NO_MULTI_WAIT)
program("wait_until_any_vector", "wait", """
    words = shmem.full(npes, 0, dtype=np.int64)
    left = (me - 1) % npes
    shmem.atomic_set(words[me:me + 1], 7, (me + 1) % npes)
    result = shmem.wait_until_any_vector(words, shmem.CMP.EQ, [7 if i == left else -1 for i in range(npes)])
    shmem.barrier_all()
    """, lambda me, n: left(me, n), refused=NO_MULTI_WAIT)
program("wait_until_some_vector", "wait", """
    words = shmem.full(npes, 0, dtype=np.int64)
    for pe in range(npes):
        shmem.atomic_set(words[me:me + 1], me, pe)
    shmem.barrier_all()
    result = sorted(shmem.wait_until_some_vector(words, shmem.CMP.GE, list(range(npes))))
    shmem.barrier_all()
    """, lambda me, n: list(range(n)), refused=NO_MULTI_WAIT)
program("test_all_poll", "wait", """
    flags = shmem.full(npes, 0, dtype=np.int32)
    for pe in range(npes):
        shmem.atomic_set(flags[me:me + 1], 1, pe)
    while not shmem.test_all(flags, shmem.CMP.EQ, 1):
        pass
    result = flags.tolist()
    shmem.barrier_all()
    """, lambda me, n: [1] * n, refused=NO_MULTI_WAIT)
program("test_any_poll", "wait", """
    flags = shmem.full(npes, 0, dtype=np.int64)
    shmem.atomic_set(flags[me:me + 1], 1, (me + 1) % npes)
    found = None
    while found is None:
        found = shmem.test_any(flags, shmem.CMP.EQ, 1)
    result = found
    shmem.barrier_all()
    """, lambda me, n: left(me, n), refused=NO_MULTI_WAIT)
program("test_some_after_barrier", "wait", """
    flags = shmem.full(npes, 0, dtype=np.int64)
    shmem.atomic_set(flags[me:me + 1], 1, (me + 1) % npes)
    shmem.barrier_all()
    result = shmem.test_some(flags, shmem.CMP.EQ, 1)
    shmem.barrier_all()
    """, lambda me, n: [left(me, n)], refused=NO_MULTI_WAIT)
program("test_all_vector_poll", "wait", """
    words = shmem.full(npes, 0, dtype=np.int64)
    for pe in range(npes):
        shmem.atomic_set(words[me:me + 1], 2 * me, pe)
    while not shmem.test_all_vector(words, shmem.CMP.EQ, [2 * i for i in range(npes)]):
        pass
    result = words.tolist()
    shmem.barrier_all()
    """, lambda me, n: [2 * i for i in range(n)], refused=NO_MULTI_WAIT)
program("test_any_vector_poll", "wait", """
    words = shmem.full(npes, 0, dtype=np.int64)
    shmem.atomic_set(words[me:me + 1], 3, (me + 1) % npes)
    found = None
    while found is None:
        found = shmem.test_any_vector(words, shmem.CMP.EQ, [3] * npes)
    result = found
    shmem.barrier_all()
    """, lambda me, n: left(me, n), refused=NO_MULTI_WAIT)
program("test_some_vector_after_barrier", "wait", """
    words = shmem.full(npes, 0, dtype=np.int64)
    shmem.atomic_set(words[me:me + 1], 4, (me + 1) % npes)
    shmem.barrier_all()
    result = shmem.test_some_vector(words, shmem.CMP.EQ, [4] * npes)
    shmem.barrier_all()
    """, lambda me, n: [left(me, n)], refused=NO_MULTI_WAIT)

# -- locks ----------------------------------------------------------------------------------------
program("lock_counter", "locks", """
    lock = shmem.new_lock()
    counter = shmem.full(1, 0, dtype=np.int64)
    for _ in range(3):
        shmem.set_lock(lock)
        value = np.zeros(1, dtype=np.int64)
        shmem.get(value, counter, 0)
        shmem.put(counter, value + 1, 0)
        shmem.clear_lock(lock)
    shmem.barrier_all()
    result = int(counter[0]) if me == 0 else None
    shmem.del_lock(lock)
    """, lambda me, n: 3 * n if me == 0 else None)
program("lock_test_lock_spin", "locks", """
    lock = shmem.new_lock()
    log = shmem.full(npes, -1, dtype=np.int64)
    count = shmem.full(1, 0, dtype=np.int64)
    while shmem.test_lock(lock):
        pass
    slot = np.zeros(1, dtype=np.int64)
    shmem.get(slot, count, 0)
    shmem.put(log[int(slot[0]):int(slot[0]) + 1], np.array([me]), 0)
    shmem.put(count, slot + 1, 0)
    shmem.clear_lock(lock)
    shmem.barrier_all()
    result = sorted(log.tolist()) if me == 0 else None
    shmem.del_lock(lock)
    """, lambda me, n: list(range(n)) if me == 0 else None)
program("lock_object_with", "locks", """
    lock = shmem.Lock()
    total = shmem.full(1, 0.0)
    with lock:
        value = np.zeros(1)
        shmem.get(value, total, npes - 1)
        shmem.put(total, value + me + 0.5, npes - 1)
    shmem.barrier_all()
    result = float(total[0]) if me == npes - 1 else None
    lock.destroy()
    """, lambda me, n: sum(p + 0.5 for p in range(n)) if me == n - 1 else None)
program("lock_acquire_nonblocking", "locks", """
    lock = shmem.Lock()
    hits = shmem.full(1, 0, dtype=np.int64)
    while not lock.acquire(blocking=False):
        pass
    value = np.zeros(1, dtype=np.int64)
    shmem.get(value, hits, 0)
    shmem.put(hits, value + 10, 0)
    lock.release()
    shmem.barrier_all()
    result = int(hits[0]) if me == 0 else None
    lock.destroy()
    """, lambda me, n: 10 * n if me == 0 else None)


# -- collectives: the library's, on the world ---------------------------------------------------
def block(p):
    """What PE ``p`` contributes to the collectives below: 3 numbers."""
    return [10 * p + 1, 10 * p + 2, 10 * p + 3]


program("broadcast_world", "collectives", """
    src = shmem.array([10 * me + 1, 10 * me + 2, 10 * me + 3])
    dst = shmem.full(3, -1, dtype=src.dtype)
    shmem.broadcast(dst, src, npes - 1)
    result = dst.tolist()
    shmem.barrier_all()
    """, lambda me, n: block(n - 1))
program("collect_world", "collectives", """
    src = shmem.array(np.arange(npes) + 10 * me)  # the same size on every PE: symmetric
    dst = shmem.full(npes * (npes + 1) // 2, -1, dtype=src.dtype)
    shmem.collect(dst, src[: me + 1])
    result = dst.tolist()
    shmem.barrier_all()
    """, lambda me, n: [10 * p + k for p in range(n) for k in range(p + 1)])
program("fcollect_world", "collectives", """
    src = shmem.array([10 * me + 1, 10 * me + 2, 10 * me + 3])
    dst = shmem.full(3 * npes, -1, dtype=src.dtype)
    shmem.fcollect(dst, src)
    result = dst.tolist()
    shmem.barrier_all()
    """, lambda me, n: sum((block(p) for p in range(n)), []))
program("alltoall_world", "collectives", """
    src = shmem.array([100 * me + j for j in range(npes) for _ in range(2)])
    dst = shmem.full(2 * npes, -1, dtype=src.dtype)
    shmem.alltoall(dst, src)
    result = dst.tolist()
    shmem.barrier_all()
    """, lambda me, n: [100 * p + me for p in range(n) for _ in range(2)])
program("alltoalls_world", "collectives", """
    src = shmem.array(np.arange(2 * npes) + 100 * me)
    dst = shmem.full(3 * npes, -1, dtype=src.dtype)
    shmem.alltoalls(dst, src, tst=3, sst=2, size=1)
    result = dst.tolist()
    shmem.barrier_all()
    """, lambda me, n: [100 * (k // 3) + 2 * me if k % 3 == 0 else -1 for k in range(3 * n)])
program("barrier_sync_all_order", "collectives", """
    x = shmem.full(1, -1, dtype=np.int64)
    shmem.put(x, np.array([me]), (me + 1) % npes)
    shmem.barrier_all()
    seen = int(x[0])
    shmem.sync_all()
    shmem.put(x, np.array([seen + 100]), (me + 1) % npes)
    shmem.barrier_all()
    result = int(x[0])
    """, lambda me, n: 100 + left(left(me, n), n))

#: reduction op -> (NumPy ufunc, dtype the cell uses)
REDUCTIONS = {
    "sum": (np.add, "int64"),
    "prod": (np.multiply, "int64"),
    "min": (np.minimum, "float64"),
    "max": (np.maximum, "int32"),
    "and": (np.bitwise_and, "uint64"),
    "or": (np.bitwise_or, "int64"),
    "xor": (np.bitwise_xor, "uint32"),
}


def reduced(op, pes):
    """The reduction of the members' sources ``10 p + k + 1`` (k < 3) over ``pes``, with NumPy."""
    ufunc, dtype = REDUCTIONS[op]
    return ufunc.reduce(np.array([block(p) for p in pes], dtype=dtype)).tolist()


for _i, (_op, (_ufunc, _dtype)) in enumerate(REDUCTIONS.items()):
    # half the programs call reduce(..., op), the others the op's own name (sum_reduce...)
    _call = f'shmem.reduce(dst, src, "{_op}")' if _i % 2 == 0 else f"shmem.{_op}_reduce(dst, src)"
    program(f"reduce_{_op}_world", "collectives", f"""
        src = shmem.array([10 * me + 1, 10 * me + 2, 10 * me + 3], dtype={_dtype!r})
        dst = shmem.full(3, 0, dtype={_dtype!r})
        {_call}
        result = dst.tolist()
        shmem.barrier_all()
        """, functools.partial(lambda op, me, n: reduced(op, range(n)), _op))
program("reduce_sum_in_place", "collectives", """
    x = shmem.array([me + 1.0, 2.0 * me])
    shmem.barrier_all()
    shmem.sum_reduce(x, x)
    result = x.tolist()
    shmem.barrier_all()
    """, lambda me, n: [n * (n + 1) / 2, float(n * (n - 1))])

# -- collectives: the library's, on a team of the even PEs (split_strided) ---------------------
TEAM = "team = shmem.TEAM_WORLD.split_strided(0, 2, (npes + 1) // 2)"


def evens(n):
    return list(range(0, n, 2))


def on_team(value):
    """``expected`` for a team program: ``value(rank, members)`` on the even PEs, None elsewhere."""
    return lambda me, n: value(me // 2, evens(n)) if me % 2 == 0 else None


program("broadcast_team", "collectives", f"""
    {TEAM}
    src = shmem.array([10 * me + 1, 10 * me + 2, 10 * me + 3])
    dst = shmem.full(3, -1, dtype=src.dtype)
    result = None
    if team:
        shmem.broadcast(dst, src, team.n_pes() - 1, team=team)
        result = dst.tolist()
    team.destroy()
    shmem.barrier_all()
    """, on_team(lambda r, pes: block(pes[-1])))
program("collect_team", "collectives", f"""
    {TEAM}
    src = shmem.array(np.arange(npes) + 10 * me)
    dst = shmem.full(npes * npes, -1, dtype=src.dtype)
    result = None
    if team:
        sizes = [p + 1 for p in range(0, npes, 2)]
        shmem.collect(dst[: sum(sizes)], src[: me + 1], team=team)
        result = dst[: sum(sizes)].tolist()
    team.destroy()
    shmem.barrier_all()
    """, on_team(lambda r, pes: [10 * p + k for p in pes for k in range(p + 1)]))
program("fcollect_team", "collectives", f"""
    {TEAM}
    src = shmem.array([10 * me + 1, 10 * me + 2, 10 * me + 3])
    dst = shmem.full(3 * npes, -1, dtype=src.dtype)
    result = None
    if team:
        shmem.fcollect(dst[: 3 * team.n_pes()], src, team=team)
        result = dst[: 3 * team.n_pes()].tolist()
    team.destroy()
    shmem.barrier_all()
    """, on_team(lambda r, pes: sum((block(p) for p in pes), [])))
program("alltoall_team", "collectives", f"""
    {TEAM}
    src = shmem.array([100 * me + j for j in range(npes)])
    dst = shmem.full(npes, -1, dtype=src.dtype)
    result = None
    if team:
        n = team.n_pes()
        shmem.alltoall(dst[:n], src[:n], team=team)
        result = dst[:n].tolist()
    team.destroy()
    shmem.barrier_all()
    """, on_team(lambda r, pes: [100 * p + r for p in pes]))
program("alltoalls_team", "collectives", f"""
    {TEAM}
    src = shmem.array(np.arange(2 * npes) + 100 * me)
    dst = shmem.full(2 * npes, -1, dtype=src.dtype)
    result = None
    if team:
        n = team.n_pes()
        shmem.alltoalls(dst[: 2 * n], src[: 2 * n], tst=2, sst=2, size=1, team=team)
        result = dst[: 2 * n].tolist()
    team.destroy()
    shmem.barrier_all()
    """, on_team(lambda r, pes: [100 * pes[k // 2] + 2 * r if k % 2 == 0 else -1 for k in range(2 * len(pes))]))
for _op in ("sum", "max", "xor"):
    _dtype = REDUCTIONS[_op][1]
    program(f"reduce_{_op}_team", "collectives", f"""
        {TEAM}
        src = shmem.array([10 * me + 1, 10 * me + 2, 10 * me + 3], dtype={_dtype!r})
        dst = shmem.full(3, 0, dtype={_dtype!r})
        result = None
        if team:
            shmem.reduce(dst, src, "{_op}", team=team)
            result = dst.tolist()
        team.destroy()
        shmem.barrier_all()
        """, on_team(functools.partial(lambda op, r, pes: reduced(op, pes), _op)))
program("team_sync_and_translate", "collectives", f"""
    {TEAM}
    result = None
    if team:
        team.sync()
        result = [team.my_pe(), team.n_pes(), team.translate_pe(team.n_pes() - 1, shmem.TEAM_WORLD)]
    team.destroy()
    shmem.barrier_all()
    """, on_team(lambda r, pes: [r, len(pes), pes[-1]]))

# -- collectives: the teaching ones (collectives in cells), every algorithm -------------------
program("teach_broadcast_binomial", "teaching", """
    src = shmem.array([10 * me + 1, 10 * me + 2, 10 * me + 3])
    dst = shmem.full(3, -1, dtype=src.dtype)
    collectives.broadcast(dst, src, npes - 1, algorithm="binomial")
    result = dst.tolist()
    """, lambda me, n: block(n - 1))
program("teach_broadcast_linear", "teaching", """
    src = shmem.array([10 * me + 1, 10 * me + 2, 10 * me + 3])
    dst = shmem.full(3, -1, dtype=src.dtype)
    collectives.broadcast(dst, src, 0, algorithm="linear")
    result = dst.tolist()
    """, lambda me, n: block(0))
for _alg in ("ring", "recursive_doubling", "bruck"):
    program(f"teach_fcollect_{_alg}", "teaching", f"""
        src = shmem.array([10 * me + 1, 10 * me + 2, 10 * me + 3])
        dst = shmem.full(3 * npes, -1, dtype=src.dtype)
        collectives.fcollect(dst, src, algorithm="{_alg}")
        result = dst.tolist()
        """, lambda me, n: sum((block(p) for p in range(n)), []))
for _alg, _op in (("recursive_doubling", "sum"), ("rabenseifner", "max"), ("recursive_doubling", "xor")):
    _dtype = REDUCTIONS[_op][1]
    program(f"teach_reduce_{_alg}_{_op}", "teaching", f"""
        src = shmem.array([10 * me + 1, 10 * me + 2, 10 * me + 3], dtype={_dtype!r})
        dst = shmem.full(3, 0, dtype={_dtype!r})
        collectives.reduce(dst, src, "{_op}", algorithm="{_alg}")
        result = dst.tolist()
        """, functools.partial(lambda op, me, n: reduced(op, range(n)), _op))
program("teach_allreduce_sum", "teaching", """
    src = shmem.array(np.sin(np.arange(6) + me))
    dst = shmem.zeros(6)
    shmem.barrier_all()
    collectives.allreduce(dst, src, "sum")
    result = np.round(dst, 9).tolist()
    """, lambda me, n: np.round(sum(np.sin(np.arange(6) + p) for p in range(n)), 9).tolist())
program("teach_min_reduce", "teaching", """
    src = shmem.array([5.0 - me, 1.0 * me])
    dst = shmem.full(2, np.inf)
    collectives.min_reduce(dst, src)
    result = dst.tolist()
    """, lambda me, n: [5.0 - (n - 1), 0.0])
for _alg in ("pairwise", "linear"):
    program(f"teach_alltoall_{_alg}", "teaching", f"""
        src = shmem.array([100 * me + j for j in range(npes) for _ in range(2)])
        dst = shmem.full(2 * npes, -1, dtype=src.dtype)
        collectives.alltoall(dst, src, algorithm="{_alg}")
        result = dst.tolist()
        """, lambda me, n: [100 * p + me for p in range(n) for _ in range(2)])
program("teach_broadcast_team", "teaching", f"""
    {TEAM}
    src = shmem.array([10 * me + 1, 10 * me + 2, 10 * me + 3])
    dst = shmem.full(3, -1, dtype=src.dtype)
    result = None
    if team:
        collectives.broadcast(dst, src, 0, team=team)
        result = dst.tolist()
    team.destroy()
    shmem.barrier_all()
    """, on_team(lambda r, pes: block(pes[0])))
program("teach_fcollect_team", "teaching", f"""
    {TEAM}
    src = shmem.array([10 * me + 1, 10 * me + 2, 10 * me + 3])
    dst = shmem.full(3 * npes, -1, dtype=src.dtype)
    result = None
    if team:
        n = team.n_pes()
        collectives.fcollect(dst[: 3 * n], src, team=team, algorithm="bruck")
        result = dst[: 3 * n].tolist()
    team.destroy()
    shmem.barrier_all()
    """, on_team(lambda r, pes: sum((block(p) for p in pes), [])))
program("teach_reduce_team", "teaching", f"""
    {TEAM}
    src = shmem.array([10 * me + 1, 10 * me + 2, 10 * me + 3])
    dst = shmem.full(3, 0, dtype=src.dtype)
    result = None
    if team:
        collectives.sum_reduce(dst, src, team=team, algorithm="rabenseifner")
        result = dst.tolist()
    team.destroy()
    shmem.barrier_all()
    """, on_team(lambda r, pes: reduced("sum", pes)))
program("teach_alltoall_team", "teaching", f"""
    {TEAM}
    src = shmem.array([100 * me + j for j in range(npes)])
    dst = shmem.full(npes, -1, dtype=src.dtype)
    result = None
    if team:
        n = team.n_pes()
        collectives.alltoall(dst[:n], src[:n], team=team, algorithm="pairwise")
        result = dst[:n].tolist()
    team.destroy()
    shmem.barrier_all()
    """, on_team(lambda r, pes: [100 * p + r for p in pes]))

# -- contexts -------------------------------------------------------------------------------------
program("ctx_put_quiet", "contexts", """
    x = shmem.full(4, -1, dtype=np.int64)
    ctx = shmem.Ctx.create()
    shmem.put(x, np.full(4, me), (me + 1) % npes, ctx=ctx)
    ctx.quiet()
    shmem.barrier_all()
    ctx.destroy()
    result = x.tolist()
    """, lambda me, n: [left(me, n)] * 4, refused=NO_CTX)
program("ctx_with_block", "contexts", """
    x = shmem.full(4, -1, dtype=np.int64)
    with shmem.Ctx.create() as ctx:
        shmem.put_nbi(x, np.arange(4) + me, (me + 1) % npes, ctx=ctx)
        ctx.quiet()
    shmem.barrier_all()
    result = x.tolist()
    """, lambda me, n: (np.arange(4) + left(me, n)).tolist(), refused=NO_CTX)
program("ctx_private_amo", "contexts", """
    x = shmem.full(1, 0, dtype=np.int64)
    with shmem.Ctx.create(shmem.CTX_PRIVATE) as ctx:
        for pe in range(npes):
            shmem.atomic_add(x, me + 1, pe, ctx=ctx)
        ctx.quiet()
    shmem.barrier_all()
    result = int(x[0])
    """, lambda me, n: n * (n + 1) // 2, refused=NO_CTX)
program("ctx_fence_flag", "contexts", """
    data = shmem.full(2, -1, dtype=np.int64)
    flag = shmem.full(1, 0, dtype=np.int64)
    with shmem.Ctx.create() as ctx:
        shmem.put(data, np.array([me, -me]), (me + 1) % npes, ctx=ctx)
        ctx.fence()
        shmem.atomic_set(flag, 1, (me + 1) % npes, ctx=ctx)
        shmem.wait_until(flag, shmem.CMP.EQ, 1)
        result = data.tolist()
        ctx.quiet()
    shmem.barrier_all()
    """, lambda me, n: [left(me, n), -left(me, n)], refused=NO_CTX)
program("ctx_get_nbi", "contexts", """
    x = shmem.full(3, me * 2, dtype=np.int64)
    got = np.zeros(3, dtype=np.int64)
    ctx = shmem.Ctx.create()
    shmem.get_nbi(got, x, (me + 1) % npes, ctx=ctx)
    ctx.quiet()
    result = got.tolist()
    shmem.barrier_all()
    ctx.destroy()
    """, lambda me, n: [2 * right(me, n)] * 3, refused=NO_CTX)
program("ctx_default", "contexts", """
    x = shmem.full(2, -1, dtype=np.int64)
    shmem.put(x, np.array([me, me]), (me + 1) % npes, ctx=shmem.CTX_DEFAULT)
    shmem.CTX_DEFAULT.quiet()
    shmem.barrier_all()
    result = [x.tolist(), bool(shmem.CTX_DEFAULT)]
    """, lambda me, n: [[left(me, n)] * 2, True])
program("ctx_invalid_quiet", "contexts", """
    shmem.CTX_INVALID.quiet()
    result = bool(shmem.CTX_INVALID)
    """, lambda me, n: False)
program("ctx_invalid_fence", "contexts", """
    shmem.CTX_INVALID.fence()
    result = shmem.CTX_INVALID == shmem.Ctx()
    """, lambda me, n: True)
program("ctx_team_or_invalid", "contexts", f"""
    {TEAM}
    x = shmem.full(1, -1, dtype=np.int64)
    ctx = team.create_ctx() if team else shmem.CTX_INVALID
    if team:
        shmem.put(x, np.array([me]), (team.my_pe() + 1) % team.n_pes(), ctx=ctx)  # a team's PE numbers
    ctx.quiet()
    ctx.destroy()
    team.destroy()
    shmem.barrier_all()
    result = int(x[0])
    """, lambda me, n: evens(n)[(me // 2 - 1) % len(evens(n))] if me % 2 == 0 else -1,
    refused=NO_TEAM_CTX)

# -- allocation idioms: each allocation is followed at once by a put from another PE -----------
program("zeros_then_put", "allocation", """
    x = shmem.zeros(4, dtype=np.int64)
    shmem.put(x, np.full(4, me + 1), (me + 1) % npes)
    shmem.barrier_all()
    result = x.tolist()
    shmem.free(x)
    """, lambda me, n: [left(me, n) + 1] * 4)
program("zeros_then_partial_put", "allocation", """
    x = shmem.zeros(8, dtype=np.float64)
    shmem.put(x[2:4], np.array([me, me + 0.5]), (me + 1) % npes)
    shmem.barrier_all()
    result = x.tolist()
    shmem.free(x)
    """, lambda me, n: [0.0, 0.0, left(me, n), left(me, n) + 0.5, 0.0, 0.0, 0.0, 0.0])
program("zeros_2d_then_put_row", "allocation", """
    grid = shmem.zeros((npes, 2), dtype=np.int32)
    shmem.put(grid[me], np.array([me, me + 1], dtype=np.int32), (me + 1) % npes)
    shmem.barrier_all()
    result = grid.tolist()
    shmem.free(grid)
    """, lambda me, n: [[p, p + 1] if p == left(me, n) else [0, 0] for p in range(n)])
program("zeros_then_atomic_add", "allocation", """
    count = shmem.zeros(1, dtype=np.int64)
    shmem.atomic_add(count, me + 1, 0)
    shmem.barrier_all()
    result = int(count[0])
    shmem.free(count)
    """, lambda me, n: n * (n + 1) // 2 if me == 0 else 0)
program("zeros_then_put_nbi", "allocation", """
    x = shmem.zeros(4, dtype=np.int64)
    shmem.put_nbi(x, np.arange(4) * (me + 1), (me + 1) % npes)
    shmem.quiet()
    shmem.barrier_all()
    result = x.tolist()
    shmem.free(x)
    """, lambda me, n: (np.arange(4) * (left(me, n) + 1)).tolist())
program("zeros_in_a_loop", "allocation", """
    seen = []
    for step in range(3):
        x = shmem.zeros(2, dtype=np.int64)
        shmem.put(x, np.array([me, step]), (me + 1) % npes)
        shmem.barrier_all()
        seen.append(x.tolist())
        shmem.free(x)
    result = seen
    """, lambda me, n: [[left(me, n), r] for r in range(3)])
program("free_then_zeros_again", "allocation", """
    old = shmem.full(4, 99, dtype=np.int64)
    shmem.free(old)
    x = shmem.zeros(4, dtype=np.int64)
    shmem.put(x[:2], np.array([me, me]), (me + 1) % npes)
    shmem.barrier_all()
    result = x.tolist()
    shmem.free(x)
    """, lambda me, n: [left(me, n)] * 2 + [0, 0])
program("ones_then_put", "allocation", """
    x = shmem.ones(4, dtype=np.int64)
    shmem.put(x[1:3], np.array([me, me]), (me + 1) % npes)
    shmem.barrier_all()
    result = x.tolist()
    shmem.free(x)
    """, lambda me, n: [1, left(me, n), left(me, n), 1])
program("full_then_put", "allocation", """
    x = shmem.full(4, 7.5)
    shmem.put(x[3:], np.array([-me - 1.0]), (me + 1) % npes)
    shmem.barrier_all()
    result = x.tolist()
    shmem.free(x)
    """, lambda me, n: [7.5, 7.5, 7.5, -left(me, n) - 1.0])
program("array_then_put", "allocation", """
    x = shmem.array([1, 2, 3, 4], dtype=np.int32)
    shmem.put(x[:1], np.array([100 + me], dtype=np.int32), (me + 1) % npes)
    shmem.barrier_all()
    result = x.tolist()
    shmem.free(x)
    """, lambda me, n: [100 + left(me, n), 2, 3, 4])
program("empty_then_put", "allocation", """
    x = shmem.empty(4, dtype=np.int64)
    shmem.put(x, np.arange(4) - me, (me + 1) % npes)
    shmem.barrier_all()
    result = x.tolist()
    shmem.free(x)
    """, lambda me, n: (np.arange(4) - left(me, n)).tolist())
program("alloc_clear_fromalloc_then_put", "allocation", """
    mem = shmem.alloc(4 * 8, clear=True)
    x = shmem.fromalloc(mem, 4, dtype=np.int64)
    shmem.put(x[2:], np.array([me, me]), (me + 1) % npes)
    shmem.barrier_all()
    result = x.tolist()
    shmem.free(mem)
    """, lambda me, n: [0, 0, left(me, n), left(me, n)])
program("alloc_fromalloc_then_put", "allocation", """
    mem = shmem.alloc(3 * 8, clear=False)
    x = shmem.fromalloc(mem, 3, dtype=np.float64)
    shmem.put(x, np.array([me, 2.0 * me, 3.0 * me]), (me + 1) % npes)
    shmem.barrier_all()
    result = x.tolist()
    shmem.free(mem)
    """, lambda me, n: [float(left(me, n)), 2.0 * left(me, n), 3.0 * left(me, n)])
program("declared_by_job_alloc_then_put", "allocation", """
    shmem.put(D[1:3], np.array([me, me]), (me + 1) % npes)
    shmem.barrier_all()
    result = D.tolist()
    """, lambda me, n: [0, left(me, n), left(me, n), 0], alloc="D=int64[4]")
program("declared_in_cell_then_put", "allocation", """
    shmem.put(C, np.full(4, me + 1), (me + 1) % npes)
    shmem.barrier_all()
    result = C.tolist()
    """, lambda me, n: [left(me, n) + 1] * 4, arrays="C=int64[4]")
program("declared_npes_shape_then_put", "allocation", """
    shmem.put(F[me:me + 1], np.array([me + 1], dtype=np.int32), 0)
    shmem.barrier_all()
    result = F.tolist()
    """, lambda me, n: list(range(1, n + 1)) if me == 0 else [0] * n, arrays="F=int32[npes]")
program("redeclared_then_put", "allocation", """
    shmem.put(R[4:], np.full(4, me), (me + 1) % npes)
    shmem.barrier_all()
    result = R.tolist()
    """, lambda me, n: [0] * 4 + [left(me, n)] * 4, alloc="R=int64[4]", arrays="R=int64[8]")
program("new_lock_then_lock", "allocation", """
    lock = shmem.new_lock()
    count = shmem.full(1, 0, dtype=np.int64)
    shmem.set_lock(lock)
    value = np.zeros(1, dtype=np.int64)
    shmem.get(value, count, 0)
    shmem.put(count, value + 1, 0)
    shmem.clear_lock(lock)
    shmem.barrier_all()
    result = int(count[0]) if me == 0 else None
    shmem.del_lock(lock)
    """, lambda me, n: n if me == 0 else None)

# -- shmem.ptr ------------------------------------------------------------------------------------
program("ptr_self", "ptr", """
    x = shmem.full(3, -1, dtype=np.int64)
    view = shmem.ptr(x, me)
    view[:] = [me, me, me]
    result = x.tolist()
    shmem.barrier_all()
    """, lambda me, n: [me] * 3)
program("ptr_or_put_to_neighbour", "ptr", """
    x = shmem.full(3, -1, dtype=np.int64)
    there = shmem.ptr(x, (me + 1) % npes)
    if there is not None:
        there[:] = [me, 2 * me, 3 * me]
    else:
        shmem.put(x, np.array([me, 2 * me, 3 * me]), (me + 1) % npes)
    shmem.barrier_all()
    result = x.tolist()
    shmem.barrier_all()
    """, lambda me, n: [left(me, n), 2 * left(me, n), 3 * left(me, n)])
program("ptr_or_get_from_neighbour", "ptr", """
    x = shmem.full(2, 5 * me, dtype=np.float64)
    there = shmem.ptr(x, (me + 1) % npes)
    got = there.copy() if there is not None else np.zeros(2)
    if there is None:
        shmem.get(got, x, (me + 1) % npes)
    result = got.tolist()
    shmem.barrier_all()
    """, lambda me, n: [5.0 * right(me, n)] * 2)

# -- whole idioms -------------------------------------------------------------------------------
program("hello", "idioms", """
    result = [me, npes, shmem.my_pe(), shmem.n_pes()]
    """, lambda me, n: [me, n, me, n])
program("pi_by_reduction", "idioms", """
    steps = 10_000
    x = (np.arange(me, steps, npes) + 0.5) / steps
    part = shmem.array([np.sum(4.0 / (1.0 + x * x)) / steps])
    pi = shmem.zeros(1)
    shmem.barrier_all()
    shmem.sum_reduce(pi, part)
    result = round(float(pi[0]), 9)
    """, lambda me, n: round(float(sum(
        np.sum(4.0 / (1.0 + ((np.arange(p, 10_000, n) + 0.5) / 10_000) ** 2)) / 10_000 for p in range(n)
    )), 9))
program("token_ring", "idioms", """
    token = shmem.full(1, -1, dtype=np.int64)
    if me == 0:
        shmem.atomic_set(token, 1, 1 % npes)
    else:
        shmem.wait_until(token, shmem.CMP.NE, -1)
        shmem.atomic_set(token, int(token[0]) * 2, (me + 1) % npes)
    if me == 0:
        shmem.wait_until(token, shmem.CMP.NE, -1)
    result = int(token[0])
    shmem.barrier_all()
    """, lambda me, n: 2 ** (n - 1) if me == 0 else 2 ** (me - 1))
program("halo_exchange", "idioms", """
    u = shmem.full(6, float(me))
    for _ in range(2):
        shmem.put(u[5:6], u[1:2], (me - 1) % npes)
        shmem.put(u[0:1], u[4:5], (me + 1) % npes)
        shmem.barrier_all()
        u[1:5] = (u[0:4] + u[2:6]) / 2
        shmem.barrier_all()
    result = u[1:5].tolist()
    """, lambda me, n: halo(me, n))


def halo(me, n):
    """Two Jacobi-like sweeps of the halo program, on every PE at once with NumPy."""
    u = np.array([np.full(6, float(p)) for p in range(n)])
    for _ in range(2):
        u[:, 5] = np.roll(u[:, 1], -1)
        u[:, 0] = np.roll(u[:, 4], 1)
        u[:, 1:5] = (u[:, 0:4] + u[:, 2:6]) / 2
    return u[me, 1:5].tolist()


# fmt: on

#: the areas in the order the programs are listed
AREAS = list(dict.fromkeys(p.area for p in PROGRAMS))


def by_name(name):
    """The program called ``name``."""
    return next(p for p in PROGRAMS if p.name == name)
