"""Tab completion of ``%shmem`` and ``%%pxshmem`` lines (client side).

``%shmem st<TAB>`` offers ``start``, ``status``, ``stop``; ``%shmem start --<TAB>`` the start options;
``--library <TAB>`` the libraries this user may start (:func:`~shmem_notebook.launcher.library.known`);
``%shmem gather <TAB>``, ``free``, ``pull``, ``--array`` the declared arrays of the current job;
``%shmem race <TAB>`` its choices; ``%%pxshmem --<TAB>`` the cell magic's flags. Nothing is listed
twice: the subcommands are the magic's own, the start options come from
:func:`~shmem_notebook.job.options.declared` (the one declaration, :class:`~.options.JobOptions`), and
every other subcommand's and ``%%pxshmem``'s from the parser the magic parses with (built from the
same declaration and the stages' registry). :func:`register` adds one matcher of IPython's matcher
API (version 2) to the shell's completer; :func:`candidates` is the same without IPython.
"""

import argparse
from typing import TYPE_CHECKING, Any

from IPython.core.completer import CompletionContext, SimpleCompletion, SimpleMatcherResult, context_matcher

from .. import job as _job
from ..job import options as _declaration
from . import shmem_magics

if TYPE_CHECKING:
    from IPython.core.interactiveshell import InteractiveShell

__all__ = ["candidates", "matcher", "register", "unregister"]

#: the start option whose values are library names (a field of JobOptions)
LIBRARY = "library"
#: subcommands whose first word is a declared array's name
NAMES_ARRAYS = ("gather", "free", "pull")
#: options (of any subcommand) whose value is a declared array's name, or a PE number
ARRAY_OPTIONS, PE_OPTIONS = ("--array",), ("--reference",)


def _declared_arrays() -> list[str]:
    """The names of the current job's declared arrays (kept while it is stopped)."""
    job = _job.current_job()
    return list(job.specs) if job is not None else []


def _libraries() -> list[str]:
    """The libraries this user may start; none when a site's or the user's file is malformed (the
    start says why)."""
    from ..errors import InputError
    from ..launcher.library import known

    try:
        return list(known())
    except InputError:
        return []


def _pes() -> list[str]:
    job = _job.current_job()
    return [str(pe) for pe in range(job.n)] if job is not None else []


def _start_options() -> dict[str, tuple[bool, list[str] | None]]:
    """``{flag: (takes a value, the values it takes or None)}`` of the start options, from their
    declaration: :func:`~shmem_notebook.job.options.listed` where it is, else
    :func:`~shmem_notebook.job.options.declared` (the library's values: :func:`_libraries`)."""
    listed = getattr(_declaration, "listed", None)
    if listed is not None:
        return {o.flag: (o.metavar is not None, o.choices) for o in listed()}
    return {
        _declaration.flag(f): (o.action != "store_true", _libraries() if f.name == LIBRARY else None)
        for f, o in _declaration.declared()
    }


def _options(sub: str) -> dict[str, bool]:
    """``{flag: takes a value}`` of a subcommand (``pxshmem``: the cell magic)."""
    if sub == "start":
        return {name: value for name, (value, _) in _start_options().items()}
    parser = shmem_magics.parser_of(sub)
    if parser is None:  # stop, restart, status, arrays: no options
        return {}
    return {s: action.nargs != 0 for action in _actions(parser) for s in action.option_strings}


def _actions(parser: argparse.ArgumentParser) -> list[argparse.Action]:
    return list(parser._actions)


def _values(sub: str, option: str) -> list[str] | None:
    """What may follow ``option`` of subcommand ``sub``; None: nothing known (a size, a file)."""
    if sub == "start":
        return _start_options().get(option, (False, None))[1]
    if option in ARRAY_OPTIONS:
        return _declared_arrays()
    if option in PE_OPTIONS:
        return _pes()
    parser = shmem_magics.parser_of(sub)
    for action in _actions(parser) if parser is not None else []:
        if option in action.option_strings and action.choices is not None:
            return [str(c) for c in action.choices]
    return None


