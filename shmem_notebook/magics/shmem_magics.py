"""``%shmem`` and ``%%pxshmem``: thin IPython front ends over :mod:`shmem_notebook.job`.

Each magic only parses its line, then calls one method of the current
:class:`~shmem_notebook.job.Job`. Errors from shmem_notebook render as one line.

Longer than 420 lines once formatted: one parser per ``%shmem`` subcommand, a few lines each,
in one place.
"""

import argparse
import functools
import shlex
import textwrap
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any, NoReturn, cast

from IPython.core.error import UsageError
from IPython.core.magic import Magics, cell_magic, line_magic, magics_class

from .. import job as _job
from ..cells import STAGES
from ..cells.result import fixes_of
from ..cells.stages import Command, reserve_commands
from ..errors import InputError, NoJobError
from ..job.options import add_arguments, declared, flag, seconds
from ..specs import format_size
from ..words import plural

if TYPE_CHECKING:
    from numpy.typing import NDArray

    from ..inspector.widget import Inspector
    from ..job import Job

__all__ = [
    "ShmemMagics",
    "format_status",
    "format_arrays",
    "overview",
    "cell_parser",
    "subcommands",
    "parser_of",
    "parsers",
    "PARSERS",
]


def _stage_commands() -> dict[str, Command]:
    """The registered stages' ``%shmem`` subcommands, by stage name."""
    return {name: stage.command for name, stage in STAGES.items() if stage.command is not None}


#: the magic's own subcommands; the registered stages' come after ``replay`` (:func:`subcommands`)
BUILT_IN = (
    "start",
    "stop",
    "restart",
    "status",
    "alloc",
    "free",
    "arrays",
    "gather",
    "pull",
    "inspect",
    "race",
    "replay",
)
LAST = ("export", "fix")
reserve_commands(BUILT_IN + LAST)  # a stage's command never replaces one of these


def subcommands() -> tuple[str, ...]:
    """Every ``%shmem`` subcommand, those of the stages registered now included (``trace``)."""
    return (*BUILT_IN, *_stage_commands(), *LAST)


class _Parser(argparse.ArgumentParser):
    """argparse that raises UsageError instead of exiting."""

    stages: tuple[str, ...] = ()  # set by _parser

    def error(self, message: str) -> NoReturn:
        usage = " ".join(self.format_usage().split()[1:])  # one line, without "usage:"
        raise UsageError(f"{self.prog}: {message}; usage: {usage}")


def _parser(prog: str, build: Callable[[_Parser], object] | None = None, description: str | None = None) -> _Parser:
    parser = _Parser(prog=prog, add_help=False, description=description)
    if build:
        build(parser)
    parser.stages = tuple(STAGES)  # the stages registered when it was built (see cell_parser)
    return parser


def _start_args(p: argparse.ArgumentParser) -> None:
    """Every start option (declared once: :mod:`shmem_notebook.job.options`)."""
    add_arguments(p)


def _cell_args(p: argparse.ArgumentParser) -> None:
    p.add_argument("arrays", nargs="*", metavar="NAME=DTYPE[SHAPE]", help="declarations of symmetric arrays")
    p.add_argument("--timeout", type=seconds, default=None, metavar="S", help="stop the cell after this many seconds")
    for name, stage in STAGES.items():  # --race, --stress, --trace...: each stage declares its flag
        if stage.flag is not None:
            p.add_argument(f"--{name}", dest=name, **stage.flag)


def cell_parser() -> _Parser:
    """``%%pxshmem``'s parser, built again once a stage was registered after it (its flags come from
    the stages' registry, :mod:`shmem_notebook.cells.stages`)."""
    if PARSERS["pxshmem"].stages != tuple(STAGES):
        PARSERS["pxshmem"] = _parser("%%pxshmem", _cell_args, CELL_ABOUT)
        ShmemMagics.pxshmem.__doc__ = _one_line("pxshmem") + ": run the cell on every PE."
        ShmemMagics.shmem.__doc__ = overview()  # a stage's subcommand too
    return PARSERS["pxshmem"]


def _replay_args(p: argparse.ArgumentParser) -> None:
    p.add_argument("--array", action="append", default=None, metavar="NAME", help="arrays drawn in the PE boxes")


