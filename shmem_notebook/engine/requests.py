"""The operations the client may ask of a PE, by name (PE side).

:func:`shmem_notebook.protocol.request` runs :func:`handle` on each PE; the
answer is plain data. Calls marked collective must reach every PE.
"""

from . import channel, heap, record, runtime, snapshot

__all__ = ["HANDLERS", "handle"]

#: op name -> function; alloc, free, join, released and record_start are collective, the rest are local to the PE
#: (record_*, trace_*, stress_* bracket a cell run with --race, --trace, --stress: engine/record)
HANDLERS = {
    "alloc": heap.alloc,
    "free": heap.free,
    "gather": heap.gather,
    "gather_into": heap.gather_into,
    "pull": heap.pull,
    "heap_usage": heap.heap_usage,
    "info": runtime.info,
    "cells_connect": channel.connect,
    "snapshot": snapshot.snapshot,
    "record_start": record.race_start,
    "record_stop": record.race_stop,
    "trace_start": record.trace_start,
    "trace_stop": record.trace_stop,
    "stress_start": record.stress_start,
    "stress_stop": record.stress_stop,
    "stress_save": record.save_arrays,
    "stress_restore": record.restore_arrays,
    "declared_values": record.declared_values,
    "join": runtime.join,
    "released": runtime.released,
}


def handle(op, *args):
    """Answer the request ``op`` with plain data."""
    return HANDLERS[op](*args)
