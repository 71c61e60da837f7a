"""PEs an interrupt left blocked in OpenSHMEM, released one call at a time (client side).

Ctrl-C (or a timeout) sends SIGINT to every PE. A PE running Python raises KeyboardInterrupt at once;
a PE inside a barrier, a collective or a wait takes it only when the call returns, and the PEs it
waits for may have just raised. :func:`release` frees them, so that the job stays usable, round
after round, from what each blocked PE's thread tells (:meth:`Job.blocked_calls
<shmem_notebook.job.health.Health.blocked_calls>`):

- PEs in a wait (``wait_until`` and its ``_all/_any/_some`` and vector forms, ``signal_wait_until``): a
  PE that ended the cell puts the value each waits for; the words it wrote are put back when every PE
  ended (``released``), so the cell leaves the flags as it found them.
- PEs all in one world collective with the same arguments, or in one world synchronisation: the
  PEs that ended the cell make the same call (``join``).

Each released PE raises the interrupt as its call returns; the next round looks again (a PE freed from
a wait may stop in a barrier the others already left, or go on to the next). What cannot be released
this way (a team's collective, a lock, calls that differ) goes to :func:`.stranded.release`, which
joins what it can and pauses the rest.
"""

from __future__ import annotations

import contextlib
import json
from typing import TYPE_CHECKING, Any, cast

import numpy as np

from ..errors import ShmemNotebookError
from ..operations import CALLS, JOINABLE
from . import stranded

if TYPE_CHECKING:
    from collections.abc import Sequence

    from .surface import JobSurface, SentCell

__all__ = ["WAITS", "release", "satisfying"]

#: the waits a PE that ended the cell can end: name -> (the flags' argument, the value's, vector?)
WAITS: dict[str, tuple[str, str, bool]] = {
    "wait_until": ("ivar", "value", False),
    "signal_wait_until": ("signal", "value", False),
    **{f"wait_until_{k}": ("ivars", "value", False) for k in ("all", "any", "some")},
    **{f"wait_until_{k}_vector": ("ivars", "values", True) for k in ("all", "any", "some")},
}
#: rounds of release before what is left goes to :func:`.stranded.release`
ROUNDS = 8


def release(job: JobSurface, cell: SentCell, where: dict[int, Any]) -> list[int]:
    """Free the PEs of ``where`` (``{pe: (line, call)}``, blocked after the interrupt) round by round;
    what is left goes to :func:`.stranded.release`. Returns the PEs still running ``cell`` (paused)."""
    restore: dict[str, list[Any]] = {}
    for round_ in range(ROUNDS):
        pending = cell.pending()
        free = [pe for pe in range(job.n) if pe not in pending]
        if not pending or not free:
            break
        # the first round starts from where the caller saw them (seen twice in place); later ones look again
        where = job.locate(pending) if round_ else {pe: w for pe, w in where.items() if pe in pending}
        if not _round(job, cell, where, free, restore):
            break
    pending = cell.pending()
    if pending:
        return stranded.release(job, cell, job.locate(pending), restore)
    with contextlib.suppress(ShmemNotebookError):  # every PE ended the cell: they answer at once
        job.ask("released", restore, timeout=10)
    return []


def _round(
    job: JobSurface, cell: SentCell, where: dict[int, Any], free: list[int], restore: dict[str, list[Any]]
) -> bool:
    """One round: release the waits, else join the one call every blocked PE is in; whether it did."""
    if any(not isinstance(w, tuple) for w in where.values()):
        return False
    calls = {call for _, call in where.values()}
    if len(calls) == 1 and calls <= set(JOINABLE) and stranded.joinable(job, where):
        return _ask(job, cell, where, "join", (calls.pop(),), free, list(where))
    told = job.blocked_calls(list(where))
    if any(not t or not t.get("call") or t.get("args") is None for t in told.values()):
        return False
    waits = {pe: t for pe, t in told.items() if t["call"] in WAITS}
    if waits:
        polls = getattr(getattr(job, "library", None), "polls", False)
        for pe, t in waits.items():
            writes, olds = satisfying(t)
            if writes is None:
                return False
            # where the wait polls its word, it is written straight into the PE's memory (no PE's help: on
            # OSHMPI a put and quiet to a second PE blocked in a wait was seen never to return)
            written = polls and all(job.write_word(pe, at, bytes.fromhex(data)) for (_, at), data in writes)
            if not written and not _ask(job, cell, where, "poke", (pe, [[s, d] for (s, _), d in writes]), free[:1], []):
                return False
            restore.setdefault(str(pe), []).extend(cast("list[list[Any]]", olds))
        return _ended(job, cell, where, list(waits))
    shapes = {json.dumps([t["call"], _bare(t["args"]), _bare(t["kwargs"])], sort_keys=True) for t in told.values()}
    call = next(iter(told.values()))
    op = CALLS.get(call["call"])
    if len(shapes) != 1 or op is None or not op.collective:
        return False
    return _ask(job, cell, where, "join", (call["call"], call["args"], call["kwargs"]), free, list(where))


