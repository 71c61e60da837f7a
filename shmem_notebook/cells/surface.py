"""What the cell path needs of the rooms around it, as Protocols (no code runs here).

The cell path (:mod:`.path`) and its stages sit below the job and may not import it:
:class:`JobSurface` is what they use of :class:`~shmem_notebook.Job` (the type checker checks
that ``Job`` has it wherever a job is handed to the path). :class:`SentCell` is what either
dispatch route of :mod:`.channel` returns for a cell on its way.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from typing import TYPE_CHECKING, Any, Protocol, Self

if TYPE_CHECKING:
    from ..launcher.library import Library
    from ..specs import ArraySpec
    from .result import CellResult

__all__ = ["JobSurface", "SentCell"]


class SentCell(Protocol):
    """A cell sent to every PE: :class:`~.channel.ChannelCell` or :class:`~.channel.ExecuteCell`."""

    #: per PE: ``stdout``, ``stderr``, ``outputs``, ``execute_result``, ``status`` (and ``error``)
    metadata: list[dict[str, Any]]

    def pending(self) -> list[int]:
        """PEs that have not finished the cell."""
        ...

    def wait(self, timeout: float) -> None:
        """Take what arrives for up to ``timeout`` seconds."""
        ...

    def answers(self, op: str) -> dict[int, Any]:
        """``{pe: answer}`` to the request ``op`` made after the cell."""
        ...

    def forget(self) -> None:
        """Drop what is kept of a finished cell."""
        ...


class JobSurface(Protocol):
    """The job as the cell path uses it (see :mod:`shmem_notebook.job.pe_requests`)."""

    n: int
    pes: dict[int, dict[str, Any]]
    timeout: float | None
    state: str
    last_result: CellResult | None
    cell_callbacks: list[Callable[[Any, CellResult], object]]
    stage_state: dict[str, Any]  # what each stage keeps between cells (see .stages)
    specs: dict[str, ArraySpec]  # the declared arrays, in declaration order
    crash: dict[int, Any]  # PE -> cause, once PEs died
    crash_dumps: dict[int, str]  # PE -> the stacks it wrote when a signal killed it
    restart_on_hang: bool  # a hung cell restarts the job by itself
    RESTART_HINT: str  # how to get a fresh job, in words
    library: Library

    @property
    def history(self) -> Sequence[Any]: ...

    def prepare_cell(self, arrays: Any = None) -> None:
        """Check that a cell can run now and allocate the arrays it declares. Collective."""
        ...

    def send_cell(
        self, code: str, before: Iterable[tuple[str, Sequence[Any]]] = (), after: Iterable[Any] = ()
    ) -> SentCell:
        """Send ``code`` to every PE with the requests it carries. Collective."""
        ...

    def ask(
        self, op: str, *args: Any, pes: Iterable[int] | None = None, timeout: float = 60.0, partial: bool = False
    ) -> dict[int, Any]:
        """The request ``op(*args)`` on ``pes``: ``{pe: answer}``."""
        ...

    def dead_pes(self, each: bool = True) -> list[int]:
        """PEs whose process is gone."""
        ...

    def locate(self, pes: Iterable[int]) -> dict[int, Any]:
        """Where each of ``pes`` is in the cell."""
        ...

    def blocked_calls(self, pes: Iterable[int]) -> dict[int, Any]:
        """``{pe: {"call": name, "args": [...], "kwargs": {...}} or None}``: what each of ``pes`` is blocked in."""
        ...

    def write_word(self, pe: int, address: int, data: bytes) -> bool:
        """Write ``data`` at ``address`` in PE ``pe``'s memory (this host); whether it was written."""
        ...

    def waiting_since(self) -> dict[int, int] | None:
        """``{pe: monotonic ns at which it entered the blocking call it is in, 0: none}`` (the wait board)."""
        ...

    def interrupt(self, cell: SentCell, pes: Iterable[int], grace: float = 1.5) -> list[int]:
        """SIGINT to ``pes``; the PEs still running ``cell`` after ``grace`` seconds."""
        ...

    def pause(self, pes: Iterable[int]) -> None:
        """SIGSTOP ``pes`` (blocked for good); the job is then hung."""
        ...

    def mark_dead(self) -> str:
        """Record why the PEs died; what killed them, in words."""
        ...

    def restart(self) -> Self:
        """A fresh job with the same PEs and options; declared arrays come back zeroed."""
        ...
