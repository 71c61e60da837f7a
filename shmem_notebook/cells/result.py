"""What one cell did on every PE."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from ..analysis.races import Race
    from ..analysis.trace import Trace

__all__ = ["CellResult"]


@dataclass
class CellResult:
    """What one cell did on every PE."""

    stdout: dict[int, str] = field(default_factory=dict)  # PE -> text
    stderr: dict[int, str] = field(default_factory=dict)
    results: dict[int, str] = field(default_factory=dict)  # PE -> text/plain of the last expression
    errors: dict[int, tuple[str, str, str]] = field(default_factory=dict)  # PE -> (ename, evalue, traceback)
    # PE -> [{"data": MIME bundle, "metadata": ...}] (display(), plt.show())
    displays: dict[int, list[dict[str, Any]]] = field(default_factory=dict)
    result_data: dict[int, dict[str, Any]] = field(default_factory=dict)  # PE -> MIME bundle of a rich last expression
    seconds: float = 0.0
    pending: list[int] = field(default_factory=list)  # PEs that had not finished (timeout, interrupt, death)
    outcome: str = "ok"  # ok, error, timeout, interrupted, died, stranded (PEs wait for others that raised)
    races: list[Race] = field(default_factory=list)  # shmem_notebook.Race, when the race stage ran
    # PE -> (line, call): waited for PEs that raised (see cells.stranded)
    waiting: dict[int, Any] = field(default_factory=dict)
    trace: Trace | None = None  # analysis.trace.Trace when run with trace=True (%%pxshmem --trace)
