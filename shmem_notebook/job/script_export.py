"""From notebook to batch job: a job's cells written out as one standalone shmem4py program (client side).

:func:`export` is ``job.export(path, cells=None, slurm=False)`` and ``%shmem export FILE``. It
reads ``job.history`` (:mod:`.history`) and writes, in order: the platform's environment
(set before shmem4py initialises OpenSHMEM; what the user set wins), the imports, the
adaptations the notebook's PEs had (``shmem_notebook.engine.shims`` when importable, else a
plain shmem4py program with only the NumPy 2 fix of ``shmem.array`` inlined), ``me`` and
``npes``, then each cell under a comment naming it (``In[k]``), with the arrays it declared
allocated zeroed before it, IPython syntax made plain Python or left out with the reason,
and at the end a barrier and the declared arrays freed. Cells that failed in the notebook
are left out (named in the program's docstring) unless chosen with ``cells``.

:mod:`.plain_python` is the cell-to-Python step; :func:`.batch.sbatch_script` writes the batch script.
Nothing here reaches the PEs.
"""

from __future__ import annotations

import os
import shlex
import sys
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from ..cells.stages import STAGES
from ..errors import InputError
from ..launcher.environment import platform_environment
from ..specs import parse_size, parse_spec
from ..words import plural
from .batch import sbatch_script
from .plain_python import plain_cell, show_last, stored as names_stored, used as names_used

if TYPE_CHECKING:
    from collections.abc import Iterable, Sequence

    from ..specs import ArraySpec
    from .history import CellRecord
    from .job import Job

    Cells = str | int | Iterable[str | int]

__all__ = ["export", "Exported", "select", "program", "sbatch_script"]

#: why a cell that did not end well is left out
FAILED = {
    "error": "it raised in the notebook",
    "timeout": "it did not finish within its timeout in the notebook",
    "interrupted": "it was interrupted in the notebook",
    "died": "PEs died while it ran in the notebook",
    "stranded": "it raised on some PEs while the others waited for them in the notebook",
    "deadlock": "it deadlocked in the notebook (every PE waited for another)",
}

TIMEOUT_NOTE = "--timeout: a program has no per-cell timeout; give the batch job a time limit (sbatch --time)"


def _option_notes() -> dict[str, str]:
    """What each cell option becomes in a program: a stage says its own (``Stage.export_note``)."""
    return {**{name: s.export_note for name, s in STAGES.items() if s.export_note}, "timeout": TIMEOUT_NOTE}


#: names the notebook binds before every cell, and how the program binds them again
BOUND = {
    "me": "me = shmem.my_pe()",
    "npes": "npes = shmem.n_pes()",
    "np": "import numpy as np",
    "shmem": "from shmem4py import shmem",
    "collectives": "from shmem_notebook.engine import collectives",
}


@dataclass
class Exported:
    """What :func:`export` wrote; ``str()`` says it in a few lines."""

    program: str
    cells: list[str]  # labels of the cells written, in order
    left_out: list[tuple[str, str]] = field(default_factory=list)  # (label, why)
    sbatch: str | None = None
    npes: int = 0
    oshrun: str = "oshrun"  # the job's library's launcher
    python: str = sys.executable  # the Python the job's PEs ran: a bare python3 may lack shmem4py

    @property
    def command(self) -> str:
        return f"{shlex.quote(self.oshrun)} -n {self.npes} {shlex.quote(self.python)} {shlex.quote(self.program)}"

    def __str__(self) -> str:
        cells = ", ".join(self.cells) or "none"
        text = f"wrote {self.program}: {plural(len(self.cells), 'cell')} ({cells})"
        if self.left_out:
            text += "; left out: " + "; ".join(f"{label} ({why})" for label, why in self.left_out)
        text += f"\nrun it: {self.command}  (per-PE output: add --tag-output)"
        if self.sbatch:
            text += f"\nwrote {self.sbatch}: submit it with `sbatch {self.sbatch}`"
        return text


