"""The MPI under this PE's OpenSHMEM library, when it is built over one (OSHMPI), as it names itself.

Read with ``MPI_Get_library_version`` from the MPI library this process has loaded (found in
``/proc/self/maps``; callable before and after ``MPI_Init``), so it is the MPI the PEs really run on,
not the one a site meant: ``"Open MPI v4.1.4"``, ``"MPICH 4.0.2"``.
"""

from __future__ import annotations

import ctypes
import re

__all__ = ["mpi_version"]

_LIBMPI = re.compile(r"\s(/\S*/libmpi(?:ch)?\.so[.\d]*)$")
MAX_LIBRARY_VERSION_STRING = 8192  # above every MPI's MPI_MAX_LIBRARY_VERSION_STRING


def loaded_libmpi(maps: str = "/proc/self/maps") -> str | None:
    """The path of the MPI library this process has loaded, or None."""
    try:
        with open(maps) as fh:
            for line in fh:
                found = _LIBMPI.search(line.rstrip("\n"))
                if found:
                    return found.group(1)
    except OSError:
        pass
    return None


def short_name(text: str) -> str:
    """``MPI_Get_library_version``'s text in a few words: ``"Open MPI v4.1.4, package: ..."`` ->
    ``"Open MPI v4.1.4"``, ``"MPICH Version:\\t4.0.2\\nMPICH Release date: ..."`` -> ``"MPICH 4.0.2"``."""
    first = text.strip().splitlines()[0] if text.strip() else ""
    mpich = re.match(r"(\w[\w ]*?) Version:\s*(\S+)", first)
    if mpich:
        return f"{mpich.group(1)} {mpich.group(2)}"
    return first.split(",")[0].strip()


def mpi_version() -> str | None:
    """The loaded MPI's name and version (``"Open MPI v4.1.4"``), or None when no MPI is loaded."""
    path = loaded_libmpi()
    if path is None:
        return None
    try:
        get = ctypes.CDLL(path).MPI_Get_library_version
    except (OSError, AttributeError):
        return None
    buf, length = ctypes.create_string_buffer(MAX_LIBRARY_VERSION_STRING), ctypes.c_int(0)
    if get(buf, ctypes.byref(length)) != 0:
        return None
    return short_name(buf.value.decode(errors="replace")) or None