def _export_args(p: argparse.ArgumentParser) -> None:
    p.add_argument("file", metavar="FILE", help="the program to write, e.g. ring.py")
    p.add_argument(
        "--cells",
        default=None,
        metavar="SPEC",
        help="the cells to write by In[k], e.g. 4,6-8 (default: every cell that ran without an error)",
    )
    p.add_argument("--slurm", action="store_true", help="also write an sbatch script next to it (FILE's name, .sbatch)")
    add_arguments(p, batch=True, prefix="with --slurm: ")


def _inspect_args(p: argparse.ArgumentParser) -> None:
    p.add_argument("--auto", action="store_true", help="refresh after every %%pxshmem cell")
    p.add_argument("--array", default=None, metavar="NAME", help="array shown in the values and diff views")
    p.add_argument("--reference", type=int, default=None, metavar="PE", help="PE the diff compares with")


CELL_ABOUT = "Run the cell on every PE with shmem, np, me, npes and the declared arrays defined."

PARSERS: dict[str, _Parser] = {
    "start": _parser("%shmem start", _start_args, "Start an OpenSHMEM job of N PEs (one ipyparallel engine per PE)."),
    "alloc": _parser(
        "%shmem alloc",
        lambda p: p.add_argument("arrays", nargs="+", metavar="NAME=DTYPE[SHAPE]"),
        "Declare symmetric arrays, allocated on every PE (collective); SHAPE may use npes.",
    ),
    "free": _parser(
        "%shmem free",
        lambda p: p.add_argument("names", nargs="+", metavar="NAME"),
        "Free declared arrays on every PE (collective).",
    ),
    "gather": _parser(
        "%shmem gather",
        lambda p: p.add_argument("name", metavar="NAME"),
        "Every PE's copy of a symmetric array, stacked: shape (npes, *shape).",
    ),
    "pull": _parser(
        "%shmem pull",
        lambda p: p.add_argument("name", metavar="NAME"),
        "Any variable of every PE's namespace, as a list in PE order.",
    ),
    "pxshmem": _parser("%%pxshmem", _cell_args, CELL_ABOUT),
    "inspect": _parser("%shmem inspect", _inspect_args, "Show the inspector: every PE's heap, arrays and state."),
    "race": _parser(
        "%shmem race",
        lambda p: p.add_argument("switch", choices=("on", "off", "reset"), metavar="on|off|reset"),
        "Race-check every %%pxshmem cell (on) or only those with --race (off); reset: forget the "
        "operations earlier cells left in flight.",
    ),
    "replay": _parser("%shmem replay", _replay_args, "Replay the last --trace cell step by step."),
    "export": _parser(
        "%shmem export",
        _export_args,
        "Write the cells run so far as one shmem4py program "
        "(oshrun -n N python FILE), with --slurm also an sbatch script.",
    ),
}


#: asking for help, IPython's way (`%shmem?` also works) or a command line's
HELP_WORDS = {"-h", "--help", "help"}

#: what the subcommands without options do
ABOUT = {
    "stop": "%shmem stop: stop every PE and the controller (declared arrays are kept for the next start)",
    "restart": "%shmem restart: a fresh job with the same PEs and options; declared arrays come back zeroed",
    "status": "%shmem status: one row per PE: state (idle/busy/dead), pid, host, heap used / size",
    "arrays": "%shmem arrays: the declared symmetric arrays: name, dtype, shape, bytes per PE",
    "fix": "%shmem fix: the last race-checked cell with every race's fix applied, put into the next input cell",
}


def parser_of(sub: str) -> _Parser | None:
    """The parser of subcommand ``sub`` (``pxshmem``: the cell magic's); None for one without options.
    A stage's is built from its :attr:`~shmem_notebook.cells.stages.Stage.command` (registered at any time)."""
    if sub == "pxshmem":
        return cell_parser()
    command = _stage_commands().get(sub)
    if command is not None:
        return _parser(f"%shmem {sub}", command.arguments, command.about)
    return PARSERS.get(sub)


