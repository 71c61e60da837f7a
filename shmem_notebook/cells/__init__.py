"""The cell path (client side): prepare -> dispatch -> stream -> collect -> report.

- :mod:`.path`: :func:`run_cell`, the pipeline ``job.run`` and ``%%pxshmem`` use.
- :mod:`.stages`: optional stages plugged into the path by name
  (``job.run(code, race=True)``), not flags threaded through it; each registers through
  :data:`shmem_notebook.stage_registry.DECLARED`, imported here.
- :mod:`.output`: per-PE streams merged into ``[PE 0-3] text`` lines, live.
- :mod:`.display`: the PEs' rich output (display(), figures) shown labelled by PE.
- :mod:`.result`: :class:`CellResult`, what one cell did on every PE.
- :mod:`.race_stage`: the ``race`` stage (``job.run(code, race=True)``, ``%%pxshmem --race``).
- the ``trace`` stage (``job.run(code, trace=True)``) is its own folder, :mod:`shmem_notebook.trace`.
- :mod:`.stress_stage`: the ``stress`` stage (``--stress [SEED]``): reruns with seeded delays.
"""

import importlib

from ..stage_registry import DECLARED
from .path import Cell, run_cell
from .result import CellResult
from .stages import STAGES, Stage, register

for _declared in DECLARED.values():  # each stage's client module registers its Stage
    importlib.import_module(_declared.client)

__all__ = ["Cell", "CellResult", "run_cell", "Stage", "STAGES", "register"]