def export(
    job: Job, path: str | os.PathLike[str], cells: Cells | None = None, slurm: bool | dict[str, Any] = False
) -> Exported:
    """Write ``job``'s cells as a program at ``path`` (and an sbatch script with ``slurm``); an :class:`Exported`."""
    if not isinstance(path, (str, os.PathLike)) or not str(path):
        raise InputError(f"export needs a file name, got {path!r}; e.g. job.export('ring.py')")
    path = os.fspath(path)
    library = getattr(job, "library", None)
    if slurm and library is not None and library.launcher != "openmpi":
        raise InputError(
            f"--slurm writes an sbatch script for Open MPI's oshrun or srun; the {library.name} library "
            f"is not supported there yet: export without --slurm and run the program with its oshrun"
        )
    chosen, left_out = select(job.history, cells)
    if not chosen:
        said = "no cell has run in this job yet" if not job.history else "none of the cells ran without an error"
        raise InputError(f"nothing to export: {said}; run a %%pxshmem cell first (or choose cells with --cells)")
    text = program(chosen, left_out, job, os.path.basename(path))
    with open(path, "w") as f:
        f.write(text)
    done = Exported(path, [r.label for r in chosen], left_out, npes=job.n, python=_python(job))
    if library is not None and library.name != "oshmem":  # the default keeps the plain `oshrun`
        done.oshrun = library.oshrun
    if slurm:
        options = dict(job.batch) if job.batch else {}
        if isinstance(slurm, dict):
            options.update({k: v for k, v in slurm.items() if v not in (None, "")})
        done.sbatch = os.path.splitext(path)[0] + ".sbatch"
        with open(done.sbatch, "w") as f:
            f.write(sbatch_script(job.n, path, job.heap, options, python=done.python))
        os.chmod(done.sbatch, 0o755)
    return done


def _python(job: Job) -> str:
    """The Python the job's PEs ran (its library's: the notebook's own for Open MPI's OSHMEM)."""
    library = getattr(job, "library", None)
    return getattr(library, "python", None) or sys.executable


# -- choosing cells ----------------------------------------------------------------------------
def _wanted(cells: Cells) -> set[int | tuple[int, int]]:
    """``"4,6-8,9.2"``, ``7``, ``"In[9].2"`` or ``[4, 6]`` -> a set of keys: ``k`` (every part of
    cell ``k``) or ``(k, part)`` (one ``job.run`` of several in notebook cell ``k``)."""
    if isinstance(cells, bool):
        raise InputError(f"cells is a list of cell numbers such as '4,6-8', got {cells!r}")
    if isinstance(cells, int):
        return {cells}
    items = cells.split(",") if isinstance(cells, str) else cells
    try:
        items = list(items)
    except TypeError:
        raise InputError(f"cells is a list of cell numbers such as '4,6-8', got {cells!r}") from None
    found: set[int | tuple[int, int]] = set()
    for item in items:
        text = str(item).strip().replace("In[", "").replace("]", "").replace("cell ", "")
        if not text:
            continue
        first, _, last = text.partition("-")
        try:
            if "." in text and not last:
                number, part = first.split(".")
                found.add((int(number), int(part)))
            else:
                found.update(range(int(first), int(last or first) + 1))
        except ValueError:
            raise InputError(
                f"cannot read cells {cells!r}: use numbers and ranges of In[k], e.g. '4,6-8' "
                "(In[k].2 for the second job.run of a cell)"
            ) from None
    return found


def _key(record: CellRecord) -> int:
    return record.count if record.count is not None else record.number


def select(history: Sequence[CellRecord], cells: Cells | None = None) -> tuple[list[CellRecord], list[tuple[str, str]]]:
    """The records to write, in the order they ran, and ``[(label, why)]`` of those left out.

    ``cells=None``: every cell that ended well. Otherwise the cells whose ``In[k]`` (or, for cells
    run outside a notebook, place in the history) is among ``cells``, whatever their outcome."""
    if cells is None:
        chosen = [r for r in history if r.outcome == "ok"]
        return chosen, [
            (r.label, FAILED.get(r.outcome, f"it ended {r.outcome!r}")) for r in history if r.outcome != "ok"
        ]
    wanted = _wanted(cells)
    chosen = [r for r in history if _key(r) in wanted or (_key(r), r.part) in wanted]
    known = {_key(r) for r in history} | {(_key(r), r.part) for r in history}
    missing = sorted(wanted - known, key=lambda k: k if isinstance(k, tuple) else (k, 0))
    if missing:
        have = ", ".join(r.label for r in history) or "none"
        name = "In[{}].{}".format(*missing[0]) if isinstance(missing[0], tuple) else missing[0]
        raise InputError(f"no cell {name} ran in this job; the cells it ran: {have}")
    return chosen, []


# -- the program ------------------------------------------------------------------------------
def _shape(spec: ArraySpec) -> str:
    dims = list(spec.dims)
    return "(" + ", ".join(dims) + ("," if len(dims) == 1 else "") + ")"


def _alloc(spec: ArraySpec) -> str:
    return f'{spec.name} = _declared["{spec.name}"] = shmem.zeros({_shape(spec)}, dtype="{spec.dtype}")'


def _header(record: CellRecord) -> str:
    declared = " ".join(record.options.get("declared", []))
    flags = " ".join(f"--{k}" if v is True else f"--{k} {v}" for k, v in record.options.items() if k in _option_notes())
    magic = " ".join(filter(None, ["%%pxshmem", declared, flags]))
    title = f"# ---- {record.label}: {magic} "
    return title + "-" * max(4, 96 - len(title))


