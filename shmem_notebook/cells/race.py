"""The ``race`` stage: ``job.run(code, race=True)`` / ``%%pxshmem --race`` (client side).

Before the cell, every PE starts its race recording (:mod:`shmem_notebook.engine.record`);
after it, the PEs that finished send their traces back, and
:func:`shmem_notebook.analysis.races.find_races` sets ``result.races``. The
report prints one line per race and a summary. A cell that raised still
reports the races traced up to the error.
"""

import time

from ..analysis.races import find_races
from ..operations import CAP
from .stages import Stage, register

__all__ = ["RaceStage", "CAP"]



@register
class RaceStage(Stage):
    """Record every PE's shmem calls and loads/stores, then report the races between them."""

    name = "race"

    def before(self, cell):
        self.started = time.perf_counter()
        cell.job.ask("record_start", {"cap": CAP})
        self.overhead = time.perf_counter() - self.started

    def after(self, cell, result):
        started = time.perf_counter()
        job = cell.job
        self.traces, self.missing = {}, []
        finished = [pe for pe in range(job.n) if pe not in result.pending]
        if result.outcome != "died" and finished:  # a PE that cannot answer: report what the others sent
            answers = job.ask("record_stop", pes=finished, timeout=30, partial=True)
            self.traces = {pe: data for pe, data in answers.items() if data is not None}
        self.missing = [pe for pe in range(job.n) if pe not in self.traces]
        result.races = find_races(self.traces, job.n) if self.traces else []
        self.overhead += time.perf_counter() - started

    def report(self, cell, result, write):
        for race in result.races:
            write(f"{race}\n")
        for pe, data in sorted(self.traces.items()):
            if data.get("truncated") is not None:
                write(
                    f"race check: PE {pe}'s trace was capped at {data['cap']:,} events (line {data['truncated']}); "
                    f"accesses after it were not checked: trace fewer iterations\n"
                )
        ops = sum(data["ops"] for data in self.traces.values())
        count = len(result.races)
        found = f"{count} race{'s' if count != 1 else ''} found" if count else "no races found"
        missing = f"; PE {_ranges(self.missing)} sent no trace" if self.missing and self.traces else ""
        if not self.traces:
            write("race check: no PE could send its trace (the cell did not finish anywhere)\n")
            return
        write(f"{found} (cell traced: {ops:,} operation{'s' if ops != 1 else ''} on {len(self.traces)} PE{'s' if len(self.traces) != 1 else ''}, +{self.overhead:.2f} s{missing})\n")


def _ranges(pes):
    from ..folding import pe_ranges

    return pe_ranges(pes)
