"""Each race's fix, applied alone to the cell and rerun on real PEs: the race must be gone.

Shared by the catalogue's fix test (test_races.py), the notebooks' ``--race`` cells and the
programs of test_race_hints.py. A race is the same race after a fix when it names the same array,
two lines of the same text (a fix inserts lines, so the numbers move) and PEs in common, unless
it is another race of the first run on those lines (other pairs of PEs, another hint). A race whose
``fix`` is None must say in its hint what to change.
"""

import io
import re

import shmem_notebook
from shmem_notebook import PEError
from shmem_notebook.analysis.hints import apply_fix

__all__ = ["run_checked", "check_each_fix", "says_what_to_change", "notebook_race_cells"]

#: a hint without a fix says what to change: it tells the user to do something
_CHANGE = re.compile(r"\b(use|give|make|call|hold|reset|do the|let one|move|complete|separate|wait)\b")


def says_what_to_change(hint):
    return bool(_CHANGE.search(hint))


def run_checked(job, code, arrays, reset, timeout=60):
    """``job.run(code, race=True)`` after ``reset`` (untraced), printing nothing."""
    job.run(reset, arrays=arrays, stdout=io.StringIO(), timeout=timeout)
    return job.run(code, race=True, arrays=arrays, stdout=io.StringIO(), stderr=io.StringIO(), timeout=timeout)


def _sides(race, code):
    lines = code.splitlines()
    return [(lines[a.line - 1].strip(), set(a.pes or (a.pe,))) for a in race.accesses]


def _same(race, code, other, other_code):
    """Do ``race`` (of ``code``) and ``other`` (of ``other_code``) name the same array, lines and PEs?"""
    if race.array != other.array or not set(race.pes or (race.pe,)) & set(other.pes or (other.pe,)):
        return False
    (t1, p1), (t2, p2) = _sides(race, code)
    (u1, q1), (u2, q2) = _sides(other, other_code)
    return (t1 == u1 and t2 == u2 and p1 & q1 and p2 & q2) or (t1 == u2 and t2 == u1 and p1 & q2 and p2 & q1)


def _hint(race):
    return re.sub(r"\d+", "#", race.hint)


def _still_there(race, races, code, again, fixed):
    """The races of the rerun that are ``race``: the same memory, lines and PEs, and not another race of
    the first run on the same lines (its pairs of PEs with another hint) that is still there."""
    return [
        r
        for r in again
        if _same(race, code, r, fixed)
        and not any(o is not race and _same(o, code, r, fixed) and _hint(o) == _hint(r) for o in races)
    ]


def check_each_fix(job, code, arrays, reset, timeout=60):
    """``(races, problems)``: the races of ``code``; for each, its fix applied alone and the cell rerun,
    a line in ``problems`` when the race is still there, the fixed cell fails, or a race without a fix
    does not say what to change."""
    try:
        races = run_checked(job, code, arrays, reset, timeout).races
    except (PEError, shmem_notebook.CellStoppedError) as exc:
        if isinstance(exc, shmem_notebook.CellStoppedError):
            job.restart()
        return [], [f"the cell failed: {str(exc).splitlines()[0]}"]
    problems = []
    for race in races:
        if any(a.cell for a in race.accesses):
            continue  # a race across cells: not this cell's to fix
        if race.fix is None:
            if not says_what_to_change(race.hint):
                problems.append(f"no fix, and the hint does not say what to change: {race}")
            continue
        fixed = apply_fix(code, race.fix)
        try:
            again = run_checked(job, fixed, arrays, reset, timeout).races
        except (PEError, shmem_notebook.CellStoppedError) as exc:
            if isinstance(exc, shmem_notebook.CellStoppedError):
                job.restart()
            problems.append(f"{race}\n    fix ({race.fix}): the fixed cell failed: {str(exc).splitlines()[0]}")
            continue
        left = _still_there(race, races, code, again, fixed)
        if left:
            problems.append(f"{race}\n    fix ({race.fix}) leaves it: {left[0]}\n{fixed}")
    return races, problems


def notebook_race_cells(path):
    """``[(declarations, code)]`` of the ``%%pxshmem --race`` cells of the notebook at ``path``."""
    import json

    cells = []
    for cell in json.loads(path.read_text())["cells"]:
        source = "".join(cell["source"])
        first, _, body = source.partition("\n")
        if cell["cell_type"] == "code" and first.startswith("%%pxshmem") and "--race" in first.split():
            cells.append(([w for w in first.split()[1:] if "=" in w and not w.startswith("-")], body))
    return cells
