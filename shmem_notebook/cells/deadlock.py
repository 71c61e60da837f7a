"""Cells in which every PE waits for another: deadlocks named within about a second (client side).

A cell is deadlocked when every PE waits in OpenSHMEM, or polls symmetric memory in a Python loop
only another PE can end (:func:`.stranded.polling_lines`), and none of them can end another's wait:
some PE waits for a value or a lock (``wait_until`` and its kin, ``signal_wait_until``, ``set_lock``,
a polling loop), which only a PE that moves on could write, or some wait in a world barrier that
others never reach. No PE moves on, so no write is coming.

:class:`Watch` notices it while the cell runs without disturbing the PEs until it is likely: it
reads the job's wait board (the time each PE entered the blocking call it is in, written by the PEs:
:mod:`shmem_notebook.engine.shims.board`) at every turn of the cell path's loop; once every PE has
waited ``rc.deadlock_ms`` with no entry changing, it looks where they are (their stacks,
``job.locate``), and a second look :data:`AGAIN` seconds later that finds the same entries and the
same places is the verdict. A PE that computes is in no blocking call, so a slow peer is never
taken for a deadlock; a PE that leaves a call and enters another (a loop of barriers) writes a new
entry. The cell then ends as when PEs wait for others that ended it (:func:`.stranded.release`):
PEs polling in Python are interrupted, PEs then left in one world barrier are joined, PEs in a team
call the tool emulates are interrupted, and the job stays ready; otherwise the waiting PEs are
paused (no CPU) and the job is marked hung until a restart.

Every PE waiting, unchanged, in calls a look found no deadlock in (a collective they are all in) for
:data:`LONG_WAIT` s is said once, as a notice on the cell's stderr: it may be hung inside the library
(CI met Sandia OpenSHMEM's reduce so) or the PEs passed it different teams; the cell goes on.

Where the PEs keep no board (PEs on other hosts, ``SHMEM_NOTEBOOK_POLITE_MS=0`` in their
environment) or with ``rc.deadlock_ms = 0``, a deadlock runs until the timeout or the stop button.
"""

from __future__ import annotations

import ast
import math
import time
from typing import TYPE_CHECKING, Any

from ..analysis.postmortem import where_report
from ..folding import fold, pe_ranges
from ..operations import CALLS
from ..rc import rc
from .stranded import BLOCKING, POLL_NAMES, polling_lines, shown

if TYPE_CHECKING:
    from collections.abc import Mapping

    from .surface import JobSurface

__all__ = [
    "AGAIN",
    "FOR_A_WRITE",
    "LONG_WAIT",
    "WORLD",
    "Watch",
    "deadlocked",
    "condition",
    "lingering_message",
    "message",
]

#: seconds between the two looks that must agree
AGAIN = 0.3
#: seconds between looks while a PE outside any blocking call may be polling (the cell has polling loops)
_IDLE_LOOK = 1.0
#: seconds every PE may wait, unchanged, in calls a look found no deadlock in (a collective all of them
#: are in) before the cell says, once, that they may be hung inside the library (:meth:`Watch.lingering`)
LONG_WAIT = 30.0
#: calls that return only once another PE writes a value (or clears a lock)
FOR_A_WRITE = frozenset(
    name
    for name, op in CALLS.items()
    if name in BLOCKING and (name == "set_lock" or (op.kind == "wait" and name.startswith(("wait", "signal_wait"))))
)
#: synchronisations that need every PE
WORLD = ("barrier_all", "sync_all")
#: what the user wrote for a comparison: shmem.CMP.EQ, "eq" or "=="
_CMP = {"eq": "==", "ne": "!=", "gt": ">", "ge": ">=", "lt": "<", "le": "<="}
RELEASED = "the rest of the cell was abandoned on every PE; the job is ready and every PE kept its variables"


