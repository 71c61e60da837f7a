"""The teaching collectives (``collectives`` in cells): every algorithm against NumPy and
the library's own call, on TEAM_WORLD and on a team, at 1, 2, 3, 4 and 6 PEs."""

import io
import json
import re
import warnings

import numpy as np
import pytest

from conftest import job_fixture, native_stacks_if_late, native_summary
from shmem_notebook import CellStoppedError, PEError

ALGORITHMS = {
    "broadcast": ("binomial", "linear", "library"),
    "fcollect": ("ring", "recursive_doubling", "bruck", "library"),
    "reduce": ("recursive_doubling", "rabenseifner", "library"),
    "alltoall": ("pairwise", "linear", "library"),
}
OPS = ("sum", "prod", "max", "min", "and", "or", "xor")
UFUNCS = {
    "sum": np.add,
    "prod": np.multiply,
    "max": np.maximum,
    "min": np.minimum,
    "and": np.bitwise_and,
    "or": np.bitwise_or,
    "xor": np.bitwise_xor,
}
BIG = 50_000  # float64 elements: more than the scratch holds, so reductions go in chunks


job = job_fixture(1, 2, 3, 4, 6, heap="32M", sos=(2, 4), oshmpi=(4,))


CELL = """
import json
rep = {}
A = collectives.ALGORITHMS
tail = shmem.TEAM_WORLD.split_strided(1, 1, npes - 1) if npes > 2 else shmem.TEAM_INVALID
src, b = shmem.zeros(5, "i8"), shmem.zeros(5, "i8")
dst, a_src, a_dst = shmem.zeros(5 * npes, "i8"), shmem.zeros(3 * npes, "i8"), shmem.zeros(3 * npes, "i8")
out = shmem.zeros(5, "i8")
def ready(team):  # a library's collective may write a PE's target before that PE zeroed it (SOS does)
    shmem.barrier_all() if team is None else team.sync()
big, big_out = shmem.zeros(BIG, "f8"), shmem.zeros(BIG, "f8")
for team_name, team in (("world", None), ("tail", tail)):
    if team is not None and not team:
        continue
    n = npes if team is None else team.n_pes()
    src[:] = me * 10 + np.arange(5) + 1
    for alg in A["broadcast"]:
        for root in sorted({0, n - 1}):
            b[:] = 0
            ready(team)
            collectives.broadcast(b, src, root, team=team, algorithm=alg)
            rep[f"{team_name}/broadcast/{alg}/{root}"] = b.tolist()
    for alg in A["fcollect"]:
        dst[:] = 0
        ready(team)
        collectives.fcollect(dst[:5 * n], src, team=team, algorithm=alg)
        rep[f"{team_name}/fcollect/{alg}"] = dst[:5 * n].tolist()
    for alg in A["alltoall"]:
        a_src[:3 * n] = [me * 100 + j * 10 + k for j in range(n) for k in range(3)]
        a_dst[:] = 0
        ready(team)
        collectives.alltoall(a_dst[:3 * n], a_src[:3 * n], team=team, algorithm=alg)
        rep[f"{team_name}/alltoall/{alg}"] = a_dst[:3 * n].tolist()
    for alg in A["reduce"]:
        for op in OPS:
            out[:] = 0
            ready(team)
            getattr(collectives, op + "_reduce")(out, src, team=team, algorithm=alg)
            rep[f"{team_name}/reduce/{alg}/{op}"] = out.tolist()
        out[:] = src
        ready(team)
        collectives.reduce(out, out, "sum", team=team, algorithm=alg)
        rep[f"{team_name}/reduce/{alg}/inplace"] = out.tolist()
        big[:] = np.sin(np.arange(BIG) + me)
        ready(team)
        collectives.allreduce(big_out, big, "sum", team=team, algorithm=alg)
        pes = range(npes) if team is None else [team.translate_pe(i) for i in range(n)]
        expected = sum(np.sin(np.arange(BIG) + p) for p in pes)
        rep[f"{team_name}/reduce/{alg}/big_error"] = float(np.abs(big_out - expected).max())
    shmem.barrier_all() if team is None else team.sync()
tail.destroy()
shmem.barrier_all()
for x in (src, b, dst, a_src, a_dst, out, big, big_out):
    shmem.free(x)
print("REPORT " + json.dumps(rep))
"""


def library_hang(error):
    """The OpenSHMEM call every PE is blocked in, by the tool's hang report, when it is one call of the
    library's own for all of them (``(blocked in shmem.reduce)`` on every line); else None."""
    calls = {m.group(1) if (m := re.search(r"\(blocked in shmem\.(\w+)\)$", line)) else None for line in error.where}
    return calls.pop() if len(calls) == 1 and None not in calls else None


