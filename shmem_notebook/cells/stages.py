"""Optional stages of the cell path, switched on per cell by name: plugins.

``job.run(code, race=True)`` runs the stage registered as ``"race"``; with no
option given no stage runs and the cell path does no extra work. The path and the
``%%pxshmem`` magic know only the registry (:data:`STAGES`): a new stage is one
module with a :func:`register`-ed :class:`Stage` subclass, which declares

- its flag (:attr:`Stage.flag`): ``%%pxshmem --<name>`` takes it, and its help shows it;
- its requests (:meth:`Stage.requests`): what the PEs answer right before and right
  after the cell (e.g. start and stop recording); they ride with the cell;
- its slot in the result: what it found goes to ``result.stages[name]``
  (:class:`~shmem_notebook.cells.CellResult`);
- its state on the job (:meth:`Stage.state`, :meth:`Stage.keep`, :meth:`Stage.reset`):
  what it keeps from one cell to the next, in ``job.stage_state[name]``;
- its ``%shmem <name>`` subcommand, if it has one (:attr:`Stage.command`, a :class:`Command`), and
  what its flag becomes in an exported program (:attr:`Stage.export_note`);

and has three hooks, all on the client: :meth:`Stage.before` (before dispatch; may
rewrite ``cell.code``), :meth:`Stage.after` (once every PE finished or stopped; reads
back the PEs' answers with ``cell.request.answers(op)``) and :meth:`Stage.report`
(after the cell's output, before an error of the cell is raised). A stage that runs the
cell again does so through the path (:func:`shmem_notebook.cells.path.rerun`).
"""

from __future__ import annotations

import argparse
from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Any, NamedTuple, TypeVar

from ..errors import InputError

if TYPE_CHECKING:
    from .path import Cell
    from .result import CellResult

__all__ = ["Stage", "Command", "STAGES", "register", "reserve_commands", "stages_for"]

#: stage name -> Stage subclass
STAGES: dict[str, type[Stage]] = {}

#: names no stage takes: ``job.run``'s own parameters (its other keywords are the stages' names)
RUN_PARAMETERS = ("code", "arrays", "timeout", "stdout", "stderr")

#: ``%shmem`` subcommands of the magic's own: no :attr:`Stage.command` takes one (:func:`reserve_commands`)
RESERVED_COMMANDS: set[str] = set()


class Command(NamedTuple):
    """A stage's ``%shmem <name>`` subcommand."""

    about: str  # what it does, in one line (its help)
    arguments: Callable[[argparse.ArgumentParser], object]  # adds its arguments to the parser
    run: Callable[[Any, argparse.Namespace], object]  # run(job, args); an InputError is the magic's usage error


class Stage:
    """One optional step of the cell path; ``option`` is the value given (``True``, a seed, ...)."""

    name: str | None = None
    #: stages run in this order whatever the order of the options (a stage that reruns the
    #: cell, such as ``stress``, comes after those that collect what the cell did)
    order = 50
    #: its ``%%pxshmem --<name>`` flag: keyword arguments of argparse's ``add_argument`` (``help``
    #: at least); None: no flag
    flag: dict[str, Any] | None = None
    #: for a flag with an optional value: what a bare ``--<name>`` stands for, so that the words
    #: after it are the cell's arrays and not its value
    bare: str | None = None
    #: the stages its flag switches on too (``--stress`` needs ``race``); ``job.run`` leaves them to the caller
    needs: tuple[str, ...] = ()
    #: its ``%shmem <name>`` subcommand, or None
    command: Command | None = None
    #: what its flag becomes in a program written from the notebook (``%shmem export``), one sentence
    export_note: str | None = None

    def __init__(self, option: Any = True) -> None:
        self.option = option

    def requests(self, cell: Cell) -> tuple[list[tuple[str, tuple[Any, ...]]], list[tuple[str, tuple[Any, ...]]]]:
        """The requests ``([(op, args)], [(op, args)])`` the PEs answer right before and right after
        the cell (asked after :meth:`before`); they ride with it."""
        return [], []

    def before(self, cell: Cell) -> None:
        """Client, before the cell is sent to the PEs."""

    def after(self, cell: Cell, result: CellResult) -> None:
        """Client, after every PE finished or stopped (also when the cell raised)."""

    def report(self, cell: Cell, result: CellResult, write: Callable[[str], object]) -> None:
        """Client: show what this stage found."""

    @classmethod
    def state(cls, job: Any) -> Any:
        """What this stage kept on ``job`` from earlier cells (None: nothing)."""
        return job.stage_state.get(cls.name)

    @classmethod
    def keep(cls, job: Any, value: Any) -> None:
        """Keep ``value`` on ``job`` for the next cells (None forgets)."""
        job.stage_state[cls.name] = value

    @classmethod
    def reset(cls, job: Any) -> None:
        """Forget what this stage kept on ``job``: the one place it is forgotten. Not collective."""
        job.stage_state.pop(cls.name, None)


S = TypeVar("S", bound=type[Stage])


def register(stage_class: S) -> S:
    """Class decorator: make ``stage_class`` available as ``job.run(code, <name>=...)``."""
    if not isinstance(stage_class.name, str) or not stage_class.name.isidentifier():
        raise TypeError(f"{stage_class.__name__}.name must be an identifier, got {stage_class.name!r}")
    if stage_class.flag is not None and "help" not in stage_class.flag:
        raise TypeError(f"{stage_class.__name__}.flag needs a help text: %%pxshmem --help shows it")
    if stage_class.name in RUN_PARAMETERS:
        raise TypeError(
            f"{stage_class.__name__}.name {stage_class.name!r} is a parameter of job.run, which the option would "
            "never reach: choose another name"
        )
    _refuse_taken({stage_class.name: stage_class}, RESERVED_COMMANDS)
    STAGES[stage_class.name] = stage_class
    return stage_class


def reserve_commands(names: tuple[str, ...]) -> None:
    """Keep the ``%shmem`` subcommands ``names`` (the magic's own) from stages: a stage with a
    :attr:`Stage.command` of one of these names is refused, whether registered before or after."""
    _refuse_taken(STAGES, set(names))
    RESERVED_COMMANDS.update(names)


def _refuse_taken(stages: Mapping[str, type[Stage]], reserved: set[str]) -> None:
    for name, stage in stages.items():
        if stage.command is not None and name in reserved:
            raise TypeError(
                f"{stage.__name__}.command would replace %shmem {name}, a subcommand of the magic's own: "
                "name the stage otherwise, or give it no command"
            )


def stages_for(options: Mapping[str, Any]) -> list[Stage]:
    """Stage instances for ``{name: option}`` in their :attr:`Stage.order`, skipping options that are off
    (False/None)."""
    unknown = sorted(set(options) - set(STAGES))
    if unknown:
        known = ", ".join(sorted(STAGES)) or "none"
        raise InputError(f"unknown cell option {unknown[0]!r}; the options are: {known}")
    chosen = [STAGES[name](value) for name, value in options.items() if value not in (None, False)]
    return sorted(chosen, key=lambda stage: stage.order)
