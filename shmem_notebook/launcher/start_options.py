"""Every start option of a job, declared once: :class:`JobOptions` (shared by the client's floors).

Each field of :class:`JobOptions` is one option of :func:`~shmem_notebook.start`, :class:`~shmem_notebook.Job`
and ``%shmem start``: its name, its type and its default, and its :class:`Option` says the rest: the help
text, the flag and how its text is read, the option's own check and the sentence a wrong value gets, the
values it takes (``choices``), what a site policy may cap (:class:`Limit`), the :data:`~shmem_notebook.rc`
setting a ``None`` stands for, whether it belongs to the Slurm batch job, and whether the ``oshrun``
launcher takes it (``launch``: a trait of :class:`~.oshrun.OshrunEngineSetLauncher` of the same name,
:func:`launcher_traits`; ``oshrun=FLAG``: passed on oshrun's command line, :func:`oshrun_args`).

It lives on the launcher's floor so that the launcher reads it too; the job's side of it (the signatures,
flags, checks, the typed keywords and the list for the docs and completion) is
:mod:`shmem_notebook.job.options`. A new start option is one more field here; one that oshrun takes as a
flag needs nothing else::

    map_by: str | None = option(None, "oshrun --map-by: how PEs are placed, e.g. node", metavar="HOW",
                                oshrun="--map-by")
"""

from __future__ import annotations  # each field's type is its source text: StartOptions is written from it

import dataclasses
import numbers
import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from ..errors import InputError

if TYPE_CHECKING:
    from traitlets import TraitType

__all__ = [
    "JobOptions",
    "Option",
    "Limit",
    "option",
    "declared",
    "flag",
    "site_key",
    "launched",
    "type_text",
    "launcher_traits",
    "oshrun_args",
    "BINDINGS",
    "slurm_seconds",
]


# -- how a value is read and checked ---------------------------------------------------------------
def _positive_integer(value: Any) -> int:
    """``value`` as an int if it is a positive integer (not a bool), else ``ValueError``."""
    if isinstance(value, bool) or not isinstance(value, numbers.Integral) or value < 1:
        raise ValueError(value)
    return int(value)


def _positive_seconds(value: Any) -> float | int:
    """``value`` if it is a positive number of seconds (not a bool), else ``ValueError``."""
    if isinstance(value, bool) or not isinstance(value, (int, float)) or value <= 0:
        raise ValueError(value)
    return value


def _heap_bytes(size: Any) -> int:
    """Bytes in a heap size (the specs, and NumPy with them, are imported on first use: the watchdog
    imports this module through its package and needs neither)."""
    from ..specs import parse_size

    return parse_size(size)


def _a_heap(size: Any) -> Any:
    """``size`` if it is a heap a job can start with, else :class:`~shmem_notebook.SpecError` in one sentence."""
    from ..specs import check_heap

    check_heap(size)
    return size


def _a_library(name: Any) -> Any:
    """``name`` if it names a library, else :class:`InputError` in one sentence naming the libraries."""
    from .library import library

    library(name)
    return name


#: what ``bind_to`` takes: the launchers' own words (Open MPI's ``--bind-to``, Hydra's ``-bind-to``)
BINDINGS = ("core", "socket", "none")


def _a_binding(value: Any) -> str:
    """``value`` if ``bind_to`` takes it, else ``ValueError``."""
    if value not in BINDINGS:
        raise ValueError(value)
    return str(value)


def _libraries() -> list[str]:
    """The names of the libraries a job may start on (built in, the site's, the user's)."""
    from .library import known

    return list(known())


def slurm_seconds(value: Any) -> int:
    """A Slurm time limit (``30``: minutes, ``1:00:00``, ``2-12``, ``1-00:30:00``) in seconds."""
    match = re.fullmatch(r"(?:(\d+)-)?(\d+)(?::(\d+))?(?::(\d+))?", str(value).strip())
    if match is None:
        raise InputError(f"a Slurm time limit looks like 30, 1:00:00 or 2-12:00:00, got {value!r}")
    days, *parts = match.groups()
    parts_n = [int(p) for p in parts if p is not None]
    if days is not None:  # days-hours[:minutes[:seconds]]
        hms = parts_n + [0] * (3 - len(parts_n))
    else:  # minutes, minutes:seconds or hours:minutes:seconds
        hms = ([0] * (3 - len(parts_n)) + parts_n) if len(parts_n) == 3 else [0] + parts_n + [0] * (2 - len(parts_n))
    return int(days or 0) * 86400 + hms[0] * 3600 + hms[1] * 60 + hms[2]


def _one_spare_set(value: Any) -> str:
    return "one (--spare)"


def _pes(value: Any) -> str:
    from ..words import plural

    return plural(value, "PE")


