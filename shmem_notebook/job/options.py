"""The job's side of the start options (client side): what is derived from their one declaration.

The options are declared once, as the fields of :class:`JobOptions`
(:mod:`shmem_notebook.launcher.start_options`, on the launcher's floor so that the ``oshrun``
launcher takes its traits from it too). From it come: ``Job()``'s and ``start()``'s signatures
(:func:`signature`, and :class:`StartOptions` for the type checker, written by
``python -m shmem_notebook.job.options`` and checked by a test), the ``%shmem start`` and
``%shmem export --slurm`` flags (:func:`add_arguments`), each option's check and its sentence
(:func:`check`, and the flags' ``type``), what a job hands the launcher (:func:`launcher_settings`),
the site's keys (:mod:`.site`), the batch options (:mod:`.batch`) and the options table of the docs
and of the magics' completion (:func:`listed`: name, flag, metavar, choices, help, default, type,
site key, batch).
"""

from __future__ import annotations  # StartOptions' types are the declaration's source text

import argparse
import dataclasses
import inspect
import sys
from collections.abc import Callable, Sequence
from typing import Any, NamedTuple, TypedDict

from ..errors import InputError
from ..launcher import start_options
from ..launcher.start_options import (
    JobOptions,
    Limit,
    Option,
    declared,
    flag,
    launched,
    option,
    site_key,
    slurm_seconds,
    type_text,
)

__all__ = [
    "JobOptions",
    "StartOptions",
    "Option",
    "Limit",
    "Listed",
    "option",
    "declared",
    "listed",
    "given",
    "check",
    "signature",
    "add_arguments",
    "flag",
    "site_key",
    "launcher_settings",
    "typed_source",
    "docs_table",
    "count",
    "node_count",
    "seconds",
    "slurm_seconds",
]


def count(text: str) -> int:
    """A flag's text as a positive number of PEs (argparse ``type``)."""
    value: int = _read_flag(_field("n"), text)
    return value


def node_count(text: str) -> int:
    """``--nodes``'s text as a positive number of nodes (argparse ``type``)."""
    value: int = _read_flag(_field("nodes"), text)
    return value


def seconds(text: str) -> float:
    """A flag's text as a positive number of seconds (argparse ``type``)."""
    value: float = _read_flag(_field("timeout"), text)
    return value


# -- written by `python -m shmem_notebook.job.options` from JobOptions: do not edit by hand ----------
class StartOptions(TypedDict, total=False):
    """The keyword options of ``start()`` and ``Job()`` for the type checker (every option but ``n``)."""

    heap: str | int | None
    oversubscribe: bool | None
    hostfile: str | None
    bind_to: str | None
    timeout: float | None
    ip: str | None
    slurm: bool
    partition: str | None
    time: str | int | None
    nodes: int | None
    account: str | None
    sbatch_args: Sequence[str]
    restart_on_hang: bool
    library: str | None
    spare: bool
    sbatch_prologue: str | Sequence[str]


# -- end of what `python -m shmem_notebook.job.options` writes ----------------------------------------


def _field(name: str) -> tuple[dataclasses.Field[Any], Option]:
    return next((f, o) for f, o in declared() if f.name == name)


class Listed(NamedTuple):
    """One start option as the docs' table and the magics' completion list it."""

    name: str  #: the keyword of ``start()`` and ``Job()``
    flag: str  #: its flag in ``%shmem start``: ``--restart-on-hang``
    metavar: str | None  #: what follows the flag (``None``: a switch)
    choices: list[str] | None  #: the values it takes, when they are few and known
    help: str
    default: Any
    type: str  #: the type, as declared
    site_key: str | None  #: its key in a site policy (site.json), if a site may cap it
    batch: bool  #: an option of the Slurm batch job
    rc: str | None  #: the ``rc`` setting a ``None`` stands for


def listed(batch: bool | None = None) -> list[Listed]:
    """Every start option in declaration order, as :class:`Listed` (name, flag, metavar, choices, help,
    default, type, site key, batch, rc setting); ``batch`` as :func:`declared`. Not collective."""
    return [
        Listed(
            f.name,
            flag(f),
            None if o.action == "store_true" else o.metavar or f.name.upper(),
            o.choices() if o.choices else None,
            o.help,
            f.default,
            type_text(f),
            site_key(f.name, o),
            o.batch,
            o.rc,
        )
        for f, o in declared(batch)
    ]


def given(**options: Any) -> JobOptions:
    """The :class:`JobOptions` of the options given by name; an unknown name is one sentence (:class:`InputError`)."""
    names = [f.name for f, _ in declared()]
    unknown = [name for name in options if name not in names]
    if unknown:
        raise InputError(f"{unknown[0]!r} is not a start option; the options are: {', '.join(names)}")
    return start_options.JobOptions(**options)  # (read when called: a test widens the declaration)


def check(options: JobOptions) -> JobOptions:
    """``options`` with each given value (not ``None``) through its option's check, in declaration order;
    the first wrong one is one sentence naming the option (:class:`InputError`)."""
    checked = {}
    for f, o in declared(options=type(options)):
        value = getattr(options, f.name)
        if o.check is None or value is None:
            continue
        try:
            checked[f.name] = o.check(value)
        except InputError:
            raise
        except (ValueError, TypeError, ArithmeticError):
            example = f"; e.g. {o.example}" if o.example else ""
            raise InputError(f"{_wrong(o, f.name)}, got {value!r}{example}") from None
    return dataclasses.replace(options, **checked)


