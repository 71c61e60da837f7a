"""The PE's end of the cell channel (PE side; see :mod:`shmem_notebook.cells.channel`).

A cell comes straight from the client's socket to this PE's main event loop and
runs through the engine's own ``do_execute`` (IPython's ``run_cell``: magics,
tracebacks, ``pre_run_cell`` hooks, matplotlib's inline figures), as an
``execute_request`` would. What the cell prints goes back as complete lines; its
displays, its last expression and its error go back in one final message. Nothing
passes through the controller, and the PE sends no status messages, which is where
ipyparallel's per-PE cost of a cell goes.

The requests the cell's stages make (``race_start`` before a race-checked cell,
``race_stop`` after it: :mod:`shmem_notebook.engine.requests`) ride with the cell, in the form
requests asked on their own have (``[name, args]``: :func:`shmem_notebook.protocol.encode`): this PE
answers those made after it in the final message's attachment, so a stage costs the
client no round trip of its own.

A request asked on its own (``{"ask": True}``, the request pickled as the attachment) is answered
as ipyparallel's ``apply`` would answer it: between cells (one that comes while a cell runs waits
for its end; the client withdraws it when it stops waiting), an error as ``apply`` reports it.

A line goes out at once when the PE sent nothing in the last ``WINDOW`` seconds;
faster output is gathered and sent once per window (by a flusher thread when the
cell prints nothing more), so 2,000 lines cost a few messages, not 2,000.
"""

from __future__ import annotations

import asyncio
import io
import secrets
import signal
import sys
import threading
import time
from typing import TYPE_CHECKING, Any

import zmq
from ipyparallel.error import wrap_exception
from zmq.eventloop.zmqstream import ZMQStream

from ..protocol import answer, seal, unseal
from .context import this_pe

if TYPE_CHECKING:
    from collections.abc import Callable, Iterable, Sequence
    from typing import TextIO

    from ..protocol import Request

__all__ = ["connect"]

#: seconds: output faster than one line per window is sent once per window
WINDOW = 0.01


def connect(url: str, key_hex: str) -> bool:
    """Connect this PE to the client's cell channel at ``url`` (replacing an earlier one)."""
    if this_pe.cell_channel is not None:
        this_pe.cell_channel.close()
    this_pe.cell_channel = _Channel(url, bytes.fromhex(key_hex))
    return True


