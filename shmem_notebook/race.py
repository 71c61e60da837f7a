"""Race-check any shmem4py program.

``python -m shmem_notebook.race [--stress SEED] -- oshrun -n 4 python prog.py ARGS``.

Also the console script ``shmem-race``. The command after ``--`` runs as given, but with the
Python program started through :data:`shmem_notebook.protocol.RACE_MODULE`
(``python -m shmem_notebook.engine.record.script prog.py ARGS``): every PE records what a
``%%pxshmem --race`` cell records, for the whole program and the modules it imports from its
directory, and writes it when the program ends (:mod:`shmem_notebook.engine.record.script`).
The runner then prints the same race report as ``--race`` with ``file:line`` for cell lines:

    RACE remote[0] on PE 1: PE 0 racy.py:4 put (write) / PE 1 racy.py:6 load (read) are unordered; ...
    1 race found (program traced: 6 operations on 2 PEs)

``--trace FILE`` also writes every PE's calls as a timeline, ``FILE.json`` for Perfetto or
``FILE.otf2`` (as ``result.trace.save`` does for a cell; :func:`save_timeline`).

``--stress SEED`` then reruns the program 4 times with seeded random delays around every
shmem call (seeds SEED..SEED+3) and says what each PE printed differently and which elements of
the arrays the races are about each PE held differently at the end: as a notebook cell's
``--stress``, a race is "real" only when a rerun changed its elements (a race on memory the
program no longer names at its end, or on OSHMPI, is judged by printed output only).
With both, ``--trace FILE`` holds the timeline of the first rerun (seed SEED), not of the run
without delays.

Exit status: 0 no race, 1 races found, 2 a usage error, 3 the program failed (a non-zero exit
or PEs that sent no recording) and no race was found in what was recorded. The command gets
the platform's environment (:func:`shmem_notebook.launcher.environment.platform_environment`)
where it is not set. Client side: nothing here imports shmem4py.
"""

from __future__ import annotations

import argparse
import json
import os
import pickle
import re
import shlex
import subprocess
import sys
import tempfile
import time
from typing import TYPE_CHECKING, Any, NoReturn, TypeAlias

from . import native_record
from .cells import ctrl_c
from .cells.output import merge_marked
from .cells.stress_stage import Difference, Run, compare, estimate, summary
from .launcher.environment import platform_environment
from .launcher.shm import SharedMemoryOf
from .operations import CAP
from .protocol import RACE_ENV, RACE_MODULE
from .race_report import analyse, numbered, report, save_timeline

if TYPE_CHECKING:
    from collections.abc import Callable, Sequence

    from .analysis.happens_before import Race
    from .race_report import Reports

    #: a run's ``(printed, values)``: what each PE printed (``{pe: text}``) and held at the end
    Output: TypeAlias = tuple[dict[int, str], dict[int, dict[str, Any]]]
    #: ``{name: (lo, hi, dtype, layout)}``: where the raced arrays lie
    Ranges: TypeAlias = dict[str, tuple[int, int, str, Any]]

__all__ = [
    *("main", "pe_command", "analyse", "report", "save_timeline", "numbered", "raced_memory", "UsageError"),
    *("RUNS", "MAX_DELAY"),
]

#: stress reruns, and the longest delay around a call (as the notebook's --stress)
RUNS = 4
MAX_DELAY = 0.02
#: launchers that forward environment variables to other nodes only when told with -x
_X_LAUNCHERS = {"oshrun", "mpirun", "mpiexec", "orterun", "shmemrun"}
_PYTHON = re.compile(r"^python[0-9.]*$")
#: python options that take a value (the program comes after them)
_PY_VALUE_OPTIONS = {"-W", "-X", "-Q"}

USAGE = "python -m shmem_notebook.race [--stress SEED] [--cap N] [--trace FILE] -- LAUNCHER ... python PROGRAM.py ARGS"


class UsageError(Exception):
    """The runner's command line is wrong (exit status 2)."""


class _Parser(argparse.ArgumentParser):
    def error(self, message: str) -> NoReturn:
        raise UsageError(message)


def _parser() -> _Parser:
    p = _Parser(
        prog="python -m shmem_notebook.race",
        usage=USAGE,
        add_help=True,
        description="Run a shmem4py program with the race recorder on every PE and report the races "
        "(as %%pxshmem --race does for a cell). Exit status: 0 no race, 1 races, 2 usage, "
        "3 the program failed.",
    )
    p.add_argument(
        "--stress",
        type=int,
        default=None,
        metavar="SEED",
        help=f"then rerun it {RUNS} times with seeded random delays around every shmem call",
    )
    p.add_argument("--cap", type=int, default=CAP, metavar="N", help=f"events kept per PE (default {CAP:,})")
    p.add_argument(
        "--trace",
        default=None,
        metavar="FILE",
        help="also write the program's calls as a timeline: FILE.json (Perfetto) or FILE.otf2",
    )
    p.add_argument("command", nargs=argparse.REMAINDER, help="the launch command, after --")
    return p


