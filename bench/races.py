"""The race check's cost: the same cells with and without ``race=True``, side by side.

(a) 10,000 8-byte puts in a loop with a barrier at the end; (b) a 1-D stencil of
100,000 elements per PE with halo puts to both neighbours, a few sweeps. Each is run
untraced and traced in turn (interleaved) on the same job; the time is the whole
``job.run`` the user waits for (dispatch, tracing, collecting, analysis), and the loop's
own time measured inside the cell. Also the traced run's event count and payload.

Then the issue-20 cells (:func:`run_loops`): the stencil of 1,000 elements per PE with a
halo exchange, 200 iterations on 4 PEs; puts to scattered elements ``arr[(i * 7919) % 100003]``
on 2 PEs, 20,000 and 60,000 per PE and a cell of 1,000,000: the whole ``job.run``
untraced and traced, the analysis alone (``analyse`` on the same cell's traces, in this
process) and the traced cell's verdict line.

Beside each ratio, the same measured in a job whose PEs record in Python
(``SHMEM_NOTEBOOK_NATIVE=no-record``): the baseline of the recording's C hot path. Each ratio is
also given paired: the median of each traced run over the untraced run before it, with its
quartiles, which a drift of the machine's speed during the runs moves less than the ratio of medians
(the goals are checked on it).
"""

import contextlib
import io
import os
import pickle
import time

import shmem_notebook
from common import median
from shmem_notebook.analysis.happens_before import analyse

PUTS = """import time as _t
_buf = np.ones(1, dtype=np.int64)
_target = (me + 1) % npes
shmem.barrier_all()
_t0 = _t.perf_counter()
for i in range({count}):
    shmem.put(cell8[i % 8:i % 8 + 1], _buf, _target)
shmem.barrier_all()
loop_seconds = _t.perf_counter() - _t0
"""

STENCIL = """import time as _t
n = {size}
u = shmem.zeros(n + 2, dtype=np.float64)
new = np.zeros(n + 2)
u[1:-1] = np.arange(n) + me * n
left, right = (me - 1) % npes, (me + 1) % npes
shmem.barrier_all()
_t0 = _t.perf_counter()
for sweep in range({sweeps}):
    shmem.put(u[n + 1:n + 2], u[1:2], left)      # my first element is my left neighbour's right halo
    shmem.put(u[0:1], u[n:n + 1], right)         # my last element is my right neighbour's left halo
    shmem.barrier_all()
    new[1:-1] = 0.5 * (u[:-2] + u[2:])
    shmem.barrier_all()
    u[1:-1] = new[1:-1]
    shmem.barrier_all()
loop_seconds = _t.perf_counter() - _t0
shmem.free(u)
"""


def _loop_seconds(job):
    out = io.StringIO()
    job.run("print(loop_seconds)", stdout=out)
    return max(float(line.split("]")[-1]) for line in out.getvalue().splitlines() if line.strip())


def _time(job, code, race):
    start = time.perf_counter()
    result = job.run(code, arrays=["cell8=int64[8]"], race=race, stdout=io.StringIO(), stderr=io.StringIO())
    return time.perf_counter() - start, _loop_seconds(job), result


@contextlib.contextmanager
def python_recording():
    """Jobs started inside record in Python, not with the C hot path (``native_record``): the
    baseline the C path is measured against."""
    before = os.environ.get("SHMEM_NOTEBOOK_NATIVE")
    os.environ["SHMEM_NOTEBOOK_NATIVE"] = "no-record"
    try:
        yield
    finally:
        if before is None:
            del os.environ["SHMEM_NOTEBOOK_NATIVE"]
        else:
            os.environ["SHMEM_NOTEBOOK_NATIVE"] = before


def _interleaved(job, code, repeats):
    """``(walls, loops, races)`` of ``code`` untraced and traced in turns, ``repeats`` times each after a
    warm-up of both: ``{traced?: [job.run seconds]}``, ``{traced?: [the loop's own seconds]}``, and the
    races the last traced run found."""
    _time(job, code, False)  # warm up both paths
    _time(job, code, True)
    walls, loops, races = {False: [], True: []}, {False: [], True: []}, None
    for _ in range(repeats):
        for race in (False, True):
            wall, loop, result = _time(job, code, race)
            walls[race].append(wall)
            loops[race].append(loop)
            if race:
                races = len(result.races)
    return walls, loops, races