def _ask(
    job: JobSurface,
    cell: SentCell,
    where: dict[int, Any],
    op: str,
    args: Sequence[Any],
    pes: list[int],
    released: list[int],
) -> bool:
    """Ask ``pes`` for ``op(*args)``, then wait until ``released`` ended the cell; whether all went well."""
    try:
        job.ask(op, *args, pes=pes, timeout=10)
    except ShmemNotebookError:
        return False
    return _ended(job, cell, where, released)


def _ended(job: JobSurface, cell: SentCell, where: dict[int, Any], pes: list[int]) -> bool:
    stranded.ended(job, cell, where, pes)
    return not set(pes) & set(cell.pending())


def _bare(value: Any) -> Any:
    """``value`` without the arrays' contents and addresses (they differ from PE to PE; the call is the same)."""
    if isinstance(value, dict):
        return {k: _bare(v) for k, v in value.items() if k not in ("now", "at")}
    if isinstance(value, list):
        return [_bare(v) for v in value]
    return value


def satisfying(told: dict[str, Any]) -> tuple[list[Any], list[list[Any]]] | tuple[None, None]:
    """``(writes, olds)`` for a wait :meth:`blocked_calls` told: ``[((sym, address there), hex bytes)]`` that
    end it, and the words as they were (``[(sym, hex bytes)]``), to put back; ``(None, None)`` when its
    arguments do not say."""
    flags_name, value_name, vector = WAITS[told["call"]]
    names = ("signal" if told["call"] == "signal_wait_until" else flags_name, "cmp", value_name, "status")
    given = dict(zip(names, told["args"])) | told["kwargs"]
    flags, cmp, value = given.get(names[0]), given.get("cmp"), given.get(value_name)
    if not isinstance(flags, dict) or "now" not in flags or not isinstance(cmp, dict) or "name" not in cmp:
        return None, None
    k, offset, dtype, shape, strides = flags["sym"]
    now = np.frombuffer(bytes.fromhex(flags["now"]), dtype).reshape(shape)
    new = now.copy().reshape(-1)
    values = _numbers(value, new.size if vector else None)
    status = _numbers(given.get("status"), new.size) if given.get("status") is not None else [0] * new.size
    if values is None or status is None:
        return None, None
    picked = [i for i in range(new.size) if not status[i]]
    if told["call"].startswith(("wait_until_any", "wait_until_some")):
        picked = picked[:1]
    for i in picked:
        target = values[i] if vector else values
        new[i] = _meets(cmp["name"], target, np.dtype(dtype))
    write = [(flags["sym"], flags.get("at")), np.ascontiguousarray(new.reshape(shape)).tobytes().hex()]
    return [write], [[flags["sym"], flags["now"]]]


def _numbers(value: Any, n: int | None) -> Any:
    """A number (``n`` None) or ``n`` numbers from an encoded argument, else None."""
    if isinstance(value, dict) and "scalar" in value:
        value = value["value"]
    elif isinstance(value, dict) and "list" in value:
        value = [v["value"] if isinstance(v, dict) and "value" in v else v for v in value["list"]]
    elif isinstance(value, dict) and "private" in value:
        value = np.frombuffer(bytes.fromhex(value["bytes"]), value["private"]).tolist()
    elif isinstance(value, dict) and "sym" in value and "now" in value:
        value = np.frombuffer(bytes.fromhex(value["now"]), value["sym"][2]).tolist()
    if n is None:
        return value if isinstance(value, (int, float)) else None
    if isinstance(value, list) and len(value) == n and all(isinstance(v, (int, float)) for v in value):
        return value
    return None


def _meets(cmp: str, value: float, dtype: np.dtype[Any]) -> float:
    """A value of ``dtype`` for which ``x cmp value`` holds."""
    step = 1 if dtype.kind in "iub" else max(abs(value) * 1e-6, 1.0)
    return {"EQ": value, "GE": value, "LE": value, "NE": value + step, "GT": value + step, "LT": value - step}[cmp]
