"""How the client asks the PEs (client side): :meth:`Asking.ask`, and the small surface the cell
path (:mod:`shmem_notebook.cells.path`) uses to run a cell on the job.

Every request a PE can answer is named in :class:`shmem_notebook.protocol.Op`; a name that is
not is refused here, before anything is sent. A request travels as :func:`shmem_notebook.protocol.encode`
makes it (plain data), asked on its own (:meth:`Asking.ask`) or riding with a cell (:meth:`Asking.send_cell`),
by the job's one transport (:mod:`shmem_notebook.cells.channel`).
"""

from __future__ import annotations

import contextlib
import signal
import time
from typing import TYPE_CHECKING, Any

import ipyparallel as ipp

from ..cells.channel import Answers
from ..errors import InputError, JobStateError
from ..protocol import encode
from ..rc import rc
from ..specs import as_specs
from .governor import governor_for
from .processes import wait

if TYPE_CHECKING:
    import subprocess
    from collections.abc import Iterable, Sequence

    from ..cells.channel import Transport
    from ..cells.surface import SentCell
    from ..protocol import Request
    from .governor import Governor
    from .members import JobMembers

__all__ = ["Asking", "encoded"]


def encoded(op: str, args: Sequence[Any] = ()) -> Request:
    """:func:`shmem_notebook.protocol.encode` of ``op(*args)``; an unknown ``op`` is an :class:`InputError`."""
    try:
        return encode(op, *args)
    except ValueError as exc:
        raise InputError(str(exc)) from None