def _python_ratios(n, cells, repeats):
    """``{name: traced / untraced}`` of each ``(name, code)`` in a job recording in Python."""
    ratios = {}
    with python_recording(), shmem_notebook.start(n=n, heap="64M") as job:
        job.alloc("cell8=int64[8]")
        for name, code in cells:
            walls, _, _ = _interleaved(job, code, repeats)
            ratios[name] = median(walls[True]) / median(walls[False])
    return ratios


def run(n, puts, size, sweeps, repeats, loops=None):
    rows = []
    cells = (("puts", PUTS.format(count=puts)), ("stencil", STENCIL.format(size=size, sweeps=sweeps)))
    with shmem_notebook.start(n=n, heap="64M") as job:
        job.alloc("cell8=int64[8]")
        for name, code in cells:
            samples, in_loop, races = _interleaved(job, code, repeats)
            stage = job.last_result
            row = {
                "workload": name,
                "n": n,
                "untraced_s": median(samples[False]),
                "traced_s": median(samples[True]),
                "untraced_loop_s": median(in_loop[False]),
                "traced_loop_s": median(in_loop[True]),
                "races": races,
            }
            row.update(_ratios(samples))
            row["loop_ratio"] = row["traced_loop_s"] / row["untraced_loop_s"]
            rows.append(row)
            del stage
        # what the PEs send back for the put loop: events after summarising, bytes pickled
        job.ask("race_start", {})
        job.run(PUTS.format(count=puts), stdout=io.StringIO())
        traces = list(job.ask("race_stop").values())
        events = sum(len(t["events"]) for t in traces)
        ops = sum(t["ops"] for t in traces)
        payload = sum(len(pickle.dumps(t)) for t in traces)
    for row, ratio in zip(rows, _python_ratios(n, cells, repeats).values()):
        row["python_ratio"] = ratio
    out = {
        "n": n,
        "puts": puts,
        "size": size,
        "sweeps": sweeps,
        "repeats": repeats,
        "rows": rows,
        "put_loop_ops": ops,
        "put_loop_events": events,
        "put_loop_payload_bytes": payload,
    }
    if loops:
        loops = dict(loops)
        wait_rounds = loops.pop("wait_rounds", (500, 2000))
        out["loops"] = run_loops(**loops)
        out["synthetic"] = synthetic(loops.get("scattered", (20_000, 60_000)))
        out["waits"] = waits(wait_rounds)
        out["loops_date"] = None  # measured with the rest of the section
    return out


SCATTERED = """src = np.ones(1, dtype=np.int64)
other = (me + 1) % npes
for i in range({count}):
    j = (i * 7919) % 100003
    shmem.put(arr[j:j + 1], src, other)
shmem.barrier_all()
"""


def _verdict(text):
    """The race report's summary line (the last line that says what was found)."""
    lines = [x for x in text.replace("\r", "\n").splitlines() if " found" in x]
    return lines[-1] if lines else text.strip().splitlines()[-1:]


def _side_by_side(job, name, code, arrays, repeats, **extra):
    """Untraced and traced ``job.run`` of one cell (interleaved, medians), the analysis alone, the verdict."""
    walls = {False: [], True: []}
    out = io.StringIO()
    for _ in range(repeats):
        for race in (False, True):
            out = io.StringIO()
            start = time.perf_counter()
            job.run(code, arrays=arrays, race=race, stdout=out, stderr=io.StringIO(), timeout=3600)
            walls[race].append(time.perf_counter() - start)
            job.race_reset()
    verdict = _verdict(out.getvalue())
    job.ask("race_start", {})
    job.run(code, arrays=arrays, stdout=io.StringIO(), stderr=io.StringIO(), timeout=3600)
    traces = job.ask("race_stop")
    cpu, start = time.process_time(), time.perf_counter()
    found = analyse(traces, job.n)
    analysis_s, analysis_cpu_s = time.perf_counter() - start, time.process_time() - cpu
    row = {
        "workload": name,
        "n": job.n,
        "repeats": repeats,
        "untraced_s": median(walls[False]),
        "traced_s": median(walls[True]),
        "analysis_s": analysis_s,
        "analysis_cpu_s": analysis_cpu_s,
        "events": sum(len(t["events"]) for t in traces.values()),
        "ops": sum(t["ops"] for t in traces.values()),
        "capped": found.checked is not None,
        "races": len(found.races),
        "verdict": verdict,
        "load_average_1min": round(os.getloadavg()[0], 2),
        **extra,
    }
    row.update(_ratios(walls))
    return row


