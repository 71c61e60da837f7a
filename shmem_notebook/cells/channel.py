"""How the client reaches a job's PEs, cells and requests alike (client side): the job's
*transport*, chosen once per start by ``rc.dispatch``.

``"direct"`` (the default): :class:`CellChannel`, one ROUTER socket in this process and a
DEALER on every PE (:mod:`shmem_notebook.engine.cell_receiver`). The client sends a cell to
each PE; each PE sends its output as lines and then one final message. ``DirectView.execute``
instead passes the cell through the controller and has every PE answer with four or five
messages that the controller relays, which with many PEs on few cores is most of what a cell
costs. Requests asked on their own take the channel too (a small gather at 4 PEs took 2 ms,
14 ms through the controller); a PE answers them between cells, as it answers ipyparallel's
``apply``. Messages are JSON signed with a key the job sends its PEs over ipyparallel
(:func:`shmem_notebook.protocol.seal`).

``"ipyparallel"`` (``SHMEM_NOTEBOOK_DISPATCH``): :class:`ApplyTransport`, cells by
``DirectView.execute`` and requests by ``apply``, e.g. where a firewall lets the PEs reach only
the controller. A start learns who its PEs are and has them connect the channel through it:
the one route that exists before the channel does.

Both transports answer ``ask(request, targets, timeout, check, partial)`` with :class:`Answers`
and ``send(code, before, after)`` with a cell the cell path follows: ``metadata`` (per PE:
``stdout``, ``stderr``, ``outputs``, ``execute_result``, ``status``, ``error``), ``pending()``,
``wait(timeout)``, ``answers(op)`` and ``forget()``. The requests the cell's stages make
before and after it (``before``, ``after``: ``[(op, args)]`` of :func:`shmem_notebook.protocol.encode`,
the form of a request asked on its own) ride with the cell on the channel, whose PEs answer
``after`` in their final message; with ``DirectView.execute`` they are asked separately,
before the cell and when ``answers`` is called.
"""

from __future__ import annotations

import concurrent.futures
import contextlib
import itertools
import secrets
import socket
import time
from typing import TYPE_CHECKING, Any

import zmq
from ipyparallel.error import collect_exceptions, unwrap_exception

from ..errors import LaunchError
from ..protocol import Op, answer, seal, unseal

if TYPE_CHECKING:
    from collections.abc import Callable, Iterable, Iterator, Sequence
    from typing import TypeAlias

    from ..protocol import Request

    Check: TypeAlias = Callable[[], object]  # called while answers are missing; raises when a PE died

__all__ = ["DISPATCH", "Answers", "ApplyTransport", "CellChannel", "ChannelCell", "ExecuteCell", "Transport"]

#: the values of ``rc.dispatch``
DISPATCH = ("direct", "ipyparallel")


class Answers(dict[int, Any]):
    """``{pe: reply}`` of a request, in PE order. Asked with ``partial=True`` also ``failed``
    (``{pe: "Error: message"}``: the PE raised or is gone) and ``unanswered`` (PEs that did not
    answer in time; their request was withdrawn)."""

    failed: dict[int, str]
    unanswered: list[int]

    def __init__(self, *args: Any) -> None:
        super().__init__(*args)
        self.failed, self.unanswered = {}, []


class Transport:
    """A job's way to its PEs (see the module's docstring): :class:`CellChannel` or :class:`ApplyTransport`."""

    n: int

    def ask(
        self,
        request: Request,
        targets: Iterable[int],
        timeout: float,
        check: Check | None = None,
        partial: bool = False,
    ) -> Answers:
        """``request`` asked of ``targets`` on its own. Without ``partial`` every PE answers within
        ``timeout`` seconds (else :class:`TimeoutError`) and a PE's error raises
        :class:`~ipyparallel.error.CompositeError`, as ipyparallel's ``apply`` does; with it, each PE
        answers on its own within ``timeout``, and the errors and the PEs that did not answer are noted
        in the :class:`Answers`. ``check()`` is called every 0.25 s while answers are missing (it raises
        when a PE died). Collective when the request is."""
        return self._ask(request, list(targets), timeout, check, partial)

    def _ask(self, request: Request, targets: list[int], timeout: float, check: Check | None, partial: bool) -> Answers:
        raise NotImplementedError

    def send(
        self, code: str, before: Iterable[Request] = (), after: Iterable[Request] = ()
    ) -> ChannelCell | ExecuteCell:
        """Send ``code`` to every PE with the requests to answer ``before`` and ``after`` it. Collective."""
        raise NotImplementedError

    def close(self) -> None:
        """Reach these PEs no more."""
        raise NotImplementedError