# -- the declaration ---------------------------------------------------------------------------------
@dataclass(frozen=True)
class Limit:
    """How a site may cap an option (site.json ``max_<name>``, or ``key``)."""

    measure: Callable[[Any], float]  #: the value -> the number the site caps (PEs, bytes, seconds)
    said: str  #: how a refusal says the limit, ``{}`` its value as written: "at most {} PEs per job"
    key: str = ""  #: its key in site.json (default ``max_<name>``)
    whole: bool = False  #: the site writes it as an integer (else a number or a string such as "512M")
    switch: bool = False  #: the site writes 0 (forbidden) or 1 (allowed)
    asked: Callable[[Any], str] = str  #: what the user asked for, as the refusal says it


@dataclass(frozen=True)
class Option:
    """What one start option says besides its name, type and default."""

    help: str = ""
    flag: str = ""  #: its flag in ``%shmem start`` (default ``--name-with-dashes``)
    metavar: str | None = None
    parse: Callable[[str], Any] | None = None  #: the flag's text -> a value for :attr:`check` (None: the text)
    check: Callable[[Any], Any] | None = None  #: a given value -> the value; raises when it is wrong
    wrong: str = ""  #: the sentence of a wrong value, ``{name}``: the keyword or the flag; "" : the check's own
    example: str = ""  #: what the sentence suggests in Python: "start(n=4)"
    choices: Callable[[], list[str]] | None = None  #: the values it takes (for completion and the docs)
    action: str | None = None  #: "store_true" (a switch) or "append" (repeatable: a list)
    required: bool = False  #: required in ``%shmem start`` (the Python API has a default)
    limit: Limit | None = None  #: what a site may cap; None: not a limit
    rc: str | None = None  #: the ``rc`` setting used when the value is None
    batch: bool = False  #: an option of the Slurm batch job (also ``%shmem export --slurm``)
    launch: bool = False  #: a setting of the oshrun launcher (a trait of the same name)
    oshrun: str | None = None  #: oshrun's flag the launcher passes the value with (implies ``launch``)


def option(default: Any, help: str, **said: Any) -> Any:
    """A field of :class:`JobOptions`: its ``default``, and its :class:`Option` (``help`` and the rest)."""
    return field(default=default, metadata={"option": Option(help=help, **said)})


@dataclass(frozen=True)
class JobOptions:
    """The options one job is started with (:func:`~shmem_notebook.start`, :class:`~shmem_notebook.Job`)."""

    n: int = option(
        4,
        "number of PEs",
        flag="-n",
        parse=int,
        check=_positive_integer,
        wrong="the number of PEs must be a positive integer",
        example="start(n=4)",
        required=True,
        limit=Limit(int, "at most {} PEs per job", key="max_pes", whole=True, asked=_pes),
    )
    heap: str | int | None = option(
        None,
        "symmetric heap per PE, e.g. 256M, 1G",
        metavar="SIZE",
        check=_a_heap,
        limit=Limit(_heap_bytes, "a heap of at most {} per PE"),
        rc="heap",
        launch=True,
    )
    oversubscribe: bool | None = option(
        None, "more PEs than cores (oshrun --oversubscribe)", action="store_true", launch=True
    )
    hostfile: str | None = option(None, "oshrun's hostfile: the nodes the PEs run on", metavar="FILE", launch=True)
    bind_to: str | None = option(
        None,
        "bind each PE to a core or a socket, or not: none (the default on one node, where other jobs share the "
        "cores; more PEs than cores bound to cores share them)",
        metavar="WHAT",
        check=_a_binding,
        wrong="{name} takes core, socket or none",
        example="bind_to='core'",
        choices=lambda: list(BINDINGS),
        launch=True,
    )
    timeout: float | None = option(
        None,
        "default timeout for every cell, seconds",
        metavar="S",
        parse=float,
        check=_positive_seconds,
        wrong="a timeout is a positive number of seconds",
        example="timeout=30",
        limit=Limit(float, "a cell timeout of at most {} s"),
        rc="timeout",
    )
    ip: str | None = option(None, "address the controller listens on (default 127.0.0.1)", metavar="ADDR", rc="ip")
    slurm: bool = option(False, "run the PEs in a Slurm batch job", action="store_true", launch=True)
    partition: str | None = option(None, "sbatch --partition", metavar="P", batch=True, launch=True)
    time: str | int | None = option(
        None,
        "the batch job's time limit, e.g. 30 or 1:00:00",
        metavar="T",
        limit=Limit(slurm_seconds, "a batch time limit of at most {}"),
        batch=True,
        launch=True,
    )
    nodes: int | None = option(
        None,
        "sbatch --nodes",
        metavar="K",
        parse=int,
        check=_positive_integer,
        wrong="{name} must be a positive integer",
        example="nodes=2 (with slurm=True)",
        limit=Limit(int, "at most {} nodes per batch job", whole=True),
        batch=True,
        launch=True,
    )
    account: str | None = option(None, "sbatch --account", metavar="A", batch=True, launch=True)
    sbatch_args: Sequence[str] = option(
        (),
        "one more sbatch argument (repeatable), e.g. --sbatch-arg=--qos=debug",
        flag="--sbatch-arg",
        metavar="ARG",
        action="append",
        batch=True,
        launch=True,
    )
    restart_on_hang: bool = option(
        False, "restart by itself when a cell leaves PEs blocked for good (says what was lost)", action="store_true"
    )
    library: str | None = option(
        None,
        "the OpenSHMEM library: oshmem (Open MPI's, the default), sos, oshmpi, or a site's own",
        metavar="NAME",
        check=_a_library,
        choices=_libraries,
        rc="library",
        launch=True,
    )
    spare: bool = option(
        False,
        "keep a spare set of PEs waiting, imports done, for the next restart to take (about half the time of a "
        "start, for N more idle processes; PEs on this host only)",
        action="store_true",
        limit=Limit(
            int, "at most {} spare sets of PEs per job", whole=True, switch=True, asked=lambda _: "one (--spare)"
        ),
    )
    sbatch_prologue: str | Sequence[str] = option(
        (),
        "a shell line the batch job runs before the PEs start (repeatable), e.g. "
        "--sbatch-prologue 'module load openmpi/4.1'",
        metavar="LINE",
        action="append",
        batch=True,
        launch=True,
    )

    def limits(self) -> dict[str, float]:
        """``{name: number}`` of the options given that a site may cap (``None`` values left out)."""
        return {
            f.name: o.limit.measure(getattr(self, f.name))
            for f, o in declared(options=type(self))
            if o.limit and getattr(self, f.name) is not None
        }


