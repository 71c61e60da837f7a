"""HTML and text tables of a :class:`~.snapshot.Snapshot`: PE state, arrays, exact values."""

import html
import time
from collections.abc import Iterable
from typing import TYPE_CHECKING, Any

import numpy as np

from ..specs import format_size
from ..words import plural

if TYPE_CHECKING:
    from ..analysis.happens_before import Race
    from .snapshot import Snapshot

__all__ = ["state_table", "arrays_table", "values_table", "race_marks", "summary_line", "VALUES_MAX"]

VALUES_MAX = 64  # exact numbers are tabulated for arrays of at most this many elements per PE
_STATE_COLOURS = {"idle": "#2ca02c", "busy": "#ff7f0e", "hung": "#9467bd", "dead": "#d62728"}
_CSS = (
    "<style>"
    ".shmem-table{border-collapse:collapse;font-size:13px;font-family:monospace;margin:4px 0}"
    ".shmem-table th,.shmem-table td{border:1px solid #ccc;padding:2px 8px;text-align:right;vertical-align:top;"
    "white-space:nowrap}"  # "PE 0", "0.098 s", "1.0 MiB / 256.0 MiB" never break
    ".shmem-table small{white-space:normal;display:inline-block;max-width:16em}"
    ".shmem-table th{background:#f3f3f3}"
    ".shmem-table td.l{text-align:left}"
    ".shmem-table td.first{border-top:2px solid #888}"  # the first row of a PE in a shaped values table
    ".shmem-table td.diff{background:#f7c6c6;font-weight:bold}"
    ".shmem-table td.race{outline:2px solid #d62728;outline-offset:-2px;font-weight:bold}"
    ".shmem-table pre{margin:0;font-size:12px;max-width:420px;white-space:pre-wrap}"
    ".shmem-badge{color:white;border-radius:4px;padding:0 6px;font-weight:bold}"
    "</style>"
)


def _e(x: object) -> str:
    return html.escape(str(x))


def _table(css_class: str, header: list[str], rows: list[list[tuple[Any, str]]], html_out: bool = True) -> str:
    """``rows``: lists of (text, td-class) cells; HTML, or aligned text when ``html_out`` is false."""
    if not html_out:
        texts = [header] + [[str(c[0]) for c in r] for r in rows]
        widths = [max(len(line.splitlines()[0] if line else "") for line in col) for col in zip(*texts)]
        return "\n".join(
            "  ".join(t.splitlines()[0].ljust(w) if t else " " * w for t, w in zip(r, widths)).rstrip() for r in texts
        )
    head = "".join(f"<th>{_e(h)}</th>" for h in header)
    body = "".join("<tr>" + "".join(f'<td class="{cls}">{cell}</td>' for cell, cls in r) + "</tr>" for r in rows)
    return f'{_CSS}<table class="shmem-table {css_class}"><thead><tr>{head}</tr></thead><tbody>{body}</tbody></table>'


def _badge(state: str, html_out: bool) -> str:
    if not html_out:
        return state
    return f'<span class="shmem-badge" style="background:{_STATE_COLOURS.get(state, "#777")}">{_e(state)}</span>'


def state_table(snapshot: "Snapshot", html_out: bool = True) -> str:
    """Per PE: state, last cell outcome and duration, output tail, RSS, pid, host, heap use."""
    rows: list[list[tuple[Any, str]]] = []
    for p in snapshot.pes:
        cell = p["last_cell"]
        seconds = f"{cell['seconds']:.3f} s" if cell["seconds"] is not None else "-"
        outcome = cell["outcome"] or "-"
        heap = p["heap"]
        used = "-" if heap["used"] is None else f"{format_size(heap['used'])} / {format_size(heap['size'] or 0)}"
        state = p["state"] + ("" if p["reachable"] else " (no data)")
        tail = p["output_tail"]
        if html_out:
            state_cell = _badge(p["state"], True) + (f"<br><small>{_e(p['note'])}</small>" if p["note"] else "")
            outcome_cell = _e(outcome) if outcome in ("ok", "-") else f'<b style="color:#d62728">{_e(outcome)}</b>'
            tail_cell = f"<pre>{_e(tail)}</pre>" if tail else ""
        else:
            state_cell, outcome_cell, tail_cell = state, outcome, tail.splitlines()[-1] if tail else ""
        rows.append(
            [
                (f"PE {p['pe']}", ""),
                (state_cell, "l"),
                (outcome_cell, "l"),
                (seconds, ""),
                (format_size(p["rss"]) if p["rss"] else "-", ""),
                (p["pid"] or "-", ""),
                (_e(p["host"] or "-") if html_out else p["host"] or "-", "l"),
                (used, ""),
                (tail_cell, "l"),
            ]
        )
    header = ["PE", "state", "last cell", "took", "RSS", "pid", "host", "heap used / size", "output (tail)"]
    return _table("shmem-pe-state", header, rows, html_out)