class _Channel:
    waiting: list[dict[str, Any]]

    def __init__(self, url: str, key: bytes) -> None:
        self.shell = this_pe.shell
        self.key = key
        self.pe: int = this_pe.shmem.my_pe()
        socket: zmq.Socket[bytes] = zmq.Context.instance().socket(zmq.DEALER)
        # a name of its own per connection: the client may still hold the previous one's
        socket.setsockopt(zmq.IDENTITY, f"{self.pe}.{secrets.token_hex(4)}".encode())
        socket.setsockopt(zmq.LINGER, 1000)
        socket.connect(url)
        self.socket = socket
        self.stream = ZMQStream(socket)  # on the engine's main event loop: cells run on the main thread
        self.stream.on_recv(self._received)
        socket.send_multipart(seal(key, {"hello": True, "pe": self.pe}))  # the client routes cells to this socket
        self.outbox = _Outbox(url, key, self.pe)
        self.running, self.waiting = False, []  # a cell runs; the requests that came meanwhile
        self.reading = False  # _answer_waiting reads what came

    def close(self) -> None:
        self.stream.close()
        self.outbox.close()

    def _received(self, frames: list[bytes]) -> None:
        message = unseal(self.key, frames)
        if message is None:  # anything not signed with the job's key is dropped
            return
        if message.get("withdraw"):  # the client stopped waiting for a request that waits for the cell's end
            self.waiting = [m for m in self.waiting if m["id"] != message["id"]]
            return
        if message.get("ask"):
            self.waiting.append(message)
            if not self.running and not self.reading:
                self._answer_waiting()
            return
        self.running = True  # from now: a request that comes before the cell starts waits for its end too
        asyncio.ensure_future(
            self._run(message["id"], message["code"], message.get("before", ()), message.get("after", ()))
        )

    def _answer_waiting(self) -> None:
        """Answer the requests waiting, once what else came is read: a withdrawal among it drops its
        request (the client stopped waiting while this PE ran a cell), a cell stops the answering."""
        if self.stream.closed():  # replaced by a channel of its own (cells_connect): nothing is read here
            return
        self.reading = True
        try:
            self.stream.flush(zmq.POLLIN)
        finally:
            self.reading = False
        while self.waiting and not self.running:
            self._answer(self.waiting.pop(0))

    def _answer(self, message: dict[str, Any]) -> None:
        """Answer a request asked on its own: its value, or its error as ``apply`` reports one."""
        try:
            self.outbox.send({"id": message["id"]}, answer(message["attachment"]))
        except (Exception, KeyboardInterrupt):  # an interrupt meant for a cell, come late, is this request's
            error = wrap_exception(self.shell.kernel.get_engine_info(method="apply"))
            self.outbox.send({"id": message["id"], "error": error})

    async def _run(
        self, cid: int, code: str, before: Sequence[Sequence[Any]] = (), after: Sequence[Sequence[Any]] = ()
    ) -> None:
        """Run the requests ``before`` (``[[op, args]]``), then one cell as ``execute_request`` would,
        then the requests ``after`` (the same form); send the cell's output, then its outcome with the
        answers of ``after`` (``{op: ("ok", answer)}`` or ``("error", "Type: message")``); then answer
        the requests that came meanwhile."""
        try:
            await self._cell(cid, code, before, after)
        finally:
            self.running = False
            self._answer_waiting()

    async def _cell(self, cid: int, code: str, before: Sequence[Sequence[Any]], after: Sequence[Sequence[Any]]) -> None:
        shell = self.shell
        out, err = _Lines(self, cid, "stdout", sys.stdout), _Lines(self, cid, "stderr", sys.stderr)
        captured = _Captured(shell)
        saved = sys.stdout, sys.stderr, signal.getsignal(signal.SIGINT)
        sys.stdout, sys.stderr = out, err
        signal.signal(signal.SIGINT, signal.default_int_handler)  # the interrupt stops the cell
        try:
            reply = _prepare(answer, before)  # None: ready; else the cell does not run, and says why
            if reply is None:
                with captured:
                    reply = await shell.kernel.do_execute(code, silent=False, store_history=True, user_expressions={})
        except KeyboardInterrupt:  # between the cell's statements and our bookkeeping
            reply = {"status": "error", "ename": "KeyboardInterrupt", "evalue": "", "traceback": ["KeyboardInterrupt"]}
        except Exception as exc:  # the kernel's own failure (a cell's is in the reply): the cell still gets its end
            text = f"the engine failed to run the cell on this PE: {type(exc).__name__}: {exc}"
            reply = {"status": "error", "ename": type(exc).__name__, "evalue": text, "traceback": [text]}
        finally:
            sys.stdout, sys.stderr = saved[:2]
            signal.signal(signal.SIGINT, saved[2])
            out.flush()
            err.flush()
        done = {
            "id": cid,
            "status": reply.get("status", "error"),
            "outputs": captured.outputs,
            "execute_result": captured.result,
        }
        if done["status"] == "error":
            done["error"] = {k: reply.get(k) for k in ("ename", "evalue", "traceback", "engine_info")}
        self.outbox.send(done, _answers(answer, after) if after else None)


def _prepare(handle: Callable[[Request], Any], requests: Iterable[Sequence[Any]]) -> dict[str, Any] | None:
    """Answer the requests ``[[op, args]]`` made before a cell; None, or the cell's error reply if one raised."""
    for op, args in requests:
        try:
            handle((op, args))
        except Exception as exc:
            text = f"the request {op} before the cell failed on this PE: {type(exc).__name__}: {exc}"
            return {"status": "error", "ename": type(exc).__name__, "evalue": text, "traceback": [text]}
    return None


def _answers(handle: Callable[[Request], Any], requests: Iterable[Sequence[Any]]) -> dict[str, tuple[str, Any]]:
    """``{op: ("ok", answer)}`` of the requests ``[[op, args]]``, ``("error", "Type: message")`` for one that raised."""
    answers: dict[str, tuple[str, Any]] = {}
    for op, args in requests:
        try:
            answers[op] = ("ok", handle((op, args)))
        except (Exception, KeyboardInterrupt) as exc:  # an interrupt meant for the cell, come late
            answers[op] = ("error", f"{type(exc).__name__}: {exc}")
    return answers


