"""Rich output of the PEs (``display(HTML(...))``, matplotlib figures, rich last expressions).

The PEs' display data reach the client in each reply's metadata; :func:`collect`
keeps them on the :class:`~shmem_notebook.cells.CellResult` and :func:`show`
republishes them once the cell finished, labelled by PE as ``%%px`` does. The
n-th display of several PEs is shown once when its data are identical
(``[PE 0-3]``), like identical text lines. Outside IPython (a plain script)
their text is written instead.
"""

from __future__ import annotations

import json
from typing import TYPE_CHECKING, Any

from ..folding import fold, pe_ranges

if TYPE_CHECKING:
    from collections.abc import Callable, Iterable, Mapping

    from .result import CellResult

__all__ = ["collect", "show", "is_rich"]


def collect(result: CellResult, metadata: list[dict[str, Any]]) -> None:
    """Store each PE's display outputs and rich last expression on ``result``."""
    for pe, md in enumerate(metadata):
        outputs = [
            {"data": dict(o.get("data", {})), "metadata": dict(o.get("metadata") or {})}
            for o in md.get("outputs") or []
        ]
        if outputs:
            result.displays[pe] = outputs
        bundle = (md.get("execute_result") or {}).get("data", {})
        if is_rich(bundle):
            result.result_data[pe] = dict(bundle)


def is_rich(data: Iterable[str]) -> bool:
    """Whether a MIME bundle holds more than plain text."""
    return any(mime != "text/plain" for mime in data)


def _key(data: Any) -> str:
    return json.dumps(data, sort_keys=True, default=str)


def _groups(per_pe: Mapping[int, dict[str, Any]]) -> list[tuple[list[int], dict[str, Any]]]:
    """``{pe: bundle}`` -> ``[(pes, bundle)]``, identical bundles folded, in PE order."""
    groups: dict[str, tuple[dict[str, Any], list[int]]] = {}
    for pe, bundle in sorted(per_pe.items()):
        groups.setdefault(_key(bundle["data"]), (bundle, []))[1].append(pe)
    return [(pes, bundle) for bundle, pes in groups.values()]


def _publish(bundle: dict[str, Any], pes: Iterable[int], write: Callable[[str], object]) -> None:
    try:
        from IPython import get_ipython

        shell = get_ipython()
    except ImportError:
        shell = None
    if shell is None:
        write(bundle["data"].get("text/plain", f"<display of {', '.join(bundle['data'])}>") + "\n")
        return
    metadata = dict(bundle.get("metadata") or {})
    metadata["shmem_notebook"] = {"pes": list(pes)}
    shell.display_pub.publish(data=bundle["data"], metadata=metadata)


def show(result: CellResult, write: Callable[[str], object]) -> None:
    """Republish the PEs' displays (the n-th display of every PE together), then the last
    expressions: plain text as ``Out[PE 0-3]: text``, rich ones as themselves.

    ``write`` takes the labels (the cell's stdout writer).
    """
    rounds = max((len(d) for d in result.displays.values()), default=0)
    for i in range(rounds):
        nth = {pe: d[i] for pe, d in result.displays.items() if len(d) > i}
        for pes, bundle in _groups(nth):
            write(f"[PE {pe_ranges(pes)}]\n")
            _publish(bundle, pes, write)
    plain = {pe: text for pe, text in result.results.items() if pe not in result.result_data}
    for text, pes in fold(plain).items():
        write(f"Out[PE {pe_ranges(pes)}]: {text}\n")
    rich = {pe: {"data": data, "metadata": {}} for pe, data in result.result_data.items()}
    for pes, bundle in _groups(rich):
        write(f"Out[PE {pe_ranges(pes)}]:\n")
        _publish(bundle, pes, write)
