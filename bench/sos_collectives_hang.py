"""The Sandia OpenSHMEM collectives hang (issue 43): the test suite's collectives cell in a loop.

``tests/test_collectives.py``'s CELL (every teaching algorithm and the library's own, on the world
and on a team) runs again and again on a job of ``--pes`` PEs of ``--library`` (default: SOS at 4
PEs) while ``--busy`` busy loops (this script's own processes, each in its own process group,
killed at the end) share the cores. Every ``--restart-every`` runs the job is restarted, so a
job's first cell (the case CI meets) is measured too. Each run has a cell timeout (``--timeout``):
a hang ends in the tool's report of where every PE waits (``CellStoppedError``); ``--stacks``
seconds into a run that has not finished, every PE's native stacks (gdb) are saved first.
Stops after ``--runs`` runs or ``--minutes`` minutes, whichever comes first. Prints one line per
run and a summary; ``--log FILE`` keeps every run's record (JSON lines) and each hang's report.

    python bench/sos_collectives_hang.py                        # 300 runs or 45 minutes
    python bench/sos_collectives_hang.py --runs 100 --minutes 30 --log /tmp/hang.jsonl
"""

import argparse
import importlib.util
import io
import json
import os
import signal
import statistics
import subprocess
import sys
import time

import shmem_notebook
from shmem_notebook.errors import ShmemNotebookError

HERE = os.path.dirname(os.path.abspath(__file__))
TESTS = os.path.join(os.path.dirname(HERE), "tests")
sys.path.insert(0, TESTS)  # the test's cell imports from conftest, as this script does
from conftest import native_stacks_if_late  # noqa: E402


def collectives_cell():
    """The cell of tests/test_collectives.py, filled in as its test fills it."""
    spec = importlib.util.spec_from_file_location("test_collectives", os.path.join(TESTS, "test_collectives.py"))
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module.CELL.replace("BIG", str(module.BIG)).replace("OPS", repr(module.OPS))


def busy_loops(count):
    """``count`` Python busy loops, each its own process group (so only they are killed)."""
    return [subprocess.Popen([sys.executable, "-c", "while True: pass"], start_new_session=True) for _ in range(count)]


def stop_busy_loops(procs):
    for proc in procs:
        try:
            os.killpg(proc.pid, signal.SIGKILL)  # its own group: the loop alone
        except ProcessLookupError:
            pass
        proc.wait()


def one_run(job, cell, timeout, stacks_after):
    """Run the cell once: a record {seconds, outcome, where, stacks}."""
    record = {}
    start = time.monotonic()
    with native_stacks_if_late(job, stacks_after) as stacks:  # a late run: every PE, before the limit stops them
        try:
            job.run(cell, stdout=io.StringIO(), stderr=io.StringIO(), timeout=timeout)
            record.update(outcome="ok", where=None)
        except shmem_notebook.CellStoppedError as e:
            record.update(outcome="hang", where=str(e))
        except ShmemNotebookError as e:
            record.update(outcome=type(e).__name__, where=str(e))
    record["stacks"] = stacks or None
    record["seconds"] = round(time.monotonic() - start, 2)
    return record


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--library", default="sos")
    parser.add_argument("--pes", type=int, default=4)
    parser.add_argument("--heap", default="32M", help="as tests/test_collectives.py's job (the cell's BIG arrays)")
    parser.add_argument("--busy", type=int, default=2, help="busy loops beside the PEs")
    parser.add_argument("--runs", type=int, default=300)
    parser.add_argument("--minutes", type=float, default=45.0)
    parser.add_argument("--timeout", type=float, default=60.0, help="each cell's limit (s): the hang report")
    parser.add_argument("--stacks", type=float, default=45.0, help="native stacks of every PE of a run this late (s)")
    parser.add_argument("--restart-every", type=int, default=10, help="runs per job (its first cell included)")
    parser.add_argument("--log", help="JSON lines: one record per run")
    args = parser.parse_args()
    cell = collectives_cell()
    log = open(args.log, "a") if args.log else None
    loops = busy_loops(args.busy)
    records, deadline = [], time.monotonic() + 60 * args.minutes
    job = None
    try:
        job = shmem_notebook.Job(args.pes, heap=args.heap, library=args.library).start()
        for i in range(args.runs):
            if time.monotonic() > deadline:
                break
            if i and (i % args.restart_every == 0 or job.state != "running"):
                job.restart()
            record = one_run(job, cell, args.timeout, args.stacks)
            record.update(run=i, first_cell=i % args.restart_every == 0, load=round(os.getloadavg()[0], 1))
            records.append(record)
            print(f"run {i}: {record['outcome']} in {record['seconds']} s (load {record['load']})", flush=True)
            if record["outcome"] != "ok":
                print(record["where"], flush=True)
            if log:
                log.write(json.dumps(record) + "\n")
                log.flush()
    finally:
        if job is not None:
            job.stop()
        stop_busy_loops(loops)
        if log:
            log.close()
    bad = [r for r in records if r["outcome"] != "ok"]
    ok = [r["seconds"] for r in records if r["outcome"] == "ok"]
    print(
        f"{len(records)} runs of the collectives cell, {args.library} at {args.pes} PEs, {args.busy} busy loops "
        f"on {os.cpu_count()} cores, a new job every {args.restart_every} runs: {len(bad)} hung or failed "
        f"({', '.join(str(r['run']) for r in bad) or 'none'}); runs took {min(ok, default=0):.1f}-"
        f"{max(ok, default=0):.1f} s (median {statistics.median(ok) if ok else 0:.1f} s)"
    )
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