def pe_command(command: list[str]) -> list[str]:
    """``command`` with its Python program started through the race recorder on every PE:
    ``oshrun -n 4 python -u prog.py A`` -> ``oshrun -n 4 python -u -m RACE_MODULE prog.py A``."""
    for i, word in enumerate(command):
        if _PYTHON.match(os.path.basename(word)):
            j = i + 1
            while j < len(command) and command[j].startswith("-") and command[j] != "-m":
                if command[j] == "-c":
                    raise UsageError("python -c CODE cannot be race-checked: write the code to a file")
                j += 2 if command[j] in _PY_VALUE_OPTIONS else 1
            if j >= len(command):
                raise UsageError(f"no program after {word!r} in the command: {shlex.join(command)}")
            return command[:j] + ["-m", RACE_MODULE] + command[j:]
    raise UsageError(f"no python in the command {shlex.join(command)!r}; e.g. -- oshrun -n 4 python prog.py")


def _launch(command: list[str], env: dict[str, str], quiet: bool = False, labelled: bool = False) -> int:
    """Run the command; its exit status. Our variables reach other nodes with -x where the launcher needs it.
    ``labelled``: what the PEs print is labelled and folded by PE as in the notebook (``[PE 0-1] text``)."""
    if labelled:
        env = dict(env, **{RACE_ENV["label"]: "1"})
    if os.path.basename(command[0]) in _X_LAUNCHERS:
        command = command[:1] + [x for name in RACE_ENV.values() if name in env for x in ("-x", name)] + command[1:]
    out = subprocess.PIPE if labelled else subprocess.DEVNULL if quiet else None
    try:
        process = subprocess.Popen(command, env=env, stdout=out, text=True, errors="replace")
    except FileNotFoundError:
        raise UsageError(f"{command[0]!r} was not found on PATH") from None
    with process, SharedMemoryOf(process):
        try:
            if process.stdout is not None:  # labelled: a pipe
                merge_marked(process.stdout, lambda text: print(text, end="", flush=True))
            return process.wait()
        except BaseException:  # Ctrl-C: nothing of the command is left running
            process.kill()
            raise


def _collect(directory: str) -> Reports:
    """``{pe: report}`` of the recordings the PEs wrote."""
    reports: Reports = {}
    for name in os.listdir(directory):
        if name.startswith("pe") and name.endswith(".pickle"):
            with open(os.path.join(directory, name), "rb") as f:
                report = pickle.load(f)
            reports[report["pe"]] = report
    return reports


# -- stress --------------------------------------------------------------------------------------
def differences(before: dict[int, str], after: dict[int, str]) -> list[str]:
    """The first differing printed line of each PE, folded by PE (as the notebook's --stress says it)."""
    return [d.text for d in _compared((before, {}), (after, {}))]


def _compared(before: Output, after: Output, races: Sequence[Race] = ()) -> list[Difference]:
    """The :class:`~shmem_notebook.cells.stress_stage.Difference` s between two runs, each ``(printed,
    values)``: what each PE printed (``{pe: text}``) and held at the end (``{pe: {name: ndarray}}``)."""
    npes = max([*before[1], *after[1], -1]) + 1
    first, rerun = (Run(printed, [held.get(pe, {}) for pe in range(npes)], "ok") for printed, held in (before, after))
    return compare(first, rerun, races, label="the run without delays")


def raced_memory(reports: Reports, races: Sequence[Race]) -> Ranges:
    """``{name: (lo, hi, dtype, layout)}``: where the arrays the races are about lie (from the recorded
    run's reports), for the stress reruns to report at their end; only those whose values the recorded
    run reported (none on OSHMPI)."""
    named = {race.array for race in races} & {name for r in reports.values() for name in r.get("values") or ()}
    return {
        name: where
        for report in sorted(reports.values(), key=lambda r: r["pe"])
        for name, where in (report.get("ranges") or {}).items()
        if name in named
    }


