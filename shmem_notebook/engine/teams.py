"""OpenSHMEM 1.5 teams on libraries that lack them (PE side).

shmem4py's Team API (``shmem.TEAM_WORLD.split_strided``, ``Team.my_pe``,
``n_pes``, ``translate_pe``, ``sync``, ``destroy``, ``TEAM_SHARED``, the
``team=`` argument of every collective) needs a library with teams. Open MPI
4.1.4 (OpenSHMEM 1.4) has only ``TEAM_WORLD``. :func:`install` decides at
engine start (:func:`decide`: the library's spec version and whether
``TEAM_SHARED`` is a valid team, or ``SHMEM_NOTEBOOK_TEAMS=native|emulated``):

- ``native``: the library's teams are used; only ``Team.split_2d`` is added
  when shmem4py lacks it (it calls ``shmem_team_split_2d``).
- ``emulated``: the Team methods and the collectives are replaced by versions
  built from OpenSHMEM 1.4 calls: puts, gets, atomics and waits (:func:`wait_for_members`) on
  synchronisation words reserved once at start (:data:`SLOTS` team slots of
  ``2 + STEPS`` int64 words per PE). A team holds a slot while it lives; a
  split agrees on a free slot with an AND of the parent's free-slot masks, so
  splits and destroys never allocate symmetric memory. Collectives on
  ``TEAM_WORLD`` (or ``team=None``) stay the library's own, except reductions
  the library lacks (unsigned sums, signed bitwise), which are emulated.

Team handles are ``shmem_team_t`` values the library never hands out (world is
1, invalid is NULL), so ``Team.__bool__``/``==`` behave as shmem4py defines.
The step counters (``signal``/``wait_signal``) are also what
:mod:`.collectives` uses to build its algorithms.

Longer than 400 lines: each emulated team call is short, but they share the reserved
words, the slot allocation and the members table, which splitting would expose.
"""

from __future__ import annotations

import os
from typing import TYPE_CHECKING, Any, cast

import numpy as np

from ..errors import InputError, ShmemNotebookError
from . import heap
from .context import this_pe
from .shims.patches import Patches

if TYPE_CHECKING:
    from collections.abc import Iterable, Sequence

    import numpy.typing as npt

__all__ = [
    "ENV",
    "wait_for_members",
    "reset",
    "SLOTS",
    "STEPS",
    "TeamError",
    "unusable",
    "mark_destroyed",
    "was_destroyed",
    "Members",
    "decide",
    "install",
    "members",
    "team_sync",
    "signal",
    "wait_signal",
    "agree_slots",
    "flat_pair",
    "checked_size",
    "alltoall_size",
    "REDUCE_UFUNCS",
]

#: environment variable forcing the mode: "native", "emulated" or "auto" (the default)
ENV = "SHMEM_NOTEBOOK_TEAMS"
#: team slots reserved per PE (bit i of a 64-bit mask); 0 = TEAM_WORLD, 1 = TEAM_SHARED
SLOTS = 63
#: signal counters per slot, for the step-by-step collectives
STEPS = 32
_ARRIVE, _RELEASE = 0, 1

_state = this_pe.teams  # the words and free slots, shared with native_teams (see .context)

REDUCE_UFUNCS = {
    "sum": np.add,
    "prod": np.multiply,
    "max": np.maximum,
    "min": np.minimum,
    "and": np.bitwise_and,
    "or": np.bitwise_or,
    "xor": np.bitwise_xor,
}


class TeamError(ShmemNotebookError, RuntimeError):
    """A team call that cannot work (not a member, destroyed team, no free slot)."""


class Members:
    """A team as the emulation sees it: world PE numbers in team order, slot, my rank."""

    __slots__ = ("pes", "slot", "rank", "team")

    def __init__(self, pes: Iterable[int], slot: int | None, rank: int, team: Any = None) -> None:
        self.pes, self.slot, self.rank, self.team = tuple(pes), slot, rank, team  # team: native only

    def __repr__(self) -> str:
        return f"Members(pes={list(self.pes)}, slot={self.slot}, rank={self.rank})"


