"""Teams of ``shmem_team_split_2d`` on Sandia OpenSHMEM (issue 43): the specification's 3-D split
(world into xteam + yzteam, yzteam into yteam + zteam, then ``yzteam.destroy()``), written through
``shmem.lib`` (cffi handles wrapped with ``shmem.Team``) and through shmem4py's ``split_2d``, at 2
and 4 PEs with xrange 2. After each destroy every remaining team's ``my_pe``, ``n_pes`` and
``translate_pe`` (to the world and to each other team) must match the closed form computed here,
and a sync and a sum reduction on each remaining team must give the sum of its world PEs.

SOS's team handle is its team's ``calloc``'d address, handed out again after a destroy: each
program runs twice in a row, so its second run's teams get the first run's freed handles (the
guards once took them for the destroyed teams: "Team.my_pe got a team that was destroyed").
"""

import json

import pytest

from conftest import needs_sos, quiet, running_job

pytestmark = [pytest.mark.pe, needs_sos]


@pytest.fixture(scope="module", params=[2, 4], ids=["2pe-sos", "4pe-sos"])
def job(request):
    """A job of 2, then 4 PEs on Sandia OpenSHMEM (only SOS has shmem_team_split_2d here)."""
    yield from running_job(request.param, library="sos", heap="8M", timeout=120)


XRANGE = 2
ORDER = ("yz", "x", "y", "z")  # the specification's destroy first, then the others one by one

SPLIT = {
    # the specification's example, through the C API
    "lib": """
ffi, lib = shmem.ffi, shmem.lib
def split_2d(parent, xrange):
    x = ffi.new("shmem_team_t*", lib.SHMEM_TEAM_INVALID)
    y = ffi.new("shmem_team_t*", lib.SHMEM_TEAM_INVALID)
    assert lib.shmem_team_split_2d(parent.ob_team, xrange, ffi.NULL, 0, x, ffi.NULL, 0, y) == 0
    return shmem.Team(x[0]), shmem.Team(y[0])
""",
    "shmem4py": """
def split_2d(parent, xrange):
    return parent.split_2d(xrange)
""",
}

CELL = """
import json
SPLIT
xteam, yzteam = split_2d(shmem.TEAM_WORLD, XRANGE)
yteam, zteam = split_2d(yzteam, YRANGE)
teams = {"x": xteam, "yz": yzteam, "y": yteam, "z": zteam}
src, dst = shmem.zeros(1, "i8"), shmem.zeros(1, "i8")
src[0] = me
shmem.barrier_all()

def translate(team, i, other):
    try:
        return team.translate_pe(i, other)
    except RuntimeError:  # shmem4py's answer to the library's -1: not a member of the other team
        return -1

def look(live):
    seen = {}
    for name in live:  # the same order on every PE: each team's collectives meet
        t = teams[name]
        n = t.n_pes()
        seen[name] = {"my_pe": t.my_pe(), "n_pes": n, "world": [t.translate_pe(i) for i in range(n)],
                      "to": {o: [translate(t, i, teams[o]) for i in range(n)] for o in live}}
        dst[0] = -1
        t.sync()
        shmem.reduce(dst, src, "sum", team=t)
        seen[name]["sum"] = int(dst[0])
    return seen

steps = [{"destroyed": None, "teams": look(ORDER)}]
for k, name in enumerate(ORDER):
    teams[name].destroy()
    try:
        teams[name].my_pe()
        said = "no error"
    except Exception as e:
        said = f"{type(e).__name__}: {e}"
    steps.append({"destroyed": name, "said": said, "teams": look(ORDER[k + 1:])})
shmem.barrier_all()
shmem.free(src)
shmem.free(dst)
print("REPORT " + json.dumps(steps))
"""


def closed_form(n, pe, yrange):
    """World PEs (in team order) of PE ``pe``'s xteam, yzteam, yteam and zteam: the grid of
    split_2d(world, XRANGE) and split_2d(yzteam, yrange), as the specification defines it."""
    x = min(XRANGE, n)
    xteam = [q for q in range(n) if q // x == pe // x]
    yzteam = [q for q in range(n) if q % x == pe % x]
    y = min(yrange, len(yzteam))
    rank = yzteam.index(pe)
    yteam = [yzteam[r] for r in range(len(yzteam)) if r // y == rank // y]
    zteam = [yzteam[r] for r in range(len(yzteam)) if r % y == rank % y]
    return {"x": xteam, "yz": yzteam, "y": yteam, "z": zteam}


def expected(n, pe, yrange, live):
    """What ``look(live)`` reports on PE ``pe``."""
    members = closed_form(n, pe, yrange)
    seen = {}
    for name in live:
        pes = members[name]
        seen[name] = {
            "my_pe": pes.index(pe),
            "n_pes": len(pes),
            "world": pes,
            "to": {o: [members[o].index(q) if q in members[o] else -1 for q in pes] for o in live},
            "sum": sum(pes),
        }
    return seen


@pytest.mark.parametrize("yrange", [1, 2])
@pytest.mark.parametrize("way", ["lib", "shmem4py"])
def test_the_specifications_3d_split_after_each_destroy(job, way, yrange):
    code = CELL.replace("SPLIT", SPLIT[way]).replace("XRANGE", str(XRANGE)).replace("YRANGE", str(yrange))
    code = code.replace("ORDER", repr(ORDER))
    for run in range(2):  # the second run's teams get the handles the first run's destroys freed
        result = quiet(job, code)
        for pe in range(job.n):
            lines = [line for line in result.stdout[pe].splitlines() if line.startswith("REPORT ")]
            steps = json.loads(lines[0][len("REPORT ") :])
            assert [s["destroyed"] for s in steps] == [None, *ORDER]
            for k, step in enumerate(steps):
                live = ORDER[k:]
                assert step["teams"] == expected(job.n, pe, yrange, live), (run, pe, step["destroyed"])
                if step["destroyed"]:
                    assert "got a team that was destroyed" in step["said"], (run, pe, step)


STALE_COPY = """
import json
ffi, lib = shmem.ffi, shmem.lib
def handle(t):
    return int(ffi.cast("uintptr_t", t.ob_team))
old = shmem.TEAM_WORLD.split_strided(0, 1, npes)
copy = shmem.Team(old)
freed = handle(old)
old.destroy()
news = []
for i in range(3):  # the library may hand old's handle to one of them (at its next malloc of that size)
    p = ffi.new("shmem_team_t*", lib.SHMEM_TEAM_INVALID)
    assert lib.shmem_team_split_strided(lib.SHMEM_TEAM_WORLD, 0, 1, npes, ffi.NULL, 0, p) == 0
    news.append(shmem.Team(p[0]))
try:
    copy.n_pes()
    said = "no error"
except Exception as e:
    said = str(e)
copy.destroy()  # nothing to do: not the library's destroy of a freed handle, nor of a new team holding it
report = {"reused": freed in [handle(t) for t in news], "said": said, "new": [[t.my_pe(), t.n_pes()] for t in news]}
for t in news:
    t.sync()
    t.destroy()
shmem.barrier_all()
print("REPORT " + json.dumps(report))
"""


def test_a_copy_of_a_destroyed_team_is_destroyed_even_when_its_handle_is_handed_out_again(job):
    result = quiet(job, STALE_COPY)
    for pe in range(job.n):
        line = [line for line in result.stdout[pe].splitlines() if line.startswith("REPORT ")][0]
        report = json.loads(line[len("REPORT ") :])
        assert "Team.n_pes got a team that was destroyed" in report["said"], report
        assert report["new"] == [[pe, job.n]] * 3, report
    assert job.state == "running"