def _cell_block(
    record: CellRecord, prev: CellRecord | None, stored: set[str], bound_names: set[str], needs: set[str]
) -> list[str]:
    """The lines of one cell: arrays (re)declared or freed, names bound again, options, the code."""
    out = ["", "", _header(record)]
    if prev is not None:  # every PE ended the cell before: ordered as in the notebook, nothing completed
        out[1:1] = ["shmem.sync_all()  # the cell boundary: every PE finished the cell above before the next starts"]
    if prev is not None and prev.pids and record.pids and prev.pids != record.pids:
        out += [
            "# the job was restarted before this cell (%shmem restart): its PEs started afresh with the declared",
            "# arrays zeroed; here the variables stay and the arrays are zeroed",
            "for _name in _declared:",
            "    _declared[_name][...] = 0",
            "shmem.barrier_all()",
        ]
    before = prev.arrays if prev is not None else {}
    now = {name: parse_spec(text) for name, text in record.arrays.items()}
    for name in reversed(list(before)):
        if name not in now or str(now[name]) != before[name]:
            why = f"re-declared as {now[name]}" if name in now else "freed (%shmem free)"
            out.append(f'shmem.free(_declared.pop("{name}"))  # {before[name]} {why} before this cell')
            if name not in now and name not in stored:
                out.append(f"del {name}")
    allocated = False
    for name, spec in now.items():
        if before.get(name) != str(spec):
            out.append(f"{_alloc(spec)}  # declared (zeroed)")
            stored.discard(name)
            allocated = True
    if allocated:  # kept where no shim runs: Open MPI's shmem.zeros zeroes after its barrier (deviations.py)
        out += [
            "# Open MPI's OSHMEM zeroes shmem.zeros' memory after the allocation's barrier (shmem_notebook.deviations:",
            "# late_zeroing): without this barrier a put from a PE done first could be wiped by a PE still zeroing",
            "shmem.barrier_all()  # every PE zeroed them before any PE writes into them (as in the notebook)",
        ]
    again = [name for name in [*BOUND, *now] if name in stored and (name in now or name in bound_names)]
    if again:
        out.append("# the notebook binds these names again before every cell")
        out += [BOUND.get(name) or f'{name} = _declared["{name}"]' for name in again]
        stored.difference_update(again)
    notes = _option_notes()
    for key in record.options:
        if key in notes:
            out.append(f"# {notes[key]}")
    if record.outcome != "ok":
        out.append(f"# NOTE: {FAILED.get(record.outcome, 'it ended ' + repr(record.outcome))}")
    text = plain_cell(record.code, needs)
    if any(record.results.values()):
        shown = show_last(text)
        if shown is not None:
            text = shown
            needs.add("show")
    try:
        compile(text, record.label, "exec")
    except SyntaxError as exc:
        text = "\n".join(
            [f"pass  # left out: not valid Python once the notebook's syntax is gone ({exc.msg})"]
            + [f"# {line}" for line in text.splitlines()]
        )
    out.append(text)
    stored.update(names_stored(text))
    return out