def decide(spec_version: Iterable[int], shared_team_valid: bool, setting: str | None = None) -> str:
    """'native' when the library has teams (spec >= 1.5 and a valid TEAM_SHARED), else
    'emulated'; ``setting`` ("native", "emulated", "auto"/None) forces it."""
    setting = (setting or "auto").strip().lower()
    if setting in ("native", "emulated"):
        return setting
    if setting != "auto":
        raise InputError(f"{ENV}={setting!r} is not a mode; use native, emulated or auto")
    return "native" if tuple(spec_version) >= (1, 5) and shared_team_valid else "emulated"


# --- plumbing -----------------------------------------------------------------


def _handle(team: Any) -> int:
    return int(this_pe.shmem.ffi.cast("uintptr_t", team.ob_team))


def _world_handle() -> int:
    return int(this_pe.shmem.ffi.cast("uintptr_t", this_pe.shmem.lib.SHMEM_TEAM_WORLD))


def members(team: Any = None, what: str = "this call") -> Members:
    """The :class:`Members` of ``team`` (None = TEAM_WORLD) on this PE.

    Raises :class:`TeamError` when this PE is not a member (TEAM_INVALID) or the
    team was destroyed. In native mode teams are asked through the library.
    """
    if team is None:
        return cast(Members, _state.world)
    handle = _handle(team)
    if handle == _world_handle():
        return cast(Members, _state.world)
    if handle in _state.members:
        return cast(Members, _state.members[handle])
    if handle == 0:
        raise unusable(what, destroyed=was_destroyed(team))
    if _state.mode == "native":
        n = team.n_pes()
        pes = [team.translate_pe(i, this_pe.shmem.TEAM_WORLD) for i in range(n)]
        return Members(pes, _state.native_slots.get(handle), team.my_pe(), team)
    raise TeamError(f"{what} got a team that was destroyed or never created on this PE; split a new one")


_DESTROYED = "_shmem_notebook_destroyed"  # set on a Team object this PE destroyed (it holds TEAM_INVALID now)


def mark_destroyed(team: Any) -> None:
    """Note on the Team object that it was destroyed, so a later call says so (not "not a member")."""
    setattr(team, _DESTROYED, True)


def was_destroyed(team: Any) -> bool:
    """Whether this Team object was destroyed on this PE (a native team's copy is marked too)."""
    return cast(bool, getattr(team, _DESTROYED, False))


def unusable(what: str, destroyed: bool) -> TeamError:
    """The :class:`TeamError` for a call on a destroyed team or on TEAM_INVALID (not a member)."""
    if destroyed:
        return TeamError(f"{what} got a team that was destroyed (team.destroy()); split a new one")
    return TeamError(
        f"{what} got TEAM_INVALID: this PE is not a member of that team (split_strided gives "
        f"non-members a falsy team); guard the call with `if team:`"
    )


def team_sync(m: Members) -> None:
    """Quiet, then wait for every member of ``m`` (:class:`Members`). Collective over the team."""
    sh = this_pe.shmem
    if m.slot == 0:  # the library's own
        sh.barrier_all()
        return
    if m.team is not None:  # a native team: the library's own sync
        sh.quiet()
        sh.sync(m.team)
        return
    sh.quiet()
    n = len(m.pes)
    if n == 1:
        return
    me = sh.my_pe()
    arrive, release = _word(cast(int, m.slot), _ARRIVE), _word(cast(int, m.slot), _RELEASE)
    if m.rank == 0:
        wait_for_members(arrive, n - 1)
        sh.atomic_add(arrive, -(n - 1), me)
        for pe in m.pes[1:]:
            sh.atomic_inc(release, pe)
    else:
        sh.atomic_inc(arrive, m.pes[0])
        wait_for_members(release, 1)
        sh.atomic_add(release, -1, me)


