"""The ``stress`` stage: ``%%pxshmem --race --stress [SEED]`` / ``job.run(code, race=True, stress=SEED)``.

After the cell, it reruns it a few times with seeded random delays before and
after every shmem call (:mod:`shmem_notebook.engine.record.stress`), each
run starting from the declared arrays as they were before the cell, so a race
can be *seen* as differing results. A line per rerun shows as soon as it ended,
saying only what differs from the cell itself (printed lines, the elements of the
declared arrays with both values); the same seed gives the same delays.
"""

import io
import random
import time

import numpy as np

from ..errors import InputError, ShmemNotebookError
from ..folding import fold, pe_ranges
from .stages import Stage, register

__all__ = ["StressStage", "RUNS", "MAX_DELAY"]

#: reruns after the cell itself
RUNS = 4
#: longest delay before or after a shmem call, seconds
MAX_DELAY = 0.02


@register
class StressStage(Stage):
    """Rerun the cell with seeded random delays around shmem calls; report what each seed produced."""

    name = "stress"
    order = 90  # last: its reruns come after every other stage has collected the cell

    def __init__(self, option=True):
        if option is not True and (isinstance(option, bool) or not isinstance(option, int)):
            raise InputError(f"stress takes True or an integer seed, got {option!r}; e.g. job.run(code, race=True, stress=3)")
        super().__init__(option)

    def before(self, cell):
        self.seed = self.option if self.option is not True else random.randrange(1000)
        cell.job.ask("stress_save")
        self.runs = []

    def after(self, cell, result):
        job, write = cell.job, cell.write_out
        if result.outcome not in ("ok", "error"):
            return
        cell_state = (result.stdout, _values(job.ask("declared_values")), result.outcome)
        write(f"stress: rerunning the cell {RUNS} times (seeds {self.seed}-{self.seed + RUNS - 1}) with random delays "
              f"of up to {MAX_DELAY * 1e3:.0f} ms around every shmem call, each from the arrays as they were before it\n")
        for run in range(RUNS):
            seed, started = self.seed + run, time.monotonic()
            job.ask("stress_restore")
            job.ask("stress_start", seed, MAX_DELAY)
            out = io.StringIO()
            try:
                rerun = job.run(cell.code, stdout=out, stderr=out, timeout=cell.timeout)
                outcome = "ok"
            except ShmemNotebookError as exc:
                rerun, outcome = getattr(exc, "result", None), str(exc).splitlines()[0]
            finally:
                if job.state == "running":
                    job.ask("stress_stop")
            values = _values(job.ask("declared_values")) if job.state == "running" else {}
            stdout = rerun.stdout if rerun is not None else {}
            differences = _differences(cell_state, (stdout, values, outcome if outcome != "ok" else result.outcome))
            self.runs.append((seed, differences))
            what = "; ".join(differences) if differences else "same output and arrays as the cell"
            write(f"  seed {seed} ({time.monotonic() - started:.1f} s): {what}\n")
            if job.state != "running":
                break
        job.last_result = result

    def report(self, cell, result, write):
        if not self.runs:
            return
        differing = [seed for seed, differences in self.runs if differences]
        if differing:
            write(f"stress: seed{'s' if len(differing) > 1 else ''} {', '.join(map(str, differing))} gave different "
                  f"results from the cell: the race is real, not just possible\n")
        else:
            write("stress: every seed gave the cell's result (a race above is still a race: it may need other "
                  "timings to show)\n")


def _values(per_pe):
    """``[{name: ndarray}]`` in PE order from the PEs' ``declared_values`` answers (``{pe: values}``)."""
    return [{name: np.asarray(v) for name, v in values.items()} for _, values in sorted(per_pe.items())]


def _short(value):
    return f"{value:.6g}" if isinstance(value, float) else str(value)


def _where(array, index):
    return "[" + ", ".join(map(str, np.unravel_index(index, array.shape))) + "]"


def _differences(before, after):
    """What differs between two runs, as short phrases: the outcome, the first differing printed
    line of each PE (folded by PE), the differing elements of each array (a few, with values)."""
    (out0, values0, outcome0), (out1, values1, outcome1) = before, after
    found = [] if outcome0 == outcome1 else [f"the cell ended {outcome1!r} (the cell: {outcome0!r})"]
    lines = {}
    for pe in sorted(set(out0) | set(out1)):
        a, b = (out0.get(pe) or "").splitlines(), (out1.get(pe) or "").splitlines()
        first = next((i for i, (x, y) in enumerate(zip(a + [None] * len(b), b + [None] * len(a))) if x != y), None)
        if first is not None:
            here = b[first] if first < len(b) else "nothing"
            there = a[first] if first < len(a) else "nothing"
            lines[pe] = f"printed {here!r} (the cell: {there!r})"
    found += [f"PE {pe_ranges(pes)} {text}" for text, pes in fold(lines).items()]
    for pe, (v0, v1) in enumerate(zip(values0, values1)):
        for name in v0:
            a, b = v0[name], v1.get(name)
            if b is None or a.shape != b.shape:
                continue
            diff = np.flatnonzero(~((a == b) | ((a != a) & (b != b))))  # NaN equals NaN here
            if diff.size:
                shown = ", ".join(f"{name}{_where(a, i)} = {_short(b.flat[i].item())} (the cell: {_short(a.flat[i].item())})"
                                  for i in diff[:3])
                more = f" and {diff.size - 3} more of {a.size}" if diff.size > 3 else ""
                found.append(f"PE {pe}: {shown}{more}")
    return found
