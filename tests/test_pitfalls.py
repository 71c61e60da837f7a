"""shmem_notebook.engine.shims.pitfalls: guards against Open MPI 4.1.4's OSHMEM atomic bugs.

Real 2-PE jobs (the guards are installed in a cell too, so this works whether or
not pe.main installs them), plus pure unit tests of the version logic and of the
wrappers on a fake shmem module (no OpenSHMEM).
"""

import os
import types
import warnings

import numpy as np
import pytest

from conftest import job_fixture, quiet
from shmem_notebook import PEError, ShmemNotebookError
from shmem_notebook.engine.shims import pitfalls as p

TIMEOUT = 120
BOTH = ("cswap32", "fetch_bitwise")
M64 = (1 << 64) - 1


def per_pe(job, expr):
    """``eval(expr)`` on every PE, as a list indexed by PE."""
    result = quiet(job, f"print(repr({expr}))")
    return [eval(result.stdout[pe]) for pe in range(job.n)]


# Ctx.destroy() waits until the other PEs make OpenSHMEM progress: a barrier after it
# keeps a PE that finished the cell from leaving another stuck in destroy().


job = job_fixture(
    2,
    timeout=TIMEOUT,
    setup=lambda job: quiet(job, "import shmem_notebook.engine.shims.pitfalls as pitfalls\npitfalls.install()"),
)


@pytest.fixture
def guarded(job):
    """Skip where this library needs no guard (not this platform: it needs both)."""
    active = per_pe(job, "pitfalls.active()")[0]
    if active != BOTH:
        pytest.skip(f"guards not active on this library: {active}")
    return job


def assert_raised_everywhere(info, job, *fragments):
    err = info.value
    assert set(err.errors) == set(range(job.n))
    for ename, evalue, _ in err.errors.values():
        assert ename == "LibraryBugError"
        for fragment in fragments:
            assert fragment in evalue


def assert_job_usable(job, name):
    quiet(job, f"{name}[0] = me + 5\nshmem.barrier_all()")
    assert job.gather(name)[:, 0].tolist() == [pe + 5 for pe in range(job.n)]
    assert {row["state"] for row in job.status()} == {"idle"}


# -- on real PEs ------------------------------------------------------------------------
def test_detects_this_library_and_installs_idempotently(job):
    on_client = p._ompi_info_version()
    vendor, loaded, guards, again = per_pe(
        job, "(shmem.info_get_name(), pitfalls._loaded_libmpi_version(), pitfalls.active(), pitfalls.install())"
    )[0]
    assert "open-mpi" in vendor
    assert loaded == on_client  # MPI_Get_library_version of the loaded libmpi agrees with ompi_info
    assert guards == again == p.decide(vendor, loaded, os.environ.get(p.ENV))


@pytest.mark.parametrize("dtype", ["int32", "uint32"])
@pytest.mark.parametrize("ctx", [False, True], ids=["default_ctx", "ctx"])
def test_cswap32_raises_on_every_pe_and_the_job_survives(guarded, dtype, ctx):
    job = guarded
    call = "shmem.atomic_compare_swap(C, 0, 1, (me + 1) % npes{})"
    code = call.format("")
    if ctx:
        code = "ctx = shmem.Ctx.create()\ntry:\n    " + call.format(", ctx=ctx")
        code += "\nfinally:\n    ctx.destroy()\n    shmem.barrier_all()"
    with pytest.raises(PEError) as info:
        quiet(job, code, arrays=f"C={dtype}[1]")
    assert_raised_everywhere(info, job, f"32-bit {dtype} array", "stack smash", "64-bit array (int64/uint64)")
    assert_job_usable(job, "C")


@pytest.mark.parametrize(
    "call",
    [
        "shmem.atomic_fetch_{op}(U, V, right)",
        "shmem.atomic_fetch_op(U, V, '{op}', right)",
        "shmem.atomic_fetch_op(U, V, shmem.AMO_{OP}, right, ctx=ctx)",
    ],
    ids=["atomic_fetch_OP", "atomic_fetch_op_str", "atomic_fetch_op_AMO_ctx"],
)
@pytest.mark.parametrize("op", ["and", "or", "xor"])
def test_fetch_bitwise_uint64_returns_old_and_updates_target(guarded, call, op):
    job = guarded
    init = [0xF0F0_0000_0000_000C + pe for pe in range(job.n)]
    value = 0x8000_0000_0000_000A
    fn = {"and": int.__and__, "or": int.__or__, "xor": int.__xor__}[op]
    call = call.format(op=op, OP=op.upper())
    result = quiet(
        job,
        f"U[0] = {0xF0F0_0000_0000_000C} + me\nV = np.uint64({value})\nright = (me + 1) % npes\n"
        f"ctx = shmem.Ctx.create()\nshmem.barrier_all()\nold = {call}\nctx.quiet()\n"
        f"ctx.destroy()\nshmem.barrier_all()\nprint(type(old).__name__, old)",
        arrays="U=uint64[1]",
    )
    for pe in range(job.n):
        assert result.stdout[pe] == f"int {init[(pe + 1) % job.n]}\n"  # the neighbour's old value
    assert job.gather("U")[:, 0].tolist() == [fn(init[pe], value) & M64 for pe in range(job.n)]