def wait_for_members(word: Any, count: int) -> None:
    """Wait until ``word >= count`` (other members' atomics raise it). A Python loop over
    ``shmem.test``, not ``shmem.wait_until``: a PE stranded here by another PE's error takes the
    interrupt at once, so the cell path can release it (``cells/stranded``, which knows the wait by
    this function's name, :data:`shmem_notebook.operations.EMULATED_WAIT`) and then :func:`reset`."""
    test, ge, give_way = this_pe.shmem.test, this_pe.shmem.CMP.GE, os.sched_yield
    while not test(word, ge, count):
        give_way()  # with more PEs than cores the PE that raises the word gets the core (4 PEs on 2: ~100x faster)


def reset() -> bool:
    """Zero every team's synchronisation words, after a cell was abandoned while PEs waited in an
    emulated team call (their counts are half-done; ``runtime.released``). Collective: every PE,
    none in a cell."""
    if _state.words is None:
        return False
    this_pe.shmem.quiet()
    this_pe.shmem.barrier_all()
    _state.words[...] = 0
    this_pe.shmem.barrier_all()
    return True


def _word(slot: int, index: int) -> Any:
    return _state.words[slot, index : index + 1]


def signal(m: Members, step: int, pe: int) -> None:
    """Tell world PE ``pe`` that step ``step`` of a collective on ``m`` delivered its data:
    a fence (earlier puts to ``pe`` land first), then an atomic add on ``pe``'s counter."""
    this_pe.shmem.fence()
    this_pe.shmem.atomic_add(_word(_slot_of(m), 2 + step), 1, pe)


def wait_signal(m: Members, step: int, count: int = 1) -> None:
    """Wait until ``count`` signals of step ``step`` arrived on this PE, and consume them."""
    word = _word(_slot_of(m), 2 + step)
    wait_for_members(word, count)
    this_pe.shmem.atomic_add(word, -count, this_pe.shmem.my_pe())


def _slot_of(m: Members) -> int:
    if m.slot is None:
        raise TeamError(
            "the step-by-step collectives work on teams split after the job started by shmem4py's split_strided "
            "or split_2d (not through shmem.lib); split a new one"
        )
    return m.slot


def _reserve(sh: Any) -> None:
    """Allocate the synchronisation words once. Collective (every PE, at engine start)."""
    _state.words = heap.reserve(sh.zeros((SLOTS, 2 + STEPS), dtype="i8"), "teams: synchronisation words")
    _state.exchange = heap.reserve(sh.zeros(1, dtype="i8"), "teams: exchange word")
    _state.free = ((1 << SLOTS) - 1) & ~0b11
    _state.world = Members(range(sh.n_pes()), 0, sh.my_pe())


def _register(pes: Sequence[int], slot: int) -> Any:
    """A Team object for ``pes`` (world PE numbers, this PE among them) holding ``slot``."""
    me = this_pe.shmem.my_pe()
    _state.free &= ~(1 << slot)
    handle = _state.next_handle
    _state.next_handle += 1
    _state.members[handle] = Members(pes, slot, list(pes).index(me))
    return this_pe.shmem.Team(this_pe.shmem.ffi.cast("shmem_team_t", handle))


def agree_slots(parent: Members, count: int) -> list[int]:
    """``count`` slots free on every member of ``parent``. Collective over the parent team."""
    sh = this_pe.shmem
    me = sh.my_pe()
    _state.exchange[0] = _state.free
    team_sync(parent)
    common, theirs = _state.free, np.zeros(1, dtype="i8")
    for pe in parent.pes:
        if pe != me:
            sh.get(theirs, _state.exchange, pe)
            common &= int(theirs[0])
    team_sync(parent)
    slots = [s for s in range(SLOTS) if common >> s & 1][:count]
    if len(slots) < count:
        raise TeamError(
            f"no free team slot: {SLOTS - 2} emulated teams can live at once on a PE; "
            f"destroy teams you no longer use (team.destroy(), or `with` a team)"
        )
    return slots


def _flat(a: object, what: str, writable: bool = False) -> npt.NDArray[Any]:
    if not isinstance(a, np.ndarray):
        raise InputError(f"{what} must be a NumPy array (a symmetric one for targets), got {type(a).__name__}")
    if not a.flags.c_contiguous and a.flags.f_contiguous:
        a = a.T
    if not a.flags.c_contiguous:
        raise InputError(f"{what} must be a contiguous array; copy it with np.ascontiguousarray first")
    if writable and not a.flags.writeable:
        raise InputError(f"{what} is read-only")
    return a.reshape(-1)


