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
- ``arrays`` and ``reserved``: the declared symmetric arrays and the tool's own allocations (:mod:`.heap`).
- ``last_cell``: how the last cell ended (:mod:`.runtime`); ``shims``: the shims installed and
  their undos, ``signals``: the signal words made (:mod:`.shims`).
- ``record``: the recordings' state (:class:`RecordState`, :mod:`.record`).

No module of the PE side keeps mutable state of its own (``tests/test_layout.py`` checks): a room
that reads a part of it on every recorded call may bind a name to that part once, at its import.
"""

from __future__ import annotations

import types
import weakref
from dataclasses import dataclass, field
from typing import Any, Literal, NamedTuple

__all__ = ["FIRST_TEAM_HANDLE", "Checks", "PEContext", "RecordState", "TeamsState", "this_pe"]

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
    #: what :func:`.teams.install` replaced on shmem4py (a :class:`.shims.patches.Patches`)
    patches: Any = None
    #: shmem4py's own functions the emulation replaced ("Team.sync", "create_ctx", ...), for its own calls
    originals: dict[str, Any] = field(default_factory=dict)


@dataclass
class RecordState:
    """What the recordings of :mod:`.record` keep on this PE between calls."""

    #: code file names of the cell being recorded (filled as the cell runs; see ``layer.cell_line``)
    cell_files: set[str] = field(default_factory=set)
    #: code file name -> place * RACE_LINES of code outside the cell that runs rewritten, while a race
    #: recording runs (see :mod:`.record.outside`)
    outside: dict[str, int] = field(default_factory=dict)
    # the layer (:mod:`.record.layer`)
    #: name -> consumer, in attach order
    consumers: dict[str, Any] = field(default_factory=dict)
    #: call name -> [befores, afters, fast]: the functions each recorded call goes to (one list per
    #: call, held by its wrapper)
    slots: dict[str, list[Any]] = field(default_factory=dict)
    #: [how many times the slots were given new consumers]: a slot's first call fills it only if none came since
    generation: list[int] = field(default_factory=lambda: [0])
    #: (owner, attribute) -> the function wrapped
    originals: dict[tuple[Any, str], Any] = field(default_factory=dict)
    #: (owner, attribute) -> (the function, the C module or None, its wrapper): kept for the next attach
    wrappers: dict[tuple[Any, str], tuple[Any, Any, Any]] = field(default_factory=dict)
    #: [>0 while inside a wrapped call] (a list, so that the hooks and the C recorder read it without a call)
    depth: list[int] = field(default_factory=lambda: [0])
    #: [the function giving a frame's recorded line]: the layer's cell_line, or the race runner's
    line_of: list[Any] = field(default_factory=list)
    # code outside the cell (:mod:`.record.outside`)
    #: off in the race runner, which numbers its program's files itself (see :mod:`.record.script`)
    outside_enabled: bool = True
    #: number -> what the place is
    places: dict[int, list[Any]] = field(default_factory=dict)
    #: file name -> place * RACE_LINES of the code rewritten there (``outside`` while a race recording runs)
    offsets: dict[str, int] = field(default_factory=dict)
    #: (code object, its file is the cell's) -> (new code, closure positions), True (run as is) or None
    plans: dict[tuple[Any, bool], Any] = field(default_factory=dict)
    #: code objects made by the rewriting (and the functions defined in them): run as they are
    made: set[Any] = field(default_factory=set)
    #: (source, line) -> (code object, its file name) of texts given to exec/eval, rewritten
    executed: dict[tuple[str | bytes, int], tuple[Any, str]] = field(default_factory=dict)
    #: code object -> the text it was compiled from (False: not known), while the code object lives
    texts: weakref.WeakKeyDictionary[types.CodeType, str | bytes | Literal[False]] = field(
        default_factory=weakref.WeakKeyDictionary
    )
    # the race recording (:mod:`.record.hooks`)
    #: the RaceRecording the hooks feed, or None
    race: Any = None
    #: a call's key -> the positions of the arrays it wrote (reset at each install)
    written: dict[Any, Any] = field(default_factory=dict)
    # the C hot path (:mod:`.record.in_c`)
    #: what the C functions read (see ``in_c.give``)
    given: list[Any] = field(default_factory=list)
    #: [the C module, or None] once loaded
    native: list[Any] = field(default_factory=list)
    #: "before" / "after" the cell -> {array name: a private copy} (:mod:`.record.perturb`)
    saved: dict[str, dict[str, Any]] = field(default_factory=dict)
    #: the race runner's rewritten files: absolute path -> its number, from 1 (:mod:`.record.script`)
    files: dict[str, int] = field(default_factory=dict)
    #: [the symmetric heap's (start, end) once found where it cannot move, or None] (``memory.heap_range``)
    heap_mapping: list[tuple[int, int] | None] = field(default_factory=lambda: [None])


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
    #: declared symmetric arrays, name -> ndarray on the symmetric heap (:mod:`.heap`)
    arrays: dict[str, Any] = field(default_factory=dict)
    #: the tool's own symmetric allocations (teams' sync words, collectives' scratch): address -> what
    reserved: dict[int, str] = field(default_factory=dict)
    #: how the last cell ended: {"state", "outcome", "seconds", "started"} (:mod:`.runtime`)
    last_cell: dict[str, Any] = field(default_factory=lambda: {"state": "idle", "outcome": None, "seconds": None})
    #: (name, undo) of the shims installed, in order (:mod:`.shims`)
    shims: list[tuple[str, Any]] = field(default_factory=list)
    #: signal words: address -> the cdata, until del_signal; address -> how many signals had been made
    #: when it was (:mod:`.shims.signals`)
    signals: weakref.WeakValueDictionary[int, Any] = field(default_factory=weakref.WeakValueDictionary)
    signals_made: dict[int, int] = field(default_factory=dict)
    record: RecordState = field(default_factory=RecordState)
    #: (pid, the write end of its lifeline) (:func:`.runtime.lifeline`; a process forked after makes its own)
    lifeline: tuple[int, int] | None = None
    #: the namespace before there is a shell (a module's helpers run in tests without an engine)
    no_shell: dict[str, Any] = field(default_factory=dict, repr=False)

    @property
    def namespace(self) -> dict[str, Any]:
        """The cells' namespace: the shell's user namespace."""
        return self.shell.user_ns if self.shell is not None else self.no_shell


#: this PE's one context
this_pe = PEContext()
