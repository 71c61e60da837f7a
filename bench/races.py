"""The race check's cost: the same cells with and without ``race=True``, side by side.

(a) 10,000 8-byte puts in a loop with a barrier at the end; (b) a 1-D stencil of
100,000 elements per PE with halo puts to both neighbours, a few sweeps. Each is run
untraced and traced in turn (interleaved) on the same job; the time is the whole
``job.run`` the user waits for (dispatch, tracing, collecting, analysis), and the loop's
own time measured inside the cell. Also the traced run's event count and payload.
"""

import io
import pickle
import time

import shmem_notebook
from common import median

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


def run(n, puts, size, sweeps, repeats):
    rows = []
    with shmem_notebook.start(n=n, heap="64M") as job:
        job.alloc("cell8=int64[8]")
        for name, code in (("puts", PUTS.format(count=puts)), ("stencil", STENCIL.format(size=size, sweeps=sweeps))):
            _time(job, code, False)  # warm up both paths
            _time(job, code, True)
            samples = {False: [], True: []}
            loops = {False: [], True: []}
            races = None
            for _ in range(repeats):
                for race in (False, True):
                    wall, loop, result = _time(job, code, race)
                    samples[race].append(wall)
                    loops[race].append(loop)
                    if race:
                        races = len(result.races)
            stage = job.last_result
            row = {
                "workload": name,
                "n": n,
                "untraced_s": median(samples[False]),
                "traced_s": median(samples[True]),
                "untraced_loop_s": median(loops[False]),
                "traced_loop_s": median(loops[True]),
                "races": races,
            }
            row["ratio"] = row["traced_s"] / row["untraced_s"]
            row["loop_ratio"] = row["traced_loop_s"] / row["untraced_loop_s"]
            rows.append(row)
            del stage
        # what the PEs send back for the put loop: events after summarising, bytes pickled
        job.ask("record_start", {})
        job.run(PUTS.format(count=puts), stdout=io.StringIO())
        traces = list(job.ask("record_stop").values())
        events = sum(len(t["events"]) for t in traces)
        ops = sum(t["ops"] for t in traces)
        payload = sum(len(pickle.dumps(t)) for t in traces)
    return {"n": n, "puts": puts, "size": size, "sweeps": sweeps, "repeats": repeats, "rows": rows,
            "put_loop_ops": ops, "put_loop_events": events, "put_loop_payload_bytes": payload}


if __name__ == "__main__":
    import json

    print(json.dumps(run(n=2, puts=10_000, size=100_000, sweeps=10, repeats=3), indent=1))
