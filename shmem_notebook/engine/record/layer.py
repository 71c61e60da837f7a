"""The one layer that sees every shmem4py call of a recorded cell (PE side).

While at least one consumer is attached, every call of
:data:`shmem_notebook.operations.CALLS` that this shmem4py offers is wrapped once. A call
is decoded once (its arguments bound to the catalogue's parameter names), its cell line
found once, and handed to every consumer: the race recording, the trace, the stress
delays. Calls made from inside a recorded call (the teams emulation's own puts) are
not seen again. With no consumer attached nothing is wrapped: off means off. Where the C hot path
is built (:mod:`shmem_notebook.native_record`) a function of the shmem module is wrapped in C, which
does what :func:`_wrapper`'s wrapper does and hands it the calls with keywords.

A consumer has ``before(op, args, line)`` (or None) and ``after(op, args, result, line)``;
``op`` is the :class:`~shmem_notebook.operations.Operation`, ``args`` a dict by parameter name.
A consumer with ``before_calls`` (a set of call names) has its ``before`` called for those only;
one with ``after_for(op)`` is asked, at a call's first call after an attach, for the function that
handles that call (None: none), so that the later calls find their handlers without a lookup. When that
consumer is the only one wanting a call, its ``fast_for(op)`` may give a ``handler(args, result, line)``
taking the call's positional arguments as they came (calls without keywords only): no dict is made.
"""

from __future__ import annotations

import sys
from typing import TYPE_CHECKING, Any

from shmem4py import shmem

from ...operations import CALLS
from ..context import this_pe

if TYPE_CHECKING:
    from collections.abc import Callable
    from types import FrameType
    from typing import Protocol

    from ...operations import Operation

    class Consumer(Protocol):
        @property
        def before(self) -> Callable[[Operation, dict[str, Any], int], None] | None: ...

        def after(self, op: Operation, args: dict[str, Any], result: Any, line: int) -> None: ...


__all__ = ["attach", "detach", "attached", "original", "cell_line", "line_of", "depth"]

# the layer's state is this PE's (:class:`..context.RecordState`): consumers, slots (filled by _refresh; one
# list per call, held by its wrapper), originals and wrappers; its parts are bound here once, never replaced
_record = this_pe.record
_record.slots.update({name: [(), (), None] for name in CALLS})
#: >0 while inside a wrapped call (a list, so that the hooks read it without a call)
depth = _record.depth
_getframe = sys._getframe
_cell_files = _record.cell_files  # one set for the whole process (cleared, never replaced)


def _owner(name: str) -> tuple[Any, str]:
    owner, _, attr = name.rpartition(".")
    return (getattr(shmem, owner) if owner else shmem), attr


#: (call name, its operation, the object that has it, its attribute name), for each call of the catalogue
_PLACES = [(name, op, *_owner(name)) for name, op in CALLS.items()]


def attach(name: str, consumer: Consumer) -> None:
    """Feed ``consumer`` every call from now on (replacing the consumer of that ``name``)."""
    if not _record.consumers:
        _wrap_all()
    _record.consumers[name] = consumer
    _refresh()


def detach(name: str) -> Consumer | None:
    """Stop feeding the consumer ``name``; the last one out unwraps everything. Returns it (or None)."""
    if name not in _record.consumers:
        return None
    consumer: Consumer = _record.consumers.pop(name)
    _refresh()
    if not _record.consumers:
        _unwrap_all()
    return consumer


def attached(name: str) -> Consumer | None:
    """The consumer attached as ``name``, or None."""
    return _record.consumers.get(name)


def original(name: str) -> Any:
    """The unwrapped shmem4py function ``name`` (for a consumer's own calls)."""
    owner, attr = _owner(name)
    return _record.originals.get((owner, attr), owner.__dict__.get(attr))


def _refresh() -> None:
    """Give every call's slot the handlers of the consumers attached now. A call that a consumer sees
    before it runs gets them at once; the others get theirs at their first call (:func:`_resolver`): a
    cell makes a few of the catalogue's calls, and making the handlers of all of them was most of a
    recording's start."""
    if not _record.consumers:  # nothing wanted: every call goes straight through (and no handler is held)
        for slot in _record.slots.values():
            slot[:] = (), (), None
        return
    consumers = tuple(_record.consumers.values())
    _record.generation[0] += 1
    seeing = [(c.before, getattr(c, "before_calls", None)) for c in consumers if getattr(c, "before", None) is not None]
    lazy = (_resolver(consumers),)
    for name, op in CALLS.items():
        befores = tuple(before for before, calls in seeing if calls is None or name in calls)
        _record.slots[name][:] = (befores, *_handlers(op, befores, consumers)) if befores else ((), lazy, None)


def _resolver(consumers: tuple[Consumer, ...]) -> Callable[[Operation, dict[str, Any], Any, int], None]:
    """The after-handler of the calls not yet made since ``consumers`` were attached: at a call's first
    call it puts the call's handlers in its slot (unless consumers came or went since) and hands this
    call to them: to the fast handler, as the next calls go, when its arguments could have come by position."""
    generation = _record.generation[0]

    def resolve(op: Operation, args: dict[str, Any], result: Any, line: int) -> None:
        afters, fast = _handlers(op, (), consumers)
        if _record.generation[0] == generation:
            _record.slots[op.name][:] = (), afters, fast
        if fast is not None and tuple(args) == op.params[: len(args)]:  # as if positional: as later calls go
            fast(tuple(args.values()), result, line)
            return
        for after in afters:
            after(op, args, result, line)

    return resolve