class _Outbox:
    """What a PE sends back during cells, on a socket of its own: output (at once, or once per
    ``window`` when it comes faster), then each cell's final message. The cell's thread and a
    flusher thread use the socket in turn, under one lock."""

    def __init__(self, url: str, key: bytes, pe: int, window: float = WINDOW) -> None:
        self.key, self.pe, self.window = key, pe, window
        socket: zmq.Socket[bytes] = zmq.Context.instance().socket(zmq.DEALER)
        socket.setsockopt(zmq.LINGER, 1000)
        socket.connect(url)
        self.socket = socket
        self.pending: list[tuple[int, str, str]] = []  # (cell id, stream, text) not sent yet, in order
        self.last_sent = 0.0
        self.lock = threading.Condition()
        self.closed = False
        self.thread = threading.Thread(target=self._flusher, name="shmem_notebook-outbox", daemon=True)
        self.thread.start()

    def output(self, cid: int, stream: str, text: str) -> None:
        """Send ``text`` of ``stream`` now, or within ``window`` seconds when output comes faster."""
        with self.lock:
            self.pending.append((cid, stream, text))
            if time.monotonic() - self.last_sent >= self.window:
                self._send_pending()
            elif len(self.pending) == 1:
                self.lock.notify()  # the flusher sends it if nothing more comes

    def send(self, message: dict[str, Any], attachment: object = None) -> None:
        """Send ``message`` (with ``attachment``, see :func:`~shmem_notebook.protocol.seal`) after all output
        before it."""
        with self.lock:
            self._send_pending()
            self._send(message, attachment)

    def close(self) -> None:
        with self.lock:
            self._send_pending()
            self.closed = True
            self.lock.notify()
        self.thread.join()
        self.socket.close()

    def _send_pending(self) -> None:
        merged: list[tuple[int, str, list[str]]] = []  # consecutive chunks of one stream of one cell: one message
        for cid, stream, text in self.pending:
            if merged and merged[-1][:2] == (cid, stream):
                merged[-1][2].append(text)
            else:
                merged.append((cid, stream, [text]))
        self.pending = []
        for cid, stream, texts in merged:
            self._send({"id": cid, stream: "".join(texts)})

    def _send(self, message: dict[str, Any], attachment: object = None) -> None:
        self.socket.send_multipart(seal(self.key, {**message, "pe": self.pe}, attachment))
        self.last_sent = time.monotonic()

    def _flusher(self) -> None:
        with self.lock:
            while not self.closed:
                if not self.pending:
                    self.lock.wait()
                    continue
                left = self.last_sent + self.window - time.monotonic()
                if left > 0:
                    self.lock.wait(left)
                else:
                    self._send_pending()


class _Lines(io.TextIOBase):
    """``sys.stdout`` / ``sys.stderr`` during a cell: hands every complete line to the
    :class:`_Outbox` at once, the rest at ``flush()`` and at the end."""

    def __init__(self, channel: _Channel, cid: int, name: str, original: TextIO) -> None:
        self.channel, self.cid, self.name, self.original = channel, cid, name, original
        self.buffer_text: list[str] = []

    @property
    def encoding(self) -> str:  # type: ignore[override]  # typeshed: a writable attribute; read-only at run time
        return "utf-8"

    def writable(self) -> bool:
        return True

    def fileno(self) -> int:  # file descriptors 1 and 2: what the kernel captures from them arrives too late
        return self.original.fileno()

    def write(self, text: str) -> int:
        if not isinstance(text, str):
            raise TypeError(f"write() argument must be str, not {type(text).__name__}")
        self.buffer_text.append(text)
        if "\n" in text:
            self.flush()
        return len(text)

    def flush(self) -> None:
        if self.buffer_text:
            text, self.buffer_text = "".join(self.buffer_text), []
            self.channel.outbox.output(self.cid, self.name, text)


class _Captured:
    """While a cell runs: its displays and its last expression are kept for the final
    message, and its traceback is kept instead of being published on the engine's iopub."""

    def __init__(self, shell: Any) -> None:
        self.shell = shell
        self.outputs: list[dict[str, Any]] = []
        self.result: dict[str, Any] | None = None

    def __enter__(self) -> _Captured:
        shell = self.shell
        self.publisher = shell.display_pub
        shell.display_pub = _Publisher(self.outputs)
        hook = shell.displayhook
        hook.finish_displayhook = self._finish_displayhook
        shell._showtraceback = self._showtraceback
        return self

    def __exit__(self, *exc: object) -> None:
        shell = self.shell
        shell.display_pub = self.publisher
        del shell.displayhook.finish_displayhook  # the class's own again
        del shell._showtraceback

    def _finish_displayhook(self) -> None:
        hook = self.shell.displayhook
        sys.stdout.flush()
        sys.stderr.flush()
        if hook.msg is not None and hook.msg["content"]["data"]:
            content = hook.msg["content"]
            self.result = {"data": dict(content["data"]), "metadata": dict(content.get("metadata") or {})}
        hook.msg = None

    def _showtraceback(self, etype: type[BaseException] | None, evalue: BaseException | None, stb: list[str]) -> None:
        sys.stdout.flush()
        sys.stderr.flush()
        self.shell._last_traceback = stb


class _Publisher:
    """``shell.display_pub`` during a cell: keeps what ``display()`` shows."""

    def __init__(self, outputs: list[dict[str, Any]]) -> None:
        self.outputs = outputs
        self.is_publishing = False

    def publish(
        self,
        data: dict[str, Any],
        metadata: dict[str, Any] | None = None,
        source: str | None = None,
        *,
        transient: dict[str, Any] | None = None,
        update: bool = False,
        **kwargs: Any,
    ) -> None:
        self.outputs.append({"data": dict(data), "metadata": dict(metadata or {})})

    def clear_output(self, wait: bool = False) -> None:
        self.outputs.clear()
