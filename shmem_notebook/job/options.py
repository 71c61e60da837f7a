"""A job's start options, declared once (client side).

:class:`JobOptions` declares every option of :func:`~shmem_notebook.start` and
:class:`~shmem_notebook.Job`: each field is its name, its type and its default, and
its :class:`Option` (read by :func:`declared`) says the rest: the help text, the
``%shmem start`` flag and how that flag's text is read, and what a site policy needs
(``limit``: the value as a number a site may cap; ``rc``: the :data:`~shmem_notebook.rc`
setting a ``None`` stands for; ``batch``: an option of the Slurm batch job, which
``%shmem export --slurm`` takes too). ``Job()`` and ``start()`` take their signature
from it (:func:`signature`) and the magics their flags (:func:`add_arguments`), so a
new start option is one more field here.
"""

import argparse
import dataclasses
import inspect
import re
from dataclasses import dataclass, field

from ..errors import InputError

__all__ = [
    "JobOptions",
    "Option",
    "option",
    "declared",
    "given",
    "signature",
    "add_arguments",
    "flag",
    "count",
    "node_count",
    "seconds",
    "slurm_seconds",
]


def _positive_int(text, what):
    """``text`` as a positive integer, or argparse's error saying ``what`` must be one."""
    try:
        value = int(text)
    except ValueError:
        value = 0
    if value < 1:
        raise argparse.ArgumentTypeError(f"{what} must be a positive integer, got {text!r}")
    return value


def count(text):
    """A flag's text as a positive number of PEs (argparse ``type``)."""
    return _positive_int(text, "the number of PEs")


def node_count(text):
    """``--nodes``'s text as a positive number of nodes (argparse ``type``)."""
    return _positive_int(text, "--nodes")


def seconds(text):
    """A flag's text as a positive number of seconds (argparse ``type``)."""
    try:
        value = float(text)
    except ValueError:
        value = -1
    if value <= 0:
        raise argparse.ArgumentTypeError(f"a timeout is a positive number of seconds, got {text!r}")
    return value


def slurm_seconds(value):
    """A Slurm time limit (``30``: minutes, ``1:00:00``, ``2-12``, ``1-00:30:00``) in seconds."""
    match = re.fullmatch(r"(?:(\d+)-)?(\d+)(?::(\d+))?(?::(\d+))?", str(value).strip())
    if match is None:
        raise InputError(f"a Slurm time limit looks like 30, 1:00:00 or 2-12:00:00, got {value!r}")
    days, *parts = match.groups()
    parts = [int(p) for p in parts if p is not None]
    if days is not None:  # days-hours[:minutes[:seconds]]
        hms = parts + [0] * (3 - len(parts))
    else:  # minutes, minutes:seconds or hours:minutes:seconds
        hms = ([0] * (3 - len(parts)) + parts) if len(parts) == 3 else [0] + parts + [0] * (2 - len(parts))
    return int(days or 0) * 86400 + hms[0] * 3600 + hms[1] * 60 + hms[2]


@dataclass(frozen=True)
class Option:
    """What one start option says besides its name, type and default."""

    help: str = ""
    flag: str = ""  #: its flag in ``%shmem start`` (default ``--name-with-dashes``)
    metavar: str | None = None
    parse: object = None  #: the flag's text -> value (argparse ``type``); None: the text
    action: str | None = None  #: "store_true" (a switch) or "append" (repeatable: a list)
    required: bool = False  #: required in ``%shmem start`` (the Python API has a default)
    limit: object = None  #: value -> a number a site may cap (PEs, bytes, seconds); None: not a limit
    rc: str | None = None  #: the ``rc`` setting used when the value is None
    batch: bool = False  #: an option of the Slurm batch job (also ``%shmem export --slurm``)


def _heap_bytes(size):
    """Bytes in a heap size (the specs, and NumPy with them, are imported on first use: the watchdog
    imports this module through its package and needs neither)."""
    from ..specs import parse_size

    return parse_size(size)


def option(default, help, **said):
    """A field of :class:`JobOptions`: its ``default``, and its :class:`Option` (``help`` and the rest)."""
    return field(default=default, metadata={"option": Option(help=help, **said)})