class CellChannel(Transport):
    """The job's cell channel: bound here, reached by the PEs at ``url``."""

    def __init__(self, n: int, ip: str = "127.0.0.1") -> None:
        self.n = n
        self.key = secrets.token_bytes(32)
        self.socket: zmq.Socket[bytes] = zmq.Context.instance().socket(zmq.ROUTER)
        self.socket.setsockopt(zmq.LINGER, 0)
        self.socket.setsockopt(zmq.ROUTER_MANDATORY, 1)  # a PE that is gone raises, not a silent drop
        everywhere = ip in ("0.0.0.0", "*")
        port: int = self.socket.bind_to_random_port("tcp://*" if everywhere else f"tcp://{ip}")
        self.url = f"tcp://{socket.gethostname() if everywhere else ip}:{port}"
        self._ids = itertools.count(1)
        self._cell: ChannelCell | None = None
        self._asked: dict[int, dict[int, dict[str, Any]]]
        self._asked = {}  # id -> {pe: reply} of the requests waiting for their answers
        self._routes: dict[int, bytes] = {}  # PE -> its socket's identity, learnt from its hello

    def connect(self, via: ApplyTransport, timeout: float = 10.0) -> None:
        """Have every PE connect, asked ``via`` ipyparallel; wait for each one's hello. Closed again
        when one does not say it."""
        try:
            self._connect(via, timeout)
        except BaseException:
            self.close()
            raise

    def _connect(self, via: ApplyTransport, timeout: float) -> None:
        via.ask((Op.CELLS_CONNECT, (self.url, self.key.hex())), range(self.n), max(timeout, 60.0))
        hello: set[int]
        hello, deadline = set(), time.monotonic() + timeout
        while len(hello) < self.n:
            left = deadline - time.monotonic()
            if left <= 0 or not self.socket.poll(left * 1000):  # type: ignore[arg-type]  # pyzmq: float ms work
                raise LaunchError(
                    f"PE {sorted(set(range(self.n)) - hello)[0]} could not reach this kernel's cell channel at "
                    f"{self.url} within {timeout:g} s; where the PEs may reach only the controller, set "
                    f"shmem_notebook.rc.dispatch = 'ipyparallel' (SHMEM_NOTEBOOK_DISPATCH) and restart"
                )
            for pe, message, ident in self._drain():
                if message.get("hello"):
                    hello.add(pe)
                    self._routes[pe] = ident

    def send(
        self,
        code: str,
        before: Iterable[tuple[str, Sequence[Any]]] = (),
        after: Iterable[tuple[str, Sequence[Any]]] = (),
    ) -> ChannelCell:
        """Send ``code`` to every PE, with the requests to answer ``before`` and ``after`` it; a
        :class:`ChannelCell` follows its answers. Collective."""
        cell = ChannelCell(self, next(self._ids), self.n)
        self._cell = cell
        frames = seal(
            self.key,
            {
                "id": cell.id,
                "code": code,
                "before": [[op, list(args)] for op, args in before],
                "after": [[op, list(args)] for op, args in after],
            },
        )
        for pe in range(self.n):
            self._send(pe, frames)  # a PE that is gone never answers, and the cell path sees it die
        return cell

    def _ask(self, request: Request, targets: list[int], timeout: float, check: Check | None, partial: bool) -> Answers:
        """See :meth:`Transport.ask`. A PE no longer connected never answers: ``check`` tells a PE
        that is gone from one that is slow; with ``partial`` it is ``failed`` at once. A request not
        answered in time is withdrawn: the PE, busy with a cell, drops it, and its late answer is not
        taken."""
        rid = next(self._ids)
        frames = seal(self.key, {"id": rid, "ask": True}, request)  # pickled: the request's tuples stay tuples
        replies: dict[int, dict[str, Any]]
        replies, answers = {}, Answers()
        self._asked[rid] = replies
        try:
            for pe in targets:
                if not self._send(pe, frames):
                    answers.failed[pe] = f"ConnectionError: PE {pe} is not connected to this kernel's cell channel"
                    if check is not None:
                        check()
            waiting = [pe for pe in targets if not (partial and pe in answers.failed)]
            deadline = time.monotonic() + timeout
            while len(replies) < len(waiting) and not self.socket.closed:
                left = deadline - time.monotonic()
                if left <= 0:
                    break
                self.receive(min(left, 0.25))
                if check is not None and len(replies) < len(waiting):
                    check()
        finally:
            del self._asked[rid]
        late = [pe for pe in waiting if pe not in replies]
        if late:
            withdraw = seal(self.key, {"id": rid, "withdraw": True})
            for pe in late:
                self._send(pe, withdraw)
        if not partial:
            if late:
                raise TimeoutError(f"no answer to {request[0]} from every PE within {timeout:g} s")
            errors = [unwrap_exception(r["error"]) for r in replies.values() if "error" in r]
            collect_exceptions(errors, answer.__name__)  # raised as ipyparallel raises what its apply(answer) raised
            return Answers((pe, replies[pe].get("attachment")) for pe in targets)
        for pe in targets:
            if pe in replies and "error" in replies[pe]:
                error = unwrap_exception(replies[pe]["error"])
                answers.failed[pe] = f"{type(error).__name__}: {error}"
            elif pe in replies:
                answers[pe] = replies[pe].get("attachment")
        answers.unanswered = late
        return answers

    def _send(self, pe: int, frames: list[bytes]) -> bool:
        """Send ``frames`` to ``pe``; False when it is not connected (gone, or it never said hello)."""
        if pe not in self._routes or self.socket.closed:
            return False
        try:
            self.socket.send_multipart([self._routes[pe]] + frames)
        except zmq.ZMQError:
            return False
        return True

    def receive(self, timeout: float) -> None:
        """Apply what arrives within ``timeout`` seconds (or what is there already) to the current cell
        and the requests waiting. A closed channel (its PEs were stopped or restarted) receives nothing."""
        if self.socket.closed:
            return
        if timeout > 0 and not self.socket.poll(timeout * 1000):  # type: ignore[arg-type]  # pyzmq: float ms work
            return
        cell = self._cell
        for pe, message, _ in self._drain():
            if cell is not None and message.get("id") == cell.id:
                cell._apply(pe, message)
            elif message.get("id") in self._asked:
                self._asked[message["id"]][pe] = message

    def _drain(self) -> Iterator[tuple[int, dict[str, Any], bytes]]:
        while True:
            try:
                ident, *frames = self.socket.recv_multipart(zmq.NOBLOCK)
            except zmq.Again:
                return
            message = unseal(self.key, frames)
            if message is not None:  # unsigned: not from our PEs
                yield message["pe"], message, ident

    def close(self) -> None:
        self.socket.close()


