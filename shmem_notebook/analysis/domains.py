"""Atomicity domains: which AMOs are atomic with respect to each other (client side).

OpenSHMEM 1.5 guarantees exclusivity to atomic operations on one location and of one datatype
(section 3.1, *Atomicity Guarantees*), and associates every communication context with a team
(section 9.5, *Communication Management Routines*: the default context and ``shmem_ctx_create``'s
with the world team, ``shmem_team_create_ctx``'s with its team). The rule applied here: two AMOs
are atomic with respect to each other only when they also go through contexts of one team, their
*atomicity domain*. An AMO's domain is what the PE recorded in its event's ``domain`` field: None
for the world team's contexts (the default context included), else ``"slot:pe,pe..."`` (the team's
slot of the tool's reserved words, agreed by its members, and its world PEs: see
:mod:`shmem_notebook.engine.teams`). Pure functions of plain data.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from ..folding import pe_ranges

if TYPE_CHECKING:
    from typing import Protocol

    class _Access(Protocol):
        line: int
        op: str
        domain: str | None


__all__ = ["differ", "name", "hint"]

#: the slot of TEAM_SHARED (engine/teams.py reserves slot 0 for TEAM_WORLD, 1 for TEAM_SHARED)
_SHARED_SLOT = "1"


def differ(a: _Access, b: _Access) -> bool:
    """Whether two atomic accesses (``a.domain``, ``b.domain``) go through contexts of different teams."""
    return a.domain != b.domain


def name(domain: str | None) -> str:
    """A domain as a report says it: ``'a world context'``, ``'a context of TEAM_SHARED (PEs 0-1)'``,
    ``'a context of a team of PE 2'``."""
    if domain is None:
        return "a world context"
    slot, _, listed = domain.partition(":")
    pes = [int(pe) for pe in listed.split(",") if pe]
    members = f"PE {pes[0]}" if len(pes) == 1 else f"PEs {pe_ranges(pes)}"
    if slot == _SHARED_SLOT:
        return f"a context of TEAM_SHARED ({members})"
    return f"a context of a team of {members}"


def hint(a: _Access, b: _Access) -> str:
    """The hint of a race between two AMOs of different domains: why, in one clause, and the fix."""
    first = f"line {a.line}'s {a.op} goes through {name(a.domain)}"
    second = f"line {b.line}'s {b.op} through {name(b.domain)}"
    return (
        f"{first}, {second}: AMOs through contexts of different teams are not atomic with respect to each "
        f"other; use one team's contexts for every AMO on that word, e.g. the default context"
    )
