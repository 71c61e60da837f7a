"""How a cell reaches the PEs and how their answers come back (client side).

``rc.dispatch = "direct"`` (the default): the job's *cell channel*, one ROUTER socket
in this process and a DEALER on every PE (:mod:`shmem_notebook.engine.cell_receiver`). The
client sends the cell to each PE; each PE sends its output as lines and then one final
message. ``DirectView.execute`` instead passes the cell through the controller and has
every PE answer with four or five messages that the controller relays, which with many
PEs on few cores is most of what a cell costs. Messages are JSON signed with a key the
job sends its PEs over ipyparallel (:func:`shmem_notebook.protocol.seal`).

``rc.dispatch = "ipyparallel"`` (``SHMEM_NOTEBOOK_DISPATCH``) sends cells with
``DirectView.execute``, e.g. where a firewall lets the PEs reach only the controller.

Requests asked on their own (:meth:`~shmem_notebook.job.pe_requests.Asking.ask`) take the channel too
once it is connected (:meth:`CellChannel.ask`; a small gather at 4 PEs took 2 ms, 14 ms through the
controller); a PE answers them between cells, as it answers ipyparallel's ``apply``.

Both give the cell path the same small interface: ``metadata`` (per PE: ``stdout``,
``stderr``, ``outputs``, ``execute_result``, ``status``, ``error``), ``pending()``,
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

__all__ = ["DISPATCH", "CellChannel", "ChannelCell", "ExecuteCell"]

#: the values of ``rc.dispatch``
DISPATCH = ("direct", "ipyparallel")


class CellChannel:
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

    def connect(self, call: Callable[..., object], timeout: float = 10.0) -> None:
        """Have every PE connect (``call`` is the job's request to all PEs); wait for each one's hello."""
        call("cells_connect", self.url, self.key.hex())
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
            try:
                self.socket.send_multipart([self._routes[pe]] + frames)
            except zmq.ZMQError:  # the PE is gone: it never answers, and the cell path sees it die
                pass
        return cell

    def ask(
        self,
        request: tuple[str, tuple[Any, ...]],
        targets: Sequence[int],
        timeout: float,
        check: Callable[[], object] | None = None,
    ) -> dict[int, Any] | None:
        """``{pe: answer}`` of ``request`` (:func:`~shmem_notebook.protocol.encode`) asked of ``targets``
        on its own; None when one of them cannot be reached this way (not connected, gone): ask through
        ipyparallel then. A PE that raised makes it raise :class:`~ipyparallel.error.CompositeError`,
        as ipyparallel's ``apply`` does; no answer from every PE within ``timeout`` seconds raises
        :class:`TimeoutError`. ``check()`` is called every 0.25 s while answers are missing (it raises
        when a PE died). Collective when the request is."""
        if self.socket.closed or request[0] == Op.CELLS_CONNECT or any(pe not in self._routes for pe in targets):
            return None  # a PE answers cells_connect by replacing the channel it would answer through
        rid = next(self._ids)
        frames = seal(self.key, {"id": rid, "ask": True}, request)  # pickled: the request's tuples stay tuples
        replies: dict[int, dict[str, Any]]
        replies = self._asked[rid] = {}
        try:
            for pe in targets:
                try:
                    self.socket.send_multipart([self._routes[pe]] + frames)
                except zmq.ZMQError:  # its PE is gone; those asked already answer into nothing
                    if check is not None:
                        check()
                    return None
            deadline = time.monotonic() + timeout
            while len(replies) < len(targets):
                left = deadline - time.monotonic()
                if left <= 0 or self.socket.closed:
                    raise TimeoutError(f"no answer to {request[0]} from every PE within {timeout:g} s")
                self.receive(min(left, 0.25))
                if check is not None and len(replies) < len(targets):
                    check()
        finally:
            del self._asked[rid]
        errors = [unwrap_exception(r["error"]) for r in replies.values() if "error" in r]
        collect_exceptions(errors, answer.__name__)  # raised as ipyparallel raises what its apply(answer) raised
        return {pe: replies[pe].get("attachment") for pe in targets}

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


class ExecuteCell:
    """One cell sent with ``DirectView.execute`` (``rc.dispatch = "ipyparallel"``); ``ask`` is the
    job's :meth:`~shmem_notebook.job.pe_requests.Asking.ask`, for the requests made before and after it."""

    def __init__(
        self,
        view: Any,
        code: str,
        before: Iterable[tuple[str, Sequence[Any]]] = (),
        ask: Callable[..., dict[int, Any]] | None = None,
        after: Iterable[tuple[str, Sequence[Any]]] = (),
    ) -> None:
        for op, args in before:
            ask(op, *args)  # type: ignore[misc]  # always given when there are requests before the cell
        self.ask: Callable[..., dict[int, Any]]
        self.view, self.ask, self.after = view, ask, dict(after)  # type: ignore[assignment]  # always given
        self.request: Any = view.execute(code, silent=False, block=False)
        self.metadata: list[dict[str, Any]] = self.request._metadata

    def answers(self, op: str) -> dict[int, Any]:
        """``{pe: answer}`` to the request ``op``, asked now of the PEs that finished the cell."""
        finished = [pe for pe in range(len(self.metadata)) if pe not in self.pending()]
        return dict(self.ask(op, *self.after.get(op, ()), pes=finished, timeout=30, partial=True)) if finished else {}

    def pending(self) -> list[int]:
        """PEs not finished: a PE is finished once its reply *and* all its output arrived."""
        return [pe for pe, c in enumerate(self.request._children) if not (c.done() and c.output.done())]

    def wait(self, timeout: float) -> None:
        concurrent.futures.wait([f for c in self.request._children for f in (c, c.output)], timeout=timeout)

    def forget(self) -> None:
        with contextlib.suppress(Exception):
            self.view.client.purge_local_results(self.request)