class Asking:
    """The :class:`~shmem_notebook.Job` methods that talk to the PEs, through the job's transport
    (:mod:`shmem_notebook.cells.channel`), chosen once per start."""

    _governor: Governor | None = None  # the Governor of the job's current PEs, once a cell ran
    _cluster: Any
    _client: Any
    _transport: Transport | None
    _engine_set_id: str | None
    _watchdog: subprocess.Popen[bytes] | None
    last_cell: SentCell | None

    def ask(
        self: JobMembers,
        op: str,
        *args: Any,
        pes: Iterable[int] | None = None,
        timeout: float = 60.0,
        partial: bool = False,
    ) -> Answers:
        """The request ``op(*args)`` on ``pes`` (default: every PE): ``{pe: reply}``, an
        :class:`~shmem_notebook.cells.channel.Answers`.

        Collective when the request is (``alloc``, ``free``...): then ask every PE. With
        ``partial=False`` every PE must answer within ``timeout`` seconds: a PE's error is
        raised, and no answer marks the job hung (:class:`JobStateError`). With ``partial=True``
        each PE answers on its own within the same ``timeout``; the answers are those that came
        (the idle PEs of a hung job answer too). A stopped or dead job raises at once, and so does
        an ``op`` not in :class:`~shmem_notebook.protocol.Op` (:class:`InputError`).
        """
        request = encoded(op, args)
        targets = list(range(self.n)) if pes is None else sorted(pes)
        if not targets:
            return Answers()
        if self.state != "running" and not (partial and self.state == "hung"):
            self._require_running(f"the request {request[0]!r}")  # one sentence: stopped, dead or hung
        assert self._transport is not None  # a running or hung job has one
        try:
            # a PE's death ends a whole ask at once; an ask of each PE on its own notes it as that PE's failure
            check = None if partial else self._require_alive
            return self._transport.ask(request, targets, timeout, check=check, partial=partial)
        except TimeoutError:
            raise self._hung(request[0], timeout) from None
        except ipp.error.CompositeError as exc:
            # the hub noticed a PE's death before this host did; a PE that raised is its error, at once
            if any(name == "EngineError" for name, *_ in exc.elist) and wait(self.dead_pes, 2.0):
                self._require_alive()
            raise

    def _hung(self: JobMembers, op: str, timeout: float) -> JobStateError:
        self.state = "hung"
        self.forks.start(restart_likely=True)  # the restart that comes next forks its PEs (.forks)
        return JobStateError(f"the PEs did not answer {op} within {timeout:.0f} s; {self.RESTART_HINT}")

    def _require_alive(self: JobMembers) -> None:
        """Raise :class:`~shmem_notebook.PEDiedError` once a PE of this host ended: its answer never comes."""
        if self.dead_pes():
            self.mark_dead()
            self._require_running("a request")

    # -- the cell path's surface (see shmem_notebook.cells.path) ---------------------------
    def prepare_cell(self: JobMembers, arrays: Any = None) -> None:
        """Check that a cell can run now and allocate those of ``arrays`` (declarations) not
        allocated with the same spec. Collective when it allocates."""
        self._require_running("a cell")
        self._reap_ended()
        todo = [s for s in as_specs(arrays) if self.specs.get(s.name) != s]
        if todo:
            self._alloc_on_pes(todo)

    def send_cell(
        self: JobMembers, code: str, before: Iterable[tuple[str, Sequence[Any]]] = (), after: Iterable[Any] = ()
    ) -> SentCell:
        """Send a cell to every PE (collective), with the requests ``before`` (``[(op, args)]``) and
        ``after`` it (the same, or op names; answered by ``answers(op)``); its request (see
        :mod:`shmem_notebook.cells.channel`). An unknown op is refused before anything is sent."""
        first = [encoded(op, args) for op, args in before]
        then = [encoded(*([item, ()] if isinstance(item, str) else item)) for item in after]
        self._govern()
        assert self._transport is not None  # prepare_cell checked that the job runs
        try:
            cell = self._transport.send(code, first, then)
        except TimeoutError:  # a request before the cell, asked on its own (ipyparallel's dispatch)
            raise self._hung(" and ".join(op for op, _ in first), 60.0) from None
        self.last_cell, self._heap_stale = cell, True  # the cell may allocate
        return cell

    def interrupt(self: JobMembers, cell: SentCell, pes: Iterable[int], grace: float = 1.5) -> list[int]:
        """SIGINT to ``pes`` of this host (as the stop button); wait up to ``grace`` seconds for
        ``cell`` to end there. Returns the PEs still running it."""
        self._signal(pes, signal.SIGINT)
        wait(lambda: not cell.pending(), grace)
        return cell.pending()

    def pause(self: JobMembers, pes: Iterable[int]) -> None:
        """SIGSTOP ``pes`` of this host (blocked for good: they burn no CPU until the restart or stop
        that kills them); the job is marked hung."""
        if self._governor:
            self._governor.hold(pes)  # it wakes none of them
        self._signal(pes, signal.SIGSTOP)
        self.paused.update(pes)
        self.state = "hung"
        self.forks.start(restart_likely=True)  # the restart that comes next forks its PEs (.forks)

    def spooled_traces(self: JobMembers, pes: Iterable[int]) -> dict[int, dict[str, Any]]:
        """``{pe: trace data}`` of those of ``pes`` on this host that spooled their ``--trace``
        recording and did not finish the cell (:mod:`shmem_notebook.trace.spool`); each
        spool is removed once read. Not collective: no PE is asked."""
        import os
        import socket

        from ..protocol import trace_spool_path
        from ..trace.spool import read_spool

        found: dict[int, dict[str, Any]]
        here, now, found = socket.gethostname(), time.time_ns(), {}
        for pe in pes:
            if self._cluster is None or self.pes.get(pe, {}).get("host") != here:
                continue
            path = trace_spool_path(self._cluster.profile_dir, self._cluster.cluster_id, pe)
            data = read_spool(path, now)
            with contextlib.suppress(OSError):
                os.remove(path)
            if data is not None:
                found[pe] = data
        return found

    def _let_go(self: JobMembers) -> None:
        """Stop reaching the PEs being released: close their governor (it wakes the PEs it stopped,
        so they take the shutdown, or die, at once) and reap its process, close the transport
        (no request reaches them; the next PEs get a transport of their own) and detach their heaps."""
        if self._governor is not None:
            self._governor.close(wait=1.0)
            self._governor = None
        self._close_transport()
        self._pe_procs.heaps.close()  # an attached segment would outlive its PEs

    def _close_transport(self: JobMembers) -> None:
        if self._transport is not None:
            self._transport.close()
            self._transport = None

    def _govern(self: JobMembers) -> None:
        """Let the PEs of this host that wait long in a blocking call sleep (see :mod:`.governor`),
        from the first cell of each start on, where the library polls while it waits;
        ``rc.polite_ms = 0`` switches it off."""
        governor, wanted = self._governor, rc.polite_ms > 0 and self.library.polls
        if governor and (not wanted or rc.polite_ms != governor.after_ms or not governor.serves(self._engine_set_id)):
            governor.close(wait=1.0)  # its thread's counts and end are on the board the next one takes
            governor = None
        if governor is None and wanted:
            governor = governor_for(self, rc.polite_ms / 1000)
        self._governor = governor
