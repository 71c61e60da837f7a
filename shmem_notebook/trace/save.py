"""Save a :class:`~shmem_notebook.trace.cell_trace.Trace` by the file's extension (client side):
``.json`` Chrome trace events for Perfetto (:mod:`.chrome_trace`), ``.otf2`` an OTF2 archive
(:mod:`.otf2_export`)."""

from __future__ import annotations

import os
from typing import TYPE_CHECKING

from ..errors import InputError

__all__ = ["save", "FORMATS"]

if TYPE_CHECKING:
    from .cell_trace import Trace

#: extension -> what it writes
FORMATS = {
    ".json": "Chrome trace-event JSON (open it in ui.perfetto.dev)",
    ".otf2": "an OTF2 archive (Vampir, Score-P tools)",
}


def save(trace: Trace, path: str | os.PathLike[str]) -> str:
    """Write ``trace`` to ``path`` (``.json`` or ``.otf2``); returns ``path``. For ``.otf2``, ``path``
    names the archive's anchor file: ``run.otf2`` writes ``run.otf2``, ``run.def`` and ``run/``."""
    path = os.fspath(path)
    extension = os.path.splitext(path)[1].lower()
    if extension == ".json":
        from .perfetto import write_json

        write_json(trace, path)
    elif extension == ".otf2":
        from .otf2 import write_otf2

        write_otf2(trace, path)
    else:
        known = "; ".join(f"{ext}: {what}" for ext, what in FORMATS.items())
        raise InputError(f"cannot save a trace as {os.path.basename(path)!r}: name it *.json or *.otf2 ({known})")
    return path