def test_library_hang_is_every_pe_in_one_call_of_the_librarys():
    line = 'line 45, collectives.allreduce(big_out, big, "sum", team=team, algorithm=alg)'
    assert library_hang(CellStoppedError("late", [f"PE 0-3: {line}  (blocked in shmem.reduce)"])) == "reduce"
    for where in (
        [f"PE 0-3: {line}"],  # in no call of the library's: the teaching algorithms' own wait, say
        [f"PE 0-1: {line}  (blocked in shmem.reduce)", f"PE 2-3: {line}  (blocked in shmem.barrier_all)"],
        [f"PE 0-2: {line}  (blocked in shmem.reduce)", "PE 3: finished"],
        [f"PE 0-3: {line}  (waiting in a team call the tool emulates)"],
    ):
        assert library_hang(CellStoppedError("late", where)) is None, where


def run_cell(job, timeout=120, stacks_after=90):
    """The cell's result. A hang fails the test with the tool's report of where each PE waits and every
    PE's native stacks (taken ``stacks_after`` s in), after a restart, so the module's other tests get
    a fresh job; a hang inside the library's own call (every PE in it: SOS's reduce, in CI, issue 43)
    is said as a warning and the cell run once more on the fresh job."""
    for attempt in (1, 2):
        with native_stacks_if_late(job, after=stacks_after) as stacks:
            try:
                cell = CELL.replace("BIG", str(BIG)).replace("OPS", repr(OPS))
                return job.run(cell, stdout=io.StringIO(), timeout=timeout)
            except CellStoppedError as e:
                error = e
        native = "\n".join(f"-- PE {pe}:\n{text}" for pe, text in stacks.items())
        short = native_summary(stacks) if stacks else "(none taken)"
        # the short form last: a CI log's excerpt keeps a failure's end
        report = f"{error}\nnative stacks at {stacks_after} s:\n{native}\nthe same, short:\n{short}"
        job.restart()
        call = library_hang(error)
        if attempt == 2 or call is None:
            pytest.fail(report)
        warnings.warn(f"{job.library.name}'s own {call} hung (run again on a fresh job): {report}", stacklevel=1)


def test_every_algorithm_equals_numpy_and_the_library(job):
    # each run's limit, twice, is below pytest's (300 s); a run takes 10-30 s (SOS at 4 PEs under load)
    result = run_cell(job)
    n = job.n
    teams = {"world": list(range(n))}
    if n > 2:
        teams["tail"] = list(range(1, n))
    checked = 0
    for me in range(n):
        text = [line for line in result.stdout[me].splitlines() if line.startswith("REPORT ")]
        rep = json.loads(text[0][len("REPORT ") :])
        for name, pes in teams.items():
            if me not in pes:
                assert not any(key.startswith(name + "/") for key in rep)
                continue
            k, rank = len(pes), pes.index(me)

            def src(p):
                return p * 10 + np.arange(5) + 1

            stacked = np.array([src(p) for p in pes])
            for alg in ALGORITHMS["broadcast"]:
                for root in sorted({0, k - 1}):
                    assert rep[f"{name}/broadcast/{alg}/{root}"] == src(pes[root]).tolist(), (me, name, alg, root)
                    checked += 1
            for alg in ALGORITHMS["fcollect"]:
                assert rep[f"{name}/fcollect/{alg}"] == stacked.reshape(-1).tolist(), (me, name, alg)
                checked += 1
            for alg in ALGORITHMS["alltoall"]:
                want = [p * 100 + rank * 10 + j for p in pes for j in range(3)]
                assert rep[f"{name}/alltoall/{alg}"] == want, (me, name, alg)
                checked += 1
            for alg in ALGORITHMS["reduce"]:
                for op in OPS:
                    assert rep[f"{name}/reduce/{alg}/{op}"] == UFUNCS[op].reduce(stacked).tolist(), (me, name, alg, op)
                    checked += 1
                assert rep[f"{name}/reduce/{alg}/inplace"] == stacked.sum(axis=0).tolist()
                assert rep[f"{name}/reduce/{alg}/big_error"] < 1e-9 * k, (me, name, alg)
                checked += 2
    per_member = 2 * len(ALGORITHMS["broadcast"]) if n > 1 else len(ALGORITHMS["broadcast"])
    assert checked >= n * (per_member + 4 + 3 + 3 * 9)


def test_unknown_algorithm_is_one_line(job):
    with pytest.raises(PEError) as info:
        job.run(
            "x = shmem.zeros(npes, 'i8')\ntry:\n    collectives.fcollect(x, x[:1], algorithm='telepathy')\n"
            "finally:\n    shmem.free(x)",
            stdout=io.StringIO(),
        )
    assert "unknown algorithm 'telepathy'; use one of ring, recursive_doubling, bruck, library" in str(info.value)


def test_importable_as_shmem_notebook_collectives_on_the_pes(job):
    out = io.StringIO()
    job.run(
        "import shmem_notebook.collectives as a\nfrom shmem_notebook import collectives as b\n"
        "print(a is b is collectives, a.__name__)",
        stdout=out,
    )
    assert set(job.last_result.stdout.values()) == {"True shmem_notebook.engine.collectives\n"}