def flat_pair(target: object, source: object, what: str) -> tuple[npt.NDArray[Any], npt.NDArray[Any]]:
    """``target`` and ``source`` as flat views of one dtype (the target writable), or one clear error."""
    t, s = _flat(target, f"{what}: target", writable=True), _flat(source, f"{what}: source")
    if t.dtype != s.dtype:
        raise InputError(f"{what}: target is {t.dtype} but source is {s.dtype}; use one dtype for both")
    return t, s


def checked_size(size: int | None, limit: int, what: str) -> int:
    """The element count ``size`` of a collective (``limit`` when None), checked against ``limit``."""
    if size is None:
        return limit
    if not 0 <= size <= limit:
        raise InputError(f"{what}: size={size} does not fit (at most {limit} elements here)")
    return int(size)


# --- the Team methods, emulated ------------------------------------------------


def _split_strided(
    self: Any, start: int = 0, stride: int = 1, size: int | None = None, config: Any = None, **kwargs: Any
) -> Any:
    """Collective over the parent team: a team of parent PEs start, start+stride, ...;
    non-members get a falsy TEAM_INVALID team."""
    parent = members(self, "split_strided")
    n = len(parent.pes)
    if size is None:
        size = len(range(start, n, stride)) if stride > 0 else 0
    picked = [start + i * stride for i in range(size)]
    if size < 1 or (stride < 1 and size > 1) or not all(0 <= i < n for i in picked):
        raise InputError(
            f"split_strided(start={start}, stride={stride}, size={size}) does not pick PEs of a team of {n}: "
            f"use start >= 0, stride >= 1, size >= 1 and start + (size - 1) * stride < {n}"
        )
    (slot,) = agree_slots(parent, 1)
    pes = [parent.pes[i] for i in picked]
    if this_pe.shmem.my_pe() in pes:
        return _register(pes, slot)
    return this_pe.shmem.Team(this_pe.shmem.lib.SHMEM_TEAM_INVALID)


def _split_2d(self: Any, xrange: int, xaxis_config: Any = None, yaxis_config: Any = None) -> tuple[Any, Any]:
    """Collective over the parent team: (xteam, yteam) of a grid ``xrange`` PEs wide;
    xteam = this PE's row (consecutive PEs), yteam = its column."""
    parent = members(self, "split_2d")
    n = len(parent.pes)
    if int(xrange) < 1:
        raise InputError(f"split_2d(xrange={xrange}): xrange must be at least 1")
    xrange = min(int(xrange), n)
    row, col = divmod(parent.rank, xrange)
    xslot, yslot = agree_slots(parent, 2)
    xteam = _register([parent.pes[i] for i in range(row * xrange, min((row + 1) * xrange, n))], xslot)
    yteam = _register([parent.pes[i] for i in range(col, n, xrange)], yslot)
    return xteam, yteam


def _native_split_2d(self: Any, xrange: int, xaxis_config: Any = None, yaxis_config: Any = None) -> tuple[Any, Any]:
    """Collective over the parent team: (xteam, yteam) by the library's shmem_team_split_2d."""
    sh = this_pe.shmem
    xconf, yconf = sh.ffi.new("shmem_team_config_t*"), sh.ffi.new("shmem_team_config_t*")
    xteam = sh.ffi.new("shmem_team_t*", sh.lib.SHMEM_TEAM_INVALID)
    yteam = sh.ffi.new("shmem_team_t*", sh.lib.SHMEM_TEAM_INVALID)
    ierr = sh.lib.shmem_team_split_2d(self.ob_team, int(xrange), xconf, 0, xteam, yconf, 0, yteam)
    sh._chkerr(ierr, "shmem_team_split_2d")
    return sh.Team(xteam[0]), sh.Team(yteam[0])


