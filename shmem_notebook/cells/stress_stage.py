"""The ``stress`` stage: ``%%pxshmem --race --stress [SEED]`` / ``job.run(code, race=True, stress=SEED)``.

After the cell, it reruns it :data:`RUNS` times with seeded random delays before and after every
shmem call (:mod:`shmem_notebook.engine.record.perturb`), each rerun starting from the declared
arrays as they were before the cell; the same seed gives the same delays. It first says how long
the reruns should take (from the cell's own time), then a line per rerun as soon as it ended,
saying what differs from the cell (printed lines, outcome, elements with both values).

A race is called real only when a rerun changed the memory it is about: the race's array on its
PE, at its elements (:attr:`Race.array`, :attr:`Race.pe`/``pes``, :attr:`Race.indices`). Printed
output, the outcome and other elements may differ by timing alone: they are listed, as what a
racy read on that PE may explain or as what no race found explains, never as proof. Ctrl-C ends
every rerun at once and is not a result. The reruns go through the cell path
(:func:`~shmem_notebook.cells.path.rerun`) with the seed's requests riding with them; they are not
the user's cells: ``job.last_result``, the history and the cell callbacks see only the cell itself.
Afterwards the declared arrays hold what the cell itself left (variables that are not declared
arrays keep what the last rerun left). What it found is ``result.stages["stress"]`` (:class:`Stressed`);
with ``trace=True`` / ``--trace`` the first rerun is traced too (``.trace``, ``%shmem trace save PATH --stress``).
"""

from __future__ import annotations

import argparse
import io
import random
import time
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, cast

import numpy as np

from ..analysis.happens_before import format_indices
from ..errors import InputError, ShmemNotebookError
from ..folding import fold, pe_ranges
from ..stage_registry import DECLARED
from ..words import plural
from . import ctrl_c
from .path import rerun as rerun_cell
from .stages import Stage, register

if TYPE_CHECKING:
    from collections.abc import Callable, Collection, Iterable, Mapping, Sequence

    import numpy.typing as npt

    from ..analysis.happens_before import Race
    from ..trace.cell_trace import Trace
    from .path import Cell
    from .result import CellResult
    from .surface import SentCell

__all__ = [
    "StressStage",
    "Stressed",
    "seed",
    "RUNS",
    "MAX_DELAY",
    "Run",
    "Difference",
    "compare",
    "summary",
    "estimate",
]

#: its requests (:mod:`shmem_notebook.stage_registry`)
STRESS_START, STRESS_STOP, STRESS_SAVE, STRESS_RESTORE, DECLARED_VALUES = DECLARED["stress"].requests
TRACE_START, TRACE_STOP = DECLARED["trace"].requests

#: reruns after the cell itself
RUNS = 4
#: longest delay before or after a shmem call, seconds
MAX_DELAY = 0.02


@dataclass
class Run:
    """What one run of the cell left: what each PE printed (``{pe: text}``), the compared arrays
    (``[{name: ndarray}]`` in PE order) and how it ended (``CellResult.outcome``)."""

    stdout: dict[int, str]
    values: list[dict[str, npt.NDArray[Any]]]
    outcome: str


@dataclass(frozen=True)
class Difference:
    """One thing a rerun changed: ``text`` as the rerun's line shows it, the ``pes`` it is on (``()``:
    the whole cell), ``what`` for the summary, and ``races``: the races whose memory it is."""

    text: str
    pes: tuple[int, ...]
    what: str
    races: tuple[Race, ...] = ()


@dataclass
class Stressed:
    """What the stress stage found (``result.stages["stress"]``): its first ``seed``, the ``runs`` (``[(seed,
    [Difference])]``), why it stopped early (``stopped``, or None) and, for a cell also traced (``trace=True``
    / ``--trace``), the :class:`~shmem_notebook.trace.cell_trace.Trace` of its first rerun (``trace``; else None)."""

    seed: int
    runs: list[tuple[int, list[Difference]]]
    stopped: str | None = None
    trace: object = None


def seed(text: str) -> int:
    """``--stress SEED``'s text as an integer (argparse ``type``)."""
    try:
        return int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"a stress seed is an integer, got {text!r}") from None


