"""The job's controller: ipyparallel's ``ipcontroller`` whose heart monitor beats fast while
PEs are missing (``python -m shmem_notebook.launcher.controller --pes N <ipcontroller args>``).

The hub finishes an engine's registration at the first beat after the engine's heart answered
one: one to two periods after the heart starts (250-500 ms at our 250 ms). While fewer hearts
than the job's PEs answer (a start, a restart), :class:`EagerHeartMonitor` beats every
:attr:`~EagerHeartMonitor.starting_ms`; once all answer it falls back to ``HeartMonitor.period``,
so a running job idles as before. A heart still fails only after it went unheard as long as
at ``period``: fast beats never make a slow, oversubscribed PE look dead. A restart's PEs leave
while every heart still answers, so the monitor would see the gap only a beat or two later: the hub
tells it (:meth:`EagerHeartMonitor.hurry`) when an engine unregisters, as the client asks for each
leaving PE, and it beats fast for :attr:`~EagerHeartMonitor.hurry_s`, time to see the gap (a spare set's
restart: 0.5 -> 0.25 s at 1 PE).

The controller is one process: its schedulers run as threads of it (``IPController.use_threads``:
ZeroMQ's queue devices as threads, the Python schedulers on the hub's event loop) and so does the heart
monitor (:class:`HeartThread`, where ipyparallel forks a process for it). ipyparallel's default, a
process per scheduler and one for the heart monitor, was 9 processes, 40 MiB of unique memory and
0.60-0.75 CPU-seconds at a 2-PE start; as threads, with the imports below, 1 process, 24 MiB and
0.35-0.60 s (``bench/student_cost.py``, three runs at load 9-18); 23 MiB without :data:`UNUSED`.

The controller's start is on the way of every job's start: it imports only what a controller
uses (:mod:`shmem_notebook.lazy_imports`; neither NumPy nor IPython's ``__init__``) and skips the
fixed 0.25 s sleep ipcontroller takes before it writes the connection files the PEs wait for.

Over IPC (``--IPController.transport=ipc``, a job on one host: :mod:`.listen`) a socket's "port" is only
the end of its path: they are numbered 1, 2, ... instead of probed as free TCP ports, and joined to the
path with ``:`` as ipyparallel's clients and engines join them (its controller joins them with ``-``,
where no client finds them). Over TCP its ports come from :func:`.listen.unclaimed_tcp_ports`.

A thread of the controller that fails (a socket it cannot bind, say) ends the controller, saying why
(:func:`fail_with_thread`): a controller without its heart monitor or a queue answers nothing, and the client,
which watches the controller while PEs register, then says so at once instead of waiting for PEs that cannot register.
"""

import os
import sys
import threading
import time
import types
from typing import Any

from .. import lazy_imports
from .listen import unclaimed_tcp_ports

# this module is the controller's process (python -m); nothing else imports it
# ipcontroller takes IPython's submodules and get_ipython (ipyparallel.util): not IPython's __init__ (its shell)
lazy_imports.install({**lazy_imports.LAZY, "IPython": {"get_ipython": "core.getipython"}})
lazy_imports.hold_back("numpy")  # only the task scheduler's "weighted" scheme uses it (the jobs do not): 0.15 s
#: what ipcontroller's imports take and a controller never uses, held back while they run (released in
#: :func:`main`, so a use comes as usual): asyncio's TLS (the controller's sockets are ZeroMQ's) and the
#: SQLite and MongoDB task stores (a job's hub keeps its tasks in memory): about 1 MiB of its 24
UNUSED = ("ssl", "ipyparallel.controller.sqlitedb", "ipyparallel.controller.mongodb")
for _name in UNUSED:
    lazy_imports.hold_back(_name)

from ipyparallel.controller import heartmonitor  # noqa: E402  (after lazy_imports.install)

__all__ = ["EagerHeartMonitor", "HeartThread", "fail_with_thread", "ipc_names", "main"]