class ChannelCell:
    """One cell sent through the :class:`CellChannel`: what every PE answered so far."""

    def __init__(self, channel: CellChannel, cid: int, n: int) -> None:
        self.channel, self.id = channel, cid
        self.metadata: list[dict[str, Any]] = [
            {"stdout": "", "stderr": "", "outputs": [], "execute_result": None, "status": None} for _ in range(n)
        ]
        self._finished: set[int] = set()
        self._answers: dict[int, dict[str, Any]] = {}  # PE -> {op: ("ok", answer) or ("error", text)}

    def _apply(self, pe: int, message: dict[str, Any]) -> None:
        md = self.metadata[pe]
        for key in ("stdout", "stderr"):
            if key in message:
                md[key] += message[key]
        if "status" in message:
            md.update(status=message["status"], outputs=message["outputs"], execute_result=message["execute_result"])
            if message["status"] == "error":
                md["error"] = unwrap_exception(message["error"])
            self._answers[pe] = message.get("attachment") or {}
            self._finished.add(pe)

    def pending(self) -> list[int]:
        """PEs whose final message has not arrived."""
        self.channel.receive(0)
        return [pe for pe in range(len(self.metadata)) if pe not in self._finished]

    def wait(self, timeout: float) -> None:
        """Take what arrives for up to ``timeout`` seconds; return early once every PE finished."""
        deadline = time.monotonic() + timeout
        while len(self._finished) < len(self.metadata):
            left = deadline - time.monotonic()
            if left <= 0 or self.channel.socket.closed:
                return
            self.channel.receive(left)

    def answers(self, op: str) -> dict[int, Any]:
        """``{pe: answer}`` to the request ``op`` made after the cell, from the PEs that finished it and answered."""
        return {pe: found[op][1] for pe, found in sorted(self._answers.items()) if found.get(op, ("",))[0] == "ok"}

    def forget(self) -> None:
        """Nothing is kept for a finished cell."""