@register
class StressStage(Stage):
    """Rerun the cell with seeded random delays around shmem calls; a race is real when a rerun changes its memory."""

    name = "stress"
    export_note = (
        "--stress: the reruns with random delays are the notebook's (`python -m shmem_notebook.race --stress "
        "SEED -- ...` does them for a program)"
    )
    order = 90  # last: its reruns come after every other stage has collected the cell
    flag = {
        "nargs": "?",
        "type": seed,
        "const": True,
        "default": None,
        "metavar": "SEED",
        "help": "with --race: rerun the cell with seeded random delays around shmem calls",
    }
    needs = ("race",)  # --stress says which races are real: the magic race-checks the cell too
    runs: list[tuple[int, list[Difference]]]
    stopped: str | None
    trace: Trace | None
    traced: bool

    def __init__(self, option: Any = True) -> None:
        if option is not True and (isinstance(option, bool) or not isinstance(option, int)):
            raise InputError(
                f"stress takes True or an integer seed, got {option!r}; e.g. job.run(code, race=True, stress=3)"
            )
        super().__init__(option)

    def before(self, cell: Cell) -> None:
        self.seed: int = self.option if self.option is not True else random.randrange(1000)
        self.runs, self.stopped, self.trace = [], None, None
        self.traced = any(stage.name == "trace" for stage in cell.stages)  # then its first rerun is traced too

    def requests(self, cell: Cell) -> tuple[list[tuple[str, tuple[Any, ...]]], list[tuple[str, tuple[Any, ...]]]]:
        return [(STRESS_SAVE, ("before",))], []  # the declared arrays as they are before the cell

    def after(self, cell: Cell, result: CellResult) -> None:
        try:
            self._after(cell, result)
        finally:
            result.stages[self.name] = Stressed(self.seed, self.runs, self.stopped, self.trace)

    def _after(self, cell: Cell, result: CellResult) -> None:
        job = cell.job
        if result.outcome not in ("ok", "error"):
            self.stopped = f"the cell ended {result.outcome!r}, so it was not rerun"
            return
        names = sorted({race.array for race in result.races})
        mine = Run(dict(result.stdout), _values(job.ask(DECLARED_VALUES, names)), result.outcome)
        job.ask(STRESS_SAVE, "after")
        try:
            self._rerun(cell, result, mine, names)
        finally:
            if job.state == "running":
                job.ask(STRESS_RESTORE, "after")  # the declared arrays as the cell left them

    def _rerun(self, cell: Cell, result: CellResult, mine: Run, names: list[str]) -> None:
        job, write = cell.job, cell.write_out
        write(
            f"stress: rerunning the cell {RUNS} times (seeds {self.seed}-{self.seed + RUNS - 1}) with random delays "
            f"of up to {MAX_DELAY * 1e3:.0f} ms around every shmem call, each from the arrays as they were before it: "
            f"{estimate(RUNS, result.seconds)}; Ctrl-C stops them\n"
        )
        started = time.monotonic()
        for run in range(RUNS):
            seed, began = self.seed + run, time.monotonic()
            try:
                ctrl_c.check()
                outcome, rerun = self._one(cell, seed, traced=self.traced and not run)
                values = _values(job.ask(DECLARED_VALUES, names)) if job.state == "running" else []
            except KeyboardInterrupt:  # between the requests; during the rerun it is its outcome
                outcome = "interrupted"
            if outcome == "interrupted":
                self.stopped = (
                    f"interrupted during the rerun with seed {seed}: the reruns after it were not run and "
                    "it is not counted"
                )
                if job.state != "running":  # the rerun's own message went to no one: say it here
                    self.stopped += f"; PEs that could not be interrupted left the job {job.state}: {job.RESTART_HINT}"
                return
            stdout = rerun.stdout if rerun is not None else {}
            found = compare(mine, Run(stdout, values, outcome), result.races)
            self.runs.append((seed, found))
            done = time.monotonic()
            left = (done - started) / (run + 1) * (RUNS - run - 1)
            what = "; ".join(d.text for d in found) or "same output and arrays as the cell"
            write(
                f"  seed {seed} (rerun {run + 1} of {RUNS}, {done - began:.1f} s"
                f"{f', about {_seconds(left)} left' if run + 1 < RUNS else ''}): {what}\n"
            )
            if job.state != "running":
                self.stopped = f"the rerun with seed {seed} left the job {job.state}; the reruns after it were not run"
                return

    def _one(self, cell: Cell, seed: int, traced: bool = False) -> tuple[str, CellResult | None]:
        """Rerun the cell once with the delays of ``seed``, from the declared arrays as they were before
        it: ``(outcome, CellResult or None)``; "interrupted" when Ctrl-C stopped it. ``traced``: the trace
        stage's requests ride with it too and its trace is kept (``self.trace``)."""
        before = [(STRESS_RESTORE, ("before",)), (STRESS_START, (seed, MAX_DELAY))]
        after = [(STRESS_STOP, ())]
        if traced:
            before, after = before + [(TRACE_START, ())], after + [(TRACE_STOP, ())]
        try:
            sent, result, error = rerun_cell(cell, before, after, write=io.StringIO().write)
        except ShmemNotebookError as exc:  # the job could not take the rerun
            return str(exc).splitlines()[0], None
        cast("SentCell", sent.request).answers(STRESS_STOP)  # with rc.dispatch = "ipyparallel" the PEs are asked now
        if traced:
            from ..trace.stage import collect as collect_trace  # here: "trace" registers after "stress"

            self.trace = collect_trace(
                cell, cast("SentCell", sent.request), result, what=f"stress rerun with seed {seed}"
            )
        return ("ok" if error is None else result.outcome), result

    def report(self, cell: Cell, result: CellResult, write: Callable[[str], object]) -> None:
        checked = any(stage.name == "race" for stage in cell.stages)
        for line in summary(self.runs, result.races, self.stopped, race_checked=checked):
            write(f"stress: {line}\n")
        if self.trace is not None:
            write(
                f"stress: the first rerun's trace (seed {self.seed}): {plural(len(self.trace.events), 'call')} on "
                f"{plural(self.trace.npes, 'PE')}; `%shmem trace save PATH --stress` writes it\n"
            )


