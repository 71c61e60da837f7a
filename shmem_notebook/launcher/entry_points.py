"""ipyparallel's look-ups of its launchers' entry points, made once per process (client side).

Every ``ipp.Cluster`` loads its profile's config through an ``ipcluster`` application, which lists
the controller and engine launchers installed (``importlib.metadata.entry_points``, a scan of every
installed distribution: 40-90 ms a group on this machine), and writing the cluster file names both
launcher classes by a scan of their groups again: 0.2 s of the client's CPU at each job start (5
scans). :func:`cache` makes ipyparallel's modules share one scan per group for the life of the kernel;
a launcher installed meanwhile is found after a restart of the kernel.
"""

import functools
import importlib.metadata
from typing import Any

__all__ = ["cache"]


@functools.cache
def _entry_points(group: str) -> importlib.metadata.EntryPoints:
    return importlib.metadata.entry_points(group=group)


def entry_points(**selection: Any) -> "importlib.metadata.EntryPoints | importlib.metadata.SelectableGroups":
    """``importlib.metadata.entry_points(group=...)``, scanned once per group."""
    if set(selection) == {"group"}:
        return _entry_points(selection["group"])
    return importlib.metadata.entry_points(**selection)


def cache() -> None:
    """Make ipyparallel's launcher look-ups (its traitlets, launcher and ipcluster modules) use
    :func:`entry_points`."""
    from ipyparallel import traitlets
    from ipyparallel.cluster import app, launcher

    for module in (traitlets, launcher, app):
        module.entry_points = entry_points
