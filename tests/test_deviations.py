"""The libraries' own deviations from the specification, repaired or named (shmem_notebook.deviations).

Each idiom is checked against an independent answer (a closed form of ``me`` and ``npes``), in cells
and jobs on every built library; plain scripts under ``shmem-race`` get the race named instead of a
silent repair; the table in docs/libraries.md is the registry's.
"""

import os
import textwrap

import numpy as np
import pytest

from conftest import job_fixture, quiet, run_race_runner
from shmem_notebook import deviations
from shmem_notebook.errors import PEError

job = job_fixture(4, heap="16M", timeout=120, sos=(4,), oshmpi=(2,))
ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

#: Open MPI zeroes after its barrier: a big block widens that window (its last element is zeroed last)
#: and the put lands at the end, so without the shim a fast PE's put is wiped in most runs at 4 PEs
BIG = 1 << 18  # int64 elements: 2 MiB
ALLOCATIONS = {
    "zeros": "x = shmem.zeros(BIG, dtype=np.int64)",
    "alloc_clear": "x = shmem.fromalloc(shmem.alloc(BIG * 8, clear=True), BIG, np.int64)",
    "alloc_default": "x = shmem.fromalloc(shmem.alloc(BIG, 8), BIG, np.int64)",
    "ones": "x = shmem.ones(BIG, dtype=np.int64)",
    "full": "x = shmem.full(BIG, 7, dtype=np.int64)",
    "array": "x = shmem.array(np.zeros(BIG, dtype=np.int64))",
}
#: each allocation, then at once (no barrier of the user's) a put into the peer's last element
IDIOM = """
BIG = {big}
for _round in range({rounds}):
    {alloc}
    shmem.put(x[-1:], np.array([me + 100], dtype=np.int64), (me + 1) % npes)
    shmem.barrier_all()
    got = int(x[-1])
    shmem.free(x)
    wrong = wrong + [got] if got != (me - 1) % npes + 100 else wrong
"""


@pytest.mark.parametrize("kind", list(ALLOCATIONS))
def test_an_allocation_is_ready_on_every_pe_before_any_pe_writes_into_it(job, kind):
    """The put right after the allocation survives on every PE, in every round (Open MPI: shim late_zeroing)."""
    code = IDIOM.format(big=BIG, rounds=8, alloc=ALLOCATIONS[kind])
    quiet(job, "wrong = []")
    result = quiet(job, code, race=True)
    wrong = job.pull("wrong", stack=False)
    assert all(v == [] for v in wrong.values()), f"{kind}: puts wiped (values seen instead of the put's): {wrong}"
    assert result.races == [], [str(r) for r in result.races]


def test_a_new_lock_is_clear_on_every_pe_before_any_pe_takes_it(job):
    """shmem.new_lock() (behind shmem.Lock) is allocated by shmem_calloc too, now followed by a sync;
    taken at once by every PE, it excludes: a read-modify-write of PE 0's counter under it loses no
    update, in every round (this OSHMEM's lock passed without the sync as well)."""
    code = """
    total = shmem.zeros(1, dtype=np.int64)
    shmem.barrier_all()
    for _round in range(6):
        lock = shmem.new_lock()
        shmem.set_lock(lock)
        seen = np.zeros(1, dtype=np.int64)
        shmem.get(seen, total, 0)
        shmem.put(total, seen + 1, 0)
        shmem.clear_lock(lock)
        shmem.barrier_all()
        shmem.del_lock(lock)
    shmem.get(seen, total, 0)
    counted = int(seen[0])
    shmem.barrier_all()
    shmem.free(total)
    """
    quiet(job, textwrap.dedent(code))
    assert job.pull("counted").tolist() == [6 * job.n] * job.n


def test_declared_and_redeclared_arrays_are_zero_before_any_pe_writes(job):
    """A declared array (and one re-declared with another size) is zeroed on every PE before the
    cell's first put lands: the put survives."""
    for spec in (f"int64[{BIG}]", f"int64[{BIG + 8}]"):
        cell = "shmem.put(D[-1:], np.array([me + 100], dtype=np.int64), (me + 1) % npes)\nshmem.barrier_all()\n"
        quiet(job, cell, arrays=f"D={spec}")
        got = job.pull("D")[:, -1]
        assert got.tolist() == [(pe - 1) % job.n + 100 for pe in range(job.n)], spec
        assert not job.pull("D")[:, :-1].any()