def test_fetch_bitwise_uint64_is_atomic_under_contention(guarded):
    """Every PE sets then clears its own 16 bits of PE 0's word, one fetch-op at a time."""
    job = guarded
    quiet(
        job,
        f"mine = [1 << (16 * me + k) for k in range(16)]\nM64 = {M64}\n"
        "shmem.barrier_all()\n"
        "for k, bit in enumerate(mine):\n"
        "    old = shmem.atomic_fetch_or(W, bit, 0)\n"
        "    assert all(old & b for b in mine[:k]) and not any(old & b for b in mine[k:]), hex(old)\n"
        "shmem.barrier_all()\n"
        "assert shmem.atomic_fetch(W, 0) == (1 << (16 * npes)) - 1\n"
        "shmem.barrier_all()\n"
        "for k, bit in enumerate(mine):\n"
        "    old = shmem.atomic_fetch_xor(W, bit, 0) if k % 2 else shmem.atomic_fetch_and(W, ~bit & M64, 0)\n"
        "    assert not any(old & b for b in mine[:k]) and all(old & b for b in mine[k:]), hex(old)\n"
        "shmem.barrier_all()",
        arrays="W=uint64[1]",
    )
    assert job.gather("W")[:, 0].tolist() == [0] * job.n


@pytest.mark.parametrize("op", ["and", "or", "xor"])
def test_fetch_bitwise_uint32_raises_and_leaves_target_alone(guarded, op):
    job = guarded
    quiet(job, "B[0] = 12\nshmem.barrier_all()", arrays="B=uint32[1]")
    with pytest.raises(PEError) as info:
        quiet(job, f"shmem.atomic_fetch_{op}(B, 10, (me + 1) % npes)")
    assert_raised_everywhere(info, job, "32-bit uint32 array", "use a uint64 array", f"shmem.atomic_{op}")
    assert job.gather("B")[:, 0].tolist() == [12] * job.n
    # the non-fetching bitwise AMOs are correct and stay unguarded
    quiet(job, f"shmem.atomic_{op}(B, 10, (me + 1) % npes)\nshmem.barrier_all()")
    assert job.gather("B")[:, 0].tolist() == [{"and": 8, "or": 14, "xor": 6}[op]] * job.n
    assert_job_usable(job, "B")


@pytest.mark.parametrize("dtype", ["int64", "uint64"])
def test_64bit_amos_unchanged(job, dtype):
    result = quiet(
        job,
        "pe = (me + 1) % npes\nX[0] = 12\nshmem.barrier_all()\n"
        "r = [shmem.atomic_compare_swap(X, 7, 99, pe), int(shmem.atomic_fetch(X, pe)),\n"
        "     shmem.atomic_compare_swap(X, 12, 99, pe), shmem.atomic_fetch_add(X, 1, pe),\n"
        "     shmem.atomic_swap(X, 40, pe), shmem.atomic_fetch_inc(X, pe)]\n"
        "shmem.barrier_all()\nprint(r, shmem.atomic_fetch_add.__module__)",
        arrays=f"X={dtype}[1]",
    )
    assert set(result.stdout.values()) == {"[12, 12, 12, 99, 100, 40] shmem4py.shmem\n"}
    assert job.gather("X")[:, 0].tolist() == [41] * job.n


# -- pure unit tests: no OpenSHMEM ------------------------------------------------------------
@pytest.mark.parametrize(
    "text, version",
    [
        ("Open MPI v4.1.4, package: Debian OpenMPI, ident: 4.1.4, repo rev: v4.1.4, May 26, 2022", (4, 1, 4)),
        ("Open MPI v5.0.3\n\nhttp://www.open-mpi.org/community/help/", (5, 0, 3)),
        ("Open MPI 4.1.5rc2", (4, 1, 5)),
        ("Sandia OpenSHMEM 1.5.2", None),
        ("", None),
        (None, None),
    ],
)
def test_parse_ompi_version(text, version):
    assert p.parse_ompi_version(text) == version


OMPI = "http://www.open-mpi.org/"


