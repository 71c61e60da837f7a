"""A whole shmem4py program race-recorded on this PE (PE side).

``python -m shmem_notebook.race -- oshrun -n 4 python prog.py ARGS`` starts
``python -m shmem_notebook.engine.record.script prog.py ARGS`` on every PE (also ``-m MODULE``).
This module initialises OpenSHMEM, installs the adaptations a cell's PEs have
(``shims``, but ``diagnostics``: a program exported from a notebook installs them itself, once),
attaches the race recording of :mod:`shmem_notebook.engine.record` and runs the program as
``__main__`` with its ``sys.argv``. The program's own files (the script and every module
imported from its directory) are rewritten as a ``--race`` cell is
(:class:`~.instrument.AccessTransformer`), through an import hook, with each recorded line
encoded as ``file number * RACE_LINES + line``; the calls' arrays are named after the
variables of the program's frame that hold them, so arrays local to functions are named too.
When the program ends (returns, ``sys.exit``, raises), before shmem4py's ``shmem_finalize``,
each PE writes its recording, its files, what it printed and how it ended to
``$SHMEM_NOTEBOOK_RACE_DIR/pe<N>.pickle`` for the runner (:mod:`shmem_notebook.race`).
With ``SHMEM_NOTEBOOK_RACE_TRACE=1`` it also traces the calls (``--trace``: the recording's
``timeline``). With ``SHMEM_NOTEBOOK_RACE_STRESS=SEED:MAX_DELAY`` it only delays every shmem call at random
(a stress rerun) and writes what it printed (and, with the trace variable too, the timeline).
The report's ``values`` are this PE's symmetric memory at the end, by name: a recorded run's named
arrays (``ranges``: where each lies, up to :data:`_VALUES_CAP` bytes in all), a stress rerun's
``SHMEM_NOTEBOOK_RACE_MEMORY`` (the ranges of the arrays the races are about): the runner compares them.
"""

from __future__ import annotations

import ast
import builtins
import ctypes
import importlib.machinery
import importlib.util
import json
import os
import pickle
import sys
import traceback
import types
from typing import TYPE_CHECKING, Any, cast

import numpy as np
from shmem4py import shmem

from ...operations import CAP
from ...protocol import PE_DONE, PE_LINE, RACE_ENV, RACE_LINES
from ...trace.recording import trace_start, trace_stop
from .. import shims
from ..context import this_pe
from . import layer, race_start, race_stop, stress_start, stress_stop
from .hooks import FUNCS
from .instrument import HOOKS, renumber
from .memory import anonymous_heap, heap_range

if TYPE_CHECKING:
    from collections.abc import Mapping, Sequence
    from types import FrameType
    from typing import NoReturn, TextIO

    import numpy.typing as npt

    from ...operations import Operation
    from .accesses import RaceRecording
    from .instrument import MarkTransformer
    from .memory import Layout, Space

__all__ = ["main", "instrument"]

_files = this_pe.record.files  # absolute path of a rewritten file -> its number (from 1)
_STDOUT_CAP = 1 << 20  # what a PE printed is kept up to this many characters (for stress runs)
_VALUES_CAP = 16 << 20  # bytes of named symmetric memory a recorded run keeps for the stress reruns' verdict


class _Shell:
    """What the recording needs of IPython's shell: a namespace (the program's ``__main__``)
    and a list of AST transformers (the one the race recording adds is used on every file)."""

    def __init__(self, namespace: dict[str, Any]) -> None:
        self.user_ns = namespace
        self.ast_transformers: list[MarkTransformer] = []


class _Tee:
    """sys.stdout that also keeps what the program prints; with ``label`` (``{text}`` in it) it writes
    whole lines, each marked with the PE, for the runner to fold (:data:`~shmem_notebook.protocol.PE_LINE`)."""

    def __init__(self, stream: TextIO, label: str | None = None) -> None:
        self.kept: list[str]
        self._stream, self.kept, self._size = stream, [], 0
        self._label, self._partial = label, ""

    def write(self, text: str) -> int:
        if self._size < _STDOUT_CAP:
            self.kept.append(text)
            self._size += len(text)
        if self._label is None:
            return self._stream.write(text)
        *lines, self._partial = (self._partial + text).split("\n")
        for line in lines:
            self._stream.write(self._label.format(text=line) + "\n")
        return len(text)

    def close_lines(self, done: str) -> None:
        """The unterminated last line, then ``done``: this PE prints no more."""
        if self._label is not None:
            if self._partial:
                self._stream.write(self._label.format(text=self._partial) + "\n")
            self._stream.write(done + "\n")
            self._partial = ""
        self._stream.flush()

    def __getattr__(self, name: str) -> Any:
        return getattr(self._stream, name)


