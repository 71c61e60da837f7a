"""Guards around a library's own teams (``teams.mode == "native"``, OpenSHMEM 1.5), PE side.

The emulation of :mod:`.teams` reports a team mistake in one line; a native library may instead
abort the whole job (Sandia OpenSHMEM does on a collective with ``TEAM_INVALID``) or answer
garbage (``n_pes()`` of a copy of a destroyed team). These guards check, before the library
sees the call, what the emulation checks, with the same messages, so the same cell fails the
same way on both:

- a team that is ``TEAM_INVALID`` (this PE is not a member) or was destroyed on this PE;
- ``split_strided`` arguments that pick no PEs of the parent;
- a reduction the library lacks for the dtype (1.5 defines bitwise reductions for unsigned
  types only): computed over the team with gets, as the emulation does.

Each team split here also takes a slot of the reserved words, as an emulated team does, so the
step-by-step collectives (:mod:`.collectives`) run on native teams too (the split agrees on it
over the parent: collective, as the split is).

A destroyed team is known by its handle and its age. The library hands a freed handle out again
(Sandia OpenSHMEM's handle is its team's ``calloc``'d address), also to a team made through
``shmem.lib`` and wrapped with ``shmem.Team(handle)``, which no split here sees. So every Team
object is stamped when it is made (a copy keeps its original's stamp), and a handle's destroy is
stamped too: a Team made before its handle was destroyed is a stale copy; one made after holds
the library's new team.

The checks are local (no communication); a valid call goes to the library unchanged.
"""

from __future__ import annotations

import functools
from typing import TYPE_CHECKING, Any

from ..errors import InputError
from . import teams
from .context import this_pe
from .shims.patches import Patches

if TYPE_CHECKING:
    from collections.abc import Callable, Sequence

    import numpy.typing as npt

__all__ = ["install"]

_BORN = "_shmem_notebook_born"  # a Team's stamp: the destroys counted when it (or its original) was made


def _handle(sh: Any, team: Any) -> int:
    return int(sh.ffi.cast("uintptr_t", team.ob_team))


def _stale(handle: int, team: Any) -> bool:
    """Whether ``team`` holds a handle destroyed after the Team was made (teams from before
    :func:`install`, world and shared, count as made first)."""
    destroyed = this_pe.teams.destroyed
    return handle in destroyed and getattr(team, _BORN, -1) <= destroyed[handle]


def check(sh: Any, team: Any, what: str) -> None:
    """Raise :class:`~.teams.TeamError` when ``team`` cannot be used on this PE (None = world)."""
    if team is None:
        return
    handle = _handle(sh, team)
    stale = _stale(handle, team)
    if handle == 0 or stale:
        raise teams.unusable(what, destroyed=stale or teams.was_destroyed(team))


def _take_slots(sh: Any, parent: Any, new: Sequence[Any]) -> None:
    """Give each team of ``new`` this PE is a member of a slot of the reserved words, agreed over
    ``parent``. Collective over the parent team."""
    slots = teams.agree_slots(teams.members(parent, "split"), len(new))
    for team, slot in zip(new, slots):
        handle = _handle(sh, team)
        if handle:
            this_pe.teams.native_slots[handle] = slot
            this_pe.teams.free &= ~(1 << slot)


def _guard_method(sh: Any, name: str, original: Callable[..., Any]) -> Callable[..., Any]:
    @functools.wraps(original)
    def method(self: Any, *args: Any, **kwargs: Any) -> Any:
        check(sh, self, f"Team.{name}")
        return original(self, *args, **kwargs)

    return method


def _guard_collective(sh: Any, name: str, original: Callable[..., Any]) -> Callable[..., Any]:
    @functools.wraps(original)
    def collective(*args: Any, **kwargs: Any) -> Any:
        team = kwargs.get("team", args[-1] if args and isinstance(args[-1], sh.Team) else None)
        check(sh, team, f"shmem.{name}")
        return original(*args, **kwargs)

    return collective


def _stamp_new(sh: Any, original: Callable[..., Any]) -> staticmethod[[type[Any], Any], Any]:
    """``Team.__new__`` that stamps the Team with its age (a copy of a Team keeps the original's)."""

    def new(cls: type[Any], team: Any = None) -> Any:
        self = original(cls, team)
        setattr(self, _BORN, getattr(team, _BORN, -1) if isinstance(team, sh.Team) else this_pe.teams.destroys)
        if isinstance(team, sh.Team) and teams.was_destroyed(team):
            teams.mark_destroyed(self)
        return self

    return staticmethod(new)