def summary(
    runs: list[tuple[int, list[Difference]]],
    races: Sequence[Race],
    stopped: str | None = None,
    memory: bool = True,
    race_checked: bool = True,
    same: str = "the cell's result",
) -> list[str]:
    """The stress verdict's lines: the races whose memory a rerun changed (real); the other differences,
    as what a race may explain (on a PE that made a racy read, or whose raced memory changed in that
    rerun) or what no race found explains; or that every rerun gave the cell's result.
    ``memory=False``: the runs compared printed output only (the command-line runner);
    ``race_checked=False``: the cell ran without the race check, so no race was looked for;
    ``same``: what a rerun that changed nothing gave."""
    lines = [stopped] if stopped else []
    if not runs:
        return lines
    real: dict[str, list[int]]
    explained: dict[str, tuple[dict[int, None], list[int]]]
    unexplained: dict[str, tuple[dict[int, None], list[int]]]
    real, explained, unexplained = {}, {}, {}
    readers = {pe for race in races for a in race.accesses if a.mode != "write" for pe in (a.pes or (a.pe,))}
    for seed, found in runs:
        raced = readers | {pe for d in found if d.races for pe in d.pes}  # where a race may have changed things
        for d in found:
            if d.races:
                for race in d.races:
                    real.setdefault(_named(race), []).append(seed)
                continue
            kind = explained if raced and (set(d.pes) <= raced if d.pes else True) else unexplained
            pes, seeds = kind.setdefault(d.what, ({}, []))
            pes.update(dict.fromkeys(d.pes))
            seeds.append(seed)
    for named, seeds in real.items():
        lines.append(
            f"{_seeds(seeds)} changed {named}, the memory of a race above: the race is real, not just possible"
        )
    for what, (pes, seeds) in explained.items():
        lines.append(
            f"{_on(pes, what)} ({_seeds(seeds)}); a race above may explain it (such a difference alone "
            "does not make a race real)"
        )
    for what, (pes, seeds) in unexplained.items():
        why = "no race found explains it" if race_checked else "the cell was not race-checked (add --race)"
        lines.append(f"{_on(pes, what)} ({_seeds(seeds)}); {why}")
    if races and not memory:
        lines.append("only printed output was compared, not memory, so no race is shown to be real")
    elif not real and races:
        lines.append(
            "no rerun changed the memory a race above is about (a race above is still a race: it may need "
            "other timings to show)"
        )
    elif not real and not explained and not unexplained:
        lines.append(f"every rerun gave {same}")
    return lines


def estimate(runs: int, seconds: float) -> str:
    """How long ``runs`` reruns of a run of ``seconds`` take, in words."""
    return (
        f"{runs} x the first run's {_seconds(seconds)} = {_seconds(runs * seconds)}, plus about "
        f"{MAX_DELAY * 1e3 / 2:.0f} ms per shmem call each rerun makes"
    )


def _named(race: Race) -> str:
    """``remote[0] on PE 1``."""
    return f"{race.array}{format_indices(race.indices, race.shape)} on PE {pe_ranges(race.pes or (race.pe,))}"


def _on(pes: Collection[int], what: str) -> str:
    return f"PE {pe_ranges(sorted(pes))} {what}" if pes else f"the cell {what}"


def _seeds(seeds: Iterable[int]) -> str:
    seeds = sorted(set(seeds))
    return f"{plural(len(seeds), 'seed', number=False)} {', '.join(map(str, seeds))}"


