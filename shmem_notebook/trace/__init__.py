"""The ``trace`` stage, both sides in one folder: ``%%pxshmem --trace`` / ``job.run(code, trace=True)``.

Registered in :mod:`shmem_notebook.stage_registry` (one line); importing this package imports nothing.

- :mod:`.recording` (PE side): the recording of one cell's calls and heap states on a PE, and the
  ``trace_start`` / ``trace_stop`` requests that bracket the cell (its ``HANDLERS``).
- :mod:`.stage` (client): the :class:`~shmem_notebook.cells.stages.Stage` (its flag, its requests,
  ``result.trace``, the cell's report) and its ``%shmem trace`` subcommand.
- :mod:`.cell_trace`: :class:`~.cell_trace.Trace`, what a traced cell recorded on every PE, with
  :mod:`.ends` (where each PE's part ends) and :mod:`.spool` (the part a PE blocked for good spooled).
- :mod:`.timeline` (the lanes), :mod:`.waits` (where each PE waited), :mod:`.drawing` (their figures).
- :mod:`.save`, :mod:`.perfetto`, :mod:`.otf2`: the trace written for Perfetto or OTF2 tools.

The replay widget over a trace is the inspector's (:func:`shmem_notebook.replay`).
"""