# -- rewriting the program's files ---------------------------------------------------------
def _number(path: str) -> int:
    return _files.setdefault(path, len(_files) + 1)


def instrument(source: str, path: str, transformer: MarkTransformer | None) -> types.CodeType:
    """The code of ``source`` (file ``path``) with its loads and stores routed through the race
    hooks, and every hook's line encoded with the file's number."""
    tree = transformer.visit(ast.parse(source, path)) if transformer is not None else ast.parse(source, path)
    renumber(tree, _number(path) * RACE_LINES)
    return compile(ast.fix_missing_locations(tree), path, "exec", dont_inherit=True)


def _line(frame: FrameType) -> int:
    """The recorded line of the innermost frame in the program's files (0 if none)."""
    f: FrameType | None = frame
    while f is not None:
        number = _files.get(f.f_code.co_filename)
        if number is not None:
            return number * RACE_LINES + f.f_lineno
        f = f.f_back
    return 0


def _program_frame(frame: FrameType | None) -> FrameType | None:
    while frame is not None and frame.f_code.co_filename not in _files:
        frame = frame.f_back
    return frame


class _Finder:
    """Import hook: modules whose file lies under ``roots`` (the program's directory) are rewritten."""

    def __init__(self, roots: list[str], transformer: MarkTransformer | None) -> None:
        self.roots = [os.path.join(os.path.realpath(r), "") for r in roots]
        self.skip = [os.path.join(os.path.realpath(p), "") for p in {sys.prefix, sys.base_prefix, _package_root()}]
        self.transformer = transformer

    def find_spec(
        self, name: str, path: Sequence[str] | None = None, target: types.ModuleType | None = None
    ) -> importlib.machinery.ModuleSpec | None:
        spec = importlib.machinery.PathFinder.find_spec(name, path)
        origin = getattr(spec, "origin", None)
        if (
            not origin
            or not origin.endswith(".py")
            or not isinstance(
                spec.loader,  # type: ignore[union-attr]  # origin: a spec
                importlib.machinery.SourceFileLoader,
            )
        ):
            return None
        real = os.path.realpath(origin)
        if not any(real.startswith(r) for r in self.roots) or any(real.startswith(s) for s in self.skip):
            return None
        spec.loader = _Loader(spec.name, origin, self.transformer)  # type: ignore[union-attr]  # origin: a spec
        return spec


class _Loader(importlib.machinery.SourceFileLoader):
    """Compiles the rewritten source, never from or into ``__pycache__``."""

    def __init__(self, fullname: str, path: str, transformer: MarkTransformer | None) -> None:
        super().__init__(fullname, path)
        self.transformer = transformer

    def get_code(self, fullname: str) -> types.CodeType:
        path = self.get_filename(fullname)
        return instrument(self.get_data(path).decode("utf-8"), os.path.abspath(path), self.transformer)


def _package_root() -> str:
    """shmem_notebook's own directory: never rewritten."""
    return os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


class _Namer:
    """A consumer of the recording layer: names the arrays a call is given after the variables of
    the program's frame holding them. A program lives longer than a cell: at its end, arrays local
    to functions are gone and freed memory may hold other arrays under other names, so the names
    seen at the calls come first (:meth:`names`)."""

    before = None

    def __init__(self, recording: RaceRecording) -> None:
        self.memory = recording.memory
        self.seen: dict[tuple[Space, int, int], tuple[str, int, Layout | None, str]]
        self.seen = {}  # (space, lo, hi) -> (name, itemsize, layout), the last name seen for that memory

    def after(self, op: Operation, args: dict[str, Any], result: Any, line: int) -> None:
        arrays = [a for a in args.values() if isinstance(a, np.ndarray) and a.size]
        frame = _program_frame(sys._getframe(1)) if arrays else None
        if frame is None:
            return
        info = self.memory.info
        spans = [info(a)[1:5] for a in arrays]
        for name, value in list(frame.f_locals.items()):
            if name.startswith("_") or not isinstance(value, np.ndarray) or not value.size:
                continue
            _, space, _, lo, hi, itemsize, dtype = info(value)[:7]
            if any(s == space and lo <= slo and shi <= hi for s, _, slo, shi in spans):
                self.seen.pop((space, lo, hi), None)  # the last name, and last in the order
                self.seen[(space, lo, hi)] = (name, itemsize, self.memory.layout(value), dtype)

    def names(self, namespace: dict[str, Any]) -> list[list[Any]]:
        """``[name, space, lo, hi, itemsize, priority, layout]`` (see ``AddressBook.names``): first the arrays of a
        program exported from a notebook declared (its ``_declared``: priority 0, as a cell's declared
        arrays), then the memory named at calls (priority 1, before the namespace's at the end)."""
        declared = namespace.get("_declared")
        found: list[list[Any]] = []
        for name, value in declared.items() if isinstance(declared, dict) else ():
            if isinstance(value, np.ndarray) and value.size:
                _, space, _, lo, hi, itemsize = self.memory.info(value)[:6]
                found.append([name, space, lo, hi, itemsize, 0, self.memory.layout(value)])
        return found + [
            [name, space, lo, hi, itemsize, 1, layout]
            for (space, lo, hi), (name, itemsize, layout, _) in self.seen.items()
        ]

    def ranges(self) -> dict[str, tuple[int, int, str, Layout | None]]:
        """``{name: (lo, hi, dtype, layout)}``: the symmetric memory last named so at a call (heap offsets),
        as long as they add up to at most :data:`_VALUES_CAP` bytes."""
        last: dict[str, tuple[int, int, str, Layout | None]] = {}
        for (space, lo, hi), (name, _, layout, dtype) in self.seen.items():
            if space == "sym":
                last.pop(name, None)
                last[name] = (lo, hi, dtype, layout)
        kept: dict[str, tuple[int, int, str, Layout | None]]
        kept, size = {}, 0
        for name, (lo, hi, dtype, layout) in reversed(last.items()):  # the latest first
            if size + hi - lo <= _VALUES_CAP:
                kept[name], size = (lo, hi, dtype, layout), size + hi - lo
        return kept