def _wrong(o: Option, name: str) -> str:
    return o.wrong.format(name=name) if o.wrong else f"{name} is not a value it takes"


def _read_flag(declared_field: tuple[dataclasses.Field[Any], Option], text: str) -> Any:
    """A flag's ``text`` through its option's parse and check, or argparse's error in one sentence."""
    f, o = declared_field
    try:
        value = o.parse(text) if o.parse else text
        return o.check(value) if o.check and o.wrong else value
    except (ValueError, TypeError, ArithmeticError):
        raise argparse.ArgumentTypeError(f"{_wrong(o, flag(f))}, got {text!r}") from None


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


def add_arguments(parser: argparse.ArgumentParser, batch: bool | None = None, prefix: str = "") -> None:
    """Add the flags of the start options to an argparse ``parser`` (``batch`` as :func:`declared`;
    ``prefix``: what their help begins with). Each lands on ``args.<name>``."""
    for f, o in declared(batch):
        kwargs: dict[str, Any] = {"dest": f.name, "help": prefix + o.help}
        if o.action == "store_true":
            kwargs.update(action="store_true", default=f.default)
        else:
            kwargs.update(default=[] if o.action == "append" else f.default, metavar=o.metavar)
            if o.action:
                kwargs["action"] = o.action
            if o.parse or (o.check and o.wrong):
                kwargs["type"] = _flag_type(f, o)
        if o.required:
            kwargs["required"] = True
        parser.add_argument(flag(f), **kwargs)


def _flag_type(f: dataclasses.Field[Any], o: Option) -> Callable[[str], Any]:
    def read(text: str) -> Any:
        return _read_flag((f, o), text)

    read.__name__ = f.name  # argparse names the type in some errors
    return read


def launcher_settings(options: JobOptions) -> dict[str, Any]:
    """What a job of ``options`` (checked, with the values it resolved: heap, library) hands the launcher,
    as its traits take them: ``None`` -> '' for a string, a list for a repeatable option."""
    settings = {}
    for f, o in launched(type(options)):
        value = getattr(options, f.name)
        if o.action == "append":
            value = [str(v) for v in ([value] if isinstance(value, str) else value or [])]
        elif o.action != "store_true" and not type_text(f).startswith("int"):
            value = "" if value is None else str(value)
        settings[f.name] = value
    return settings


# -- StartOptions, written from the declaration --------------------------------------------------------
_BEGIN = "# -- written by `python -m shmem_notebook.job.options` from JobOptions: do not edit by hand"
_END = "# -- end of what `python -m shmem_notebook.job.options` writes"


def typed_source(options: type | None = None) -> str:
    """The source of :class:`StartOptions` for the declaration (``options``: another than :class:`JobOptions`)."""
    keys = "".join(f"    {f.name}: {type_text(f)}\n" for f, _ in declared(options=options) if f.name != "n")
    return (
        "class StartOptions(TypedDict, total=False):\n"
        '    """The keyword options of ``start()`` and ``Job()`` for the type checker (every option but ``n``)."""\n'
        f"\n{keys}"
    )


def docs_table() -> str:
    """The options table of docs/api.md ("Start options"): one row per option, in declaration order."""
    rows = ["| option | `%shmem start` | default | site.json | what it is |", "| --- | --- | --- | --- | --- |"]
    for o in listed():
        shown = o.flag if o.metavar is None else f"{o.flag} {o.metavar}"
        limit = f"`{o.site_key}`" if o.site_key else ""
        what = o.help.replace("|", "\\|") + (" (Slurm batch job)" if o.batch else "")
        default = f"`rc.{o.rc}`" if o.default is None and o.rc else f"`{o.default!r}`"
        rows.append(f"| `{o.name}` | `{shown}` | {default} | {limit} | {what} |")
    return "\n".join(rows) + "\n"


#: where docs/api.md holds :func:`docs_table`
DOCS_BEGIN = "<!-- the start options: written by `python -m shmem_notebook.job.options`, do not edit by hand -->"
DOCS_END = "<!-- end of the start options -->"


def _rewrite(path: str) -> bool:
    """Write :class:`StartOptions` into this module's file at ``path`` again; whether it changed."""
    with open(path) as fh:
        text = fh.read()
    head, rest = text.split(_BEGIN, 1)
    _, tail = rest.split(_END, 1)
    line_end = rest.index("\n")
    new = f"{head}{_BEGIN}{rest[:line_end]}\n{typed_source()}\n\n{_END}{tail}"
    return _write(path, text, new)


def _rewrite_docs(path: str) -> bool:
    """Write :func:`docs_table` into docs/api.md at ``path`` again; whether it changed."""
    with open(path) as fh:
        text = fh.read()
    head, rest = text.split(DOCS_BEGIN, 1)
    _, tail = rest.split(DOCS_END, 1)
    return _write(path, text, f"{head}{DOCS_BEGIN}\n\n{docs_table()}\n{DOCS_END}{tail}")


def _write(path: str, text: str, new: str) -> bool:
    if new != text:
        with open(path, "w") as fh:
            fh.write(new)
    return new != text


if __name__ == "__main__":  # python -m shmem_notebook.job.options: what is written from JobOptions, again
    import os

    docs = os.path.join(os.path.dirname(__file__), "..", "..", "docs", "api.md")
    for what, changed in (("StartOptions", _rewrite(__file__)), ("docs/api.md's table", _rewrite_docs(docs))):
        print(f"{what} {'rewritten' if changed else 'unchanged'}", file=sys.stderr)