def _destroy(self: Any) -> None:
    """Collective over the team: free its slot; the Team becomes TEAM_INVALID."""
    handle = _handle(self)
    rec = _state.members.get(handle)
    if rec is None or rec.slot == 1:  # world, shared, invalid, already destroyed: nothing to do
        if handle not in (0, _world_handle()) and rec is None:
            self.ob_team = this_pe.shmem.lib.SHMEM_TEAM_INVALID
        return
    team_sync(rec)
    del _state.members[handle]
    _state.free |= 1 << rec.slot
    self.ob_team = this_pe.shmem.lib.SHMEM_TEAM_INVALID
    mark_destroyed(self)


def _my_pe(self: Any) -> int:
    return members(self, "Team.my_pe").rank


def _n_pes(self: Any) -> int:
    return len(members(self, "Team.n_pes").pes)


def _translate_pe(self: Any, pe: int | None = None, team: Any = None) -> int:
    src = members(self, "Team.translate_pe")
    pe = src.rank if pe is None else int(pe)
    if not 0 <= pe < len(src.pes):
        raise TeamError(f"translate_pe: PE {pe} is not in the source team of {len(src.pes)} PEs")
    world = src.pes[pe]
    dest = members(team, "Team.translate_pe")
    if world not in dest.pes:
        raise TeamError(f"translate_pe: PE {pe} of the source team (world PE {world}) is not in the destination team")
    return dest.pes.index(world)


def _get_config(self: Any) -> dict[str, int]:
    members(self, "Team.get_config")
    return {"num_contexts": 0}


def _create_ctx(self: Any, options: int = 0) -> Any:
    if members(self, "Team.create_ctx") is _state.world:
        return _state.originals["create_ctx"](self, options)
    raise TeamError(
        "contexts on emulated teams are not available on an OpenSHMEM 1.4 library; use shmem.Ctx.create() "
        "(world) and team.translate_pe(i) to address team members"
    )


def _team_sync_method(self: Any) -> None:
    _sync(self)


# --- the collectives, emulated on teams other than TEAM_WORLD ------------------


def _sync(team: Any = None) -> Any:
    """Collective over ``team``: like shmem.sync."""
    m = members(team, "shmem.sync")
    if m is _state.world:
        return _state.originals["sync"](team)
    team_sync(m)


def _put_block(t: npt.NDArray[Any], s: npt.NDArray[Any], pe: int) -> None:
    if s.size:
        if pe == this_pe.shmem.my_pe():
            t[:] = s
        else:
            this_pe.shmem.put(t, s, pe)


def _broadcast(
    target: npt.NDArray[Any], source: npt.NDArray[Any], root: int, size: int | None = None, team: Any = None
) -> Any:
    """Collective over ``team``: ``source`` of the team's PE ``root`` into ``target`` everywhere."""
    m = members(team, "shmem.broadcast")
    if m is _state.world:
        return _state.originals["broadcast"](target, source, root, size, team)
    t, s = flat_pair(target, source, "broadcast")
    size = checked_size(size, min(t.size, s.size), "broadcast")
    if not 0 <= root < len(m.pes):
        raise InputError(f"broadcast: root={root} is not a PE of this team of {len(m.pes)} (roots are team PE numbers)")
    team_sync(m)
    if m.rank == root:
        for pe in m.pes:
            _put_block(t[:size], s[:size], pe)
    team_sync(m)


def _collect(target: npt.NDArray[Any], source: npt.NDArray[Any], size: int | None = None, team: Any = None) -> Any:
    """Collective over ``team``: every member's ``size`` elements (sizes may differ), in team order."""
    m = members(team, "shmem.collect")
    if m is _state.world:
        return _state.originals["collect"](target, source, size, team)
    t, s = flat_pair(target, source, "collect")
    size = checked_size(size, s.size, "collect")
    me, got = this_pe.shmem.my_pe(), np.zeros(1, dtype="i8")
    _state.exchange[0] = size
    team_sync(m)
    sizes: list[int] = []
    for pe in m.pes:
        if pe != me:
            this_pe.shmem.get(got, _state.exchange, pe)
        sizes.append(size if pe == me else int(got[0]))
    if sum(sizes) > t.size:
        raise InputError(f"collect: target has {t.size} elements but the members send {sum(sizes)}")
    offset = sum(sizes[: m.rank])
    for pe in m.pes:
        _put_block(t[offset : offset + size], s[:size], pe)
    team_sync(m)