def _handlers(
    op: Operation, befores: tuple[Callable[..., Any], ...], consumers: tuple[Consumer, ...]
) -> tuple[tuple[Callable[..., Any], ...], Callable[..., Any] | None]:
    """``(afters, fast)`` of ``op``'s calls for ``consumers`` (see the module docstring)."""
    afters: list[Callable[..., Any]]
    wanting: list[Consumer]
    afters, wanting = [], []
    for c in consumers:
        handler = c.after_for(op) if hasattr(c, "after_for") else c.after
        if handler is not None:
            afters.append(handler)
            wanting.append(c)
    one = wanting[0] if len(wanting) == 1 and not befores else None
    fast = one.fast_for(op) if one is not None and hasattr(one, "fast_for") else None
    # a call with no consumer still needs one entry to be recorded at all (its inner calls are not)
    return (tuple(afters) if afters else (_ignore,)), fast


def _ignore(op: Operation, args: dict[str, Any], result: Any, line: int) -> None:
    """The handler of a call no consumer wants (it still hides its inner calls)."""


def _wrap_all() -> None:
    from .in_c import module

    _cell_files.clear()
    native = module()
    for name, op, owner, attr in _PLACES:
        func = owner.__dict__.get(attr)
        if func is None:
            continue
        _record.originals[(owner, attr)] = func
        made = _record.wrappers.get((owner, attr))
        if made is None or made[:2] != (func, native):  # a wrapper is made once per function (and C module)
            wrapper = _wrapper(op, func, _record.slots[name])
            if native is not None and owner is shmem:  # a method's wrapper must bind: those stay Python
                wrapper = _like(native.Recorded(op, func, _record.slots[name], op.params, wrapper), wrapper)
            made = _record.wrappers[(owner, attr)] = (func, native, wrapper)
        setattr(owner, attr, made[2])


def _like(recorded: Any, wrapper: Callable[..., Any]) -> Any:
    """The C wrapper ``recorded`` named and marked as the Python ``wrapper`` it stands for."""
    for attr in ("__name__", "__qualname__", "__module__", "__doc__", "__wrapped__", "__shmem_race_skip__"):
        setattr(recorded, attr, getattr(wrapper, attr))
    return recorded


def _unwrap_all() -> None:
    for (owner, attr), func in _record.originals.items():
        setattr(owner, attr, func)
    _record.originals.clear()


def _wrapper(op: Operation, func: Callable[..., Any], slot: list[Any]) -> Callable[..., Any]:
    params = op.params

    def wrapper(*args: Any, **kwargs: Any) -> Any:
        befores, afters, fast = slot
        if depth[0] or not afters:
            return func(*args, **kwargs)
        frame = _getframe(1)  # the cell's own frame, usually: its line without a call
        find = line_of[0]
        if find is cell_line and frame.f_code.co_filename in _cell_files:
            line = frame.f_lineno
        else:  # the race runner numbers its programs' lines its own way
            line = find(frame)
        if fast is not None and not kwargs:  # the one consumer takes the arguments as they came
            depth[0] += 1
            try:
                result = func(*args)
            except BaseException:
                del args, frame  # as below: the traceback must not keep the call's arrays
                raise
            finally:
                depth[0] -= 1
            fast(args, result, line)
            return result
        bound = dict(zip(params, args)) if args else {}
        if kwargs:
            bound.update(kwargs)
        for before in befores:
            before(op, bound, line)
        depth[0] += 1
        try:
            result = func(*args, **kwargs)
        except BaseException:
            # the traceback keeps this frame: it must not keep the call's symmetric arrays alive, or
            # dropping it later frees them (a collective shmem_free) on this PE alone
            del args, kwargs, bound, frame
            raise
        finally:
            depth[0] -= 1
        for after in afters:
            after(op, bound, result, line)
        return result

    wrapper.__name__ = wrapper.__qualname__ = func.__name__
    wrapper.__module__ = getattr(func, "__module__", None)  # type: ignore[assignment]  # None: func has none
    wrapper.__doc__ = func.__doc__
    wrapper.__wrapped__ = func  # type: ignore[attr-defined]  # a function takes attributes
    wrapper.__shmem_race_skip__ = (  # type: ignore[attr-defined]  # a function takes attributes
        True  # the load/store hooks leave recorded calls to the layer
    )
    return wrapper


def inside() -> bool:
    """Is a wrapped call running (its inner calls and accesses are not recorded)?"""
    return depth[0] > 0


def cell_line(frame: FrameType) -> int:
    """The line of the recorded cell that ``frame`` (or a caller of it) runs, 0 if none: the
    innermost frame of the cell's code, found by its file name (the cell's code marks its file
    at start when rewritten; else the frame below IPython's ``run_code`` names it), or of code
    outside the cell that runs rewritten (``place * RACE_LINES + line``, see :mod:`.outside`)."""
    files, outside = _cell_files, _record.outside
    f: FrameType | None = frame
    while f is not None:
        name = f.f_code.co_filename
        if name in files:
            return f.f_lineno
        if outside:
            offset = outside.get(name)
            if offset is not None:
                return offset + f.f_lineno
        f = f.f_back
    f = frame
    while f is not None and f.f_back is not None:
        back = f.f_back
        if back.f_code.co_name == "run_code" and back.f_code.co_filename.endswith("interactiveshell.py"):
            files.add(f.f_code.co_filename)
            return cell_line(frame)
        f = back
    return 0


#: how a recorded call finds its line: ``[cell_line]``, or the race runner's function (it numbers its
#: programs' files); a list, which the C wrapper reads without a lookup in this module
line_of: list[Callable[[FrameType], int]] = _record.line_of
line_of[:] = [cell_line]
