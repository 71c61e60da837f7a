"""Heap bookkeeping of a job: declared symmetric arrays and heap use (client side)."""

from __future__ import annotations

import mmap
import os
import socket
import sys
from collections.abc import Iterable, Mapping
from typing import TYPE_CHECKING, Any

import ipyparallel as ipp
import numpy as np

from ..errors import HeapFullError, InputError
from ..folding import pe_ranges
from ..launcher.shm import SHM_DIR, transfer_prefix
from ..rc import rc
from ..specs import SpecError, as_specs, format_size
from .members import JobMembers
from .site import heap_to_ask

if TYPE_CHECKING:
    import numpy.typing as npt

    from ..specs import ArraySpec
    from .remote import Place

__all__ = ["SymmetricArrays", "GATHER"]

#: the ways gather moves large arrays (:data:`rc.gather <shmem_notebook.rc>`)
GATHER = ("shm", "file", "pickle")


class _Large:
    """A PE's answer to gather for a large array: its dtype, shape and place in the PE's memory
    (see :mod:`.remote`; None when the PE will write it into the client's file instead)."""

    def __init__(self, dtype: npt.DTypeLike, shape: Iterable[int], place: Place | None = None) -> None:
        self.dtype, self.shape, self.place = np.dtype(dtype), tuple(shape), place


