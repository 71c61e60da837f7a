"""Running one conformance program on a job and judging what came back (client side).

:func:`run_once` runs a :class:`~conformance.programs.Program` as one race-checked cell
(``job.run(code, race=True)``) and brings back every PE's ``result`` (``job.pull``), the errors the
PEs raised, whether the cell hung or a PE died (the job is restarted then, so the next program
finds it running), and the races the check reported. :func:`problems` compares a program's runs
with what it expects on a library: the values on every PE, or the refusal the tool makes there,
and no race unless the program names it. Any repetition that differs is a problem.
"""

import contextlib
import io
import os
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from shmem_notebook import CellStoppedError, PEDiedError, PEError

__all__ = ["Run", "TIMEOUT", "run_once", "judge", "problems", "plain", "tally"]

#: seconds a program's cell may take before it counts as a hang (its cell ending is the event
#: waited for; a correct program takes well under a second, a few under load)
TIMEOUT = float(os.environ.get("SHMEM_NOTEBOOK_CONFORMANCE_TIMEOUT", "60"))


@dataclass
class Run:
    """One repetition of a program: what each PE left in ``result``, or what went wrong."""

    values: dict[int, Any] = field(default_factory=dict)  # PE -> result (plain Python)
    errors: dict[int, str] = field(default_factory=dict)  # PE -> "ErrorName: message"
    outcome: str = "ok"  # ok, error, hang, died
    races: list[str] = field(default_factory=list)
    seconds: float = 0.0


def plain(value):
    """``value`` as plain Python (NumPy arrays and scalars to lists and numbers, tuples to lists)."""
    if isinstance(value, np.ndarray):
        return plain(value.tolist())
    if isinstance(value, np.generic):
        return value.item()
    if isinstance(value, (list, tuple)):
        return [plain(v) for v in value]
    if isinstance(value, dict):
        return {k: plain(v) for k, v in value.items()}
    return value


def run_once(job, program, timeout=TIMEOUT):
    """Run ``program`` once on ``job`` (collective) as a race-checked cell; a :class:`Run`.
    Declared arrays the program makes are freed afterwards; a hung or dead job is restarted."""
    run = Run()
    try:
        if program.alloc:
            job.alloc(program.alloc)
        out = io.StringIO()
        result = job.run(
            program.code, arrays=program.arrays or None, race=True, timeout=timeout, stdout=out, stderr=out
        )
        run.races = [str(race) for race in result.races]
        run.seconds = result.seconds
        run.values = {pe: plain(v) for pe, v in job.pull("result", stack=False).items()}
    except PEError:
        result = job.last_result
        run.outcome, run.seconds = "error", result.seconds
        run.errors = {pe: f"{name}: {value}".strip() for pe, (name, value, _) in result.errors.items()}
    except CellStoppedError as exc:
        if getattr(job.last_result, "outcome", None) == "interrupted":
            raise KeyboardInterrupt from exc  # Ctrl-C: the run stops, not this program alone
        run.outcome, run.errors = "hang", {-1: str(exc).splitlines()[0]}
    except PEDiedError as exc:
        run.outcome, run.errors = "died", {-1: str(exc).splitlines()[0]}
    # not in a finally: after Ctrl-C (a KeyboardInterrupt from anywhere here, also between two requests)
    # the run ends and the job's stop cleans up; freeing on a job interrupted mid-request could raise
    # an error of its own in place of the interrupt
    if job.state != "running":
        job.restart()
    with contextlib.redirect_stderr(io.StringIO()):  # names the cells kept of the old arrays
        for name in {*names(program.alloc), *names(program.arrays)} & set(job.specs):
            job.free(name)
    return run


def names(declarations):
    """The array names in declarations like ``"A=int64[4] B=int32[npes]"``."""
    return [d.split("=", 1)[0] for d in declarations.split()]


def judge(program, library, npes, run):
    """What is wrong with one run: ``[(kind, text)]``, kind ``wrong`` (values, or an error where the
    program expects values, or no refusal where it expects one), ``hang`` (or a PE died) or ``race``."""
    if run.outcome in ("hang", "died"):
        return [("hang", f"{run.outcome}: {run.errors.get(-1, '')}")]
    refusal = program.refused.get(library)
    if refusal is not None:
        # every PE that made the call raised the refusal (a team's outsiders may not make it)
        names = {text.split(":", 1)[0] for text in run.errors.values()}
        if run.outcome != "error" or names != {refusal}:
            got = first_error(run) if run.errors else f"values {run.values}"
            return [("wrong", f"expected the tool's {refusal} on every PE, got {got}")]
        return []
    if run.outcome == "error":
        return [("wrong", f"raised {first_error(run)}")]
    found = []
    want = {pe: plain(program.expected(pe, npes)) for pe in range(npes)}
    wrong = {pe: run.values.get(pe) for pe in want if run.values.get(pe) != want[pe]}
    if wrong:
        expected = {pe: want[pe] for pe in wrong}
        found.append(("wrong", f"wrong values on PE {sorted(wrong)}: got {wrong}, expected {expected}"))
    unexpected = [race for race in run.races if not any(name in race for name in program.races)]
    missing = [name for name in program.races if not any(name in race for race in run.races)]
    if unexpected or missing:
        found.append(("race", f"races reported: {unexpected or 'none'}; expected: {list(program.races) or 'none'}"))
    return found


def problems(program, library, npes, runs):
    """What is wrong with ``runs`` of ``program`` on ``library`` at ``npes`` PEs: one line per
    problem of a repetition (empty when every repetition is right)."""
    return [
        f"{program.name} on {library} at {npes} PEs, run {k}/{len(runs)}: {text}"
        for k, run in enumerate(runs, 1)
        for _, text in judge(program, library, npes, run)
    ]


def first_error(run):
    """The first PE's error, and which PEs raised."""
    pes = sorted(run.errors)
    text = run.errors[pes[0]].splitlines()[0][:300]
    return f"{text} (on PE {', '.join(map(str, pes))})"


def tally(program, library, npes, runs):
    """One row of the table: runs, wrong values (or a refusal missing), hangs, race reports."""
    kinds = [{kind for kind, _ in judge(program, library, npes, run)} for run in runs]
    return {
        "program": program.name,
        "area": program.area,
        "library": library,
        "npes": npes,
        "runs": len(runs),
        "wrong": sum("wrong" in k for k in kinds),
        "hangs": sum("hang" in k for k in kinds),
        "races": sum("race" in k for k in kinds),
        "refused": program.refused.get(library),
        "problems": problems(program, library, npes, runs)[:3],
        "seconds": round(sum(run.seconds for run in runs), 3),
    }
