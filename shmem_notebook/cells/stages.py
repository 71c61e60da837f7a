"""Optional stages of the cell path, switched on per cell by name.

``job.run(code, race=True)`` runs the stage registered as ``"race"``; with no
option given no stage runs and the cell path does no extra work. A stage is a
class with three hooks, all on the client:

- :meth:`Stage.before`: before dispatch; may rewrite ``cell.code`` or add requests
  the PEs answer right before and after the cell (``cell.before_requests``,
  ``cell.after_requests``: e.g. to start and stop recording); they ride with the cell.
- :meth:`Stage.after`: once every PE finished or stopped; reads back what the
  PEs recorded (``cell.request.answers(op)``) and stores it on the
  :class:`~shmem_notebook.cells.CellResult`.
- :meth:`Stage.report`: shows what the stage found, after the cell's output and
  before an error of the cell is raised.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Any, TypeVar

from ..errors import InputError

if TYPE_CHECKING:
    from .path import Cell
    from .result import CellResult

__all__ = ["Stage", "STAGES", "register", "stages_for"]

#: stage name -> Stage subclass
STAGES: dict[str, type[Stage]] = {}


class Stage:
    """One optional step of the cell path; ``option`` is the value given (``True``, a seed, ...)."""

    name: str | None = None
    #: stages run in this order whatever the order of the options (a stage that reruns the
    #: cell, such as ``stress``, comes after those that collect what the cell did)
    order = 50

    def __init__(self, option: Any = True) -> None:
        self.option = option

    def before(self, cell: Cell) -> None:
        """Client, before the cell is sent to the PEs."""

    def after(self, cell: Cell, result: CellResult) -> None:
        """Client, after every PE finished or stopped (also when the cell raised)."""

    def report(self, cell: Cell, result: CellResult, write: Callable[[str], object]) -> None:
        """Client: show what this stage found."""


S = TypeVar("S", bound=type[Stage])


def register(stage_class: S) -> S:
    """Class decorator: make ``stage_class`` available as ``job.run(code, <name>=...)``."""
    if not isinstance(stage_class.name, str) or not stage_class.name.isidentifier():
        raise TypeError(f"{stage_class.__name__}.name must be an identifier, got {stage_class.name!r}")
    STAGES[stage_class.name] = stage_class
    return stage_class


def stages_for(options: Mapping[str, Any]) -> list[Stage]:
    """Stage instances for ``{name: option}`` in their :attr:`Stage.order`, skipping options that are off
    (False/None)."""
    unknown = sorted(set(options) - set(STAGES))
    if unknown:
        known = ", ".join(sorted(STAGES)) or "none"
        raise InputError(f"unknown cell option {unknown[0]!r}; the options are: {known}")
    chosen = [STAGES[name](value) for name, value in options.items() if value not in (None, False)]
    return sorted(chosen, key=lambda stage: stage.order)
