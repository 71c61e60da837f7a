"""Where a cut-short trace ends, one sentence per PE (client side): a PE interrupted, stopped by
the timeout, that raised, sent no trace, or whose trace reached the event cap. Shared by the
``--trace`` stage and the race runner's ``--trace``."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from ..operations import CAP

if TYPE_CHECKING:
    from collections.abc import Callable, Mapping

    from ..analysis.report import Stop

__all__ = ["ends", "said"]


def ends(
    per_pe: Mapping[int, dict[str, Any]],
    npes: int,
    stops: Mapping[int, Stop] | None = None,
    where: Callable[[Any], str] | None = None,
    cap: int = CAP,
) -> dict[int, str]:
    """``{pe: sentence}`` for the PEs whose trace does not cover the whole cell. ``per_pe``: what the
    PEs sent (``{pe: data}``); ``stops``: ``{pe: Stop}`` (:func:`~.report.stops_of`); ``where(line)``
    names a line (default ``line 7``)."""
    where = where or (lambda line: f"line {line}")
    out: dict[int, str] = {}
    for pe in range(npes):
        data, stop = per_pe.get(pe), (stops or {}).get(pe)
        if data is None:
            out[pe] = f"PE {pe} sent no trace" + (f" (it {stop.what})" if stop is not None else "")
        elif stop is not None:
            call = data.get("open")  # spooled by a PE that never finished: the call it is in
            at = f" at {where(stop.line)}" if stop.line else ""
            if call and not stop.line:
                at = f" in {call['op']}" + (f" at {where(call['line'])}" if call.get("line") else "")
            last = data["events"][-1]["line"] if data.get("events") else None
            after = f", after its last call at {where(last)}" if last and not stop.line and not call else ""
            out[pe] = f"PE {pe} {stop.what}{at}{after}"
        elif data.get("dropped"):
            last = data["events"][-1]["line"] if data["events"] else None
            at = f" at {where(last)}" if last else ""
            out[pe] = (
                f"PE {pe}'s trace reached the cap of {cap:,} events{at} ({data['dropped']:,} later calls not kept)"
            )
    return out


def said(ends_by_pe: Mapping[int, str]) -> str:
    """The sentences of :func:`ends` joined, PEs that ended alike folded: ``PE 0-1 was interrupted at line 4``."""
    from ..folding import pe_ranges

    alike: dict[str, list[int]] = {}
    for pe, sentence in sorted(ends_by_pe.items()):
        rest = sentence[len(f"PE {pe}") :]
        alike.setdefault(rest, []).append(pe)
    return "; ".join(f"PE {pe_ranges(pes)}{rest}" for rest, pes in alike.items())