class SymmetricArrays:
    """The :class:`~shmem_notebook.Job` methods that allocate, free and gather arrays."""

    def alloc(self: JobMembers, *declarations: Any, **specs: Any) -> None:
        """Allocate symmetric arrays on every PE, zeroed. Collective.

        Declarations take every form of :func:`~shmem_notebook.specs.as_specs`:
        ``job.alloc("A=int64[8] B=float32[npes]")``, ``job.alloc(["A=int64[8]"])``,
        ``job.alloc({"A": "int64[8]"})``, ``job.alloc(flags="int32[npes]")``.
        A new spec for an existing name re-allocates it.
        """
        self._require_running("an allocation")
        self._alloc_on_pes(as_specs(*declarations, **specs))

    def _alloc_on_pes(self: JobMembers, specs: list[ArraySpec]) -> None:
        decls = [(s.name, s.dtype, s.shape(self.n)) for s in specs]  # SpecError names npes
        self._check_heap(specs)
        try:
            replies = self.ask("alloc", decls)
        except ipp.error.CompositeError as exc:
            raise HeapFullError(f"allocating {' '.join(map(str, specs))} failed on the PEs: {exc}") from None
        for s in specs:
            self.specs.pop(s.name, None)
            self.specs[s.name] = s
        self._after_heap_change(replies, "re-allocated")

    def _after_heap_change(self: JobMembers, replies: dict[int, Any], verb: str) -> None:
        """Record the heap use the PEs answered and say which names were retired (see engine/heap.py)."""
        self.record_usage({pe: r["usage"] for pe, r in replies.items()})
        retired: dict[tuple[str, str], list[int]] = {}  # (array, name) -> PEs
        for pe, r in replies.items():
            for array, names in r["retired"].items():
                for name in names:
                    retired.setdefault((array, name), []).append(pe)
        for (array, name), pes in retired.items():
            where = "" if len(pes) == self.n else f" on PE {pe_ranges(pes)}"
            sys.stderr.write(
                f"shmem_notebook: `{name}`{where} referred to the old {array}, which was {verb}; `{name}` is now "
                f"a read-only copy of the old values (writes to it raise), use `{array}` for the new one\n"
            )

    def record_usage(self: JobMembers, usage: Iterable[Any] | Mapping[int, Any]) -> None:
        """Record heap use answered by the PEs: a list in PE order (every PE) or ``{pe: (used, size)}``.

        The PEs' own count (:func:`shmem_notebook.engine.heap.heap_usage`, every live
        shmem4py allocation) is the one source; ``self.pes`` only caches it.
        """
        if not isinstance(usage, dict):
            usage = dict(enumerate(usage))
        for pe, (used, size) in usage.items():
            self.pes.setdefault(pe, {}).update(heap_used=used, heap_size=size)
        if set(usage) >= set(range(self.n)):
            self._heap_stale = False

    def _refresh_usage(self: JobMembers, skip: Iterable[int] = (), timeout: float = 5.0) -> None:
        """After a cell (which may allocate with shmem4py directly), ask the PEs that can
        answer for their heap use. Not collective; PEs in ``skip`` (dead) or still busy
        keep their last figure."""
        if not self._heap_stale or self._client is None:
            return
        idle = [pe for pe in range(self.n) if pe not in skip and not self._unanswered(pe)]
        self.record_usage(self.ask("heap_usage", pes=idle, timeout=timeout, partial=True))

    def _check_heap(self: JobMembers, specs: list[ArraySpec]) -> None:
        if self._heap_stale:  # cells may have allocated with shmem4py directly
            self.record_usage(self.ask("heap_usage"))
        replaced = sum(self.specs[s.name].nbytes(self.n) for s in specs if s.name in self.specs)
        need = sum(s.nbytes(self.n) for s in specs) - replaced
        used = max(info.get("heap_used", 0) for info in self.pes.values())
        size = min(info.get("heap_size", self.heap_bytes) for info in self.pes.values())
        if used + need > size:
            raise HeapFullError(
                f"{' '.join(map(str, specs))} needs {format_size(need)} per PE but the symmetric heap has "
                f"{format_size(size - used)} free of {format_size(size)}; free arrays (`%shmem free NAME`) "
                f"{heap_to_ask(used + need, self.n, self.hostfile)}"
            )

    def _declared(self: JobMembers, name: str) -> None:
        if name not in self.specs:
            raise SpecError(f"no array named {name!r} is declared; declared: {', '.join(self.specs) or 'none'}")

    def free(self: JobMembers, name: str) -> None:
        """Free the declared array ``name`` on every PE. Collective."""
        self._require_running("free")
        self._declared(name)
        replies = self.ask("free", name)
        del self.specs[name]
        self._after_heap_change(replies, "freed")

    def gather(self: JobMembers, name: str) -> npt.NDArray[Any]:
        """Copy the symmetric array ``name`` from every PE: an ndarray of shape ``(npes, *shape)``.

        ``name`` is a declared array or any name cells bound to a symmetric array
        (``B = shmem.zeros(8)``). From PEs on this host, arrays of 1 MiB and more are
        copied straight from the PEs' memory, or come through one file in
        /dev/shm that the result maps (see :data:`rc.gather <shmem_notebook.rc>`;
        :attr:`last_gather` says which). Not collective.
        """
        self._require_running("gather")
        if rc.gather not in GATHER:
            raise InputError(f"rc.gather is {rc.gather!r}; use one of {', '.join(map(repr, GATHER))}")
        by_file = self._transfer_by_file()
        values = self._values("gather", name, by_file)
        shapes = {(v.dtype.name, v.shape) for v in values.values()}
        if len(shapes) > 1:
            where = "; ".join(f"PE {pe}: {v.dtype.name}{list(v.shape)}" for pe, v in values.items())
            raise InputError(
                f"{name!r} has a different dtype or shape on different PEs ({where}); "
                f"use `%shmem pull {name}` (job.pull({name!r})) to get each PE's value"
            )
        first = values[0]
        if isinstance(first, _Large) and rc.gather == "shm":
            stacked = self._pe_procs.heaps.read([values[pe].place for pe in range(self.n)], first.dtype, first.shape)
            if stacked is not None:
                self.last_gather = "memory"
                return stacked
        if isinstance(first, _Large):
            stacked = self._gather_by_file(name, first.dtype, first.shape)
            if stacked is not None:
                self.last_gather = "file"
                return stacked
            values = self._values("gather", name)  # no room in /dev/shm: by message
        self.last_gather = "message"
        return np.stack([values[pe] for pe in range(self.n)])

    def _gather_by_file(
        self: JobMembers, name: str, dtype: np.dtype[Any], shape: tuple[int, ...]
    ) -> npt.NDArray[Any] | None:
        """The PEs write ``name`` into one file in /dev/shm, each at its offset; the result maps
        that file (unlinked at once): the PEs' write is the only copy. None if /dev/shm lacks room."""
        nbytes = int(np.prod(shape, dtype=np.int64)) * dtype.itemsize
        fs = os.statvfs(SHM_DIR)
        if fs.f_bavail * fs.f_frsize < 2 * self.n * nbytes:
            return None
        self._gathers += 1
        path = transfer_prefix(self._token) + f"gather{self._gathers}"
        fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_EXCL, 0o600)
        try:
            os.ftruncate(fd, self.n * nbytes)
            self.ask("gather_into", name, path)
            pages = mmap.mmap(fd, self.n * nbytes, flags=mmap.MAP_SHARED | getattr(mmap, "MAP_POPULATE", 0))
        finally:
            os.close(fd)
            os.unlink(path)
        return np.frombuffer(pages, dtype).reshape(self.n, *shape)

    def _transfer_by_file(self: JobMembers) -> bool:
        """Whether gather may hand arrays over in shared memory: every PE on this host, rc.gather
        'shm' or 'file'."""
        here = socket.gethostname()
        return (
            rc.gather in ("shm", "file")
            and os.path.isdir(SHM_DIR)
            and all(info.get("host") == here for info in self.pes.values())
        )

    def pull(self: JobMembers, name: str, stack: bool | None = None) -> npt.NDArray[Any] | dict[int, Any]:
        """The value bound to ``name`` on every PE. Not collective.

        Returns ``{pe: value}``, or with ``stack=None`` (default) one ndarray of
        shape ``(npes, ...)`` when every PE holds an array or number of the
        same shape; ``stack=True`` insists on that, ``stack=False`` always gives the dict.
        """
        self._require_running("pull")
        values = self._values("pull", name)
        stackable = (
            all(isinstance(v, (np.ndarray, np.generic, int, float, complex)) for v in values.values())
            and len({np.shape(v) for v in values.values()}) == 1
        )
        if stack and not stackable:
            raise InputError(
                f"{name!r} cannot be stacked: the PEs hold values that are not arrays or numbers of one shape; "
                f"use job.pull({name!r}) to get {{pe: value}}"
            )
        if stackable and stack is not False:
            return np.stack([np.asarray(values[pe]) for pe in range(self.n)])
        return values

    def _values(self: JobMembers, op: str, name: str, *args: Any) -> dict[int, Any]:
        """``{pe: value}`` of the ``gather``/``pull`` request for ``name``, or one clear error."""
        if not isinstance(name, str) or not name.isidentifier():
            raise InputError(f"{op} takes a variable name, got {name!r}")
        problems: dict[tuple[str, Any], list[int]]
        values: dict[int, Any]
        problems, values = {}, {}
        for pe, (status, value) in self.ask(op, name, *args).items():
            if status == "ok":
                values[pe] = value
            elif status == "large":
                values[pe] = _Large(*value)
            else:
                problems.setdefault((status, value), []).append(pe)
        if not problems:
            return values
        (status, detail), pes = next(iter(problems.items()))
        where = "any PE" if len(pes) == self.n else f"PE {pe_ranges(pes)}"
        if status == "missing":
            hint = (
                f"declared arrays: {', '.join(self.specs) or 'none'}; names exist once a cell assigned them"
                if op == "gather"
                else "names exist once a cell assigned them"
            )
            raise InputError(f"no variable named {name!r} on {where}; {hint}")
        if status == "not symmetric":
            raise InputError(
                f"{name!r} on {where} is a {detail}, not a symmetric array; `%shmem pull {name}` "
                f"(job.pull({name!r})) brings back any value"
            )
        raise InputError(
            f"{name!r} on {where} cannot be sent to the notebook ({detail}); "
            f"bind what you need to a name as an array, list or number and pull that"
        )

    def arrays(self: JobMembers) -> list[dict[str, Any]]:
        """Declared arrays: one dict per array with name, dtype, shape, bytes."""
        return [
            {"name": s.name, "dtype": s.dtype, "shape": s.shape(self.n), "bytes": s.nbytes(self.n)}
            for s in self.specs.values()
        ]