def test_job_run_gives_the_issue_cell_right_values(job):
    """The cell of issue 43, through Job.run, ten times: every PE holds its left neighbour's values."""
    code = textwrap.dedent(
        """
        x = shmem.zeros(4, dtype=np.int64)
        shmem.put(x, np.full(4, me + 1), (me + 1) % npes)
        shmem.barrier_all()
        got = x.copy()
        shmem.free(x)
        """
    )
    for _ in range(10):
        quiet(job, code)
        got = job.pull("got")
        expected = np.array([[(pe - 1) % job.n + 1] * 4 for pe in range(job.n)])
        assert np.array_equal(got, expected), got


def test_quiet_and_fence_on_ctx_invalid_do_nothing_and_a_put_on_it_is_refused(job):
    """OpenSHMEM 1.5: operations on SHMEM_CTX_INVALID do nothing (OSHMEM 1.4 kills the PE);
    a put given it ends in one sentence, and the job goes on."""
    quiet(job, "ctx = shmem.CTX_INVALID\nctx.quiet()\nctx.fence()\nctx.destroy()\nalive = me")
    assert job.pull("alive").tolist() == list(range(job.n))
    with pytest.raises(PEError) as caught:
        quiet(job, "shmem.put(C, np.ones(2, dtype=np.int64), 0, ctx=shmem.CTX_INVALID)", arrays="C=int64[2]")
    assert "invalid context" in str(caught.value) and "shmem.Ctx.create()" in str(caught.value)
    quiet(job, "shmem.atomic_inc(C[0:1], 0)\nshmem.barrier_all()")
    assert job.pull("C")[0, 0] == job.n


def test_a_team_program_stands_ctx_invalid_in_for_a_team_it_is_not_in(job):
    """The 1.5 idiom: PEs outside a team use CTX_INVALID, and its quiet() is harmless."""
    code = """
        team = shmem.TEAM_WORLD.split_strided(0, 2, (npes + 1) // 2)
        ctx = shmem.CTX_INVALID
        if team:
            try:
                ctx = team.create_ctx()
            except Exception:  # 1.4: contexts on emulated teams are not available
                ctx = shmem.CTX_INVALID
        ctx.quiet()
        ctx.destroy()
        if team:
            team.destroy()
        done = 1
    """
    quiet(job, textwrap.dedent(code))
    assert job.pull("done").tolist() == [1] * job.n


LATE = """\
import numpy as np
from shmem4py import shmem

me, npes = shmem.my_pe(), shmem.n_pes()
x = shmem.zeros(4, dtype=np.int64)
shmem.put(x, np.full(4, me + 1), (me + 1) % npes)
shmem.barrier_all()
shmem.free(x)
"""


@pytest.mark.pe
def test_the_race_runner_names_the_late_zeroing_of_a_plain_script(tmp_path):
    """shmem-race does not repair a plain program: it reports the race between Open MPI's late
    zeroing (line 5) and the peer's put (line 6), naming the library; the fixed twin is clean."""
    (tmp_path / "late.py").write_text(LATE)
    (tmp_path / "fixed.py").write_text(LATE.replace("np.int64)\n", "np.int64)\nshmem.barrier_all()\n", 1))
    racy = run_race_runner(tmp_path, "late.py", npes=2)
    assert racy.returncode == 1, racy.stdout + racy.stderr
    assert "late.py:5 zeroing (write)" in racy.stdout and "late.py:6 put (write)" in racy.stdout
    assert "zeroes after its barrier on Open MPI" in racy.stdout
    assert "add shmem.barrier_all() after late.py:5" in racy.stdout
    fixed = run_race_runner(tmp_path, "fixed.py", npes=2)
    assert fixed.returncode == 0 and "no races found" in fixed.stdout, fixed.stdout + fixed.stderr


def test_the_documented_table_is_the_registry():
    """docs/libraries.md holds the table `python -m shmem_notebook.deviations` prints."""
    with open(os.path.join(ROOT, "docs", "libraries.md")) as f:
        page = f.read()
    assert f"{deviations.BEGIN}\n{deviations.markdown()}{deviations.END}" in page, (
        "docs/libraries.md's deviations table is stale: run python -m shmem_notebook.deviations --write"
    )


def test_every_deviation_says_what_the_tool_does():
    remedies = {"shim", "refusal", "race report", "launch", "build"}
    assert len({d.key for d in deviations.DEVIATIONS}) == len(deviations.DEVIATIONS)
    for d in deviations.DEVIATIONS:
        assert d.remedy in remedies and d.what and d.reference and d.does, d.key
    assert deviations.library_of("http://www.open-mpi.org/") == "oshmem"
    assert deviations.affects(deviations.LATE_ZEROING, "http://www.open-mpi.org/")
    assert not deviations.affects(deviations.LATE_ZEROING, "Sandia OpenSHMEM")