@dataclass(frozen=True)
class JobOptions:
    """The options one job is started with (:func:`~shmem_notebook.start`, :class:`~shmem_notebook.Job`)."""

    n: int = option(4, "number of PEs", flag="-n", parse=count, required=True, limit=int)
    heap: str = option(None, "symmetric heap per PE, e.g. 256M, 1G", metavar="SIZE", limit=_heap_bytes, rc="heap")
    oversubscribe: bool = option(None, "more PEs than cores (oshrun --oversubscribe)", action="store_true")
    hostfile: str = option(None, "oshrun's hostfile: the nodes the PEs run on", metavar="FILE")
    timeout: float = option(
        None, "default timeout for every cell, seconds", metavar="S", parse=seconds, limit=float, rc="timeout"
    )
    ip: str = option(None, "address the controller listens on (default 127.0.0.1)", metavar="ADDR", rc="ip")
    slurm: bool = option(False, "run the PEs in a Slurm batch job", action="store_true")
    partition: str = option(None, "sbatch --partition", metavar="P", batch=True)
    time: str = option(
        None, "the batch job's time limit, e.g. 30 or 1:00:00", metavar="T", limit=slurm_seconds, batch=True
    )
    nodes: int = option(None, "sbatch --nodes", metavar="K", parse=node_count, limit=int, batch=True)
    account: str = option(None, "sbatch --account", metavar="A", batch=True)
    sbatch_args: tuple = option(
        (),
        "one more sbatch argument (repeatable), e.g. --sbatch-arg=--qos=debug",
        flag="--sbatch-arg",
        metavar="ARG",
        action="append",
        batch=True,
    )
    restart_on_hang: bool = option(
        False, "restart by itself when a cell leaves PEs blocked for good (says what was lost)", action="store_true"
    )
    library: str = option(
        None,
        "the OpenSHMEM library: oshmem (Open MPI's, the default), sos, oshmpi, or a site's own",
        metavar="NAME",
        rc="library",
    )
    spare: bool = option(
        False,
        "keep a spare set of PEs waiting, imports done, for the next restart to take (about half the time of a "
        "start, for N more idle processes; PEs on this host only)",
        action="store_true",
        limit=int,  # a site's max_spare: 0 forbids it
    )
    sbatch_prologue: tuple = option(
        (),
        "a shell line the batch job runs before the PEs start (repeatable), e.g. "
        "--sbatch-prologue 'module load openmpi/4.1'",
        metavar="LINE",
        action="append",
        batch=True,
    )

    def limits(self):
        """``{name: number}`` of the options given that a site may cap (``None`` values left out)."""
        return {
            f.name: o.limit(getattr(self, f.name))
            for f, o in declared()
            if o.limit and getattr(self, f.name) is not None
        }


def given(**options):
    """The :class:`JobOptions` of the options given by name; an unknown name is one sentence (:class:`InputError`)."""
    names = [f.name for f, _ in declared()]
    unknown = [name for name in options if name not in names]
    if unknown:
        raise InputError(f"{unknown[0]!r} is not a start option; the options are: {', '.join(names)}")
    return JobOptions(**options)


def declared(batch=None):
    """``[(field, Option)]`` of every start option in declaration order (``batch``: only those that
    are, or are not, the batch job's)."""
    return [
        (f, f.metadata["option"])
        for f in dataclasses.fields(JobOptions)
        if batch is None or f.metadata["option"].batch == batch
    ]


def signature(method: bool = False) -> inspect.Signature:
    """The signature of ``start()`` (``method``: of ``Job.__init__``, with ``self``): ``n``, then the
    other options by keyword."""
    first = [inspect.Parameter("self", inspect.Parameter.POSITIONAL_OR_KEYWORD)] if method else []
    params = [
        inspect.Parameter(
            f.name,
            inspect.Parameter.POSITIONAL_OR_KEYWORD if f.name == "n" else inspect.Parameter.KEYWORD_ONLY,
            default=f.default,
            annotation=f.type,
        )
        for f, _ in declared()
    ]
    return inspect.Signature(first + params)


def add_arguments(parser, batch=None, prefix=""):
    """Add the flags of the start options to an argparse ``parser`` (``batch`` as :func:`declared`;
    ``prefix``: what their help begins with). Each lands on ``args.<name>``."""
    for f, o in declared(batch):
        kwargs = {"dest": f.name, "help": prefix + o.help}
        if o.action == "store_true":
            kwargs.update(action="store_true", default=f.default)
        else:
            kwargs.update(default=[] if o.action == "append" else f.default, metavar=o.metavar)
            if o.action:
                kwargs["action"] = o.action
            if o.parse:
                kwargs["type"] = o.parse
        if o.required:
            kwargs["required"] = True
        parser.add_argument(flag(f), **kwargs)


def flag(f):
    """The flag of the start option of field ``f`` (``--restart-on-hang``)."""
    return f.metadata["option"].flag or "--" + f.name.replace("_", "-")
