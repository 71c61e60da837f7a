"""The PE's process: an ipyparallel engine whose id is the PE number (PE side).

Importing it calls ``shmem_init()``, so it runs only inside a PE started by
``oshrun`` (``python -m shmem_notebook.engine <ipengine args>``). It binds
``shmem``, ``np``, ``me``, ``npes``, ``collectives`` (:mod:`.collectives`) and the declared arrays (:mod:`.heap`)
into the engine's namespace before every cell.
"""

from __future__ import annotations

import _thread
import contextlib
import functools
import json
import os
import socket
import sys
import threading
import time
from typing import TYPE_CHECKING, Any, cast

import numpy as np
from shmem4py import shmem

from .. import lazy_imports
from ..rc import rc
from . import collectives, heap, shims, teams
from .context import this_pe
from .mpi_version import mpi_version
from .shims import pitfalls
from .shims.blocked_call import decode, symmetric_view

__all__ = ["info", "lifeline", "bind", "join", "poke", "released", "main"]

if TYPE_CHECKING:
    from collections.abc import Sequence


def _bind_namespace() -> None:
    ns = this_pe.namespace
    ns.update(shmem=shmem, np=np, me=shmem.my_pe(), npes=shmem.n_pes(), collectives=collectives)
    ns.update(this_pe.arrays)


def _before_cell(info: Any = None) -> None:
    _bind_namespace()
    this_pe.last_cell.update(state="busy", outcome=None, seconds=None, started=time.time())


def _after_cell(result: Any) -> None:
    last_cell = this_pe.last_cell
    if "started" not in last_cell:  # the end of the start-up code that called bind(): not a cell
        return
    error = result.error_before_exec or result.error_in_exec
    last_cell.update(
        state="idle",
        outcome="ok" if error is None else type(error).__name__,
        seconds=time.time() - last_cell["started"],
    )
    if result.error_in_exec is not None:  # raised here, maybe not on the other PEs
        drop_error_frames()


def bind(shell: Any) -> None:
    """Install the namespace and the per-cell hooks in the engine's shell."""
    this_pe.shell = shell  # the one place the PE keeps it: namespace, recordings, snapshot, channel
    lazy_imports.release("debugpy")
    for stream in (sys.stdout, sys.stderr):
        # send output at once: when a PE dies, oshrun kills the others within ~0.1 s,
        # and output still buffered (0.2 s by default) would be lost
        if hasattr(stream, "flush_interval"):
            stream.flush_interval = 0.0
    _bind_namespace()
    _keep_static_transforms(shell)
    shell.events.register("pre_run_cell", _before_cell)
    shell.events.register("post_run_cell", _after_cell)


def _keep_static_transforms(shell: Any) -> None:
    """Transform a cell's text once per text, not twice per run. ipykernel's ``do_execute`` transforms
    the cell, then IPython's ``run_cell`` transforms it again, each time tokenizing the whole cell (about a
    millisecond of a PE's CPU for a 20-line cell), and IPython compiles the whole transformed cell, twice, to
    learn whether it awaits at its top level. The static transform (``TransformerManager``: the text alone,
    no namespace) is kept for the last texts, under the transforms it ran, and so is that answer, so a
    re-run cell and the second look at a cell reuse them."""
    import IPython.core.interactiveshell as interactive

    manager = shell.input_transformer_manager
    if getattr(manager.transform_cell, "kept", False):
        return
    transform = manager.transform_cell

    @functools.lru_cache(maxsize=_KEPT_TEXTS)  # an error is raised, not kept
    def kept(cell: str, *transforms: tuple[Any, ...]) -> str:
        return cast("str", transform(cell))

    def transform_cell(cell: str) -> str:
        transforms = (manager.cleanup_transforms, manager.line_transforms, manager.token_transformers)
        return kept(cell, *map(tuple, transforms))  # under the transforms that run now

    transform_cell.kept = True  # type: ignore[attr-defined]
    manager.transform_cell = transform_cell
    awaits = getattr(interactive, "_should_be_async", None)
    if awaits is not None and not hasattr(awaits, "cache_info"):  # a pure function of the text
        interactive._should_be_async = functools.lru_cache(maxsize=_KEPT_TEXTS)(awaits)  # type: ignore[attr-defined]


#: cell texts whose static transform a PE keeps
_KEPT_TEXTS = 16


def lifeline() -> int:
    """The write end of a pipe only this process holds (its read end closed): the descriptor a client
    on this host opens through ``/proc`` to learn the moment the PE's files close, early in its exit,
    before the launcher can see it end and end the others (:class:`shmem_notebook.job.processes.LocalPEs`)."""
    if this_pe.lifeline is None or this_pe.lifeline[0] != os.getpid():
        read, write = os.pipe()
        os.close(read)
        this_pe.lifeline = (os.getpid(), write)
    return this_pe.lifeline[1]