def _positionals(sub: str, before: list[str]) -> list[str] | None:
    """What the next positional word of ``sub`` may be, after the words ``before`` it; None: unknown."""
    if sub in NAMES_ARRAYS:
        return [n for n in _declared_arrays() if n not in before] if sub == "free" or not before else []
    parser = shmem_magics.parser_of(sub)
    if parser is None or sub == "pxshmem":
        return None
    positional = [a for a in _actions(parser) if not a.option_strings]
    if not before and positional and positional[0].choices is not None:
        return [str(c) for c in positional[0].choices]
    return None


def candidates(text: str) -> tuple[str, list[str]] | None:
    """For the text of a ``%shmem`` or ``%%pxshmem`` line up to the cursor: ``(fragment, words)``, the
    part of the last word completed and the words that complete it (an empty list: nothing fits);
    None when the line is neither magic's, or when what comes next is not known here (a file name)."""
    words = text.split()
    current = "" if not words or text[-1].isspace() else words.pop()
    if not words or words[0] not in ("%shmem", "%%pxshmem"):
        return None
    if words[0] == "%%pxshmem":
        sub, rest = "pxshmem", words[1:]
    elif len(words) == 1:
        subs = [*shmem_magics.subcommands(), "help"]
        return current, [s for s in subs if s.startswith(current)]
    else:
        sub, rest = words[1], words[2:]
        if sub not in shmem_magics.subcommands():
            return current, []
    options = _options(sub)
    if current.startswith("-") and "=" in current:  # --library=so
        option, _, fragment = current.partition("=")
        values = _values(sub, option) if options.get(option) else []
        return None if values is None else (fragment, [v for v in values if v.startswith(fragment)])
    if rest and options.get(rest[-1]) and not current.startswith("-"):  # the value of an option
        values = _values(sub, rest[-1])
        return None if values is None else (current, [v for v in values if v.startswith(current)])
    flags = list(options)
    if current.startswith("-"):
        return current, [o for o in options if o.startswith(current)]
    before = [w for i, w in enumerate(rest) if not w.startswith("-") and not (i and options.get(rest[i - 1]))]
    positional = _positionals(sub, before)
    if positional is None and current:
        return None  # a file name, a declaration, a variable's name: IPython's own matchers
    return current, [p for p in positional or [] if p.startswith(current)] + ([] if current else flags)


@context_matcher(identifier="shmem_notebook.magics")  # type: ignore[untyped-decorator]  # IPython's: Any to mypy
def matcher(context: CompletionContext) -> SimpleMatcherResult:
    """IPython's matcher (API v2): the completions of :func:`candidates`, the only ones offered on a
    ``%shmem`` or ``%%pxshmem`` line where it knows them; nothing from it elsewhere."""
    if context.line_with_cursor.lstrip().startswith("%%pxshmem") and context.cursor_line != 0:
        found = None  # a cell magic's line is the cell's first
    else:
        found = candidates(context.text_until_cursor.lstrip())
    if found is None:
        return {"completions": [], "suppress": False}
    fragment, words = found
    return {
        "completions": [SimpleCompletion(w, type="shmem") for w in words],
        "matched_fragment": fragment,
        "suppress": True,
        "ordered": True,
    }


def register(shell: "InteractiveShell") -> None:
    """Add :func:`matcher` to ``shell``'s completer (once)."""
    completer: Any = getattr(shell, "Completer", None)
    if completer is not None and matcher not in completer.custom_matchers:
        completer.custom_matchers.append(matcher)


def unregister(shell: "InteractiveShell") -> None:
    """Remove :func:`matcher` from ``shell``'s completer."""
    completer: Any = getattr(shell, "Completer", None)
    if completer is not None and matcher in completer.custom_matchers:
        completer.custom_matchers.remove(matcher)
