"""The members :class:`~shmem_notebook.Job`'s mixins (:mod:`.arrays`, :mod:`.health`) use of the job.

A mixin method that reaches past its own class says so with ``self: JobMembers``; the type
checker then checks that ``Job`` has every member listed here wherever such a method is called.
No code runs here.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import TYPE_CHECKING, Any, Protocol

if TYPE_CHECKING:
    import subprocess

    import numpy as np
    import numpy.typing as npt

    from ..cells.channel import Transport
    from ..cells.surface import JobSurface, SentCell
    from ..errors import JobStateError
    from ..launcher.library import Library
    from ..specs import ArraySpec
    from .forks import ForkServer
    from .governor import Governor
    from .job import Job
    from .processes import LocalPEs

__all__ = ["JobMembers"]


class JobMembers(Protocol):
    """The job as its mixins see it: its state, its PEs, and the lifecycle helpers of :mod:`.job`."""

    n: int
    state: str
    pes: dict[int, dict[str, Any]]
    specs: dict[str, ArraySpec]
    crash: dict[int, str]
    _crash_places: dict[int, str]
    crash_dumps: dict[int, str]
    paused: set[int]
    forks: ForkServer
    heap_bytes: int
    hostfile: str | None
    library: Library
    last_cell: SentCell | None
    last_gather: Any  # the last gather's route, "memory", "file" or "message" (None before one)
    RESTART_HINT: str
    _cluster: Any  # ipyparallel.Cluster, None when stopped
    _client: Any
    _transport: Transport | None
    _engine_set_id: str | None
    _watchdog: subprocess.Popen[bytes] | None
    _token: str
    _heap_stale: bool
    _gathers: int
    _pe_procs: LocalPEs  # PE -> psutil.Process, for PEs on this host
    _governor: Governor | None  # the polite-waiting Governor of this host's PEs, None before a cell

    def ask(
        self, op: str, *args: Any, pes: Iterable[int] | None = None, timeout: float = 60.0, partial: bool = False
    ) -> dict[int, Any]: ...

    def record_usage(self, usage: Iterable[Any] | Mapping[int, Any]) -> None: ...

    def dead_pes(self, each: bool = True) -> list[int]: ...

    def mark_dead(self) -> str: ...

    def _require_running(self, what: str) -> None: ...

    def _crash_text(self) -> str: ...

    def _died_at(self, pes: Iterable[int]) -> dict[int, str]: ...

    def _controller_alive(self) -> bool: ...

    def _oshrun_running(self, set_id: str | None = None) -> bool: ...

    def _oshrun_output(self, lines: int = 15) -> str: ...

    def _ended_while_starting(self, what: str) -> str | None: ...

    def _stop_pes(self) -> None: ...

    def _reap_ended(self) -> None: ...

    def _refresh_usage(self, skip: Iterable[int] = (), timeout: float = 5.0) -> None: ...

    # the mixins' own helpers, which their annotated methods call through ``self``
    def _declared(self, name: str) -> None: ...

    def _check_heap(self, specs: list[ArraySpec]) -> None: ...

    def _alloc_on_pes(self, specs: list[ArraySpec]) -> None: ...

    def _after_heap_change(self, replies: dict[int, Any], verb: str) -> None: ...

    def _values(self, op: str, name: str, *args: Any) -> dict[int, Any]: ...

    def _transfer_by_file(self) -> bool: ...

    def _gather_by_file(self, name: str, dtype: np.dtype[Any], shape: tuple[int, ...]) -> npt.NDArray[Any] | None: ...

    def _global_exits(self) -> dict[int, str]: ...

    def _unanswered(self, pe: int) -> int: ...

    def _signal(self, pes: Iterable[int], signum: int) -> None: ...

    def _require_alive(self) -> None: ...

    def _hung(self, op: str, timeout: float) -> JobStateError: ...

    def _close_transport(self) -> None: ...

    def _govern(self) -> None: ...


if TYPE_CHECKING:  # the type checker's proof that Job has what its mixins and the cell path use

    def _job_has_its_members(job: Job) -> JobMembers:
        return job

    def _job_has_the_cell_paths_surface(job: Job) -> JobSurface:
        return job