class Watch:
    """One cell's look-out for a deadlock while every PE still runs it: the cell path calls
    :meth:`look` at each turn of its loop (every 50 ms)."""

    def __init__(self, job: JobSurface, code: str) -> None:
        self.job, self.code = job, code
        self.settle = max(rc.deadlock_ms, 0) / 1000
        self.polls: set[int] = polling_lines(code) if self.settle else set()
        self.since: dict[int, int] | None = None  # the board as last read: {pe: ns it entered its call, 0: none}
        self.seen: dict[int, Any] | None = None  # where the PEs were at a first look that found them deadlocked
        self.found_none = False  # a look found no deadlock and the board has not changed since
        self.where: dict[int, Any] = {}  # where that look found every PE
        self.told = False  # lingering() said it
        self.next = 0.0 if self.settle else math.inf

    def look(self, now: float) -> dict[int, Any] | None:
        """``{pe: (line, call)}`` once two looks found the PEs deadlocked at the same places (``call``
        None: a polling loop), else None."""
        if now < self.next:
            return None
        since = self.job.waiting_since()
        if since is None:  # no board here: no check for this cell
            self.next = math.inf
            return None
        if since != self.since:
            self.since, self.seen, self.found_none = since, None, False
        waiting = [ns for ns in since.values() if ns]
        everyone = len(waiting) == len(since)
        if not waiting or (not everyone and not self.polls) or (everyone and self.found_none):
            return None  # a PE computes, or all are where a look found no deadlock (a slow collective)
        settled = time.monotonic_ns() / 1e9 - max(waiting) / 1e9
        if settled < self.settle:
            self.next = now + self.settle - settled
            return None
        where = self.job.locate(range(self.job.n))
        found = deadlocked(where, since, self.polls) if self.job.waiting_since() == since else None
        if found is None:  # some PE computes (it may be about to write), or moved meanwhile
            self.seen, self.found_none, self.where = None, True, where
            self.next = time.monotonic() + _IDLE_LOOK
            return None
        if found == self.seen:
            return found
        self.seen, self.next = found, time.monotonic() + AGAIN
        return None

    def lingering(self) -> dict[int, Any] | None:
        """Once per cell: where every PE is (as the last look found them) when all of them have waited
        :data:`LONG_WAIT` s in calls that look found no deadlock in, the board unchanged since: a
        collective every PE is in that does not end, hung inside the library (CI met Sandia
        OpenSHMEM's reduce so) or given different teams. Else None."""
        if self.told or not self.found_none or not self.since:
            return None
        waiting = [ns for ns in self.since.values() if ns]
        if len(waiting) < len(self.since) or time.monotonic_ns() / 1e9 - max(waiting) / 1e9 < LONG_WAIT:
            return None
        self.told = True
        return self.where


def lingering_message(where: Mapping[int, Any], code: str, npes: int) -> str:
    """What :meth:`Watch.lingering` found, in words, with a line per group of PEs."""
    lines = "\n".join(where_report(where, code, npes))
    return (
        f"shmem_notebook: every PE has waited {LONG_WAIT:g} s in a call they are all in, so no PE is missing from "
        "it, and it does not end: the PEs may have passed it different teams or arguments, or it hangs inside the "
        "OpenSHMEM library. The cell goes on; to end it, interrupt the kernel (the stop button), then run "
        f"`%shmem restart` if the PEs stay blocked. Where every PE is:\n{lines}\n"
    )


def deadlocked(where: dict[int, Any], since: Mapping[int, int], polls: set[int]) -> dict[int, Any] | None:
    """``where`` (``{pe: (line, call)}`` of every PE) when it is a deadlock, else None: every PE on
    the board (``since``) is in a blocking call, every other polls at a line of ``polls``, and some PE
    waits for a write (:data:`FOR_A_WRITE`, a polling loop) or in a world synchronisation that
    another PE is not in."""
    for pe, at in where.items():
        if not isinstance(at, tuple):
            return None
        line, call = at
        if call not in BLOCKING if since.get(pe) else call is not None or line not in polls:
            return None
    calls = {call for _, call in where.values()}
    world = [pe for pe, (_, call) in where.items() if call in WORLD]
    if None in calls or calls & FOR_A_WRITE or 0 < len(world) < len(where):
        return where
    return None