def arrays_table(snapshot: "Snapshot", html_out: bool = True) -> str:
    """Every symmetric allocation in heap order: name, dtype, shape, bytes, offset, origin, transfer."""
    rows: list[list[tuple[Any, str]]] = []
    first: dict[str, Any] = next((p for p in snapshot.pes if p["reachable"]), {})  # {}: none answered
    for b in first["blocks"] if first else []:
        info = first["arrays"].get(b["name"]) if b["name"] else None
        holders = [p["pe"] for p in snapshot.pes if b["name"] and b["name"] in p["arrays"]]
        if info is None:
            cells = ["(unnamed)", "-", "-", b["bytes"], f"{b['offset']:#x}", "shmem4py, no name", "-"]
        else:
            how = "exact" if info["exact"] else _blocks(info)
            origin = "declared" if info["declared"] else "shmem4py"
            if b["aliases"]:
                origin += f" (also {', '.join(b['aliases'])})"
            cells = [
                b["name"],
                info["dtype"],
                list(info["shape"]),
                info["bytes"],
                f"{b['offset']:#x}",
                origin,
                how + ("" if len(holders) == snapshot.npes else f" (PE {','.join(map(str, holders))})"),
            ]
        rows.append([(_e(c) if html_out else c, "l" if i in (0, 1, 5, 6) else "") for i, c in enumerate(cells)])
    if first and first["omitted"]["count"]:
        more = f"(+{first['omitted']['count']} more)"
        cells = [more, "-", "-", first["omitted"]["bytes"], "-", "not listed: too many to describe", "-"]
        rows.append([(_e(c) if html_out else c, "l" if i in (0, 5) else "") for i, c in enumerate(cells)])
    if not rows:
        return "<p>no symmetric allocations on the PEs that answered</p>" if html_out else "no symmetric allocations"
    return _table("shmem-arrays", ["name", "dtype", "shape", "bytes", "offset", "origin", "transfer"], rows, html_out)


def _blocks(info: dict[str, Any]) -> str:
    br, bc = info["summary"]["block"]
    gr, gc = info["summary"]["grid"]
    size = f"{bc}-element blocks" if len(info["shape"]) <= 1 else f"{br}x{bc} blocks"
    return f"summary: {gr * gc} {size}"


def race_marks(races: Iterable["Race"] | None, name: str) -> set[tuple[int, int]]:
    """``{(pe, flat index)}`` of the elements of array ``name`` that races in ``races`` touch."""
    return {
        (pe, i) for r in races or () if r.array == name for pe in (r.pes or (r.pe,)) for rng in r.indices for i in rng
    }


def values_table(
    snapshot: "Snapshot",
    name: str,
    reference: int | None = None,
    html_out: bool = True,
    races: Iterable["Race"] | None = None,
    flat: bool = False,
) -> str:
    """Exact numbers of a small array, PE by PE; differing cells highlighted, elements in
    ``races`` (the last cell's :class:`~shmem_notebook.Race` list) outlined (``!`` in text). '' when too large.
    An N-D array keeps its shape: per PE, one row per index of all but the last axis, one column per
    index of the last (a 6x8 array: 6 rows of 8); ``flat``: one row per PE, every element a column."""
    if not snapshot.is_exact(name):
        return ""
    values = snapshot.values(name)
    per_pe = int(np.prod(values.shape[1:]))
    if per_pe > VALUES_MAX or per_pe == 0:
        return ""
    shape = values.shape[1:]
    columns = shape[-1] if len(shape) > 1 and not flat else per_pe
    values = values.reshape(snapshot.npes, -1)
    mask = snapshot.diff(name, reference).reshape(snapshot.npes, -1)
    marks = race_marks(races, name)

    def index(i: int) -> str:
        return ",".join(map(str, np.unravel_index(i, shape)))

    if columns == per_pe:
        header = ["PE"] + [index(i) for i in range(per_pe)]
    else:
        header = ["PE", "[" + ", ".join("ijklmnop"[: len(shape) - 1]) + ", :]"] + [str(j) for j in range(columns)]
    rows: list[list[tuple[Any, str]]] = []
    for pe in range(snapshot.npes):
        label = f"PE {pe}" + (" (ref)" if pe == reference else "")
        for start in range(0, per_pe, columns):
            first = "first" if start == 0 and columns != per_pe else ""
            row = [(label if start == 0 else "", first)]
            if columns != per_pe:
                row.append((index(start).rpartition(",")[0], "l " + first))
            for i in range(start, start + columns):
                if name not in snapshot.pes[pe]["arrays"]:
                    row.append(("-", first))
                    continue
                racing = (pe, i) in marks
                text = _format(values[pe, i]) + ("!" if racing and not html_out else "")
                row.append(
                    (text, " ".join(c for c, on in (("diff", mask[pe, i]), ("race", racing), (first, first)) if on))
                )
            rows.append(row)
    return _table("shmem-values", header, rows, html_out)


def _format(v: object) -> str:
    return f"{v:.6g}" if isinstance(v, (float, np.floating, complex, np.complexfloating)) else str(v)


def summary_line(snapshot: "Snapshot") -> str:
    """``4 PEs, refreshed 12:01:02 in 0.21 s, 123 KiB received``."""
    stamp = time.strftime("%H:%M:%S", time.localtime(snapshot.time))
    answered = sum(p["reachable"] for p in snapshot.pes)
    missing = "" if answered == snapshot.npes else f" ({snapshot.npes - answered} without data)"
    return (
        f"{plural(snapshot.npes, 'PE')}{missing}, job {snapshot.job_state}; "
        f"refreshed {stamp} in {snapshot.seconds:.2f} s, "
        f"{format_size(snapshot.payload_bytes)} received"
    )
