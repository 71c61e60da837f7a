"""Scoring labelled race cells (:class:`race_catalogue.Case`) on a running job: the runner shared by
``tests/test_races.py::test_catalogue`` and ``bench/race_heldout.py``.

A case is run with ``race=True`` after ``RESET``; a racy case is a true positive when a race names both
its marked lines, a race-free case a true negative when no race is reported at all; a case that must end
in an error (1.5 routines on a 1.4 library, contexts where none exist) is right when every PE's error is
that one. A hang is a wrong case (the job is restarted). A PE that dies of a signal in one of the library's
own threads (no Python frame: CI, twice in 4-PE catalogue jobs, on OSHMEM and on OSHMPI) is said as a warning
with its stacks, and the case run once more on a fresh job; a second such death, or one in Python code, fails.
"""

import io
import warnings

import shmem_notebook
from shmem_notebook import PEDiedError, PEError
from shmem_notebook.analysis.postmortem import NO_PYTHON_THREAD, crash_site, thread_stacks

__all__ = ["NO_CONTEXTS", "marked", "run_cases"]

#: libraries that create no contexts: their "contexts" cases end in UnsupportedError (OSHMPI: MPI has no endpoints)
NO_CONTEXTS = {"oshmpi"}


def marked(access):
    """The cell line a case's marker is on: the access's own line in a function of the cell, else its line."""
    return access.own_line if access.own_line is not None and access.own_file is None else access.line


def library_crash(error):
    """Whether ``error`` is a :class:`PEDiedError` whose every fatal signal struck a thread running no Python
    code (the OpenSHMEM library's own, or another C library's), by the stacks the PEs wrote as they died."""
    sites = [crash_site(dump) for dump in getattr(error, "dumps", {}).values()]
    return isinstance(error, PEDiedError) and bool(sites) and all((s or "").startswith(NO_PYTHON_THREAD) for s in sites)


def _run_case(job, case, arrays, reset, timeout):
    """``reset``, then ``case`` race-checked: its result. When a PE died in one of the library's own threads, a
    warning with its stacks, a fresh job and both once more (whose second such death is raised)."""
    for attempt in (1, 2):
        try:
            job.run(reset, arrays=arrays, stdout=io.StringIO(), timeout=timeout)
            return job.run(case.code, race=True, stdout=io.StringIO(), stderr=io.StringIO(), timeout=timeout)
        except PEDiedError as error:
            if attempt == 2 or not library_crash(error):
                raise
            stacks = "\n".join(f"-- PE {pe}:\n" + "\n".join(thread_stacks(d)) for pe, d in sorted(error.dumps.items()))
            warnings.warn(f"case {case.name!r}: {error} (run again on a fresh job)\n{stacks}", stacklevel=2)
            job.restart()
    raise AssertionError("unreachable")


def run_cases(job, cases, arrays, reset, spec="1.4", picture=None, timeout=60):
    """Run every case of ``cases`` that runs at ``job.n`` PEs (``arrays`` declared and zeroed by ``reset``
    before each); return (rows, scores): rows = (case, verdict, detail), verdict None for a pending case;
    scores = tp, fp, tn, fn, precision, recall, accuracy. ``spec``: the OpenSHMEM version of the job's
    library (1.5 cases end in UnsupportedError below 1.5); ``picture(race)`` is called on every race of a
    scored case."""
    tp = fp = tn = fn = 0
    rows = []
    for case in cases:
        if not case.runs_at(job.n):
            continue
        try:
            result = _run_case(job, case, arrays, reset, timeout)
            error = None
        except PEError as exc:
            result, error = exc.result, exc
            if job.state != "running":  # PEs stranded by the error (waiting for one that raised): a fresh job
                job.restart()
        except shmem_notebook.CellStoppedError as exc:  # a hang is a wrong case, not a stuck run
            rows.append((case, False, str(exc)))
            job.restart()
            continue
        expected = case.error_on(spec) or (
            "UnsupportedError"
            if (case.category == "contexts" and job.library.name in NO_CONTEXTS) or job.library.name in case.refused_on
            else None
        )
        if expected:
            ok = error is not None and all(e[0] == expected for e in error.errors.values())
            rows.append((case, ok, str(error)))
            continue
        if error is not None:  # an error no label expects is a wrong case: a missed race or a false alarm
            fn, fp = fn + case.race, fp + (not case.race)
            rows.append((case, False, f"unexpected error: {error}"))
            continue
        want = set(case.lines)
        named = [r for r in result.races if {marked(a) for a in r.accesses} == want]
        if case.pending:  # run, not scored; says when the verdict became right
            right = bool(named) if case.race else not result.races
            detail = "; ".join(map(str, result.races)) or "no race"
            rows.append((case, None, ("now right, score it: " if right else "") + detail))
            continue
        if picture is not None:
            for race in result.races:
                picture(race)
        if case.race:
            ok = bool(named)
            tp, fn = tp + ok, fn + (not ok)
        else:
            ok = not result.races
            tn, fp = tn + ok, fp + (not ok)
        rows.append((case, ok, "; ".join(map(str, result.races)) or "no race"))
    precision = tp / (tp + fp) if tp + fp else 1.0
    recall = tp / (tp + fn) if tp + fn else 1.0
    accuracy = (tp + tn) / (tp + tn + fp + fn) if tp + tn + fp + fn else 1.0
    scores = {"tp": tp, "fp": fp, "tn": tn, "fn": fn, "precision": precision, "recall": recall, "accuracy": accuracy}
    return rows, scores