def _ratios(walls):
    """Traced over untraced (``walls``: ``{traced?: [seconds]}``, runs made in turns): the ratio of the
    medians, and the paired ratio, the median of each traced run over the untraced run just before
    it, with its quartiles. The paired one is steadier where the machine's speed drifts during the
    runs (on this one an untraced stencil iteration once went from 30 us to 17 us within a run)."""
    paired = sorted(b / a for a, b in zip(walls[False], walls[True]))
    return {
        "ratio": median(walls[True]) / median(walls[False]),
        "paired_ratio": median(paired),
        "paired_quartiles": [paired[len(paired) // 4], paired[(3 * len(paired)) // 4]],
    }


def synthetic(per_pe=(20_000, 60_000)):
    """The analysis alone on the worst case of the scattered puts: every put its own event (no range
    or strided summary), as :mod:`race_traces` builds them; wall and CPU seconds."""
    import race_traces

    rows = []
    for count in per_pe:
        traces = race_traces.scattered_puts(count)
        cpu, start = time.process_time(), time.perf_counter()
        found = analyse(traces, 2)
        rows.append(
            {
                "per_pe": count,
                "events": sum(len(t["events"]) for t in traces.values()),
                "analysis_s": time.perf_counter() - start,
                "analysis_cpu_s": time.process_time() - cpu,
                "races": len(found.races),
            }
        )
    return rows


def waits(rounds=(500, 2000), repeats=3):
    """The analysis alone on wait-heavy protocols (:func:`race_traces.ping_pong`, ``credit_ring``):
    the condition rule beside the observed-value rule it replaced (the same traces without the
    waits' conditions), median wall seconds of ``repeats``, and the races each finds (none is right)."""
    import race_traces

    rows = []
    for name in ("ping_pong", "credit_ring"):
        for count in rounds:
            traces = getattr(race_traces, name)(count)
            row = {"workload": name, "rounds": count}
            for rule, data in (("condition", traces), ("observed", race_traces.without_conditions(traces))):
                times, found = [], None
                for _ in range(repeats):
                    start = time.perf_counter()
                    found = analyse(data, 2)
                    times.append(time.perf_counter() - start)
                row[f"{rule}_s"], row[f"{rule}_races"] = median(times), len(found.races)
            rows.append(row)
    return rows


def run_loops(
    stencil_iterations=200, stencil_pes=4, scattered=(20_000, 60_000), big=1_000_000, repeats=3, stencil_repeats=21
):
    """The issue-20 loops, untraced vs traced (see the module docstring). The stencil's cell takes a
    tenth of a second and, with more PEs than cores, varies by half from run to run: it is
    repeated ``stencil_repeats`` times."""
    rows = []
    code = STENCIL.format(size=1000, sweeps=stencil_iterations)
    with shmem_notebook.start(n=stencil_pes, heap="64M") as job:
        job.run(code, stdout=io.StringIO())  # warm up
        rows.append(_side_by_side(job, "stencil_loop", code, None, stencil_repeats, iterations=stencil_iterations))
    with python_recording(), shmem_notebook.start(n=stencil_pes, heap="64M") as job:
        job.run(code, stdout=io.StringIO())
        rows[-1]["python_ratio"] = _side_by_side(job, "stencil_loop", code, None, stencil_repeats)["ratio"]
    with shmem_notebook.start(n=2, heap="64M") as job:
        job.alloc("arr=int64[100003]")
        for count in scattered:
            rows.append(_side_by_side(job, "scattered", SCATTERED.format(count=count), None, repeats, per_pe=count))
        if big:
            rows.append(_side_by_side(job, "scattered", SCATTERED.format(count=big), None, 1, per_pe=big))
    return rows


if __name__ == "__main__":
    import json

    print(json.dumps(run(n=2, puts=10_000, size=100_000, sweeps=10, repeats=3), indent=1))
