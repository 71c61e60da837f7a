"""The shmem4py calls the tool records, and the events it records them as.

One catalogue for both sides: the PEs' recording layer (:mod:`shmem_notebook.engine.record`)
decodes calls with it, the client's analysis (:mod:`shmem_notebook.analysis`) reads the
events with it. A new call is taught here once. Plain data; imports nothing of the package.

:data:`CALLS` maps a call's name (``"put"``, ``"Ctx.quiet"``) to an :class:`Operation`:

- ``kind``: ``rma`` (put/get, ``put_signal``), ``amo`` (atomics), ``sync`` (barriers, quiet, fence,
  allocation), ``coll`` (collectives), ``wait`` (``wait_until*``, ``test*``, ``signal_wait_until``,
  ``signal_fetch``), ``lock``;
- ``params``: shmem4py's positional parameters, in order (a method's ``self`` first);
- ``remote``/``local``: the parameters naming the remote symmetric buffer and the local one
  (a non-blocking fetching atomic writes its local ``fetch`` when it completes);
- ``writes``: the remote side is written (puts, every atomic but ``atomic_fetch``);
- ``fetches``: the call returns data, so it is complete when it returns;
- ``nbi``: completes only at the next ``quiet`` (or barrier) of its context;
- ``completes``: a ``sync`` that completes outstanding operations (``quiet``, ``barrier_all``...);
- ``collective``: every PE (of ``team``) takes part: everything before it on any PE happens
  before everything after it on every PE.
"""

from __future__ import annotations

from collections import namedtuple
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from collections.abc import Sequence

__all__ = [
    "Operation",
    "JOINABLE",
    "EMULATED_WAIT",
    "CALLS",
    "RMA",
    "ATOMICS",
    "COLLECTIVES",
    "WAITS",
    "TRANSFERS",
    "RECORDED_AS",
    "SIGNAL_EVENTS",
    "CAP",
    "EVENT_FIELDS",
    "EVENTS",
    "FIELD",
    "event",
    "kind_of",
]

Operation = namedtuple(
    "Operation",
    "name kind params remote local writes fetches nbi completes collective team",
    defaults=(None, None, False, False, False, False, False, None),
)


def _rma(name: str, params: tuple[str, ...], put: bool) -> Operation:
    return Operation(
        name,
        "rma",
        params,
        "target" if put else "source",
        "source" if put else "target",
        writes=put,
        fetches=not put and not name.endswith("_nbi"),
        nbi=name.endswith("_nbi"),
    )


def _amo(name: str, params: tuple[str, ...]) -> Operation:
    fetching = name == "atomic_fetch" or "fetch" in name or name in ("atomic_swap", "atomic_compare_swap")
    return Operation(
        name,
        "amo",
        params,
        "source" if name == "atomic_fetch" else "target",
        writes=name != "atomic_fetch",
        fetches=fetching,
    )


_PUT = ("target", "source", "pe", "size", "ctx")
_STRIDED = ("target", "source", "pe", "tst", "sst", "size", "ctx")
_AMO_PARAMS = {
    "atomic_set": ("target", "value", "pe", "ctx"),
    "atomic_inc": ("target", "pe", "ctx"),
    "atomic_fetch": ("source", "pe", "ctx"),
    "atomic_compare_swap": ("target", "cond", "value", "pe", "ctx"),
    "atomic_fetch_inc": ("target", "pe", "ctx"),
    "atomic_op": ("target", "value", "op", "pe", "ctx"),
    "atomic_fetch_op": ("target", "value", "op", "pe", "ctx"),
}
_VALUE_AMOS = ("add", "and", "or", "xor", "swap", "fetch_add", "fetch_and", "fetch_or", "fetch_xor")
#: OpenSHMEM 1.5's non-blocking fetching atomics: the fetched value lands in local ``fetch`` at ``quiet``
_NBI_AMO_PARAMS = {
    "atomic_fetch_nbi": ("fetch", "source", "pe", "ctx"),
    "atomic_fetch_inc_nbi": ("fetch", "target", "pe", "ctx"),
    "atomic_compare_swap_nbi": ("fetch", "target", "cond", "value", "pe", "ctx"),
    "atomic_fetch_op_nbi": ("fetch", "target", "value", "op", "pe", "ctx"),
    **{
        f"atomic_{name}_nbi": ("fetch", "target", "value", "pe", "ctx")
        for name in ("swap", "fetch_add", "fetch_and", "fetch_or", "fetch_xor")
    },
}