def declared(batch: bool | None = None, options: type | None = None) -> list[tuple[dataclasses.Field[Any], Option]]:
    """``[(field, Option)]`` of every start option in declaration order (``batch``: only those that
    are, or are not, the batch job's; ``options``: another declaration than :class:`JobOptions`)."""
    return [
        (f, f.metadata["option"])
        for f in dataclasses.fields(options or JobOptions)
        if batch is None or f.metadata["option"].batch == batch
    ]


def flag(f: dataclasses.Field[Any]) -> str:
    """The flag of the start option of field ``f`` (``--restart-on-hang``)."""
    said: Option = f.metadata["option"]
    return said.flag or "--" + f.name.replace("_", "-")


def site_key(name: str, o: Option) -> str | None:
    """The site.json key that caps option ``name`` (``None``: a site cannot cap it)."""
    return (o.limit.key or f"max_{name}") if o.limit else None


# -- the oshrun launcher's side --------------------------------------------------------------------------
def type_text(f: dataclasses.Field[Any]) -> str:
    """The type of option ``f`` as its source says it (``int | None``)."""
    return f.type if isinstance(f.type, str) else getattr(f.type, "__name__", None) or str(f.type)


def launched(options: type | None = None) -> list[tuple[dataclasses.Field[Any], Option]]:
    """``[(field, Option)]`` of the options the launcher takes (``launch``, or an ``oshrun`` flag)."""
    return [(f, o) for f, o in declared(options=options) if o.launch or o.oshrun]


def launcher_traits(options: type | None = None) -> dict[str, TraitType[Any, Any]]:
    """The configurable traits of the launcher, one per option it takes (``options``: another declaration
    than :class:`JobOptions`): a list for a repeatable option, a bool for a switch (``None`` allowed where
    the default is ``None``: the launcher decides), an integer, else a string ('' for ``None``)."""
    from traitlets import Bool, Integer, List, Unicode

    traits: dict[str, TraitType[Any, Any]] = {}
    for f, o in launched(options):
        default: Any = f.default
        about = o.help + (f" ('' or None: {'rc.' + o.rc if o.rc else 'the default'})" if default is None else "")
        said: dict[str, Any] = {"config": True, "help": about, "allow_none": default is None}
        if o.action == "append":
            traits[f.name] = List(Unicode(), **said)
        elif o.action == "store_true":
            traits[f.name] = Bool(default, **said)
        elif type_text(f).startswith("int"):
            traits[f.name] = Integer(default, **said)
        else:
            traits[f.name] = Unicode("" if default is None else str(default), **said)
    return traits


def oshrun_args(launcher: Any, options: type | None = None) -> list[str]:
    """The arguments the declared ``oshrun=FLAG`` options add to oshrun's command line, read from the
    ``launcher``'s traits: the flag alone for a switch that is on, ``FLAG VALUE`` (once per value of a
    repeatable option) else; nothing for an option not given."""
    args: list[str] = []
    for f, o in launched(options):
        if not o.oshrun:
            continue
        value = getattr(launcher, f.name, None)
        if o.action == "store_true":
            args += [o.oshrun] if value else []
        elif o.action == "append":
            args += [a for v in value or [] for a in (o.oshrun, str(v))]
        elif value not in (None, ""):
            args += [o.oshrun, str(value)]
    return args
