"""The inspector: every PE's symmetric heap, array values and state at a glance.

``inspect(job)`` (``%shmem inspect``) displays an :class:`Inspector` widget;
:func:`gather_snapshot` gives the data alone as a :class:`Snapshot`. A traced cell's
:class:`~shmem_notebook.trace.cell_trace.Trace` gets its replay widget from :func:`replay`. Submodules:
``snapshot`` (gathering, the data structure), ``plots`` (matplotlib helpers), ``tables`` (HTML/text
tables), ``widget``, ``replay``.

This package imports lazily: PEs import :mod:`.snapshot` to run the gathering
function, and must not pull in matplotlib or ipywidgets for it.
"""

import importlib
from typing import Any

__all__ = [
    "inspect",
    "Inspector",
    "Snapshot",
    "gather_snapshot",
    "static_figure",
    "plot_heap",
    "plot_values",
    "plot_diff",
    "state_table",
    "replay",
]

_WHERE = {
    "Snapshot": "snapshot",
    "gather_snapshot": "snapshot",
    "Inspector": "widget",
    "inspect": "widget",
    "static_figure": "plots",
    "plot_heap": "plots",
    "plot_values": "plots",
    "plot_diff": "plots",
    "state_table": "tables",
    "replay": "replay",
}


def __getattr__(name: str) -> Any:
    if name in _WHERE:
        return getattr(importlib.import_module(f".{_WHERE[name]}", __name__), name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(__all__))
