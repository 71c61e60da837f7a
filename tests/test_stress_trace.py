"""The trace of a ``--stress`` run's first rerun (issue 32): ``job.run(code, race=True, stress=N, trace=True)``
keeps it as ``result.stages["stress"].trace``, ``%shmem trace save PATH --stress`` writes it, and the race
runner's ``--stress N --trace FILE`` writes the first rerun's timeline. Racy and fixed twins, real jobs at 2 PEs."""

import io
import json
import pathlib
from collections import Counter

import pytest
from test_trace_export import flows

from conftest import ipython_shell, job_fixture, quiet, run_race_runner
from shmem_notebook.cells.stress_stage import Stressed
from shmem_notebook.trace.cell_trace import Trace

job = job_fixture(2, heap="32M", timeout=120)

ARRAYS = "box=int64[1] seen=int64[1]"
#: each PE puts into its right neighbour's box and reads its own box before any barrier orders the two
RACY = """\
box[:] = 0
shmem.barrier_all()
shmem.put(box, np.full(1, me + 1), (me + 1) % npes)
seen[0] = box[0]
shmem.barrier_all()
"""
#: the same with a barrier between the put and the read
FIXED = """\
box[:] = 0
shmem.barrier_all()
shmem.put(box, np.full(1, me + 1), (me + 1) % npes)
shmem.barrier_all()
seen[0] = box[0]
"""
TWINS = pytest.mark.parametrize("code", [RACY, FIXED], ids=["racy", "fixed"])


def calls(code):
    """``[(line, call name)]`` of the shmem calls in ``code``."""
    return [
        (n, line.split("(")[0].split(".")[1])
        for n, line in enumerate(code.splitlines(), 1)
        if line.startswith("shmem.")
    ]


@TWINS
def test_the_first_rerun_is_traced_with_the_cells_calls_and_lines(job, code, tmp_path):
    n = job.n
    out = io.StringIO()
    result = quiet(job, code, arrays=ARRAYS, race=True, stress=7, trace=True, stdout=out)
    assert bool(result.races) == (code is RACY)
    stressed = result.stages["stress"]
    assert isinstance(stressed, Stressed) and stressed.seed == 7 and len(stressed.runs) == 4
    trace = stressed.trace
    assert isinstance(trace, Trace) and trace is not result.trace and not trace.cut
    assert "stress rerun with seed 7" in trace.meta["cell"]
    made = calls(code)
    assert Counter((e["line"], e["op"]) for e in trace.events) == Counter({c: n for c in made})
    assert "stress: the first rerun's trace (seed 7): 6 calls on 2 PEs" in out.getvalue()
    assert trace.waits().sentences()  # where each PE waited, as for a traced cell
    document = json.loads(pathlib.Path(trace.save(tmp_path / "rerun.json")).read_text())
    slices = [e for e in document["traceEvents"] if e["ph"] == "X"]
    assert len(slices) == len(made) * n
    for e in slices:
        assert e["dur"] >= 0 and e["ts"] >= 0 and e["args"]["code"] == code.splitlines()[e["args"]["line"] - 1]
    names = {
        e["tid"]: e["args"]["name"] for e in document["traceEvents"] if e["ph"] == "M" and e["name"] == "thread_name"
    }
    assert names == {pe: f"PE {pe}" for pe in range(n)}
    arrows = sorted((s["name"], s["tid"], f["tid"]) for s, f in flows(document).values())
    assert arrows == sorted(("put", pe, (pe + 1) % n) for pe in range(n))
    assert document["otherData"]["complete"] is True and document["otherData"]["calls"] == len(made) * n


def test_a_stress_run_without_trace_records_none(job):
    result = quiet(job, RACY, arrays=ARRAYS, race=True, stress=7)
    assert result.stages["stress"].trace is None and result.trace is None and len(result.stages["stress"].runs) == 4


def test_magics_save_the_first_reruns_trace(job, tmp_path, capsys):
    from IPython.core.error import UsageError

    import shmem_notebook.job as jobs

    shell = ipython_shell()
    jobs._current = job
    try:
        shell.run_cell_magic("pxshmem", f"--race --stress 3 --trace {ARRAYS}", FIXED)
        assert "stress: the first rerun's trace (seed 3)" in capsys.readouterr().out
        shell.run_line_magic("shmem", f"trace save {tmp_path / 'rerun.json'} --stress")
        assert "trace saved: " in capsys.readouterr().out
        document = json.loads((tmp_path / "rerun.json").read_text())
        assert "stress rerun with seed 3" in document["otherData"]["cell"]
        flows(document)  # every arrow at its call and forward in time
        shell.run_cell_magic("pxshmem", f"--trace {ARRAYS}", FIXED)
        with pytest.raises(UsageError, match="first stress rerun was not traced"):
            shell.run_line_magic("shmem", f"trace save {tmp_path / 'no.json'} --stress")
    finally:
        jobs._current = None


# -- the race runner ---------------------------------------------------------------------------
PROGRAM = """\
import numpy as np
from shmem4py import shmem

me, npes = shmem.my_pe(), shmem.n_pes()
box = shmem.zeros(1, dtype=np.int64)
shmem.barrier_all()
shmem.put(box, np.array([me + 1], dtype=np.int64), (me + 1) % npes)
{order}seen = int(box[0])
shmem.barrier_all()
shmem.free(box)
"""


@pytest.mark.pe
@pytest.mark.parametrize("racy", [True, False], ids=["racy", "fixed"])
def test_race_runner_writes_the_first_reruns_timeline(tmp_path, racy):
    (tmp_path / "ring.py").write_text(PROGRAM.format(order="" if racy else "shmem.barrier_all()\n"))
    done = run_race_runner(tmp_path, "ring.py", "--stress", "5", "--trace", "out.json")
    assert done.returncode == (1 if racy else 0), done.stdout + done.stderr
    assert "stress: trace: " in done.stdout and "written to out.json" in done.stdout
    document = json.loads((tmp_path / "out.json").read_text())
    slices = [e for e in document["traceEvents"] if e["ph"] == "X"]
    puts = [e for e in slices if e["name"] == "put"]
    assert sorted(e["tid"] for e in puts) == [0, 1] and all(e["args"]["where"] == "ring.py:7" for e in puts)
    assert len(flows(document)) == 2 and document["otherData"]["cell"] == "ring.py, the first stress rerun (seed 5)"
    assert Counter(e["name"] for e in slices)["barrier_all"] == 2 * (2 if racy else 3)