def parsers() -> dict[str, _Parser]:
    """``{subcommand: parser}`` of every subcommand that takes options, the cell magic's (``pxshmem``)
    and the registered stages' included."""
    found = {sub: parser_of(sub) for sub in (*subcommands(), "pxshmem")}
    return {sub: parser for sub, parser in found.items() if parser is not None}


def _usage(sub: str) -> str:
    """The help text of a subcommand (``pxshmem``: the cell magic)."""
    if sub in ABOUT:
        return ABOUT[sub]
    return cast("_Parser", parser_of(sub)).format_help().replace("usage: ", "", 1).rstrip()


def _one_line(sub: str) -> str:
    """A subcommand's usage from its parser, on one line, without ``usage:``."""
    return " ".join(cast("_Parser", parser_of(sub)).format_usage().split()[1:])


def overview(width: int = 100) -> str:
    """``%shmem``'s usage (``%shmem?``, ``%shmem help``): every subcommand with every option, read
    from the subcommands' parsers, so that no option is left out."""
    lines = []
    for sub in subcommands():
        if sub in ABOUT:
            if sub == next(iter(ABOUT)):
                lines.append("%shmem " + " | ".join(ABOUT))
            continue
        lines += textwrap.wrap(
            _one_line(sub), width, subsequent_indent="    ", break_on_hyphens=False, break_long_words=False
        )
    lines += [
        "",
        "%shmem SUBCOMMAND --help: what a subcommand does and each option's meaning",
        "%%pxshmem --help: the cell magic's options",
    ]
    return "\n".join(lines)


def _table(header: Sequence[str], rows: Sequence[Sequence[object]]) -> str:
    widths = [max(len(str(x)) for x in col) for col in zip(header, *rows)]
    fmt = "  ".join(f"{{:<{w}}}" for w in widths)
    return "\n".join(fmt.format(*map(str, r)).rstrip() for r in [header, *rows])


TEAMS_NOTE = {
    "native": "teams: native (the library's OpenSHMEM 1.5 teams)",
    "emulated": "teams: emulated (OpenSHMEM 1.4 library: split_strided, split_2d and team= collectives are "
    "built from puts, atomics and wait_until on reserved words)",
}


#: what libraries call themselves (shmem_info_get_name) -> how status names them
_VENDORS = {"http://www.open-mpi.org/": "Open MPI's OSHMEM"}
#: libraries built over an MPI: status names that MPI too ("OSHMPI over Open MPI v4.1.4")
_OVER_MPI = {"OSHMPI"}


def _vendor(vendor: str, mpi: str | None) -> str:
    said = _VENDORS.get(vendor, vendor)
    return f"{said} over {mpi}" if mpi and vendor in _OVER_MPI else said


def format_status(rows: list[dict[str, Any]]) -> str:
    """``%shmem status`` as a text table, then the library and how the PEs provide teams."""
    found: set[tuple[Any, str, Any]] = {
        (r.get("library"), _vendor(r["vendor"], r.get("mpi")), r.get("spec")) for r in rows if r.get("vendor")
    }
    libraries = sorted(found)
    note = "".join(f"\nlibrary: {name} ({vendor}, OpenSHMEM {spec})" for name, vendor, spec in libraries)
    modes = sorted({r["teams"] for r in rows if r.get("teams") is not None})
    note += "".join(f"\n{TEAMS_NOTE.get(m, 'teams: ' + m)}" for m in modes)
    return (
        _table(
            ("PE", "state", "pid", "host", "heap used / size"),
            [
                (
                    r["pe"],
                    r["state"],
                    r["pid"] or "-",
                    _host(r),
                    ("unknown" if r["heap_used"] is None else format_size(r["heap_used"]))
                    + f" / {format_size(r['heap_size'])}",
                )
                for r in rows
            ],
        )
        + note
    )


def format_arrays(rows: list[dict[str, Any]]) -> str:
    """``%shmem arrays`` as a text table."""
    if not rows:
        return "no symmetric arrays declared; declare some with `%shmem alloc A=int64[8]`"
    return _table(
        ("name", "dtype", "shape", "bytes"),
        [(r["name"], r["dtype"], r["shape"], r["bytes"]) for r in rows],
    )


