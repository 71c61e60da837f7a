"""The PE's end of the cell channel (PE side; see :mod:`shmem_notebook.cells.channel`).

A cell comes straight from the client's socket to this PE's main event loop and
runs through the engine's own ``do_execute`` (IPython's ``run_cell``: magics,
tracebacks, ``pre_run_cell`` hooks, matplotlib's inline figures), as an
``execute_request`` would. What the cell prints goes back line by line; its
displays, its last expression and its error go back in one final message. Nothing
passes through the controller, and the PE sends no status messages, which is where
ipyparallel's per-PE cost of a cell goes.
"""

import asyncio
import io
import secrets
import signal
import sys

import zmq
from zmq.eventloop.zmqstream import ZMQStream

from ..protocol import seal, unseal

__all__ = ["connect"]

_channel = None


def connect(url, key_hex):
    """Connect this PE to the client's cell channel at ``url`` (replacing an earlier one)."""
    global _channel
    if _channel is not None:
        _channel.close()
    _channel = _Channel(url, bytes.fromhex(key_hex))
    return True


class _Channel:
    def __init__(self, url, key):
        from IPython import get_ipython

        from .runtime import shmem

        self.shell = get_ipython()
        self.key = key
        self.pe = shmem.my_pe()
        socket = zmq.Context.instance().socket(zmq.DEALER)
        # a name of its own per connection: the client may still hold the previous one's
        socket.setsockopt(zmq.IDENTITY, f"{self.pe}.{secrets.token_hex(4)}".encode())
        socket.setsockopt(zmq.LINGER, 1000)
        socket.connect(url)
        self.socket = socket
        self.stream = ZMQStream(socket)  # on the engine's main event loop: cells run on the main thread
        self.stream.on_recv(self._received)
        self.send({"hello": True})

    def close(self):
        self.stream.close()

    def send(self, message):
        self.socket.send_multipart(seal(self.key, {**message, "pe": self.pe}))

    def _received(self, frames):
        message = unseal(self.key, frames)
        if message is not None:  # anything not signed with the job's key is dropped
            asyncio.ensure_future(self._run(message["id"], message["code"]))

    async def _run(self, cid, code):
        """Run one cell as ``execute_request`` would; send its output, then its outcome."""
        shell = self.shell
        out, err = _Lines(self, cid, "stdout", sys.stdout), _Lines(self, cid, "stderr", sys.stderr)
        captured = _Captured(shell)
        saved = sys.stdout, sys.stderr, signal.getsignal(signal.SIGINT)
        sys.stdout, sys.stderr = out, err
        signal.signal(signal.SIGINT, signal.default_int_handler)  # the interrupt stops the cell
        try:
            with captured:
                reply = await shell.kernel.do_execute(code, silent=False, store_history=True, user_expressions={})
        except KeyboardInterrupt:  # between the cell's statements and our bookkeeping
            reply = {"status": "error", "ename": "KeyboardInterrupt", "evalue": "", "traceback": ["KeyboardInterrupt"]}
        finally:
            sys.stdout, sys.stderr = saved[:2]
            signal.signal(signal.SIGINT, saved[2])
            out.flush()
            err.flush()
        done = {"id": cid, "status": reply.get("status", "error"), "outputs": captured.outputs,
                "execute_result": captured.result}
        if done["status"] == "error":
            done["error"] = {k: reply.get(k) for k in ("ename", "evalue", "traceback", "engine_info")}
        self.send(done)


class _Lines(io.TextIOBase):
    """``sys.stdout`` / ``sys.stderr`` during a cell: sends every complete line at once
    (a PE that dies takes nothing printed with it), the rest at ``flush()`` and at the end."""

    def __init__(self, channel, cid, name, original):
        self.channel, self.cid, self.name, self.original = channel, cid, name, original
        self.buffer_text = []

    @property
    def encoding(self):
        return "utf-8"

    def writable(self):
        return True

    def fileno(self):  # file descriptors 1 and 2: what the kernel captures from them arrives too late
        return self.original.fileno()

    def write(self, text):
        if not isinstance(text, str):
            raise TypeError(f"write() argument must be str, not {type(text).__name__}")
        self.buffer_text.append(text)
        if "\n" in text:
            self.flush()
        return len(text)

    def flush(self):
        if self.buffer_text:
            text, self.buffer_text = "".join(self.buffer_text), []
            self.channel.send({"id": self.cid, self.name: text})


class _Captured:
    """While a cell runs: its displays and its last expression are kept for the final
    message, and its traceback is kept instead of being published on the engine's iopub."""

    def __init__(self, shell):
        self.shell = shell
        self.outputs = []
        self.result = None

    def __enter__(self):
        shell = self.shell
        self.publisher = shell.display_pub
        shell.display_pub = _Publisher(self.outputs)
        hook = shell.displayhook
        hook.finish_displayhook = self._finish_displayhook
        shell._showtraceback = self._showtraceback
        return self

    def __exit__(self, *exc):
        shell = self.shell
        shell.display_pub = self.publisher
        del shell.displayhook.finish_displayhook  # the class's own again
        del shell._showtraceback

    def _finish_displayhook(self):
        hook = self.shell.displayhook
        sys.stdout.flush()
        sys.stderr.flush()
        if hook.msg is not None and hook.msg["content"]["data"]:
            content = hook.msg["content"]
            self.result = {"data": dict(content["data"]), "metadata": dict(content.get("metadata") or {})}
        hook.msg = None

    def _showtraceback(self, etype, evalue, stb):
        sys.stdout.flush()
        sys.stderr.flush()
        self.shell._last_traceback = stb


class _Publisher:
    """``shell.display_pub`` during a cell: keeps what ``display()`` shows."""

    def __init__(self, outputs):
        self.outputs = outputs
        self.is_publishing = False

    def publish(self, data, metadata=None, source=None, *, transient=None, update=False, **kwargs):
        self.outputs.append({"data": dict(data), "metadata": dict(metadata or {})})

    def clear_output(self, wait=False):
        self.outputs.clear()