def install(sh: Any) -> Callable[[], None]:
    """Put the guards on shmem4py's Team methods and collectives, after :func:`.teams.install` chose the
    native mode; return the undo."""
    patches = Patches()
    this_pe.teams.native_slots[_handle(sh, sh.TEAM_SHARED)] = 1  # slot 1 is TEAM_SHARED's, as when emulated
    patches.set(sh.Team, "__new__", _stamp_new(sh, sh.Team.__new__))
    for name in ("my_pe", "n_pes", "sync", "get_config", "create_ctx"):
        if hasattr(sh.Team, name):
            patches.set(sh.Team, name, _guard_method(sh, name, getattr(sh.Team, name)))
    translate = sh.Team.translate_pe

    @functools.wraps(translate)
    def translate_pe(
        self: Any, pe: int | None = None, team: Any = None
    ) -> Any:  # both teams: the library reads the destination's too
        check(sh, self, "Team.translate_pe")
        check(sh, team, "Team.translate_pe (its destination team)")
        return translate(self, pe, team)

    patches.set(sh.Team, "translate_pe", translate_pe)
    split, destroy = sh.Team.split_strided, sh.Team.destroy

    @functools.wraps(split)
    def split_strided(
        self: Any, start: int = 0, stride: int = 1, size: int | None = None, config: Any = None, **kwargs: Any
    ) -> Any:
        check(sh, self, "split_strided")
        n = self.n_pes()
        size = (len(range(start, n, stride)) if stride > 0 else 0) if size is None else size
        picked = [start + i * stride for i in range(size)]
        if size < 1 or (stride < 1 and size > 1) or not all(0 <= i < n for i in picked):
            raise InputError(
                f"split_strided(start={start}, stride={stride}, size={size}) does not pick PEs of a team of {n}: "
                f"use start >= 0, stride >= 1, size >= 1 and start + (size - 1) * stride < {n}"
            )
        team = split(self, start, stride, size, config, **kwargs)
        _take_slots(sh, self, [team])
        return team

    @functools.wraps(destroy)
    def destroy_(self: Any) -> None:  # on TEAM_INVALID or a destroyed team: nothing to do, as in shmem4py
        handle = _handle(sh, self)
        if _stale(handle, self):  # a copy of a destroyed team: its handle may be another team's now
            self.ob_team = sh.lib.SHMEM_TEAM_INVALID
            return
        destroy(self)
        if handle and _handle(sh, self) == 0:  # a team of its own (not world or shared): gone now
            this_pe.teams.destroyed[handle] = this_pe.teams.destroys
            this_pe.teams.destroys += 1
            teams.mark_destroyed(self)
            slot = this_pe.teams.native_slots.pop(handle, None)
            if slot is not None:
                this_pe.teams.free |= 1 << slot

    split_2d = sh.Team.split_2d

    @functools.wraps(split_2d)
    def split_2d_(self: Any, xrange: int, *args: Any, **kwargs: Any) -> Any:
        check(sh, self, "split_2d")
        if int(xrange) < 1:
            raise InputError(f"split_2d(xrange={xrange}): xrange must be at least 1")
        pair = split_2d(self, xrange, *args, **kwargs)
        _take_slots(sh, self, list(pair))
        return pair

    patches.set(sh.Team, "split_strided", split_strided)
    patches.set(sh.Team, "split_2d", split_2d_)
    patches.set(sh.Team, "destroy", destroy_)
    for name in ("sync", "broadcast", "collect", "fcollect", "alltoall", "alltoalls"):
        patches.set(sh, name, _guard_collective(sh, name, getattr(sh, name)))
    library_reduce = sh.reduce

    @functools.wraps(library_reduce)
    def reduce(
        target: npt.NDArray[Any],
        source: npt.NDArray[Any],
        op: str = "sum",
        size: int | None = None,
        team: Any = None,
    ) -> Any:
        check(sh, team, "shmem.reduce")
        try:
            return library_reduce(target, source, op, size, team)
        except AttributeError:  # no shmem_<type>_<op>_reduce in the library: checked before any communication
            t, s = teams.flat_pair(target, source, "reduce")
            name = teams.check_reduce(op, t.dtype)
            size = teams.checked_size(size, min(t.size, s.size), "reduce")
            t[:size] = teams.reduce_values(teams.members(team, "shmem.reduce"), s, size, name)

    patches.set(sh, "reduce", reduce)
    return patches.undo