def _seconds(seconds: float) -> str:
    return f"{seconds:.0f} s" if seconds >= 10 else f"{seconds:.1f} s" if seconds >= 1 else f"{seconds:.2f} s"


def _values(per_pe: Mapping[int, Mapping[str, Any]]) -> list[dict[str, npt.NDArray[Any]]]:
    """``[{name: ndarray}]`` in PE order from the PEs' ``declared_values`` answers (``{pe: values}``)."""
    return [{name: np.asarray(v) for name, v in values.items()} for _, values in sorted(per_pe.items())]


def _short(value: object) -> str:
    return f"{value:.6g}" if isinstance(value, float) else str(value)


def _where(array: npt.NDArray[Any], index: int) -> str:
    return "[" + ", ".join(map(str, np.unravel_index(index, array.shape))) + "]"


def _elements(
    name: str, a: npt.NDArray[Any], b: npt.NDArray[Any], indices: npt.NDArray[np.intp], label: str = "the cell"
) -> str:
    """``A[3] = 1002 (the cell: 1001)`` for up to three of ``indices``, and how many more."""
    shown = ", ".join(
        f"{name}{_where(a, i)} = {_short(b.flat[i].item())} ({label}: {_short(a.flat[i].item())})" for i in indices[:3]
    )
    return shown + (f" and {indices.size - 3} more of {a.size}" if indices.size > 3 else "")


def _race_elements(races: Iterable[Race], pe: int, name: str, size: int) -> list[tuple[Race, npt.NDArray[np.int64]]]:
    """``[(race, flat indices)]`` of the races about ``name`` on ``pe``."""
    found: list[tuple[Race, npt.NDArray[np.int64]]] = []
    for race in races:
        if race.array == name and pe in (race.pes or (race.pe,)):
            flat = np.concatenate(
                [np.arange(r.start, min(r.stop, size), r.step) for r in race.indices]
                or cast("list[npt.ArrayLike]", [[]])
            )
            found.append((race, flat.astype(np.int64)))
    return found


def compare(cell: Run, rerun: Run, races: Sequence[Race] = (), label: str = "the cell") -> list[Difference]:
    """What ``rerun`` (a :class:`Run`) changed against ``cell`` (called ``label``), as :class:`Difference` s:
    the outcome, the first differing printed line of each PE (folded by PE), the differing elements of
    each array (those a race of ``races`` is about apart, with that race)."""
    found = (
        []
        if cell.outcome == rerun.outcome
        else [Difference(f"the cell ended {rerun.outcome!r} ({label}: {cell.outcome!r})", (), "ended differently")]
    )
    lines: dict[int, str] = {}
    a: list[str] | npt.NDArray[Any]
    b: list[str] | npt.NDArray[Any] | None
    for pe in sorted(set(cell.stdout) | set(rerun.stdout)):
        a, b = (cell.stdout.get(pe) or "").splitlines(), (rerun.stdout.get(pe) or "").splitlines()
        first = next((i for i, (x, y) in enumerate(zip(a + [None] * len(b), b + [None] * len(a))) if x != y), None)
        if first is not None:
            here = b[first] if first < len(b) else "nothing"
            there = a[first] if first < len(a) else "nothing"
            lines[pe] = f"printed {here!r} ({label}: {there!r})"
    found += [
        Difference(f"PE {pe_ranges(pes)} {text}", tuple(pes), "printed something else")
        for text, pes in fold(lines).items()
    ]
    for pe, (v0, v1) in enumerate(zip(cell.values, rerun.values)):
        for name in v0:
            a, b = v0[name], v1.get(name)
            if b is None or a.shape != b.shape:
                continue
            same = a == b
            if a.dtype.kind in "fc":
                same |= np.isnan(a) & np.isnan(b)  # NaN equals NaN here
            diff = np.flatnonzero(~same)
            if not diff.size:
                continue
            covering = [(race, diff[np.isin(diff, flat)]) for race, flat in _race_elements(races, pe, name, a.size)]
            covering = [(race, hit) for race, hit in covering if hit.size]
            raced = np.unique(np.concatenate([hit for _, hit in covering])) if covering else diff[:0]
            if raced.size:
                found.append(
                    Difference(
                        f"PE {pe}: {_elements(name, a, b, raced, label)}",
                        (pe,),
                        f"changed {name}",
                        tuple(race for race, _ in covering),
                    )
                )
            rest = diff[~np.isin(diff, raced)]
            if rest.size:
                found.append(
                    Difference(f"PE {pe}: {_elements(name, a, b, rest, label)}", (pe,), f"left other values in {name}")
                )
    return found