def _stress(
    pe_cmd: list[str],
    env: dict[str, str],
    seed: int,
    first: Output,
    write: Callable[[str], object],
    seconds: float = 0.0,
    races: Sequence[Race] = (),
    trace: str | None = None,
    command: Sequence[str] = (),
    memory: Ranges | None = None,
) -> None:
    """The reruns; ``first``: ``(printed, values)`` of the recorded run, ``memory``: the raced arrays'
    ranges, whose values each rerun reports at its end; ``trace``: the file the first rerun's timeline
    goes to (None: no rerun is traced)."""
    write(
        f"stress: rerunning the program {RUNS} times (seeds {seed}-{seed + RUNS - 1}) with random delays of up "
        f"to {MAX_DELAY * 1e3:.0f} ms around every shmem call: {estimate(RUNS, seconds)}; Ctrl-C stops them"
    )
    runs, stopped, began = [], None, time.monotonic()
    same, env = (
        ("output and raced memory", dict(env, **{RACE_ENV["memory"]: json.dumps(memory)}))
        if memory
        else ("output", env)
    )
    for run in range(RUNS):
        started = time.monotonic()
        try:
            ctrl_c.check()
            with tempfile.TemporaryDirectory(prefix="shmem-race-") as directory:
                run_env = dict(env, **{RACE_ENV["dir"]: directory, RACE_ENV["stress"]: f"{seed + run}:{MAX_DELAY}"})
                if trace is not None and not run:
                    run_env[RACE_ENV["trace"]] = "1"
                status = _launch(pe_cmd, run_env, quiet=True)
                reports = _collect(directory)
                rerun = (
                    {pe: r["stdout"] for pe, r in reports.items()},
                    {pe: r.get("values") or {} for pe, r in reports.items()},
                )
        except KeyboardInterrupt:
            stopped = (
                f"interrupted during the rerun with seed {seed + run}: the reruns after it were not run and it "
                "is not counted"
            )
            break
        if trace is not None and not run:
            npes = max([r.get("npes", 0) for r in reports.values()] + [0])
            what = f"the first stress rerun (seed {seed})"
            save_timeline(reports, numbered(reports), npes, trace, command, lambda text: write(f"stress: {text}"), what)
        found = _compared(first, rerun, races)
        if status != 0:
            found.insert(0, Difference(f"the program exited with status {status}", (), "exited differently"))
        runs.append((seed + run, found))
        done = time.monotonic()
        left = f", about {(done - began) / (run + 1) * (RUNS - run - 1):.1f} s left" if run + 1 < RUNS else ""
        write(
            f"  seed {seed + run} (rerun {run + 1} of {RUNS}, {done - started:.1f} s{left}): "
            f"{'; '.join(d.text for d in found) or f'same {same} as the run without delays'}"
        )
    for line in summary(
        runs, races, stopped, memory=bool(memory) or not races, same=f"the {same} of the run without delays"
    ):
        write(f"stress: {line}")


# -- the command ---------------------------------------------------------------------------------
def main(argv: Sequence[str] | None = None) -> int:
    """Run the command with the race recorder; the exit status (see the module's docstring)."""
    argv = list(sys.argv[1:] if argv is None else argv)
    try:
        if "--" not in argv:
            if any(a in ("-h", "--help") for a in argv):
                _parser().print_help()
                return 0
            raise UsageError("the command to run comes after --")
        split = argv.index("--")
        options = _parser().parse_args(argv[:split])
        command = argv[split + 1 :]
        if not command:
            raise UsageError("no command after --")
        if options.trace is not None and not options.trace.lower().endswith((".json", ".otf2")):
            raise UsageError(f"--trace writes *.json (Perfetto) or *.otf2, got {options.trace!r}")
        if options.cap < 1:
            raise UsageError(f"--cap must be a positive number of events, got {options.cap}")
        pe_cmd = pe_command(command)
    except UsageError as exc:
        print(f"shmem_notebook.race: {exc}\nusage: {USAGE}", file=sys.stderr)
        return 2
    env = dict(os.environ)
    env.update({k: v for k, v in platform_environment(environ=os.environ).items() if k not in os.environ})
    native_record.build()  # the recording's hot path in C, as a notebook job's start builds it (once per user)
    with tempfile.TemporaryDirectory(prefix="shmem-race-") as directory:
        env_run = dict(env, **{RACE_ENV["dir"]: directory, RACE_ENV["cap"]: str(options.cap)})
        if options.trace is not None and options.stress is None:  # with --stress: the first rerun's
            env_run[RACE_ENV["trace"]] = "1"
        started = time.monotonic()
        try:
            status = _launch(pe_cmd, env_run, labelled=True)
        except UsageError as exc:
            print(f"shmem_notebook.race: {exc}", file=sys.stderr)
            return 2
        reports = _collect(directory)
    seconds = time.monotonic() - started
    sys.stdout.flush()
    races, files, traces, npes = analyse(reports)
    report(races, files, traces, npes, status={pe: r.get("status", 0) for pe, r in reports.items()})
    if options.trace is not None and options.stress is None:
        save_timeline(reports, files, npes, options.trace, command, races=races)
    failed = status != 0 or not traces or len(traces) < npes
    if status != 0:
        print(f"the program exited with status {status}")
    if options.stress is not None and not failed:
        memory = raced_memory(reports, races)
        printed = {pe: r["stdout"] for pe, r in reports.items()}
        held = {pe: {n: v for n, v in (r.get("values") or {}).items() if n in memory} for pe, r in reports.items()}
        with ctrl_c.watching():  # a Ctrl-C that a finalizer dropped still ends the reruns
            _stress(pe_cmd, env, options.stress, (printed, held), print, seconds, races, options.trace, command, memory)
    elif options.stress is not None and options.trace is not None:
        print(f"trace: not written to {options.trace}: the program failed, so it was not rerun under --stress")
    if races:
        return 1
    return 3 if failed else 0


def console() -> None:
    """The ``shmem-race`` console script."""
    sys.exit(main())


if __name__ == "__main__":
    console()
