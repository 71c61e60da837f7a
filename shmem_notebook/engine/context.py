"""This PE's state in one object, :data:`this_pe` (PE side; plain data: importing it runs nothing).

What one room of the PE side keeps and another reads lives here, under public names; no
module reads another's private names:

- ``shell``: the engine's IPython shell, set once by :func:`.runtime.bind` (the race runner
  sets a stand-in, :mod:`.record.script`); ``namespace`` is its user namespace, where cells
  and the declared arrays (:mod:`.heap`) bind names.
- ``shmem``: the shmem4py module, set once by :func:`.shims.install`, the first call of every entry point
  that imports it (the engine, the race runner, an exported script); every room reads it from here.
- ``teams``: the reserved synchronisation words and the slot bookkeeping of :mod:`.teams`,
  which :mod:`.native_teams` shares and the trace (:mod:`.record.trace`) leaves out.
- ``checks``: what the argument checks (:mod:`.shims.mistakes`) know of this PE's library.
- ``scratch``, ``collective_calls`` and ``collective_label``: the teaching collectives' staging area,
  how many collectives this PE has called and the step running (:mod:`.collectives`; the trace numbers
  calls by the count and labels them by the step).

The recordings' own state is :mod:`.record.state`.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, NamedTuple

__all__ = ["FIRST_TEAM_HANDLE", "Checks", "PEContext", "TeamsState", "this_pe"]

#: emulated team handles count up from here (:mod:`.teams`)
FIRST_TEAM_HANDLE = 0x5EA0000


@dataclass
class TeamsState:
    """The teams on this PE as :mod:`.teams` and :mod:`.native_teams` keep them."""

    #: int64[SLOTS, 2 + STEPS]: each team slot's arrive, release and step counters (reserved at start)
    words: Any = None
    #: int64[1]: a PE's free-slot mask or collect size, read by the others
    exchange: Any = None
    #: bit mask of this PE's free slots
    free: int = 0
    #: native team handle -> the slot of its words (for the step-by-step collectives)
    native_slots: dict[int, int] = field(default_factory=dict)
    #: "native" (the library's own teams) or "emulated", decided at start (:func:`.teams.install`)
    mode: str | None = None
    #: emulated team handle -> its members (emulated teams and TEAM_SHARED); the world's members
    members: dict[int, Any] = field(default_factory=dict)
    world: Any = None
    #: the handle the next emulated team gets
    next_handle: int = FIRST_TEAM_HANDLE
    #: native teams: handle -> the teams destroyed on this PE before it was, and how many so far
    destroyed: dict[int, int] = field(default_factory=dict)
    destroys: int = 0


class Checks(NamedTuple):
    """What the argument checks know of this PE's library (set by :func:`.shims.mistakes.install`)."""

    npes: int = 1  # the world's PEs
    native_teams: bool = False  # OpenSHMEM 1.5: contexts of teams other than the world
    buffer_type: Any = None  # shmem4py's ffi.buffer: a symmetric array's memory is one
    numpy_to_shmem: dict[str, str] = {}  # NumPy dtype character -> shmem4py's type name


@dataclass
class PEContext:
    """Everything the rooms of the PE side share (see the module's docstring)."""

    shell: Any = None
    shmem: Any = None
    teams: TeamsState = field(default_factory=TeamsState)
    scratch: Any = None
    collective_calls: int = 0
    #: the teaching collective's running step: {"collective", "algorithm", "step", "of", "text"}, None
    #: between steps (the trace labels what it records with it)
    collective_label: dict[str, Any] | None = None
    #: the client's cell channel this PE receives cells on (:mod:`.cell_receiver`), once connected
    cell_channel: Any = None
    checks: Checks = Checks()
    #: the namespace before there is a shell (a module's helpers run in tests without an engine)
    no_shell: dict[str, Any] = field(default_factory=dict, repr=False)

    @property
    def namespace(self) -> dict[str, Any]:
        """The cells' namespace: the shell's user namespace."""
        return self.shell.user_ns if self.shell is not None else self.no_shell


#: this PE's one context
this_pe = PEContext()
