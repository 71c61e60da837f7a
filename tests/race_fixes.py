"""Each race's fix, applied alone to the cell and rerun on real PEs: the race must be gone.

Shared by the catalogue's fix test (test_races.py), the notebooks' ``--race`` cells and the
programs of test_race_hints.py. A race is the same race after a fix when it names the same array
and two lines of the same text (a fix inserts lines, so the numbers move). A race whose ``fix``
is None must say in its hint what to change.
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


def _key(race, code):
    lines = code.splitlines()
    return race.array, frozenset(lines[a.line - 1].strip() for a in race.accesses)


def check_each_fix(job, code, arrays, reset, timeout=60):
    """``(races, problems)``: the races of ``code``; for each, its fix applied alone and the cell rerun,
    a line in ``problems`` when the race is still there, the fixed cell fails, or a race without a fix
    does not say what to change."""
    races = run_checked(job, code, arrays, reset, timeout).races
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
        if _key(race, code) in {_key(r, fixed) for r in again}:
            problems.append(f"{race}\n    fix ({race.fix}) leaves it:\n{fixed}")
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
