"""The cell path (client side): prepare -> dispatch -> stream -> collect -> report.

- :mod:`.path`: :func:`run_cell`, the pipeline ``job.run`` and ``%%pxshmem`` use.
- :mod:`.stages`: optional stages plugged into the path by name
  (``job.run(code, race=True)``), not flags threaded through it.
- :mod:`.output`: per-PE streams merged into ``[PE 0-3] text`` lines, live.
- :mod:`.display`: the PEs' rich output (display(), figures) shown labelled by PE.
- :mod:`.result`: :class:`CellResult`, what one cell did on every PE.
- :mod:`.race_stage`: the ``race`` stage (``job.run(code, race=True)``, ``%%pxshmem --race``).
- :mod:`.trace_stage`: the ``trace`` stage (``job.run(code, trace=True)``).
- :mod:`.stress_stage`: the ``stress`` stage (``--stress [SEED]``): reruns with seeded delays.
"""

from . import race_stage, stress_stage, trace_stage  # noqa: F401  (register the "race", "stress" and "trace" stages)
from .path import Cell, run_cell
from .result import CellResult
from .stages import STAGES, Stage, register

__all__ = ["Cell", "CellResult", "run_cell", "Stage", "STAGES", "register"]