class EagerHeartMonitor(heartmonitor.HeartMonitor):  # type: ignore[misc]  # ipyparallel: untyped
    """A HeartMonitor that beats every :attr:`starting_ms` while fewer than :attr:`expected`
    hearts answer."""

    #: the job's PEs
    expected = 0
    #: the period while hearts are missing, ms (25 against 50: a 2- or 4-PE start 0.04-0.06 s sooner and a
    #: restart 0.03 s; at 16-32 PEs the same wall time for 0.01-0.05 CPU-s more in the controller)
    starting_ms = 25
    #: how long the monitor beats fast after an engine unregistered, s
    hurry_s = 0.5
    #: the monitor beating in this process (its thread), once started
    running: "EagerHeartMonitor | None" = None

    def start(self) -> None:
        self._heard: dict[Any, float] = {}
        self._counted = 0.0
        self._fast_until = 0.0
        super().start()
        self._pace(answered=0)
        # its own thread's loop, where its beats run (its ``loop`` trait would be the loop of the thread that
        # first reads it: the hub's, when the hub hurries it)
        self._own_loop = heartmonitor.ioloop.IOLoop.current()  # tornado's, as ipyparallel imports it
        EagerHeartMonitor.running = self

    @classmethod
    def hurry(cls) -> None:
        """Beat fast now and for :attr:`hurry_s`: an engine left (thread-safe: the hub calls it)."""
        if cls.running is not None:
            cls.running._own_loop.add_callback(cls.running._hurry)

    def _hurry(self) -> None:
        self._fast_until = time.monotonic() + self.hurry_s
        if self.caller.callback_time != self.starting_ms:  # the next beat comes at the fast pace, not a period on
            self.caller.stop()
            self.caller.callback_time = self.starting_ms
            self.caller.start()

    def beat(self) -> None:
        answered = len(self.responses)  # hearts that answered the last ping (beat clears them)
        super().beat()
        self._pace(answered)

    def _pace(self, answered: int) -> None:
        fast = answered < self.expected or time.monotonic() < self._fast_until
        self.caller.callback_time = self.starting_ms if fast else self.period

    def handle_pong(self, msg: list[Any]) -> None:
        self._heard[msg[0]] = time.monotonic()
        super().handle_pong(msg)

    def _check_missed(self, missed_beats: list[Any], on_probation: Any, hearts: Any) -> Any:
        """Count misses once per ``period``, and only of hearts unheard for two periods."""
        now = time.monotonic()
        if now - self._counted < 0.9 * self.period / 1000:
            return [], on_probation
        self._counted = now
        unheard = [h for h in missed_beats if now - self._heard.get(h, 0.0) > 2 * self.period / 1000]
        for heart in set(self._heard) - set(hearts) - set(self.responses):
            del self._heard[heart]  # hearts gone for good
        return super()._check_missed(unheard, on_probation, hearts)


class HeartThread(threading.Thread):
    """What ipyparallel's controller starts its heart monitor in (its ``Process``): a daemon thread of
    the controller. ``terminate`` does nothing: the thread ends with the controller."""

    def terminate(self) -> None:
        pass


def ipc_names(controller_class: Any) -> None:
    """Make ``controller_class`` (ipyparallel's IPController) name its IPC sockets ``<path>:1``, ``<path>:2``, ...
    (see the module's docstring); TCP is left as it is."""
    pick_port = controller_class.next_port

    def next_port(self: Any, pool_name: str = "common") -> Any:
        if "tcp" in (self.engine_transport, self.client_transport, self.monitor_transport):
            return pick_port(self, pool_name)
        self._ipc_sockets = getattr(self, "_ipc_sockets", 0) + 1
        return self._ipc_sockets

    def construct_url(self: Any, kind: str, channel: str, index: int | None = None) -> str:
        info = {"engine": self.engine_info, "client": self.client_info, "internal": self.internal_info}[kind]
        port = info[channel] if index is None else info[channel][index]
        return f"{info['interface']}:{port}"

    controller_class.next_port, controller_class.construct_url = next_port, construct_url


def fail_with_thread(args: threading.ExceptHookArgs) -> None:
    """``threading.excepthook`` of the controller: a thread that died ends the process, saying which and why."""
    name = args.thread.name if args.thread is not None else "a thread"
    error = f"{args.exc_type.__name__}: {args.exc_value}"
    sys.stderr.write(f"the controller's thread {name} failed ({error}); the controller ends\n")
    sys.stderr.flush()
    os._exit(3)


def _hurried(hub_class: Any) -> None:
    """Make ``hub_class`` (ipyparallel's Hub) hurry the heart monitor when an engine unregisters
    (before the hub is made: it binds its handlers once)."""
    unregister = hub_class.unregister_engine

    def unregister_engine(self: Any, *args: Any) -> Any:
        try:
            return unregister(self, *args)
        finally:
            EagerHeartMonitor.hurry()

    hub_class.unregister_engine = unregister_engine


def main(argv: list[str] | None = None) -> None:
    """Run ipcontroller with :class:`EagerHeartMonitor`; ``--pes N`` (first) is the job's size."""
    argv = list(sys.argv[1:] if argv is None else argv)
    if argv[:1] == ["--pes"]:
        EagerHeartMonitor.expected = int(argv[1])
        argv = argv[2:]
    heartmonitor.HeartMonitor = EagerHeartMonitor  # start_heartmonitor looks it up when it starts
    threading.excepthook = fail_with_thread
    from ipyparallel import util
    from ipyparallel.controller import app, hub

    util.select_random_ports = unclaimed_tcp_ports  # its one use: the controller's TCP ports

    _hurried(hub.Hub)

    for name in UNUSED:
        lazy_imports.release(name)
    if not any(a.startswith("--IPController.use_threads") for a in argv):
        argv.append("--IPController.use_threads=True")  # the schedulers as threads, not 7 processes
    app.Process = HeartThread  # with use_threads, its one use: the heart monitor

    # ipcontroller's one use of `time`: a fixed time.sleep(0.25) in init_hub, before the connection files
    app.time = types.SimpleNamespace(**{**vars(time), "sleep": lambda seconds: None})
    ipc_names(app.IPController)
    os.umask(0o077)  # its sockets (and files) are the user's only, as the connection files are
    app.main(argv)


if __name__ == "__main__":
    main()