def _amo_nbi(name: str, params: tuple[str, ...]) -> Operation:
    return Operation(name, "amo", params, params[1], "fetch", writes=name != "atomic_fetch_nbi", nbi=True)


_PUT_SIGNAL = ("target", "source", "pe", "signal", "value", "sigop", "size", "ctx")

_calls = [
    _rma("put", _PUT, True),
    _rma("get", _PUT, False),
    _rma("put_nbi", _PUT, True),
    _rma("get_nbi", _PUT, False),
    _rma("iput", _STRIDED, True),
    _rma("iget", _STRIDED, False),
    *(_amo(name, params) for name, params in _AMO_PARAMS.items()),
    *(_amo(f"atomic_{name}", ("target", "value", "pe", "ctx")) for name in _VALUE_AMOS),
    *(_amo_nbi(name, params) for name, params in _NBI_AMO_PARAMS.items()),
    # put_signal: the data, then the signal word (an atomic) on the same context, delivered in that
    # order; recorded as two events, the put and a signal_set / signal_add on the signal word
    _rma("put_signal", _PUT_SIGNAL, True),
    _rma("put_signal_nbi", _PUT_SIGNAL, True),
    *(Operation(name, "amo", (), "signal", writes=True) for name in ("signal_set", "signal_add")),
    Operation("barrier_all", "sync", (), completes=True, collective=True),
    Operation("sync_all", "sync", (), collective=True),
    Operation("sync", "sync", ("team",), collective=True, team="team"),
    Operation("Team.sync", "sync", ("team",), collective=True, team="team"),
    Operation("alloc", "sync", ("count", "size", "align", "hints", "clear"), completes=True, collective=True),
    Operation("free", "sync", ("mem",), completes=True, collective=True),
    Operation("quiet", "sync", ("ctx",), completes=True),
    Operation("Ctx.quiet", "sync", ("ctx",), completes=True),
    Operation("fence", "sync", ("ctx",)),
    Operation("Ctx.fence", "sync", ("ctx",)),
    Operation("Ctx.destroy", "sync", ("ctx",), completes=True),
    Operation("broadcast", "coll", ("target", "source", "root", "size", "team"), collective=True, team="team"),
    Operation("alltoalls", "coll", ("target", "source", "tst", "sst", "size", "team"), collective=True, team="team"),
    Operation("reduce", "coll", ("target", "source", "op", "size", "team"), collective=True, team="team"),
    *(
        Operation(name, "coll", ("target", "source", "size", "team"), collective=True, team="team")
        for name in ("collect", "fcollect", "alltoall")
    ),
    *(
        Operation(f"{op}_reduce", "coll", ("target", "source", "size", "team"), collective=True, team="team")
        for op in ("and", "or", "xor", "max", "min", "sum", "prod")
    ),
    *(Operation(name, "wait", ("ivar", "cmp", "value")) for name in ("wait_until", "test")),
    # waits on a signal word: signal_fetch counts when it saw a new value (a polling loop's exit)
    Operation("signal_wait_until", "wait", ("signal", "cmp", "value")),
    Operation("signal_fetch", "wait", ("signal",)),
    *(
        Operation(f"{name}_{how}{vector}", "wait", ("ivars", "cmp", "values" if vector else "value", "status"))
        for name in ("wait_until", "test")
        for how in ("all", "any", "some")
        for vector in ("", "_vector")
    ),
    *(Operation(name, "lock", ("lock",)) for name in ("set_lock", "test_lock", "clear_lock")),
]

#: call name -> Operation; methods as "Class.method"
CALLS = {op.name: op for op in _calls}

RMA = tuple(name for name, op in CALLS.items() if op.kind == "rma")
ATOMICS = tuple(name for name, op in CALLS.items() if op.kind == "amo")
COLLECTIVES = tuple(name for name, op in CALLS.items() if op.kind == "coll")
WAITS = tuple(name for name, op in CALLS.items() if op.kind == "wait")
#: calls that move data or an atomic update between two PEs (a trace draws them as arrows)
TRANSFERS = frozenset(RMA) | frozenset(ATOMICS)


