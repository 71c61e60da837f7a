"""Atomicity domains (issue 48 item 7): AMOs on one word through contexts of different teams are not
atomic with respect to each other, so, unordered, they race (docs/races.md 'Atomicity domains').

On Sandia OpenSHMEM (native 1.5 teams) a split team's contexts, and TEAM_SHARED's, against world
contexts; on Open MPI's OSHMEM (OpenSHMEM 1.4, the tool's emulated teams) only world contexts can
be made, so no two AMOs there are of different domains: a world context against the default one is
no race, and a context of any other team is refused in one sentence."""

import io

import pytest

from conftest import job_fixture
from shmem_notebook.errors import PEError

job = job_fixture(2, heap="8M", timeout=60, sos=(2,))

#: PE 0 adds through {ctx0}, PE 1 through {ctx1}, both to PE 0's counter; {sync}: between them or not
CELL = """counter = shmem.zeros(1, dtype=np.int64)
team = {team}
tctx = team.create_ctx()
shmem.barrier_all()
if me == 0:
    shmem.atomic_add(counter, 1, 0{ctx0})
{sync}
if me == 1:
    shmem.atomic_fetch_add(counter, 2, 0{ctx1})
tctx.quiet()
shmem.barrier_all()
tctx.destroy()
{destroy}
"""
SPLIT = ("shmem.TEAM_WORLD.split_strided(0, 1, npes)", "team.destroy()")
SHARED = ("shmem.TEAM_SHARED", "")
WORLD = ("shmem.TEAM_WORLD", "")


def _run(job, team, ctx0, ctx1, sync="pass"):
    make, destroy = team
    code = CELL.format(team=make, destroy=destroy, ctx0=ctx0, ctx1=ctx1, sync=sync)
    return job.run(code, race=True, stdout=io.StringIO(), stderr=io.StringIO())


def _native(job):
    if job.library.name != "sos":
        pytest.skip("contexts of teams other than the world need OpenSHMEM 1.5 teams (Sandia OpenSHMEM here)")


@pytest.mark.parametrize(
    ("team", "named"), [(SPLIT, "a team of PEs 0-1"), (SHARED, "TEAM_SHARED")], ids=["split", "shared"]
)
def test_amos_through_two_teams_contexts_race(job, team, named):
    _native(job)
    if team is SHARED:  # the PEs PE 0 shares memory with: the library's choice (Sandia OpenSHMEM: itself here)
        n = int(job.run("print(shmem.TEAM_SHARED.n_pes())", stdout=io.StringIO()).stdout[0])
        named += " (PE 0)" if n == 1 else f" (PEs 0-{n - 1})"
    racy = _run(job, team, ", ctx=tctx", "")
    assert [str(r) for r in racy.races] == [
        f"RACE counter[0] on PE 0: PE 0 line 6 atomic_add (atomic) / PE 1 line 9 atomic_fetch_add (atomic) are "
        f"unordered; line 6's atomic_add goes through a context of {named}, line 9's atomic_fetch_add through a "
        f"world context: AMOs through contexts of different teams are not atomic with respect to each other; use "
        f"one team's contexts for every AMO on that word, e.g. the default context"
    ]
    assert racy.races[0].fix is None
    # the twin: one team's contexts for both AMOs, the team's or the default context
    assert _run(job, team, ", ctx=tctx", ", ctx=tctx").races == []
    assert _run(job, team, "", "").races == []


def test_amos_of_two_domains_ordered_by_a_barrier_do_not_race(job):
    _native(job)
    assert _run(job, SPLIT, ", ctx=tctx", "", sync="tctx.quiet()\nshmem.barrier_all()").races == []
    # the barrier alone does not complete PE 0's add on its team's context: still a race
    racy = _run(job, SPLIT, ", ctx=tctx", "", sync="shmem.barrier_all()")
    assert [(r.accesses[0].line, r.accesses[1].line) for r in racy.races] == [(6, 9)]


def test_a_world_context_and_the_default_context_are_one_domain(job):
    assert _run(job, WORLD, ", ctx=tctx", "").races == []  # TEAM_WORLD.create_ctx() against the default


def test_a_context_of_another_team_is_refused_on_openshmem_1_4(job):
    if job.library.name != "oshmem":
        pytest.skip("OSHMEM's emulated teams refuse contexts of teams other than the world")
    with pytest.raises(PEError) as info:
        _run(job, SHARED, ", ctx=tctx", "")
    assert "contexts on emulated teams are not available on an OpenSHMEM 1.4 library" in str(info.value)


#: PE 1 adds through a context of a team of PE 1 alone: its PE 0 is world PE 1, not PE 0's counter
ALONE = """counter = shmem.zeros(1, dtype=np.int64)
team = shmem.TEAM_WORLD.split_strided(1, 1, 1)
shmem.barrier_all()
if me == 0:
    shmem.atomic_add(counter, 1, 0)
else:
    tctx = team.create_ctx()
    shmem.atomic_add(counter, 2, {target}, ctx=tctx)
    tctx.quiet()
    tctx.destroy()
    team.destroy()
shmem.barrier_all()
"""


def test_a_teams_context_numbers_pes_in_its_team(job):
    _native(job)
    # team PE 0 is world PE 1: the two adds are on different PEs' counters
    alone = job.run(ALONE.format(target=0), race=True, stdout=io.StringIO(), stderr=io.StringIO())
    assert alone.races == []
