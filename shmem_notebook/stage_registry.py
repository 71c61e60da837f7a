"""The stages of the cell path, registered in one place that both sides read (shared; imports nothing).

A stage (``%%pxshmem --<name>``, ``job.run(code, <name>=...)``) has two halves:

- its client module, whose :class:`~shmem_notebook.cells.stages.Stage` subclass declares its flag, the
  requests that ride with the cell, its hooks, its slot in the result and its ``%shmem`` subcommand;
  the cell path imports it (and so registers the stage) through :data:`DECLARED`;
- its PE module, whose ``HANDLERS`` map each request of :attr:`Declared.requests` to its function;
  each PE loads it at start (:mod:`shmem_notebook.engine.requests`).

:mod:`shmem_notebook.protocol` accepts the requests declared here beside its own. Adding a stage is
its folder (``trace/`` holds every part of ``--trace``) and one line here.
"""

from __future__ import annotations

from typing import NamedTuple

__all__ = ["Declared", "DECLARED", "requests", "collective"]


class Declared(NamedTuple):
    """A stage as both sides know it."""

    client: str  # the module whose Stage subclass registers it (the client imports it)
    pe: str  # the module whose HANDLERS answer its requests on a PE
    requests: tuple[str, ...]  # the requests it adds to the protocol
    collective: tuple[str, ...] = ()  # those of them every PE must be asked


#: stage name -> its declaration, in the order the client registers them
DECLARED: dict[str, Declared] = {
    "race": Declared(
        "shmem_notebook.cells.race_stage", "shmem_notebook.engine.record", ("race_start", "race_stop"), ("race_start",)
    ),
    "stress": Declared(
        "shmem_notebook.cells.stress_stage",
        "shmem_notebook.engine.record",
        ("stress_start", "stress_stop", "stress_save", "stress_restore", "declared_values"),
    ),
    "trace": Declared("shmem_notebook.trace.stage", "shmem_notebook.trace.recording", ("trace_start", "trace_stop")),
}


def requests() -> tuple[str, ...]:
    """Every request the stages add, in their order."""
    return tuple(name for stage in DECLARED.values() for name in stage.requests)


def collective() -> frozenset[str]:
    """The stages' requests that every PE must be asked."""
    return frozenset(name for stage in DECLARED.values() for name in stage.collective)
