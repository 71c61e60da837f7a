"""``python -X importtime`` output to numbers: each import's own and cumulative time, the time spent
in each package's modules, and a Markdown table of those per package, medians over PEs, side by side.

An import's *self* time excludes the imports it made, so the self times of a process add up to all
its import time (``shmem_init`` runs in the body of ``shmem4py.shmem``: it is that module's self time).
Valid only when one thread imports at a time: the interpreter keeps one nesting level for all threads.
"""

import re
import statistics
import sys
from typing import NamedTuple

__all__ = ["Import", "parse", "cumulative", "by_package", "ROWS", "row_of", "table"]

_LINE = re.compile(r"^import time:\s+(-?\d+) \|\s+(-?\d+) \| ( *)(\S+)\s*$")


class Import(NamedTuple):
    name: str
    self_us: int
    cumulative_us: int
    level: int  # 0: imported by no import being timed


def parse(text):
    """The imports of one process's ``-X importtime`` output, in its order (innermost first); other
    lines (the process's own output on the same stream) are skipped."""
    out = []
    for line in text.splitlines():
        m = _LINE.match(line)
        if m:
            out.append(Import(m.group(4), int(m.group(1)), int(m.group(2)), len(m.group(3)) // 2))
    return out


def cumulative(imports):
    """``{module: cumulative µs}`` (the first time each module was imported)."""
    out = {}
    for imp in imports:
        out.setdefault(imp.name, imp.cumulative_us)
    return out


#: table row -> top-level packages; a package in none: "other packages", or the standard library
ROWS = {
    "shmem4py (with shmem_init)": ("shmem4py", "cffi"),
    "NumPy": ("numpy",),
    "ipyparallel": ("ipyparallel",),
    "IPython": ("IPython",),
    "ipykernel": ("ipykernel",),
    "jupyter_client, jupyter_core": ("jupyter_client", "jupyter_core"),
    "zmq": ("zmq",),
    "tornado": ("tornado",),
    "traitlets": ("traitlets",),
    "shmem_notebook": ("shmem_notebook",),
}
OTHER, STDLIB, START = "other packages", "standard library", "Python's start (up to site)"
_ROW = {pkg: row for row, pkgs in ROWS.items() for pkg in pkgs}


def row_of(module):
    """The table row a module's own time counts in."""
    top = module.split(".", 1)[0]
    if top in _ROW:
        return _ROW[top]
    if top in sys.stdlib_module_names or top.startswith("_") or top == "encodings":
        return STDLIB
    return OTHER


def by_package(imports):
    """``{row: self µs summed over its modules}`` with every row (0 if none), and ``"all imports"``.
    A standard library module counts for the package that imported it (its nearest importer outside
    the standard library), and what the interpreter imports before the program (``site`` and all
    before it) as START."""
    out = dict.fromkeys([START, *ROWS, OTHER, STDLIB], 0)
    for imp, row in zip(imports, _rows(imports)):
        out[row] += imp.self_us
    out["all imports"] = sum(imp.self_us for imp in imports)
    return out


def _rows(imports):
    """The row of each import: reversed, the output lists each import before the imports it made."""
    start = next((i for i, imp in enumerate(imports) if imp.name == "site" and imp.level == 0), -1)
    rows, above = [""] * len(imports), {}  # level -> the row of the latest import at that level
    for i in reversed(range(len(imports))):
        imp = imports[i]
        row = START if i <= start else row_of(imp.name)
        if row == STDLIB and imp.level > 0:
            row = above.get(imp.level - 1, STDLIB)
        rows[i] = above[imp.level] = row
    return rows


def _ms(us):
    return f"{us / 1000:.0f}" if us >= 1000 or us == 0 else f"{us / 1000:.1f}"


def table(columns):
    """A Markdown table: a row per package, a column per ``{title: [imports of one process, ...]}``,
    each cell the median over the processes of the milliseconds in that package's modules."""
    medians = {
        title: {row: statistics.median(v) for row, v in _per_row([by_package(p) for p in procs]).items()}
        for title, procs in columns.items()
    }
    rows = [START, *ROWS, OTHER, STDLIB, "all imports"]
    lines = [
        "| package (import time of its modules and of the standard library's it imports first, ms) | "
        + " | ".join(columns)
        + " |",
        "|---|" + "---:|" * len(columns),
    ]
    for row in rows:
        cells = " | ".join(_ms(medians[title][row]) for title in columns)
        lines.append(f"| {'**' + row + '**' if row == 'all imports' else row} | {cells} |")
    return "\n".join(lines) + "\n"


def _per_row(per_process):
    out = {}
    for d in per_process:
        for row, us in d.items():
            out.setdefault(row, []).append(us)
    return out