def message(where: Mapping[int, tuple[int, str | None]], released: bool, restart_hint: str, code: str | None) -> str:
    """``the cell is deadlocked: PE 0 waits at line 2 for flag[0] == 1, which no PE will write; PE 1-3
    wait in shmem.barrier_all() at line 3, which PE 0 never reaches; ...``: one clause per group of PEs
    at one place, then what became of them."""
    tree = _parsed(code)
    world = {pe for pe, (_, call) in where.items() if call in WORLD}
    parts: list[str] = []
    for (line, call), pes in fold(where).items():
        one = len(pes) == 1
        who = f"PE {pe_ranges(pes)} {'waits' if one else 'wait'}"
        if call is None:
            loop = _loop(tree, line)
            polled = " and ".join(_names(loop.test)) if loop else "memory"
            text = f" (while {ast.unparse(loop.test)})" if loop else ""
            polls = "polls" if one else "poll"
            parts.append(f"PE {pe_ranges(pes)} {polls} {polled} at line {line}{text}, which no PE will write")
        elif call == "set_lock":
            parts.append(f"{who} in shmem.set_lock() at line {line} for a lock no PE will clear")
        elif call in FOR_A_WRITE:
            cond = condition(tree, call, line)
            what = f"for {cond}, which no PE will write" if cond else "for a value no PE will write"
            parts.append(f"{who} at line {line} {what}" if cond else f"{who} in shmem.{call}() at line {line} {what}")
        elif call in WORLD:
            missing = sorted(set(where) - world)
            reach = "reaches" if len(missing) == 1 else "reach"
            parts.append(f"{who} in shmem.{call}() at line {line}, which PE {pe_ranges(missing)} never {reach}")
        else:
            parts.append(f"{who} in {shown(call, line, code)} at line {line} for team members that never reach it")
    head = "the cell is deadlocked (every PE waits for another): "
    if released:
        return head + "; ".join(parts + [RELEASED])
    return head + "; ".join(
        parts
        + [
            "the waiting PEs cannot be released from these calls (only a polling loop, a world barrier or sync, "
            f"or a team call the tool emulates, can be), so they are paused (no CPU) and the job is marked hung: "
            f"{restart_hint}"
        ]
    )


def condition(tree: ast.AST, call: str, line: int) -> str | None:
    """What the wait of ``call`` at ``line`` of the cell (``tree``) waits for, as written: ``flag[0] ==
    1``, ``all of flags >= 1``; None when it cannot be read from the cell."""
    node = _call_at(tree, call, line)
    if node is None or any(isinstance(a, ast.Starred) for a in node.args):
        return None
    names = ("ivars", "cmp", "values" if call.endswith("_vector") else "value")
    if call in ("wait_until", "signal_wait_until"):
        names = ("signal" if call.startswith("signal") else "ivar", "cmp", "value")
    given = dict(zip(names, node.args)) | {k.arg: k.value for k in node.keywords if k.arg in names}
    if len(given) < 3:
        return None
    what, cmp, value = (given[name] for name in names)
    op = _comparison(cmp)
    if call in ("wait_until", "signal_wait_until"):
        target = f"{what.id}[0]" if isinstance(what, ast.Name) else ast.unparse(what)
        return f"{target} {op} {ast.unparse(value)}"
    kind = call.split("_")[2]  # wait_until_all -> all
    return f"{kind} of {ast.unparse(what)} {op} {ast.unparse(value)}"


def _comparison(cmp: ast.expr) -> str:
    """``==`` for ``shmem.CMP.EQ``, ``"eq"`` or ``"=="``; else the expression as written."""
    if isinstance(cmp, ast.Attribute) and cmp.attr.lower() in _CMP:
        return _CMP[cmp.attr.lower()]
    if isinstance(cmp, ast.Constant) and isinstance(cmp.value, str):
        word = cmp.value.lower()
        return _CMP.get(word, word if word in _CMP.values() else repr(cmp.value))
    return f"({ast.unparse(cmp)})"


def _parsed(code: str | None) -> ast.Module:
    try:
        return ast.parse(code or "")
    except SyntaxError:
        return ast.Module(body=[], type_ignores=[])


def _call_at(tree: ast.AST, call: str, line: int) -> ast.Call | None:
    """The innermost call of ``call`` (``shmem.wait_until(...)``, ``wait_until(...)``) spanning ``line``."""
    found: ast.Call | None = None
    for node in ast.walk(tree):
        if isinstance(node, ast.Call) and node.lineno <= line <= (node.end_lineno or node.lineno):
            func = node.func
            name = func.attr if isinstance(func, ast.Attribute) else getattr(func, "id", None)
            if name == call and (found is None or node.lineno >= found.lineno):
                found = node
    return found


def _loop(tree: ast.AST, line: int) -> ast.While | None:
    """The innermost ``while`` loop spanning ``line``."""
    loops = [n for n in ast.walk(tree) if isinstance(n, ast.While) and n.lineno <= line <= (n.end_lineno or n.lineno)]
    return max(loops, key=lambda n: n.lineno, default=None)


def _names(test: ast.expr) -> list[str]:
    """The variables a polling loop's condition reads (not ``int``, ``np``, ``me``...), in order."""
    seen: list[str] = []
    for node in ast.walk(test):
        if isinstance(node, ast.Name) and node.id not in POLL_NAMES and node.id not in seen:
            seen.append(node.id)
    return seen or ["memory"]