def info() -> dict[str, Any]:
    """Who this PE is: pe, pid, host, heap used/size, library name and version, its :func:`lifeline`."""
    used, size = heap.heap_usage()
    major, minor = shmem.info_get_version()
    return {
        "pe": shmem.my_pe(),
        "npes": shmem.n_pes(),
        "pid": os.getpid(),
        "lifeline": lifeline(),
        "host": socket.gethostname(),
        "node": os.environ.get("SLURMD_NODENAME") or socket.gethostname(),
        "heap_used": used,
        "heap_size": size,
        "library": shmem.info_get_name(),
        "spec_version": f"{major}.{minor}",
        "guards": pitfalls.active(shmem),
        "shims": shims.installed(),
        "teams": this_pe.teams.mode,
        "mpi": mpi_version(),  # the MPI under the library (OSHMPI, Open MPI's OSHMEM), or None
    }


def join(call: str, args: Sequence[Any] | None = None, kwargs: dict[str, Any] | None = None) -> str:
    """Make the world synchronisation ``call`` (one of :data:`shmem_notebook.operations.JOINABLE`) that
    other PEs wait in for this PE, whose cell raised (see ``shmem_notebook.cells.stranded``); with
    ``args``, the call the others are blocked in with those arguments
    (:func:`.shims.blocked_call.describe`: this PE's copies of their symmetric arrays). Collective."""
    if args is not None:
        getattr(shmem, call)(
            *(decode(shmem, a) for a in args),
            **{k: decode(shmem, v) for k, v in cast("dict[str, Any]", kwargs).items()},
        )
        return call
    {"barrier_all": shmem.barrier_all, "sync_all": shmem.sync_all, "sync": lambda: shmem.sync(shmem.TEAM_WORLD)}[call]()
    return call


def poke(pe: int, writes: Sequence[Sequence[Any]]) -> int:
    """Put ``writes`` (``[(sym, hex bytes)]``, :func:`.shims.blocked_call.describe`'s symmetric places) to
    PE ``pe``, then quiet: the values a wait that PE is blocked in waits for. Not collective."""
    for sym, data in writes:
        target = symmetric_view(shmem, sym)
        shmem.put(target, np.frombuffer(bytes.fromhex(data), target.dtype).reshape(target.shape), pe)
    shmem.quiet()
    return len(writes)


def released(restore: dict[str, Sequence[Sequence[Any]]] | None = None) -> bool:
    """After a cell was abandoned (``cells/stranded``): put back this PE's words that :func:`poke` wrote
    (``restore``: ``{pe: [(sym, hex bytes)]}``), drop the last exception's frames
    (:func:`drop_error_frames`), then zero the emulated teams' half-done counts. Collective."""
    for sym, data in (restore or {}).get(str(shmem.my_pe()), ()):
        target = symmetric_view(shmem, sym)
        target[...] = np.frombuffer(bytes.fromhex(data), target.dtype).reshape(target.shape)
    drop_error_frames(forget=True)
    shmem.barrier_all()
    teams.reset()
    return True


def drop_error_frames(forget: bool = False) -> None:
    """Drop the locals of the last exception's frames, which may hold symmetric arrays on some PEs and
    not others (shmem4py frees an array, collectively, when its last reference goes: a frame kept on
    one PE would make a later rebinding free it there alone, and the PEs' barriers pair wrongly from
    then on); ``forget``: the exception too (once the cell's reply was sent). Not collective."""
    shell = this_pe.shell
    last = getattr(shell, "last_execution_result", None)
    error = getattr(last, "error_in_exec", None)
    for tb in {
        id(t): t for t in (getattr(sys, "last_traceback", None), getattr(error, "__traceback__", None)) if t
    }.values():
        while tb is not None:  # the frames' locals go now, whatever else holds the frames
            frame = tb.tb_frame
            if frame.f_locals is not frame.f_globals:  # not the cell's own (module) frame
                frame.f_locals.clear()  # the snapshot a traceback formatter took
                with contextlib.suppress(RuntimeError):  # a frame still running
                    frame.clear()
            tb = tb.tb_next
    for name in ("last_type", "last_value", "last_traceback", "last_exc"):
        if hasattr(sys, name):
            setattr(sys, name, None)
    if shell is not None:  # IPython keeps it too: for %debug, and in the last ExecutionResult
        shell.InteractiveTB.tb = None
        if last is not None and forget:
            last.error_in_exec = None