@pytest.mark.parametrize(
    "vendor, version, setting, guards",
    [
        (OMPI, (4, 1, 4), None, BOTH),
        (OMPI, (4, 1, 0), "auto", BOTH),
        (OMPI, (4, 0, 7), None, ("cswap32",)),  # cswap fixed in 4.1.5; fetch_bitwise wrapped for 4.1.x only
        (OMPI, (4, 1, 5), None, ()),
        (OMPI, (5, 0, 3), None, ()),
        (OMPI, None, None, BOTH),  # unknown version: protect
        ("Sandia OpenSHMEM", None, None, ()),
        ("Sandia OpenSHMEM", (1, 5, 2), " ON ", BOTH),
        (OMPI, (4, 1, 4), "off", ()),
        (OMPI, (5, 0, 3), "on", BOTH),
    ],
)
def test_decide(vendor, version, setting, guards):
    assert p.decide(vendor, version, setting) == guards


def test_decide_warns_on_a_bad_setting_and_uses_auto():
    with pytest.warns(UserWarning, match="SHMEM_NOTEBOOK_PITFALLS='maybe'"):
        assert p.decide(OMPI, (4, 1, 4), "maybe") == BOTH


def test_loaded_libmpi_version_is_none_without_libmpi():
    with open("/proc/self/maps") as maps:
        if "/libmpi.so" in maps.read():
            pytest.skip("this test process has loaded libmpi")
    assert p._loaded_libmpi_version() is None


def fake_shmem(contend=0):
    """A local stand-in for shmem4py.shmem with bug 2; ``contend`` CAS calls see a rival update first."""
    calls = {"cswap": 0}

    def atomic_fetch(source, pe, ctx=None):
        return int(source[0])

    def atomic_compare_swap(target, cond, value, pe, ctx=None):
        calls["cswap"] += 1
        if calls["cswap"] <= contend:
            target[0] += 1  # another PE got there first
        old = int(target[0])
        if old == cond:
            target[0] = value
        return old

    def buggy(op):
        def fetch(target, value, pe, ctx=None):
            old = int(target[0])
            target[0] = {"and": old & old, "or": old | old, "xor": old ^ old}[op]
            return old

        return fetch

    def atomic_fetch_op(target, value, op, pe, ctx=None):
        return buggy(f"{op}")(target, value, pe, ctx)

    mod = types.ModuleType("fake_shmem")
    mod.__dict__.update(
        info_get_name=lambda: "http://www.open-mpi.org/",
        atomic_fetch=atomic_fetch,
        atomic_compare_swap=atomic_compare_swap,
        atomic_fetch_op=atomic_fetch_op,
        atomic_fetch_and=buggy("and"),
        atomic_fetch_or=buggy("or"),
        atomic_fetch_xor=buggy("xor"),
        calls=calls,
    )
    return mod


def test_wrappers_on_a_fake_module():
    mod = fake_shmem(contend=2)
    original = mod.atomic_fetch_xor
    assert p.install(mod, guards=BOTH) == BOTH
    assert p.install(mod) == BOTH and p.active(mod) == BOTH  # idempotent
    t = np.array([0xFFFF_0000_0000_0001], dtype=np.uint64)
    old = mod.atomic_fetch_xor(t, np.uint64(1 << 63), 1)
    assert old == 0xFFFF_0000_0000_0003  # the value its successful swap replaced
    assert int(t[0]) == 0x7FFF_0000_0000_0003 and mod.calls["cswap"] == 3  # retried past two rivals
    assert mod.atomic_fetch_op(t, 0xFF, "AND", 1) == 0x7FFF_0000_0000_0003 and int(t[0]) == 3
    with pytest.raises(p.LibraryBugError, match="32-bit int32 array") as info:
        mod.atomic_compare_swap(np.zeros(1, np.int32), 0, 1, 1)
    assert isinstance(info.value, ShmemNotebookError)
    with pytest.raises(p.LibraryBugError, match="use a uint64 array"):
        mod.atomic_fetch_or(np.zeros(1, np.uint32), 1, 1)
    with pytest.raises(OverflowError):
        mod.atomic_fetch_or(t, -1, 1)
    assert mod.atomic_compare_swap(np.array([5], np.int64), 5, 6, 1) == 5  # 64-bit passes through
    p.uninstall(mod)
    assert mod.atomic_fetch_xor is original and p.active(mod) == ()


def test_install_with_no_guards_changes_nothing():
    mod = fake_shmem()
    before = dict(vars(mod))
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert p.install(mod, guards=()) == ()
    assert all(vars(mod)[name] is func for name, func in before.items())
    with pytest.raises(ValueError, match="unknown guards"):
        p.install(fake_shmem(), guards=("nope",))
