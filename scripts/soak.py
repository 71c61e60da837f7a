"""Soak the PE tests: run them several times over with busy loops beside them (``make soak``).

    .venv/bin/python scripts/soak.py [--rounds 5] [--busy 2] [MODULE ...] [-- PYTEST ARGS]

The modules whose tests meet the machine's timing most (hangs, stranded PEs, deadlocks, collectives,
transitions, reliability, the cell channel, interrupts, Ctrl-C during reruns) run ``--rounds`` times,
each round a fresh pytest, on every library built here (their fixtures pick up SOS and OSHMPI by
themselves), with ``--busy`` processes spinning on the cores in their own process group, killed at
the end. The report gives each test's runs, failures and slowest time against its time limit
(pytest-timeout's), names every test that failed or needed more than half its limit, and is written
to ``build/soak.json``. Exit status 1 when any test failed in any round.
"""

import argparse
import json
import os
import signal
import subprocess
import sys
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
MODULES = [
    "tests/test_hangs.py",
    "tests/test_stranded.py",
    "tests/test_deadlock.py",
    "tests/test_collectives.py",
    "tests/test_transitions.py",
    "tests/test_reliability.py",
    "tests/test_channel.py",
    "tests/test_interrupts.py",
    "tests/test_stress.py",
]
#: where conftest.py writes each test's outcome, duration and time limit, one JSON line each
TIMES_ENV = "SHMEM_NOTEBOOK_TEST_TIMES"


def _busy(n):
    """``n`` processes spinning on the CPU, in a process group of their own (killed by :func:`_stop`)."""
    spin = f"import os\nfor _ in range({n} - 1):\n    if os.fork() == 0:\n        break\nwhile True:\n    pass\n"
    return subprocess.Popen([sys.executable, "-c", spin], start_new_session=True) if n else None


def _stop(busy):
    if busy is not None:
        try:
            os.killpg(busy.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
        busy.wait()


def _round(k, modules, extra, out_dir):
    times = os.path.join(out_dir, f"round-{k}.jsonl")
    env = dict(os.environ, **{TIMES_ENV: times})
    command = [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", *modules, *extra]
    started = time.monotonic()
    code = subprocess.run(command, cwd=ROOT, env=env).returncode
    rows = []
    if os.path.exists(times):
        with open(times) as f:
            rows = [json.loads(line) for line in f if line.strip()]
    return code, time.monotonic() - started, rows


def summarise(rounds):
    """``{nodeid: {"runs", "failed", "slowest", "limit"}}`` over every round's rows."""
    tests = {}
    for rows in rounds:
        for row in rows:
            t = tests.setdefault(row["nodeid"], {"runs": 0, "failed": 0, "slowest": 0.0, "limit": row["limit"]})
            t["runs"] += 1
            t["failed"] += row["outcome"] == "failed"
            t["slowest"] = max(t["slowest"], row["duration"])
    return tests


def report(tests, wall, codes):
    """The lines of the report: failures, tests past half their limit, the totals."""
    failed = {k: v for k, v in tests.items() if v["failed"]}
    slow = {k: v for k, v in tests.items() if v["limit"] and v["slowest"] > v["limit"] / 2}
    lines = [f"soak: {len(codes)} rounds, {len(tests)} tests, {sum(v['runs'] for v in tests.values())} runs, "
             f"{sum(v['failed'] for v in tests.values())} failed, {wall / 60:.1f} min"]  # fmt: skip
    for title, chosen in (("failed", failed), ("needed more than half their time limit", slow)):
        lines.append(f"tests that {title}: {len(chosen) or 'none'}")
        for nodeid, v in sorted(chosen.items()):
            lines.append(
                f"  {nodeid}: failed {v['failed']} of {v['runs']}, slowest {v['slowest']:.1f} s of {v['limit']:.0f} s"
            )
    if any(codes) and not failed:
        lines.append(f"pytest exit statuses {codes}: a round failed outside a test (collection, a fixture)")
    return lines


def main(argv=None):
    argv = list(sys.argv[1:] if argv is None else argv)
    extra = argv[argv.index("--") + 1 :] if "--" in argv else []
    argv = argv[: argv.index("--")] if "--" in argv else argv
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=5, help="how many times each module runs (default 5)")
    parser.add_argument("--busy", type=int, default=2, help="processes spinning beside the tests (default 2)")
    parser.add_argument("modules", nargs="*", help=f"test modules (default: {' '.join(MODULES)})")
    args = parser.parse_args(argv)
    if args.rounds < 1 or args.busy < 0:
        parser.error("--rounds must be at least 1 and --busy at least 0")
    modules = args.modules or [m for m in MODULES if os.path.exists(os.path.join(ROOT, m))]
    out_dir = os.path.join(ROOT, "build", "soak")
    os.makedirs(out_dir, exist_ok=True)
    for name in os.listdir(out_dir):
        os.remove(os.path.join(out_dir, name))
    busy, started, codes, rounds = _busy(args.busy), time.monotonic(), [], []
    try:
        for k in range(1, args.rounds + 1):
            print(f"== soak round {k} of {args.rounds} ({args.busy} busy loops beside)", flush=True)
            code, _, rows = _round(k, modules, extra, out_dir)
            codes.append(code)
            rounds.append(rows)
    finally:
        _stop(busy)
    tests, wall = summarise(rounds), time.monotonic() - started
    lines = report(tests, wall, codes)
    print("\n".join(lines))
    with open(os.path.join(ROOT, "build", "soak.json"), "w") as f:
        json.dump({"rounds": args.rounds, "busy": args.busy, "modules": modules, "exit": codes, "tests": tests}, f,
                  indent=1)  # fmt: skip
    return 1 if any(v["failed"] for v in tests.values()) or any(codes) else 0


if __name__ == "__main__":
    sys.exit(main())
