"""The operations the client may ask of a PE, by name (PE side).

:func:`shmem_notebook.protocol.request` runs :func:`handle` on each PE; the
answer is plain data. Calls marked collective must reach every PE.
"""

from . import channel, heap, recorder, runtime, snapshot, trace

__all__ = ["HANDLERS", "handle"]

#: op name -> function; alloc and free are collective, the rest are local to the PE
#: (trace_start/trace_stop bracket a cell run with --trace)
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
    "record_start": recorder.start,
    "record_stop": recorder.stop,
    "trace_start": trace.start,
    "trace_stop": trace.stop,
    "stress_save": recorder.save_arrays,
    "stress_restore": recorder.restore_arrays,
    "declared_values": recorder.declared_values,
}


def handle(op, *args):
    """Answer the request ``op`` with plain data."""
    return HANDLERS[op](*args)
