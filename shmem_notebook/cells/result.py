"""What one cell did on every PE."""

from dataclasses import dataclass, field

__all__ = ["CellResult"]


@dataclass
class CellResult:
    """What one cell did on every PE."""

    stdout: dict = field(default_factory=dict)  # PE -> text
    stderr: dict = field(default_factory=dict)
    results: dict = field(default_factory=dict)  # PE -> text/plain of the last expression
    errors: dict = field(default_factory=dict)  # PE -> (ename, evalue, traceback)
    displays: dict = field(
        default_factory=dict
    )  # PE -> [{"data": MIME bundle, "metadata": ...}] (display(), plt.show())
    result_data: dict = field(default_factory=dict)  # PE -> MIME bundle of a rich last expression
    seconds: float = 0.0
    pending: list = field(default_factory=list)  # PEs that had not finished (timeout, interrupt, death)
    outcome: str = "ok"  # ok, error, timeout, interrupted, died, stranded (PEs wait for others that raised)
    races: list = field(default_factory=list)  # shmem_notebook.Race, when the race stage ran
    waiting: dict = field(default_factory=dict)  # PE -> (line, call): waited for PEs that raised (see cells.stranded)
    trace: object = None  # analysis.trace.Trace when run with trace=True (%%pxshmem --trace)
