"""The ``stress`` stage: ``%%pxshmem --race --stress [SEED]`` / ``job.run(code, race=True, stress=SEED)``.

After the cell, it reruns it a few times with seeded random delays before and
after every shmem call (:mod:`shmem_notebook.engine.record.stress`), each
run starting from the declared arrays as they were before the cell, so a race
can be *seen* as differing results. The report says which seed produced which
output and array values; the same seed gives the same delays.
"""

import io
import random

from ..errors import ShmemNotebookError
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

    def before(self, cell):
        self.seed = self.option if isinstance(self.option, int) and not isinstance(self.option, bool) else random.randrange(1000)
        cell.job._call("stress_save")
        self.runs = []

    def after(self, cell, result):
        job = cell.job
        if result.outcome not in ("ok", "error"):
            return
        for run in range(RUNS):
            seed = self.seed + run
            job._call("stress_restore")
            job._call("stress_start", seed, MAX_DELAY)
            out = io.StringIO()
            try:
                job.run(cell.code, stdout=out, stderr=out, timeout=cell.timeout)
                outcome = "ok"
            except ShmemNotebookError as exc:
                outcome = str(exc).splitlines()[0]
            finally:
                if job.state == "running":
                    job._call("stress_stop")
            values = job._call("declared_values") if job.state == "running" else []
            self.runs.append((seed, outcome, out.getvalue(), values))
            if job.state != "running":
                break
        job.last_result = result

    def report(self, cell, result, write):
        if not self.runs:
            return
        write(f"stress: {len(self.runs)} reruns with random delays (up to {MAX_DELAY * 1e3:.0f} ms) around every shmem call:\n")
        seen = set()
        for seed, outcome, output, values in self.runs:
            arrays = "; ".join(
                f"{name} " + ", ".join(f"PE {pe_ranges(pes)}: {text}" for text, pes in fold({pe: str(v[name]) for pe, v in enumerate(values)}).items())
                for name in (values[0] if values else {})
            )
            lines = [line for line in output.splitlines() if line.strip()]
            text = " | ".join(lines[:4]) + (" | ..." if len(lines) > 4 else "")
            write(f"  seed {seed}: {text or '(no output)'}" + (f"; {arrays}" if arrays else "") + ("" if outcome == "ok" else f"; {outcome}") + "\n")
            seen.add((outcome, output, repr(values)))
        if len(seen) > 1:
            write("  the seeds gave different results: the race is real, not just possible\n")
        else:
            write("  every seed gave the same result (a race above is still a race: it may need other timings to show)\n")
