"""The recording's hot path in C (:mod:`shmem_notebook.native_record`) on this PE: the module,
loaded at its first use and given what its functions read, or None where it is not built (PE side).

Imports nothing of the recording: the record package gives it the layer's and the hooks' parts
(:func:`give`) once they are imported."""

from ... import native_record

__all__ = ["give", "module"]

_given = []  # what the C functions read: see give()
_loaded = []  # [the module, or None] once loaded


def give(depth, cell_files, layer_globals, cell_line, python):
    """What the C functions read: the layer's depth list, the cell files, the layer's namespace and its
    own ``cell_line`` (the race runner replaces it there: then the C wrapper calls the runner's), and
    ``python``, the hooks that take the cases C leaves (``get_rest``, ``read``, ``set``,
    ``element_range``). The recording the hooks note into is given by ``hooks.install`` (``feed``)."""
    _given[:] = [depth, cell_files, layer_globals, cell_line, python]


def module():
    """The C module, set up at its first use; None where it is not built or is switched off."""
    if not _loaded:
        found = native_record.load() if _given else None
        if found is not None:
            found.setup(*_given)
        _loaded.append(found)
    return _loaded[0]
