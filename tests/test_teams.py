"""Teams in cells (emulated on Open MPI's OpenSHMEM 1.4, the library's own on Sandia OpenSHMEM
1.5): the Team API and every team collective against NumPy, at 1, 2, 3, 4 and 6 PEs (2, 3 and 4
on SOS); one job per PE count and library runs all the cells.

The PEs report what they computed; the expected values are computed here, with
NumPy, from the inputs' formula and the teams' membership.
"""

import json

import numpy as np
import pytest

from conftest import job_fixture, quiet
from shmem_notebook import PEError
from shmem_notebook.engine.teams import decide
from shmem_notebook.errors import InputError

job = job_fixture(1, 2, 3, 4, 6, heap="32M", sos=(2, 4), oshmpi=(4,))


def reports(result):
    """PE -> the JSON object each PE printed on its line starting with REPORT."""
    found = {}
    for pe, text in result.stdout.items():
        lines = [line[len("REPORT ") :] for line in text.splitlines() if line.startswith("REPORT ")]
        assert len(lines) == 1, text
        found[pe] = json.loads(lines[0])
    return found


def team_pes(n):
    """Expected world PEs of each named team, as the cells build them."""
    teams = {"world": list(range(n)), "WORLD": list(range(n)), "even": list(range(0, n, 2)), "shared": list(range(n))}
    if n > 1:
        teams["odd"] = list(range(1, n, 2))
        teams["tail"] = list(range(1, 1 + n // 2))  # split_strided(1, 1, n // 2)
    return teams


def grid(n, xrange=2):
    """(row members, column members) of each world PE for split_2d(xrange)."""
    xrange = min(xrange, n)
    rows = {pe: [q for q in range(n) if q // xrange == pe // xrange] for pe in range(n)}
    cols = {pe: [q for q in range(n) if q % xrange == pe % xrange] for pe in range(n)}
    return rows, cols


TEAMS_CELL = """
import json
report, me_ = {}, me
even = shmem.TEAM_WORLD.split_strided(0, 2)
odd = shmem.TEAM_WORLD.split_strided(1, 2) if npes > 1 else shmem.TEAM_INVALID
tail = shmem.TEAM_WORLD.split_strided(1, 1, npes // 2) if npes > 1 else shmem.TEAM_INVALID
row, col = shmem.TEAM_WORLD.split_2d(2)
named = {"world": None, "WORLD": shmem.TEAM_WORLD, "even": even, "odd": odd, "tail": tail,
         "shared": shmem.TEAM_SHARED, "row": row, "col": col}
report["member"] = {k: (t is None or bool(t)) for k, t in named.items()}
# symmetric allocation is collective over the world: allocate before the per-team loop
src, b, out = shmem.zeros(4, "i8"), shmem.zeros(4, "i8"), shmem.zeros(4, "i8")
dst_, a_src_, a_dst_ = shmem.zeros(4 * npes, "i8"), shmem.zeros(2 * npes, "i8"), shmem.zeros(2 * npes, "i8")
s_src_, s_dst_ = shmem.zeros(6 * npes, "i8"), shmem.zeros(4 * npes, "i8")
f, fo, u, uo = shmem.zeros(3, "f8"), shmem.zeros(3, "f8"), shmem.zeros(2, "u8"), shmem.zeros(2, "u8")
for name, t in named.items():
    if t is not None and not t:
        continue
    tt = shmem.TEAM_WORLD if t is None else t
    r = report[name] = {"my_pe": tt.my_pe(), "n_pes": tt.n_pes(),
                        "world": [tt.translate_pe(i, shmem.TEAM_WORLD) for i in range(tt.n_pes())]}
    n = tt.n_pes()
    dst, a_src, a_dst, s_src, s_dst = dst_[:4 * n], a_src_[:2 * n], a_dst_[:2 * n], s_src_[:6 * n], s_dst_[:4 * n]
    src[:] = me * 10 + np.arange(4) + 1
    tt.sync()  # every member's buffers ready before anyone's collective writes into them (SOS may write early)
    shmem.fcollect(dst, src, team=t); r["fcollect"] = dst.tolist()
    dst[:] = -1; tt.sync(); shmem.collect(dst, src, me % 3 + 1, team=t); r["collect"] = dst.tolist()
    shmem.broadcast(b, src, n - 1, team=t); r["broadcast"] = b.tolist()
    a_src[:] = [me * 100 + j * 10 + k for j in range(n) for k in range(2)]; tt.sync()
    shmem.alltoall(a_dst, a_src, team=t); r["alltoall"] = a_dst.tolist()
    s_src[:] = me * 1000 + np.arange(6 * n); s_dst[:] = -1; tt.sync()
    shmem.alltoalls(s_dst, s_src, 2, 3, 2, team=t); r["alltoalls"] = s_dst.tolist()
    for op in ["sum", "prod", "max", "min", "and", "or", "xor"]:
        getattr(shmem, op + "_reduce")(out, src, team=t); r[op] = out.tolist()
    f[:] = (me + 1) * 0.5 + np.arange(3); tt.sync()
    for op in ["sum", "prod", "max", "min"]:
        shmem.reduce(fo, f, op, team=t); r["f" + op] = fo.tolist()
    u[:] = me + 1; tt.sync()
    shmem.sum_reduce(uo, u, team=t); r["usum"] = uo.tolist()
    shmem.reduce(src, src, "sum", team=t); r["inplace"] = src.tolist()
    shmem.sync(t); tt.sync()
    shmem.barrier_all() if t is None else None
shmem.barrier_all()
for x in (src, b, out, dst_, a_src_, a_dst_, s_src_, s_dst_, f, fo, u, uo):
    shmem.free(x)
for t in (even, odd, tail, row, col):
    t.destroy()
report["destroyed"] = [bool(t) for t in (even, odd, tail, row, col)]
shmem.barrier_all()
print("REPORT " + json.dumps(report))
"""


def expected_for(pes, me):
    """What a member ``me`` of the team ``pes`` (world PEs in team order) must hold."""
    n, rank = len(pes), pes.index(me)

    def src(p):
        return p * 10 + np.arange(4) + 1

    a_src = {p: np.array([p * 100 + j * 10 + k for j in range(n) for k in range(2)]) for p in pes}
    s_src = {p: p * 1000 + np.arange(6 * n) for p in pes}
    s_dst = np.full(4 * n, -1)
    for j, p in enumerate(pes):
        for k in range(2):
            s_dst[(j * 2 + k) * 2] = s_src[p][(rank * 2 + k) * 3]
    collect = np.full(4 * n, -1)
    collect[: sum(p % 3 + 1 for p in pes)] = np.concatenate([src(p)[: p % 3 + 1] for p in pes])
    stacked = np.array([src(p) for p in pes])
    floats = np.array([(p + 1) * 0.5 + np.arange(3) for p in pes])
    ops = {
        "sum": np.add,
        "prod": np.multiply,
        "max": np.maximum,
        "min": np.minimum,
        "and": np.bitwise_and,
        "or": np.bitwise_or,
        "xor": np.bitwise_xor,
    }
    exp = {
        "my_pe": rank,
        "n_pes": n,
        "world": list(pes),
        "fcollect": np.concatenate([src(p) for p in pes]).tolist(),
        "collect": collect.tolist(),
        "broadcast": src(pes[-1]).tolist(),
        "alltoall": np.concatenate([a_src[p][2 * rank : 2 * rank + 2] for p in pes]).tolist(),
        "alltoalls": s_dst.tolist(),
        "usum": [sum(p + 1 for p in pes)] * 2,
        "inplace": stacked.sum(axis=0).tolist(),
    }
    for op, ufunc in ops.items():
        exp[op] = ufunc.reduce(stacked, axis=0).tolist()
    for op in ["sum", "prod", "max", "min"]:
        exp["f" + op] = ops[op].reduce(floats, axis=0).tolist()
    return exp


def test_team_api_and_every_team_collective_equal_numpy(job):
    n = job.n
    got = reports(quiet(job, TEAMS_CELL))
    rows, cols = grid(n)
    for me in range(n):
        teams = dict(team_pes(n), row=rows[me], col=cols[me])
        if not job.library.shares_heaps:  # no PE can shmem_ptr another (OSHMPI over Open MPI's osc, SOS over
            # libfabric): TEAM_SHARED is itself; SOS built with shared heaps maps its node's, as OSHMEM does
            teams["shared"] = [me]
        r = got[me]
        assert r["destroyed"] == [False] * 5
        for name, pes in teams.items():
            assert r["member"][name] == (me in pes), (me, name)
            if me not in pes:
                assert name not in r
                continue
            exp = expected_for(pes, me)
            for key, value in exp.items():
                if key.startswith("f") and key != "fcollect":
                    assert np.allclose(r[name][key], value), (me, name, key)
                else:
                    assert r[name][key] == value, (me, name, key, r[name][key], value)


def test_status_says_how_the_library_provides_teams(job):
    rows = job.status()
    native = job.library.name == "sos"  # OpenSHMEM 1.5; Open MPI 4.1.4's OSHMEM is 1.4
    assert {row["teams"] for row in rows} == {"native" if native else "emulated"}
    vendor = {"sos": "Sandia OpenSHMEM", "oshmpi": "OSHMPI"}.get(job.library.name, "http://www.open-mpi.org/")
    assert {(row["vendor"], row["spec"]) for row in rows} == {(vendor, "1.5" if native else "1.4")}


def test_team_collectives_involve_only_members(job):
    """The odd team runs 30 collectives; the even PEs do nothing meanwhile and are not held."""
    result = quiet(
        job,
        """
import json, time
odd = shmem.TEAM_WORLD.split_strided(1, 2) if npes > 1 else shmem.TEAM_INVALID
x = shmem.zeros(1, "i8"); y = shmem.zeros(npes, "i8"); x[0] = me
started = time.monotonic()
if odd:
    for _ in range(30):
        shmem.fcollect(y, x, team=odd)
        shmem.sum_reduce(y[:1], x, team=odd)
print("REPORT", json.dumps({"member": bool(odd), "sum": int(y[0]), "s": time.monotonic() - started}))
odd.destroy()
shmem.barrier_all()
shmem.free(x); shmem.free(y)
""",
    )
    got = reports(result)
    for pe in range(job.n):
        assert got[pe]["member"] == (pe % 2 == 1)
        if pe % 2:
            assert got[pe]["sum"] == sum(range(1, job.n, 2))
        else:
            assert got[pe]["s"] < 0.5  # went straight on


def test_a_thousand_splits_and_destroys_leak_nothing(job):
    """1000 splits (100 on SOS, where each is the library's collective over sockets: ~0.2 s at 4 PEs on 2 cores)."""
    result = quiet(
        job,
        """
import json
from shmem_notebook.engine import heap
from shmem_notebook.engine.context import this_pe
before = (heap.heap_usage()[0], this_pe.teams.free, len(this_pe.teams.members))
for i in range(SPLITS):
    with shmem.TEAM_WORLD.split_strided(i % npes, 1, 1) as t:
        if t:
            t.sync()
    if i % 100 == 0:
        r, c = shmem.TEAM_WORLD.split_2d(2); r.destroy(); c.destroy()
print("REPORT", json.dumps({"same": before == (heap.heap_usage()[0], this_pe.teams.free, len(this_pe.teams.members))}))
""".replace("SPLITS", "100" if job.library.name == "sos" else "1000"),
    )
    assert all(r["same"] for r in reports(result).values())


def test_mistakes_end_in_one_line(job):
    with pytest.raises(PEError) as info:
        quiet(job, "shmem.fcollect(np.zeros(1), np.zeros(1), team=shmem.TEAM_INVALID)")
    assert "TEAM_INVALID: this PE is not a member of that team" in str(info.value)
    with pytest.raises(PEError) as info:
        quiet(job, "shmem.TEAM_WORLD.split_strided(0, 1, npes + 1)")
    assert "does not pick PEs of a team of" in str(info.value)
    with pytest.raises(PEError) as info:
        quiet(job, "t = shmem.TEAM_WORLD.split_strided(0, 1, 1)\nt2 = shmem.Team(t)\nt.destroy()\nt2.n_pes()")
    said = str(
        info.value
    )  # the copy shares the handle: "was destroyed", or (a handle SOS handed out again) "never created"
    assert "got a team that was destroyed" in said or "destroyed or never created" in said or "TEAM_INVALID" in said, (
        said
    )
    quiet(job, "shmem.barrier_all()")  # the job is still usable


def test_decide():
    assert decide((1, 4), False) == "emulated"
    assert decide((1, 5), True) == "native"
    assert decide((1, 5), False) == "emulated"
    assert decide((1, 4), False, "native") == "native"
    assert decide((1, 5), True, "emulated") == "emulated"
    with pytest.raises(InputError, match="is not a mode"):
        decide((1, 5), True, "sometimes")