#: the events a put_signal's signal word is recorded as, by its sigop (SIGNAL_SET 0, SIGNAL_ADD 1)
SIGNAL_EVENTS = ("signal_set", "signal_add")

#: calls recorded under another op name in the race events: one name per effect
RECORDED_AS = {
    "sync": "sync_all",
    "Team.sync": "sync_all",
    "Ctx.quiet": "quiet",
    "Ctx.fence": "fence",
    "Ctx.destroy": "ctx_destroy",
}

#: most events each PE keeps per cell and recording; beyond it the recording says where it stopped
CAP = 50_000


def kind_of(op: str) -> Operation | None:
    """The Operation of a recorded op name (an event's ``op``), or None for loads/stores."""
    return CALLS.get(op) or CALLS.get(next((k for k, v in RECORDED_AS.items() if v == op), None))


# -- the race recording's events ------------------------------------------------------------
#: event kind -> its fields, in the order a PE sends them (a list per event: compact to send)
EVENT_FIELDS = {
    # every kind ends with ``at``: None, or the event's own line when ``line`` is the cell's top-level
    # call that led to it (the function's line: a line of the cell, or place * RACE_LINES + line)
    # a load ("read") or store ("write") of this PE's memory by the cell; fp: None when it is all
    # of [lo, hi), else the strided bytes it touches (see shmem_notebook/analysis/footprint.py);
    # space "sym" (heap offsets), "priv", or a PE's number: that PE's symmetric memory, loaded or
    # stored through a shmem.ptr view (heap offsets on that PE). line: see analysis/places.py;
    # values: [v] for a store of integer v into one element of symmetric memory (a flag's reset)
    "mem": "kind op line mode space lo hi dtype fp values at",
    # an RMA or atomic call on PE `pe`'s symmetric bytes [lo, hi), with its local buffer
    # (lspace None for atomics), context (0: default), values written when known; fp/lfp: the
    # footprints of the remote and local sides (None: the whole range); domain: an atomic's context's
    # team, "slot:pe,pe..." (None: the world's, the default context's; see analysis/domains.py)
    "rma": "kind op line pe lo hi dtype lspace llo lhi ctx values fp lfp domain at",
    # barrier_all, sync_all (also sync/Team.sync), alloc, free, quiet, fence, ctx_destroy;
    # members: the team's world PEs (None: every PE)
    "sync": "kind op line ctx members at",
    # broadcast, reductions, collect, fcollect, alltoall(s): target and source ranges
    "coll": "kind op line tspace tlo thi sspace slo shi dtype root members at",
    # a wait_until* or a test* that succeeded, on this PE's symmetric range; the values it saw; its
    # condition (cmp as "==", ">="..., value; None for vector waits and signal_fetch); before: the
    # word's value when the recording began (None: not known, e.g. allocated since)
    "wait": "kind op line lo hi dtype observed cmp value before at",
    # set_lock (a test_lock that acquired counts) / clear_lock on the lock at symmetric offset `lock`
    "lock": "kind op line lock at",
}

#: event kind -> namedtuple class (what the analysis reads); fields after ``line`` default to None
EVENTS = {
    kind: namedtuple(f"{kind.capitalize()}Event", fields, defaults=(None,) * (len(fields.split()) - 3))
    for kind, fields in EVENT_FIELDS.items()
}

#: event kind -> {field: index}: where the PE writes each field of its event lists
FIELD = {kind: {name: i for i, name in enumerate(fields.split())} for kind, fields in EVENT_FIELDS.items()}


def event(raw: Sequence[Any]) -> Any:
    """A PE's event list as its named tuple (``event(["sync", "quiet", 3, 0, None]).line == 3``)."""
    return EVENTS[raw[0]](*raw)


#: world synchronisations that PEs stranded by another PE's error can be released from: the PEs
#: whose cell raised make the same call (engine/requests "join"); "sync" is shmem.sync(TEAM_WORLD)
JOINABLE = ("barrier_all", "sync_all", "sync")
#: the function of ``engine/teams.py`` every emulated team call waits in (a loop the interrupt
#: reaches): PEs stranded there are released by SIGINT, then the teams' words are reset
EMULATED_WAIT = "wait_for_members"
