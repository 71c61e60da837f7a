"""What one cell did on every PE; what its stages found is in ``stages``, by stage name."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from ..analysis.happens_before import Race
    from ..trace.cell_trace import Trace

__all__ = ["CellResult", "fixes_of"]


@dataclass
class CellResult:
    """What one cell did on every PE."""

    stdout: dict[int, str] = field(default_factory=dict)  # PE -> text
    stderr: dict[int, str] = field(default_factory=dict)
    results: dict[int, str] = field(default_factory=dict)  # PE -> text/plain of the last expression
    errors: dict[int, tuple[str, str, str]] = field(default_factory=dict)  # PE -> (ename, evalue, traceback)
    # PE -> [{"data": MIME bundle, "metadata": ...}] (display(), plt.show())
    displays: dict[int, list[dict[str, Any]]] = field(default_factory=dict)
    result_data: dict[int, dict[str, Any]] = field(default_factory=dict)  # PE -> MIME bundle of a rich last expression
    seconds: float = 0.0
    pending: list[int] = field(default_factory=list)  # PEs that had not finished (timeout, interrupt, death)
    # ok, error, timeout, interrupted, died, stranded (PEs wait for others that raised), deadlock (for each other)
    outcome: str = "ok"
    # PE -> (line, call): waited for PEs that raised (see cells.stranded), or for each other (cells.deadlock)
    waiting: dict[int, Any] = field(default_factory=dict)
    stages: dict[str, Any] = field(default_factory=dict)  # stage name -> what it found (see cells.stages)
    code: str | None = None  # the cell as run, kept by the race stage (its races' lines are its lines)

    @property
    def races(self) -> list[Race]:
        """``stages["race"]``: the :class:`~shmem_notebook.Race` s found (``[]`` when the race stage did not run)."""
        races: list[Race] = self.stages.get("race", [])
        return races

    @races.setter
    def races(self, races: list[Race]) -> None:
        self.stages["race"] = races

    @property
    def trace(self) -> Trace | None:
        """``stages["trace"]``: the :class:`~shmem_notebook.trace.cell_trace.Trace` of a traced cell, or None."""
        trace: Trace | None = self.stages.get("trace")
        return trace

    @trace.setter
    def trace(self, trace: Trace | None) -> None:
        self.stages["trace"] = trace

    @property
    def fixed_code(self) -> str | None:
        """The cell with the fix of every race of it applied (each fix checked on the trace before it
        was offered; see :func:`~shmem_notebook.analysis.edits.apply_fixes`), or None when there is
        nothing to apply: the cell was not race-checked, found no race, or no race's fix is an edit."""
        from ..analysis.edits import apply_fixes

        fixes = fixes_of(self.races)
        if self.code is None or not fixes:
            return None
        fixed: str = apply_fixes(self.code, fixes)[0]
        return fixed


def fixes_of(races: list[Race]) -> list[Any]:
    """The fixes of ``races`` that are edits of this cell (a race with a line in another cell is not its to
    fix), each once, in report order."""
    fixes: list[Any] = []
    for race in races:
        if race.fix is not None and not any(a.cell for a in race.accesses) and race.fix not in fixes:
            fixes.append(race.fix)
    return fixes