def _preamble(
    name: str, records: Sequence[CellRecord], left_out: list[tuple[str, str]], job: Job, needs: set[str], used: set[str]
) -> list[str]:
    labels = ", ".join(r.label for r in records)
    env = platform_environment(environ={}, heap=job.heap)
    heap = parse_size(job.heap)
    python = shlex.quote(_python(job))  # the job's interpreter: the one with shmem4py
    lines = [
        "#!/usr/bin/env python3",
        f'"""{name}: {plural(len(records), "cell")} of a shmem_notebook session as one OpenSHMEM program',
        f"(exported by `%shmem export` from a job of {plural(job.n, 'PE')}, heap {job.heap} per PE).",
        "",
        f"Run:              oshrun -n {job.n} {python} {name}",
        f"Output per PE:    oshrun -n {job.n} --tag-output {python} {name}",
        f"Race check:       {python} -m shmem_notebook.race -- oshrun -n {job.n} {python} {name}",
        "As root Open MPI also wants OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1.",
        "",
        f"Cells: {labels}",
    ]
    for label, why in left_out:
        lines.append(f"Left out: {label}, because {why}")
    lines += [
        "Each PE prints what the cell printed on it, in order (unlabelled: --tag-output labels the lines).",
        '"""',
        "",
        "import os",
        "import sys",
        "",
        "# the environment shmem_notebook's launcher gives its PEs, set before shmem4py initialises OpenSHMEM",
        "# on import (what you set yourself wins)",
        f'os.environ.setdefault("SMA_SYMMETRIC_SIZE", "{heap}")  # heap {job.heap} per PE (Open MPI reads this one)',
        f'os.environ.setdefault("SHMEM_SYMMETRIC_SIZE", "{heap}")',
    ]
    if "OMPI_MCA_osc" in env:
        lines += [
            'if "OMPI_MCA_opal_common_ucx_opal_mem_hooks" not in os.environ:',
            '    os.environ.setdefault("OMPI_MCA_osc", "^rdma")  # Open MPI < 4.1.6 crashes in shmem_finalize '
            "without it (ompi#11604)",
            '    os.environ["OMPI_MCA_opal_common_ucx_opal_mem_hooks"] = "0"  # and now and then at start (ompi#10765)',
        ]
    lines += [
        "sys.stdout.reconfigure(line_buffering=True, write_through=False)  "
        "# each line as soon as it is printed, as in the notebook",
        "",
    ]
    if "subprocess" in needs:
        lines.append("import subprocess")
    lines += [
        "import numpy as np",
        "from shmem4py import shmem  # initialises OpenSHMEM",
        "",
        "try:  # the adaptations of shmem4py the notebook's PEs had: NumPy 2 fixes, teams on OpenSHMEM 1.4,",
        "    # routines the library lacks named in one error, guards against the library's atomic bugs",
        "    from shmem_notebook.engine import shims",
        "except ImportError:  # shmem_notebook is not installed where this runs: plain shmem4py",
        "    shims = None",
        "if shims is not None:",
        '    shims.install(shmem, exclude=("diagnostics",))  # collective',
    ]
    if any("shmem.array" in r.code for r in records):
        lines += [
            'elif int(np.__version__.split(".")[0]) >= 2:',
            "    import inspect",
            "",
            '    if "copy=False" in inspect.getsource(shmem.array):  '
            "# shmem4py 1.0.0's shmem.array fails under NumPy 2",
            "",
            '        def _array(obj, dtype=None, *, order="K", align=None, hints=None):',
            "            tmp = np.asarray(obj, dtype)",
            '            if order in ("K", "A"):',
            '                order = "F" if tmp.flags.f_contiguous and not tmp.flags.c_contiguous else "C"',
            "            a = shmem.new_array(tmp.shape, tmp.dtype, order, align=align, hints=hints, clear=False)",
            '            np.copyto(a, tmp, casting="no")',
            "            shmem.sync_all()",
            "            return a",
            "",
            "        shmem.array = _array",
        ]
    if "collectives" in used or any(
        "shmem_notebook.collectives" in r.code or "import collectives" in r.code for r in records
    ):
        lines += [
            "",
            "# the teaching collectives the cells call (shmem_notebook must be installed for them)",
            "from shmem_notebook.engine import collectives",
            "",
            "collectives.install(shmem)  # collective: reserves their scratch",
            'sys.modules.setdefault("shmem_notebook.collectives", collectives)',
        ]
    if "display" in used:
        lines += [
            "",
            "try:  # display() in a cell: outside a notebook IPython's prints the object",
            "    from IPython.display import display",
            "except ImportError:",
            "    display = print",
        ]
    if "show" in needs:
        lines += [
            "",
            "",
            "def _show(value):",
            '    """A cell\'s last expression, which the notebook shows as Out[PE k]."""',
            "    if value is not None:",
            "        try:",
            "            from IPython.lib.pretty import pretty",
            "        except ImportError:",
            "            pretty = repr",
            "        print(pretty(value))",
            "",
        ]
    lines += [
        "",
        "me = shmem.my_pe()",
        "npes = shmem.n_pes()",
        "_declared = {}  # the declared symmetric arrays: name -> array, freed at the end",
    ]
    return lines


def program(records: Sequence[CellRecord], left_out: list[tuple[str, str]], job: Job, name: str) -> str:
    """The program's text for the cell records ``records``."""
    needs: set[str]
    body: list[str]
    stored: set[str]
    prev: CellRecord | None
    needs, used = set(), names_used(plain_cell(r.code) for r in records)
    bound = set(BOUND) - ({"collectives"} - used)
    body, stored, prev = [], set(), None
    for record in records:
        body += _cell_block(record, prev, stored, bound, needs)
        prev = record
    ending = [
        "",
        "",
        "# ---- end: every PE waits for the others, then the declared arrays are freed (collective) " + "-" * 6,
        "shmem.barrier_all()",
        "for _name in reversed(list(_declared)):",
        "    shmem.free(_declared[_name])",
        "",
    ]
    return "\n".join(_preamble(name, records, left_out, job, needs, used) + body + ending)