def _wait_for_connection_file(timeout: float) -> None:
    """On one node oshrun starts while the controller starts: wait until the controller's
    engine connection file is complete (ipyparallel would read a half-written one)."""
    if os.environ.get("IPP_CONNECTION_INFO") or "IPP_PROFILE_DIR" not in os.environ:
        return
    name = (
        f"ipcontroller-{os.environ['IPP_CLUSTER_ID']}-engine.json"
        if os.environ.get("IPP_CLUSTER_ID")
        else "ipcontroller-engine.json"
    )
    path = os.path.join(os.environ["IPP_PROFILE_DIR"], "security", name)
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            with open(path) as f:
                json.load(f)
            return
        except (OSError, ValueError):
            time.sleep(0.05)


def _publish_collectives() -> None:
    """On a PE, ``import shmem_notebook.collectives`` (and ``from shmem_notebook import
    collectives``) give :mod:`.collectives`: the name users write, kept out of the client's
    package because the client never imports the engine."""
    import shmem_notebook

    sys.modules["shmem_notebook.collectives"] = collectives
    shmem_notebook.collectives = collectives


def _keep_dropped_interrupts() -> None:
    """Raise again each KeyboardInterrupt that a finalizer drops. SIGINT (the stop button, a timeout)
    that lands in a ``__del__`` or a weakref callback is "Exception ignored" by Python: the PE would compute
    on while the client waits for it to stop, then take it for blocked and mark the job hung. It is
    raised where it surfaced: at the next line of the frame the finalizer ran in, or at the next call."""
    previous = sys.unraisablehook

    def hook(unraisable: Any) -> None:
        if not issubclass(unraisable.exc_type, KeyboardInterrupt) or threading.current_thread() is not main_thread:
            previous(unraisable)
            return
        tracing = sys.gettrace()
        tracing = getattr(tracing, "tracing", tracing)  # dropped again before it was raised

        def again(frame: Any, event: str, arg: Any) -> None:
            sys.settrace(tracing)
            surfaced.f_trace = None
            raise KeyboardInterrupt

        again.tracing = tracing  # type: ignore[attr-defined]
        try:
            surfaced = sys._getframe(1)
        except ValueError:  # no Python frame: as the signal would, at the next statement
            threading.Timer(0.01, _thread.interrupt_main).start()
            return
        surfaced.f_trace = again  # its next line (a trace function's error is raised there)
        sys.settrace(again)  # or the next call, whichever comes first

    main_thread = threading.main_thread()
    sys.unraisablehook = hook


def main(argv: Sequence[str] | None = None) -> None:
    """Run an ipyparallel engine whose id is this PE's number."""
    _keep_dropped_interrupts()
    shims.install(shmem)  # collective: the teams shim reserves its synchronisation words
    collectives.install(shmem)  # collective: reserves the teaching collectives' scratch
    _publish_collectives()
    lazy_imports.install()
    lazy_imports.hold_back("debugpy")  # until bind()
    from ipyparallel.engine.app import IPEngine  # imports while the controller starts

    _wait_for_connection_file(rc.start_timeout)
    argv = list(sys.argv[1:] if argv is None else argv)
    argv += [
        f"--IPEngine.id={shmem.my_pe()}",
        # a line per request in oshrun's output costs every PE (and oshrun, which forwards
        # it) about a millisecond per cell; warnings and errors still show
        "--IPEngine.log_level=WARN",
        # the client signals PEs itself and notices deaths through oshrun: no nanny process
        "--IPEngine.enable_nanny=False",
        # a PE quits when the controller's heartbeats stop for max_heartbeat_misses checks (750 ms each
        # here): 50 (37 s) was too few on a crowded server (a class of 20-30 on 2 cores: bench/hub.py);
        # a job whose kernel dies is ended by its watchdog anyway, so a PE waits 5 minutes
        "--IPEngine.max_heartbeat_misses=400",
        # oshrun and the controller start together: the connection file may come after us
        f"--IPEngine.wait_for_url_file={rc.start_timeout}",
        # bind this module to the engine's shell and answer requests (requests imports this module)
        f"--IPEngine.startup_command=__import__('{__package__}.requests', fromlist=['start']).start(get_ipython())",
    ]
    try:
        IPEngine.launch_instance(argv)
    except RuntimeError as exc:
        # ipyparallel's engine ends every clean shutdown with this error; exiting 1 for it
        # would make oshrun report a failed PE and linger 1-2 s
        if "Event loop stopped before Future completed" not in str(exc):
            raise


if __name__ == "__main__":
    main()