def _host(row: dict[str, Any]) -> str:
    """A PE's host, with its Slurm node name when that differs (several nodes on one host)."""
    host, node = row.get("host"), row.get("node")
    if not host:
        return "-"
    return host if not node or node == host else f"{node} ({host})"


def _hosts(job: "Job") -> str:
    nodes = dict.fromkeys(info.get("node") or info.get("host") for info in job.pes.values())
    return ",".join(str(n) for n in nodes)


@magics_class
class ShmemMagics(Magics):
    """``%shmem SUBCOMMAND ...`` manages the job; ``%%pxshmem`` runs a cell on every PE."""

    race_default = False  # `%shmem race on`: every %%pxshmem cell is race-checked
    last_cell: tuple[str, str] | None = None  # (line, cell) of the last %%pxshmem cell: `%shmem fix` keeps its line

    def _job(self, what: str) -> "Job":
        job = _job.current_job()
        if job is None or job.state == "stopped":
            raise NoJobError(what)
        return job

    @line_magic
    def shmem(self, line: str) -> Any:
        """(written by :func:`overview` from the subcommands' parsers)"""
        words = shlex.split(line)
        if words and words[0] in HELP_WORDS:
            print(overview())
            return None
        if not words or words[0] not in subcommands():
            given = f"unknown subcommand {words[0]!r}" if words else "a subcommand is missing"
            raise UsageError(f"%shmem: {given}; use one of {', '.join(subcommands())}")
        sub, rest = words[0], words[1:]
        command = _stage_commands().get(sub)
        handler: Callable[..., Any] = (
            functools.partial(self._stage_command, sub, command) if command else getattr(self, f"_{sub}")
        )
        parser = parser_of(sub)
        if HELP_WORDS.intersection(rest):
            print(_usage(sub))
            return None
        if parser is None:
            if rest:
                raise UsageError(f"%shmem {sub} takes no arguments, got {' '.join(rest)!r}")
            return handler()
        return handler(parser.parse_args(rest))

    def _stage_command(self, sub: str, command: Command, args: argparse.Namespace) -> object:
        """A stage's subcommand (:attr:`shmem_notebook.cells.stages.Stage.command`) on the job."""
        try:
            return command.run(self._job(f"%shmem {sub}"), args)
        except InputError as exc:
            raise UsageError(str(exc)) from None

    def _start(self, args: argparse.Namespace) -> None:
        job = _job.start(**{f.name: getattr(args, f.name) for f, _ in declared()})
        where = f" on {_hosts(job)}" if len(_hosts(job).split(",")) > 1 or job.slurm else ""
        print(f"OpenSHMEM job ready: {plural(job.n, 'PE')}, heap {job.heap} per PE{where}")

    def _stop(self) -> None:
        job = _job.current_job()
        if job is None or job.state == "stopped":
            print("no OpenSHMEM job is running; nothing to stop")
            return
        job.stop()
        print(f"OpenSHMEM job stopped: {plural(job.n, 'PE')}")

    def _restart(self) -> None:
        job = _job.current_job()
        if job is None:
            raise NoJobError("restart")
        job.restart()
        print(
            f"OpenSHMEM job restarted: {plural(job.n, 'PE')}"
            + (f", arrays {', '.join(job.specs)} re-allocated (zeroed)" if job.specs else "")
        )

    def _status(self) -> None:
        job = self._job("status")
        print(format_status(job.status()))
        if job.spares.wanted:  # the spare set a restart takes (--spare)
            print(f"spare: {plural(job.spares.waiting(), 'PE')} of {job.n} waiting for the next restart")

    def _arrays(self) -> None:
        print(format_arrays(self._job("arrays").arrays()))

    def _alloc(self, args: argparse.Namespace) -> None:
        job = self._job("%shmem alloc")
        job.alloc(*args.arrays)

    def _free(self, args: argparse.Namespace) -> None:
        job = self._job("%shmem free")
        for name in args.names:
            size = job.specs[name].nbytes(job.n) if name in job.specs else None
            job.free(name)
            print(f"freed {name}" + (f" ({format_size(size)} per PE)" if size is not None else ""))

    def _gather(self, args: argparse.Namespace) -> "NDArray[Any]":
        return self._job("%shmem gather").gather(args.name)

    def _pull(self, args: argparse.Namespace) -> "NDArray[Any] | dict[int, Any]":
        return self._job("%shmem pull").pull(args.name)

    def _inspect(self, args: argparse.Namespace) -> "Inspector":
        from ..inspector.widget import inspect

        return inspect(self._job("%shmem inspect"), auto=args.auto, array=args.array, reference=args.reference)

    def _race(self, args: argparse.Namespace) -> None:
        job = _job.current_job()
        if args.switch != "on" and job is not None:
            job.race_reset()  # off or reset: the next race-checked cell starts afresh
        if args.switch == "reset":
            print("race check: forgot the operations earlier cells left in flight")
            return
        self.race_default = args.switch == "on"
        print(f"race check {'on' if self.race_default else 'off'} for every %%pxshmem cell")

    def _replay(self, args: argparse.Namespace) -> Any:
        result = self._job("%shmem replay").last_result
        if result is None or result.trace is None:
            raise UsageError("%shmem replay: the last cell was not traced; run it with `%%pxshmem --trace` first")
        from ..inspector.replay import replay

        return replay(result.trace, arrays=args.array)

    def _fix(self) -> None:
        from ..analysis.edits import apply_fixes

        result = self._job("%shmem fix").last_result
        if result is None or result.code is None:
            raise UsageError("%shmem fix: the last cell was not race-checked; run it with `%%pxshmem --race` first")
        fixes, races = fixes_of(result.races), result.races
        if not fixes:
            why = (
                "found no race"
                if not races
                else f"found {plural(len(races), 'race')}, none with a fix that is an edit of the cell (see the hints)"
            )
            print(f"%shmem fix: nothing to fix: the last race-checked cell {why}")
            return
        fixed, applied = apply_fixes(result.code, fixes)
        line, cell = self.last_cell or ("", "")
        text = f"%%pxshmem {line}".rstrip() + "\n" + fixed if cell == result.code else fixed
        assert self.shell is not None  # a magic runs in its shell
        self.shell.set_next_input(text.rstrip("\n"), replace=False)
        left = len(races) - sum(1 for race in races if race.fix in applied)
        still = f"; {plural(left, 'race')} without a fix: see the hints" if left else ""
        print(f"%shmem fix: the next cell is the last one with {plural(len(applied), 'fix', 'fixes')} applied{still}")

    def _export(self, args: argparse.Namespace) -> None:
        job = _job.current_job()
        if job is None:
            raise NoJobError("%shmem export")
        batch = {f.name: getattr(args, f.name) or None for f, _ in declared(batch=True)}  # [] given as None
        given = [flag(f) for f, _ in declared(batch=True) if batch[f.name] is not None]
        if given and not args.slurm:
            raise UsageError(f"%shmem export: {', '.join(given)} only apply with --slurm")
        print(job.export(args.file, cells=args.cells, slurm=batch if args.slurm else False))

    @cell_magic
    def pxshmem(self, line: str, cell: str) -> Any:
        """(written from its parser: see the end of this module)"""
        if HELP_WORDS.intersection(shlex.split(line)):
            print(_usage("pxshmem"))
            return
        bare = {f"--{name}": f"--{name}={stage.bare}" for name, stage in STAGES.items() if stage.bare}
        args = cell_parser().parse_args([bare.get(w, w) for w in shlex.split(line)])
        options = {name: getattr(args, name) for name, stage in STAGES.items() if stage.flag is not None}
        for name, stage in STAGES.items():  # --stress race-checks the cell too
            if options.get(name) not in (None, False):
                options.update({need: options.get(need) or True for need in stage.needs})
        if self.race_default:  # `%shmem race on`
            options["race"] = options.get("race") or True
        self.last_cell = (line, cell)
        self._job("%%pxshmem").run(cell, arrays=args.arrays, timeout=args.timeout, **options)


# the magics' docstrings (`%shmem?`, `%%pxshmem?`) come from the parsers: every option, said once
ShmemMagics.shmem.__doc__ = overview()
ShmemMagics.pxshmem.__doc__ = _one_line("pxshmem") + ": run the cell on every PE."