class ApplyTransport(Transport):
    """The PEs reached through ipyparallel (``rc.dispatch = "ipyparallel"``, and a start's first
    requests): requests by ``apply``, cells by ``DirectView.execute``."""

    def __init__(self, client: Any, n: int) -> None:
        self.client, self.n = client, n
        self.view = client[list(range(n))]

    def _ask(self, request: Request, targets: list[int], timeout: float, check: Check | None, partial: bool) -> Answers:
        """See :meth:`Transport.ask`. A request not answered in time is withdrawn (``abort``)."""
        if partial:
            return self._each(request, targets, timeout)
        ar = (self.view if targets == list(range(self.n)) else self.client[targets]).apply_async(answer, request)
        try:
            deadline = time.monotonic() + timeout
            while not ar.wait(min(0.25, max(0.0, deadline - time.monotonic()))):
                if check is not None:
                    check()  # a dead PE's answer never comes: say so now
                if time.monotonic() >= deadline:
                    self.client.abort(ar, block=False)  # withdrawn where it waits for a cell's end
                    raise TimeoutError(f"no answer to {request[0]} from every PE within {timeout:g} s")
            return Answers(zip(targets, ar.get()))
        finally:
            with contextlib.suppress(Exception):
                self.client.purge_local_results(ar)

    def _each(self, request: Request, targets: list[int], timeout: float) -> Answers:
        pending: dict[int, Any]
        answers, pending = Answers(), {}
        for pe in targets:
            try:
                pending[pe] = self.client[pe].apply_async(answer, request)
            except Exception as exc:  # its engine is gone
                answers.failed[pe] = f"{type(exc).__name__}: {exc}"
        deadline = time.monotonic() + timeout
        for pe, ar in pending.items():
            try:
                ar.wait(max(0.0, deadline - time.monotonic()))
                if ar.ready():
                    answers[pe] = ar.get()
                else:
                    answers.unanswered.append(pe)
                    self.client.abort(ar, targets=[pe], block=False)
            except Exception as exc:  # the PE raised or its engine vanished
                answers.failed[pe] = f"{type(exc).__name__}: {exc}"
            finally:
                if ar.ready():
                    with contextlib.suppress(Exception):
                        self.client.purge_local_results(ar)
        return answers

    def send(self, code: str, before: Iterable[Request] = (), after: Iterable[Request] = ()) -> ExecuteCell:
        """See :meth:`Transport.send`: the requests ``before`` are asked first, each of every PE."""
        return ExecuteCell(self, code, before, after)

    def close(self) -> None:
        """Nothing to close: the job's client is the job's."""


class ExecuteCell:
    """One cell sent with ``DirectView.execute`` by an :class:`ApplyTransport`, which asks the requests
    made before and after it."""

    def __init__(
        self, transport: ApplyTransport, code: str, before: Iterable[Request] = (), after: Iterable[Request] = ()
    ) -> None:
        everyone = range(transport.n)
        for request in before:
            transport.ask(request, everyone, 60.0)
        self.transport, self.after = transport, dict(after)
        self.request: Any = transport.view.execute(code, silent=False, block=False)
        self.metadata: list[dict[str, Any]] = self.request._metadata

    def answers(self, op: str) -> dict[int, Any]:
        """``{pe: answer}`` to the request ``op``, asked now of the PEs that finished the cell."""
        finished = [pe for pe in range(len(self.metadata)) if pe not in self.pending()]
        if not finished:
            return {}
        return dict(self.transport.ask((op, self.after.get(op, ())), finished, 30.0, partial=True))

    def pending(self) -> list[int]:
        """PEs not finished: a PE is finished once its reply *and* all its output arrived."""
        return [pe for pe, c in enumerate(self.request._children) if not (c.done() and c.output.done())]

    def wait(self, timeout: float) -> None:
        concurrent.futures.wait([f for c in self.request._children for f in (c, c.output)], timeout=timeout)

    def forget(self) -> None:
        with contextlib.suppress(Exception):
            self.transport.client.purge_local_results(self.request)