def _heap_values(ranges: Mapping[str, Sequence[Any]], heap: tuple[int, int]) -> dict[str, npt.NDArray[Any]]:
    """``{name: ndarray}``: copies of this PE's symmetric memory in ``ranges`` (see :meth:`_Namer.ranges`),
    ``heap`` the ``(lo, hi)`` its offsets count in. Empty on OSHMPI, whose heap offsets count from
    the lowest live allocation, which differs between runs."""
    lo_heap, hi_heap = heap
    if not lo_heap or anonymous_heap():
        return {}
    memory = (ctypes.c_char * (hi_heap - lo_heap)).from_address(lo_heap)
    values: dict[str, npt.NDArray[Any]] = {}
    for name, (lo, hi, dtype, layout) in ranges.items():
        try:
            if layout:
                origin, shape, strides = layout
                view = np.ndarray(
                    tuple(shape),
                    dtype,
                    buffer=memory,  # type: ignore[arg-type]  # a ctypes array is a buffer
                    offset=origin,
                    strides=tuple(strides),
                )
            else:
                view = np.ndarray(
                    ((hi - lo) // np.dtype(dtype).itemsize,),
                    dtype,
                    buffer=memory,  # type: ignore[arg-type]  # a ctypes array is a buffer
                    offset=lo,
                )
        except (TypeError, ValueError):  # outside the heap, or a layout NumPy refuses: not compared
            continue
        values[name] = view.copy()
    return values


# -- running the program ---------------------------------------------------------------------
def _target(argv: list[str]) -> tuple[str, str, importlib.machinery.ModuleSpec | None, list[str]]:
    """``(path, run name's package, module name)`` of ``FILE ARGS`` or ``-m MODULE ARGS``."""
    if argv[:1] == ["-m"] and len(argv) > 1:
        spec = importlib.util.find_spec(argv[1])
        if spec is not None and spec.submodule_search_locations is not None:  # a package: its __main__
            spec = importlib.util.find_spec(argv[1] + ".__main__")
        if spec is None or not spec.origin or not spec.origin.endswith(".py"):
            raise SystemExit(f"shmem_notebook.race: no Python module named {argv[1]!r}")
        return os.path.abspath(spec.origin), spec.name.rpartition(".")[0], spec, argv[2:]
    if not argv:
        raise SystemExit("shmem_notebook.race: no program given (FILE ARGS or -m MODULE ARGS)")
    path = os.path.abspath(argv[0])
    if not os.path.isfile(path):
        raise SystemExit(f"shmem_notebook.race: can't open file {argv[0]!r}: no such file")
    return path, "", None, argv[1:]


def _run(code: types.CodeType, namespace: dict[str, Any]) -> int:
    """Run the program's code; its exit status as Python would give it."""
    try:
        exec(code, namespace)
    except SystemExit as exc:
        if exc.code is None or isinstance(exc.code, int):
            return exc.code or 0
        print(exc.code, file=sys.stderr)
        return 1
    except BaseException:
        kind, value, tb = sys.exc_info()
        traceback.print_exception(kind, value, cast("types.TracebackType", tb).tb_next)  # without this module's frame
        return 1
    return 0


def main(argv: list[str] | None = None) -> NoReturn:
    argv = list(sys.argv[1:] if argv is None else argv)
    path, package, spec, args = _target(argv)
    out_dir = os.environ.get(RACE_ENV["dir"])
    stress = os.environ.get(RACE_ENV["stress"])
    shims.install(shmem, exclude=("diagnostics",))  # collective; a program exported from a notebook skips its own

    module = types.ModuleType("__main__")
    module.__dict__.update(
        __file__=path,
        __builtins__=builtins,
        __spec__=spec,
        __package__=package,
        __loader__=spec.loader if spec else None,
    )
    sys.modules["__main__"] = module
    sys.argv = [path, *args]
    if spec is None:
        sys.path[0] = os.path.dirname(path)

    namer: _Namer
    transformer = namer = None  # type: ignore[assignment]  # set where it is read (not stress)
    this_pe.shell = _Shell(module.__dict__)
    if stress:
        seed, _, delay = stress.partition(":")
        stress_start(int(seed), float(delay or 0.02))
        if os.environ.get(RACE_ENV["trace"]):  # --stress with --trace: the first rerun's timeline
            layer.line_of[0] = _line
            trace_start({"cap": int(os.environ.get(RACE_ENV["cap"]) or CAP)})
    else:
        race_start({"cap": int(os.environ.get(RACE_ENV["cap"]) or CAP), "library_writes": True})
        if os.environ.get(RACE_ENV["trace"]):  # the runner's --trace FILE: also the calls' timeline
            trace_start({"cap": int(os.environ.get(RACE_ENV["cap"]) or CAP)})
        transformer = this_pe.shell.ast_transformers[-1]
        recording = cast("RaceRecording", layer.attached("race"))
        for hook, func in FUNCS.items():  # every rewritten module finds the hooks
            setattr(builtins, HOOKS[hook], func)
        layer.line_of[0] = _line  # lines of the program's files, numbered
        this_pe.record.outside_enabled = False  # its files are rewritten as they are imported, numbered here
        namer = _Namer(recording)
        layer.attach("names", namer)
    sys.meta_path.insert(0, _Finder([os.path.dirname(path)] if spec is None else [os.getcwd()], transformer))
    if hasattr(sys.stdout, "reconfigure"):  # whole lines: the PEs share the launcher's stdout
        sys.stdout.reconfigure(line_buffering=True, write_through=False)
    me, npes = shmem.my_pe(), shmem.n_pes()
    label = PE_LINE.format(pe=me, npes=npes, text="{text}") if os.environ.get(RACE_ENV["label"]) else None
    sys.stdout = tee = _Tee(sys.stdout, label)

    with open(path, encoding="utf-8") as f:
        source = f.read()
    data: dict[str, Any] | None
    ranges: Mapping[str, Sequence[Any]]
    status, data, ranges, values = 1, None, {}, {}
    try:
        status = _run(instrument(source, path, transformer), module.__dict__)
    finally:
        sys.stdout.flush()
        tee.close_lines(PE_DONE.format(pe=me, npes=npes))
        sys.stdout = tee._stream
        if stress:
            stress_stop()
            data = {"timeline": trace_stop()} if os.environ.get(RACE_ENV["trace"]) else None
            ranges = json.loads(os.environ.get(RACE_ENV["memory"]) or "{}")
            values = _heap_values(ranges, heap_range())
        else:
            layer.detach("names")
            ranges = namer.ranges()
            values = _heap_values(ranges, namer.memory.heap)
            data = cast("dict[str, Any]", race_stop())
            data["timeline"] = trace_stop() if os.environ.get(RACE_ENV["trace"]) else None
            data["names"] = namer.names(module.__dict__) + data["names"]
        if out_dir:
            _write(
                out_dir,
                {
                    "pe": shmem.my_pe(),
                    "npes": shmem.n_pes(),
                    "status": status,
                    "data": data,
                    "files": {number: p for p, number in _files.items()},
                    "stdout": "".join(tee.kept),
                    "ranges": ranges,
                    "values": values,
                },
            )
    sys.exit(status)


def _write(directory: str, report: dict[str, Any]) -> None:
    path = os.path.join(directory, f"pe{report['pe']}.pickle")
    with open(path + ".part", "wb") as f:
        pickle.dump(report, f, protocol=pickle.HIGHEST_PROTOCOL)
    os.replace(path + ".part", path)


if __name__ == "__main__":  # run as the module itself, not a copy named __main__: the program takes that name
    from shmem_notebook.engine.record import script

    script.main()
