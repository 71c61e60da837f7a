"""Recording a cell on this PE: one layer over shmem4py, three consumers (PE side).

- :mod:`.layer`: wraps every call of :data:`shmem_notebook.operations.CALLS` once while
  a consumer is attached, decodes each call once and hands it to the consumers.
- :mod:`.accesses`: the race recording (events of :data:`~shmem_notebook.operations.EVENT_FIELDS`),
  fed also by :mod:`.hooks`, the loads and stores of the cell rewritten by :mod:`.instrument`.
- the ``--trace`` recording (calls and heap states per epoch) is the trace stage's, another consumer of the
  layer (:mod:`shmem_notebook.trace.recording`).
- :mod:`.perturb`: seeded delays around every call, and the arrays saved for reruns.
- :mod:`.memory`: where memory is and what the cell calls it; what the recordings keep between
  calls is this PE's (``this_pe.record``, :mod:`..context`).

The functions below answer the ``race`` and ``stress`` stages' requests (:data:`HANDLERS`, see
:mod:`shmem_notebook.stage_registry`). Consumers are independent: starting one never discards another, so a
cell may be race-checked, traced and stressed at once, in any order.
"""

from __future__ import annotations

import functools
import gc
from typing import Any, cast

from shmem4py import shmem

from ..context import this_pe
from . import callsites, hooks, in_c, layer, outside
from .accesses import RaceRecording
from .instrument import AccessTransformer, MarkTransformer, compile_kept
from .perturb import StressDelays, declared_values, restore_arrays, save_arrays

__all__ = [
    "CAP",
    "race_start",
    "race_stop",
    "stress_start",
    "stress_stop",
    "save_arrays",
    "restore_arrays",
    "declared_values",
    "active",
    "HANDLERS",
]

from ...operations import CAP  # one cap for every recording, shared with the client

# what the recording's C hot path reads, where it is built (loaded at its first use)
in_c.give(
    layer.depth,
    this_pe.record.cell_files,
    layer.line_of,
    layer.cell_line,
    {
        "get_rest": hooks.get_rest,
        "read": hooks.FUNCS["read"],
        "set": hooks.FUNCS["set"],
        "element_range": hooks.element_range,
    },
)


def active() -> list[str]:
    """Names of the consumers recording now (``"race"``, ``"trace"``, ``"stress"``)."""
    return [name for name in ("race", "trace", "stress") if layer.attached(name) is not None]


def _rewrite_with(transformer: MarkTransformer) -> None:
    """Have the shell rewrite the cells it runs with ``transformer`` until :func:`_rewrite_stop`. IPython's
    shell: after its own ``transform_ast`` (as its last AST transformer would be, without its
    ``fix_missing_locations`` walking again a rewrite kept from an earlier run), told each cell's text
    before it parses it (``pre_run_cell``); the race runner's shell: through its ``ast_transformers``."""
    shell = this_pe.shell
    events = getattr(shell, "events", None)
    if events is None:
        shell.ast_transformers.append(transformer)
        return
    compile_kept(shell.compile)  # a cell run again is neither rewritten nor compiled again
    own = shell.transform_ast
    transformer.installed = shell.transform_ast = lambda node: transformer.visit(own(node))
    events.register("pre_run_cell", transformer.expect)


def _rewrite_stop(transformer: MarkTransformer) -> None:
    shell = this_pe.shell
    if transformer in shell.ast_transformers:
        shell.ast_transformers.remove(transformer)
    if transformer.installed is not None and vars(shell).get("transform_ast") is transformer.installed:
        del shell.transform_ast  # IPython's own again
    transformer.installed = None
    events = getattr(shell, "events", None)
    if events is not None and transformer.expect in events.callbacks["pre_run_cell"]:
        events.unregister("pre_run_cell", transformer.expect)


#: the oldest generation's threshold while a cell is recorded: never reached
NO_FULL_COLLECTION = 1 << 30


@functools.cache
def _frozen_before() -> bool:
    """Whether objects were frozen before any recording (the fork server freezes what it imported).
    Asked once: counting them walks them all (5-12 ms a cell on a forked PE)."""
    return gc.get_freeze_count() > 0


def race_start(options: dict[str, Any] | None = None) -> bool:
    """Collective. Record the next cell for the race check: every call, and (``loads``, default True) the
    cell's loads and stores. ``options``: ``cap`` (default :data:`CAP`), ``loads``, ``private`` (per
    PE, ``[lo, hi]`` of private buffers earlier cells' operations in flight use), ``library_writes``
    (``shmem-race`` on a plain program: the library's writes that a shim repairs here but a plain
    ``oshrun`` meets, such as a late zeroing, are recorded, so they are reported as races)."""
    options = dict(options or {})
    race_stop()
    private, me = options.get("private") or [], shmem.my_pe()
    mine = private[me] if me < len(private) else ()
    recording = RaceRecording(int(options.get("cap") or CAP), mine, bool(options.get("library_writes")))
    # every PE has noted what its flags hold before any PE starts the cell (whose writes would
    # otherwise show in a slower PE's snapshot); the cell boundary is a sync_all in the analysis too
    layer.original("sync_all")()
    transformer = AccessTransformer() if options.get("loads", True) else MarkTransformer()
    recording.transformer = transformer
    _rewrite_with(transformer)
    hooks.install(recording)
    layer.attach("race", recording)
    # while the cell runs, the collector leaves alone the objects that exist now (the engine's, the
    # namespace's: frozen) and the oldest generation (its threshold is never reached): its collections,
    # set off by the events the recording keeps, were a quarter of a traced loop's time. Both end with
    # the recording. A PE the fork server forked has the server's objects frozen already; an unfreeze
    # would thaw those too, so there only the threshold holds
    recording.froze = not _frozen_before()
    if recording.froze:
        gc.freeze()
    recording.thresholds = gc.get_threshold()
    gc.set_threshold(*recording.thresholds[:2], NO_FULL_COLLECTION)
    return True


def race_stop() -> dict[str, Any] | None:
    """Stop the race recording; its plain data (see :mod:`.accesses`), or None if none ran."""
    recording = cast("RaceRecording | None", layer.detach("race"))
    if recording is None:
        return None
    hooks.uninstall()
    if recording.froze:
        gc.unfreeze()
    if gc.get_threshold()[2] == NO_FULL_COLLECTION:  # unless the cell set its own
        gc.set_threshold(*recording.thresholds)
    _rewrite_stop(recording.transformer)
    own_lines = callsites.place_calls(recording)
    data = recording.data()
    data["functions"] = callsites.functions(own_lines)  # own lines of accesses made in functions
    data["places"] = outside.places()  # lines outside the cell: what their places are
    data["compiled"] = sorted(getattr(recording, "compiled", ()))  # lines calling compiled code
    recording.memory.cache.clear()
    recording.release()
    return data


def stress_start(seed: int, max_delay: float) -> bool:
    """Delay every shmem call of the next cell at random, seeded by ``seed`` (see :mod:`.perturb`)."""
    layer.attach("stress", StressDelays(seed, max_delay))
    return True


def stress_stop() -> bool:
    """Stop delaying calls."""
    layer.detach("stress")
    return True


#: the race and stress stages' requests (their names: :mod:`shmem_notebook.stage_registry`) -> functions
HANDLERS = {
    "race_start": race_start,
    "race_stop": race_stop,
    "stress_start": stress_start,
    "stress_stop": stress_stop,
    "stress_save": save_arrays,
    "stress_restore": restore_arrays,
    "declared_values": declared_values,
}
