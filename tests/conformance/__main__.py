"""``make conformance``: every program on every built library at 2 and 4 PEs, repeated under CPU load.

``PYTHONPATH=tests python -m conformance [--repeat 5] [--load 2] [--library sos] [--npes 4]
[--program NAME] [--update-docs]``: starts ``--load`` busy loops in a process group of their own
(killed at the end, whatever happens), runs each program ``--repeat`` times in one job per
(library, PE count) and prints one line per program that was not right every time. It writes
``tests/conformance/results.json`` and, with ``--update-docs``, the table in ``docs/conformance.md``.
Exit status 1 when any repetition was wrong, hung or reported a race.
"""

import argparse
import datetime
import json
import os
import pathlib
import platform
import signal
import subprocess
import sys
import time

from conformance.programs import PROGRAMS
from conformance.report import update_page
from conformance.runner import run_once, tally

__all__ = ["main", "busy_loops", "built_libraries"]

HERE = pathlib.Path(__file__).parent
RESULTS = HERE / "results.json"
PAGE = HERE.parent.parent / "docs" / "conformance.md"


def built_libraries():
    """The libraries whose shmem4py is built here: Open MPI's OSHMEM always, SOS and OSHMPI if built."""
    from conftest import oshmpi_built, sos_built

    return ["oshmem"] + (["sos"] if sos_built() else []) + (["oshmpi"] if oshmpi_built() else [])


def busy_loops(count):
    """``count`` shell busy loops in a new process group (its id is the returned process's pid)."""
    if count <= 0:
        return None
    loops = " ".join(["while :; do :; done &"] * count)
    return subprocess.Popen(["sh", "-c", f"{loops} wait"], start_new_session=True)


def stop_loops(loops):
    """End the busy loops' process group (ours alone: made by :func:`busy_loops`)."""
    if loops is not None:
        os.killpg(loops.pid, signal.SIGTERM)
        loops.wait()


class _CtrlC:
    """Ctrl-C ends the run, also where the tool takes it for a part of one cell (the race check's
    analysis is skipped and the cell returns): it is noted here, and the run stops after that cell."""

    pressed = False

    @classmethod
    def handle(cls, signum, frame):
        cls.pressed = True
        signal.default_int_handler(signum, frame)

    @classmethod
    def check(cls):
        if cls.pressed:
            raise KeyboardInterrupt


def run_all(libraries, counts, repeat, programs, heap, save):
    """Rows of the table, one per (program, library, PE count); the seconds each job took.
    ``save(rows, seconds)`` after each job, so that a long run stopped early leaves what it measured."""
    import shmem_notebook

    signal.signal(signal.SIGINT, _CtrlC.handle)
    rows, seconds = [], {}
    for library in libraries:
        for n in counts:
            started = time.monotonic()
            with shmem_notebook.Job(n, heap=heap, library=library).start() as job:
                print(f"{library} at {n} PEs: started", flush=True)
                for program in programs:
                    runs = []
                    for _ in range(repeat):
                        runs.append(run_once(job, program))
                        _CtrlC.check()
                    row = tally(program, library, n, runs)
                    rows.append(row)
                    for line in row["problems"]:
                        print(line, flush=True)
            seconds[f"{library}/{n}"] = round(time.monotonic() - started, 1)
            print(f"{library} at {n} PEs: {len(programs)} programs x {repeat} in {seconds[f'{library}/{n}']} s")
            save(rows, seconds)
    return rows, seconds


def main(argv=None):
    parser = argparse.ArgumentParser(prog="python -m conformance", description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=5, help="repetitions of each program (default 5)")
    parser.add_argument("--load", type=int, default=2, help="busy loops beside the PEs (default 2)")
    parser.add_argument("--library", action="append", help="only this library (repeatable); default: every built one")
    parser.add_argument("--npes", type=int, action="append", help="only this PE count (repeatable); default 2 and 4")
    parser.add_argument("--program", action="append", help="only this program (repeatable)")
    parser.add_argument("--heap", default="8M", help="symmetric heap per PE (default 8M)")
    parser.add_argument(
        "--results", type=pathlib.Path, default=RESULTS, help=f"the JSON file written (default {RESULTS})"
    )
    parser.add_argument("--update-docs", action="store_true", help="write the table into docs/conformance.md")
    args = parser.parse_args(argv)
    libraries = args.library or built_libraries()
    programs = [p for p in PROGRAMS if not args.program or p.name in args.program]
    if args.program and len(programs) != len(set(args.program)):
        unknown = sorted(set(args.program) - {p.name for p in programs})
        parser.error(f"no program named {', '.join(unknown)}; the names are in tests/conformance/programs.py")
    started = time.monotonic()
    commit = subprocess.run(["git", "rev-parse", "--short", "HEAD"], capture_output=True, text=True).stdout.strip()

    def save(rows, seconds):
        results = {
            "date": datetime.datetime.now(datetime.UTC).strftime("%Y-%m-%d %H:%M UTC"),
            "commit": commit,
            "machine": f"{platform.system()} {platform.machine()}, {os.cpu_count()} cores",
            "repeat": args.repeat,
            "load": args.load,
            "seconds": {"total": round(time.monotonic() - started, 1), **seconds},
            "rows": rows,
        }
        args.results.write_text(json.dumps(results, indent=1) + "\n")
        return results

    loops = busy_loops(args.load)
    try:
        rows, seconds = run_all(libraries, args.npes or [2, 4], args.repeat, programs, args.heap, save)
    except KeyboardInterrupt:
        print(f"interrupted: {args.results} keeps the jobs that finished", file=sys.stderr)
        return 130
    finally:
        stop_loops(loops)
    results = save(rows, seconds)
    if args.update_docs:
        update_page(PAGE, results)
    bad = [row for row in rows if row["wrong"] or row["hangs"] or row["races"]]
    print(
        f"{len(rows)} rows, {len(bad)} not right every time; {args.results}" + (f", {PAGE}" if args.update_docs else "")
    )
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