def _fcollect(target: npt.NDArray[Any], source: npt.NDArray[Any], size: int | None = None, team: Any = None) -> Any:
    """Collective over ``team``: ``size`` elements of every member, concatenated in team order."""
    m = members(team, "shmem.fcollect")
    if m is _state.world:
        return _state.originals["fcollect"](target, source, size, team)
    t, s = flat_pair(target, source, "fcollect")
    size = checked_size(size, s.size, "fcollect")
    if size * len(m.pes) > t.size:
        raise InputError(f"fcollect: target has {t.size} elements, needs {size} x {len(m.pes)} PEs")
    team_sync(m)
    for pe in m.pes:
        _put_block(t[m.rank * size : (m.rank + 1) * size], s[:size], pe)
    team_sync(m)


def alltoall_size(
    t: npt.NDArray[Any], s: npt.NDArray[Any], size: int | None, n: int, tst: int, sst: int, what: str
) -> int:
    """The block size of an alltoall(s) over ``n`` PEs (strides ``tst``, ``sst``), checked against both arrays."""
    tn, sn = -(-t.size // tst), -(-s.size // sst)
    if size is None:
        size, rest = divmod(min(tn, sn), n)
        if rest:
            raise InputError(f"{what}: {min(tn, sn)} elements do not split into {n} equal blocks; pass size=")
    if size * n > min(tn, sn):
        raise InputError(f"{what}: size={size} x {n} PEs does not fit in {min(tn, sn)} elements")
    return size


def _alltoall(target: npt.NDArray[Any], source: npt.NDArray[Any], size: int | None = None, team: Any = None) -> Any:
    """Collective over ``team``: block j of my source goes to member j, into block my-rank."""
    m = members(team, "shmem.alltoall")
    if m is _state.world:
        this_pe.shmem.barrier_all()  # see _alltoalls
        return _state.originals["alltoall"](target, source, size, team)
    return _alltoalls(target, source, 1, 1, size, team, what="alltoall")


def _alltoalls(
    target: npt.NDArray[Any],
    source: npt.NDArray[Any],
    tst: int = 1,
    sst: int = 1,
    size: int | None = None,
    team: Any = None,
    what: str = "alltoalls",
) -> Any:
    """Collective over ``team``: alltoall with element strides ``tst`` (target), ``sst`` (source)."""
    m = members(team, f"shmem.{what}")
    if m is _state.world:
        # measured on Open MPI 4.1.4 at 3+ PEs: the library's alltoall(s) right after another
        # alltoall loses blocks (a PE still writing its target is overrun); a barrier first fixes it
        this_pe.shmem.barrier_all()
        return _state.originals["alltoalls"](target, source, tst, sst, size, team)
    t, s = flat_pair(target, source, what)
    n, me = len(m.pes), this_pe.shmem.my_pe()
    size = alltoall_size(t, s, size, n, tst, sst, what)
    team_sync(m)
    for j, pe in enumerate(m.pes):
        if not size:
            break
        tview, sview = t[m.rank * size * tst :], s[j * size * sst :]
        if pe == me:
            tview[: size * tst : tst] = sview[: size * sst : sst]
        else:
            this_pe.shmem.iput(tview, sview, pe, tst, sst, size)
    team_sync(m)


def reduce_values(m: Members, s: npt.NDArray[Any], size: int, op: str) -> npt.NDArray[Any]:
    """Combine ``s[:size]`` of every member of ``m`` with ``op``, in team order (the same
    result on every member). Collective over the team; reads the others' sources with gets."""
    ufunc = REDUCE_UFUNCS[op]
    acc: npt.NDArray[Any] | None
    me, tmp, acc = this_pe.shmem.my_pe(), np.empty(size, dtype=s.dtype), None
    team_sync(m)
    for pe in m.pes:
        if pe == me:
            part = s[:size]
        else:
            if size:
                this_pe.shmem.get(tmp, s[:size], pe)
            part = tmp
        acc = np.array(part) if acc is None else ufunc(acc, part)
    team_sync(m)  # every member has read every source: targets may now overwrite them
    return cast("npt.NDArray[Any]", acc)


def check_reduce(op: str, dtype: np.dtype[Any], what: str = "reduce") -> str:
    """The reduction's name in lower case; a clear error for an op the dtype cannot do."""
    name = f"{op}".lower()
    if name not in REDUCE_UFUNCS:
        raise InputError(f"{what}: unknown op {op!r}; use one of {', '.join(REDUCE_UFUNCS)}")
    if name in ("and", "or", "xor") and not np.issubdtype(dtype, np.integer):
        raise InputError(f"{what}: {name}_reduce needs an integer array, got {dtype}")
    if name in ("max", "min") and np.issubdtype(dtype, np.complexfloating):
        raise InputError(f"{what}: {name}_reduce is not defined for complex arrays ({dtype})")
    return name


def _reduce(
    target: npt.NDArray[Any], source: npt.NDArray[Any], op: str = "sum", size: int | None = None, team: Any = None
) -> Any:
    """Collective over ``team``: ``op`` of every member's ``source`` into ``target``."""
    m = members(team, "shmem.reduce")
    if m is _state.world:
        try:
            return _state.originals["reduce"](target, source, op, size, team)
        except (NotImplementedError, AttributeError):
            pass  # a type/op the library lacks (checked before any communication): emulate it
    t, s = flat_pair(target, source, "reduce")
    name = check_reduce(op, t.dtype)
    size = checked_size(size, min(t.size, s.size), "reduce")
    t[:size] = reduce_values(m, s, size, name)


_TEAM_METHODS = {
    "split_strided": _split_strided,
    "split_2d": _split_2d,
    "destroy": _destroy,
    "my_pe": _my_pe,
    "n_pes": _n_pes,
    "translate_pe": _translate_pe,
    "get_config": _get_config,
    "create_ctx": _create_ctx,
    "sync": _team_sync_method,
}

_COLLECTIVES = {
    "sync": _sync,
    "broadcast": _broadcast,
    "collect": _collect,
    "fcollect": _fcollect,
    "alltoall": _alltoall,
    "alltoalls": _alltoalls,
    "reduce": _reduce,
}


def _shared_members(sh: Any) -> list[int]:
    """World PEs whose heap this PE can load from directly (shmem_ptr): its node."""
    me = sh.my_pe()
    return [pe for pe in range(sh.n_pes()) if pe == me or sh.ptr(_state.exchange, pe) is not None]


def install(shmem_module: Any, setting: str | None = None) -> str:
    """Decide the mode, reserve the synchronisation words and, when emulating, replace
    shmem4py's Team methods, ``TEAM_SHARED`` and collectives (in native mode the teams shim then guards
    the library's own, :mod:`.native_teams`); the mode. Collective: every PE at start."""
    sh = shmem_module
    if _state.patches is None:
        _state.patches = Patches()
    major, minor = sh.info_get_version()
    _state.mode = decide((major, minor), bool(sh.TEAM_SHARED), os.environ.get(ENV) if setting is None else setting)
    _reserve(sh)
    if _state.mode == "native":
        if not hasattr(sh.Team, "split_2d"):
            _state.patches.set(sh.Team, "split_2d", _native_split_2d)
        return _state.mode
    for name, method in _TEAM_METHODS.items():
        _state.originals.setdefault(f"Team.{name}", getattr(sh.Team, name, None))
        _state.patches.set(sh.Team, name, method)
    _state.originals["create_ctx"] = _state.originals["Team.create_ctx"]
    for name, function in _COLLECTIVES.items():
        _state.originals.setdefault(name, getattr(sh, name))
        function.__doc__ = f"{function.__doc__}\n\n(shmem_notebook: teams emulated on OpenSHMEM {major}.{minor})"
        _state.patches.set(sh, name, function)
    _state.patches.set(sh, "TEAM_SHARED", _register(_shared_members(sh), 1))
    return _state.mode


def uninstall() -> None:
    """Put shmem4py's own Team methods and collectives back (the reserved words stay)."""
    if _state.patches is not None:
        _state.patches.undo()
