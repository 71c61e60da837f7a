"""Heap bookkeeping of a job: declared symmetric arrays and heap use (client side)."""

import contextlib
import glob
import os
import socket
import sys

import ipyparallel as ipp
import numpy as np

from ..errors import HeapFullError, InputError
from ..folding import pe_ranges
from ..protocol import request
from ..rc import rc
from ..specs import SpecError, as_specs, format_size
from .shm import SHM_DIR, transfer_prefix

__all__ = ["SymmetricArrays"]


class _File:
    """An array a PE on this host wrote to a file in /dev/shm for :meth:`SymmetricArrays.gather`."""

    def __init__(self, pe, path, dtype, shape):
        self.pe, self.path, self.dtype, self.shape = pe, path, np.dtype(dtype), tuple(shape)

    def read_into(self, out):
        """Copy the file's bytes into the C-contiguous ndarray ``out`` (the only copy on this side)."""
        view = memoryview(out.reshape(-1).view(np.uint8))
        with open(self.path, "rb", buffering=0) as f:
            while view:
                n = f.readinto(view)
                if not n:
                    raise InputError(f"PE {self.pe}'s copy of the array ended early; gather again")
                view = view[n:]


class SymmetricArrays:
    """The :class:`~shmem_notebook.Job` methods that allocate, free and gather arrays."""

    def alloc(self, *declarations, **specs):
        """Allocate symmetric arrays on every PE, zeroed. Collective.

        Declarations take every form of :func:`~shmem_notebook.specs.as_specs`:
        ``job.alloc("A=int64[8] B=float32[npes]")``, ``job.alloc(["A=int64[8]"])``,
        ``job.alloc({"A": "int64[8]"})``, ``job.alloc(flags="int32[npes]")``.
        A new spec for an existing name re-allocates it.
        """
        self._require_running("an allocation")
        self._alloc_on_pes(as_specs(*declarations, **specs))

    def _alloc_on_pes(self, specs):
        decls = [(s.name, s.dtype, s.shape(self.n)) for s in specs]  # SpecError names npes
        self._check_heap(specs)
        try:
            replies = self._call("alloc", decls)
        except ipp.error.CompositeError as exc:
            raise HeapFullError(f"allocating {' '.join(map(str, specs))} failed on the PEs: {exc}") from None
        for s in specs:
            self.specs.pop(s.name, None)
            self.specs[s.name] = s
        self._after_heap_change(replies, "re-allocated")

    def _after_heap_change(self, replies, verb):
        """Record the heap use the PEs answered and say which names were retired (see engine/heap.py)."""
        self._record_usage([r["usage"] for r in replies])
        retired = {}  # (array, name) -> PEs
        for pe, r in enumerate(replies):
            for array, names in r["retired"].items():
                for name in names:
                    retired.setdefault((array, name), []).append(pe)
        for (array, name), pes in retired.items():
            where = "" if len(pes) == self.n else f" on PE {pe_ranges(pes)}"
            sys.stderr.write(
                f"shmem_notebook: `{name}`{where} referred to the old {array}, which was {verb}; `{name}` is now "
                f"a read-only copy of the old values (writes to it raise), use `{array}` for the new one\n"
            )

    def _record_usage(self, usage):
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

    def _refresh_usage(self, skip=(), timeout=5.0):
        """After a cell (which may allocate with shmem4py directly), ask the PEs that can
        answer for their heap use. Not collective; PEs in ``skip`` (dead) or still busy
        keep their last figure."""
        if not self._heap_stale or self._client is None:
            return
        ask = [pe for pe in range(self.n) if pe not in skip and not self._unanswered(pe)]
        if not ask:
            return
        ar = self._client[ask].apply_async(request, "heap_usage")
        try:
            self._record_usage(dict(zip(ask, ar.get(timeout))))
        except Exception:  # a PE that cannot answer now keeps its last figure
            with contextlib.suppress(Exception):
                self._client.abort(ar, targets=ask, block=False)

    def _check_heap(self, specs):
        if self._heap_stale:  # cells may have allocated with shmem4py directly
            self._record_usage(self._call("heap_usage"))
        replaced = sum(self.specs[s.name].nbytes(self.n) for s in specs if s.name in self.specs)
        need = sum(s.nbytes(self.n) for s in specs) - replaced
        used = max(info.get("heap_used", 0) for info in self.pes.values())
        size = min(info.get("heap_size", self.heap_bytes) for info in self.pes.values())
        if used + need > size:
            raise HeapFullError(
                f"{' '.join(map(str, specs))} needs {format_size(need)} per PE but the symmetric heap has "
                f"{format_size(size - used)} free of {format_size(size)}; free arrays (`%shmem free NAME`) "
                f"or start with a larger heap (`%shmem stop`, then `%shmem start -n {self.n} --heap 1G`)"
            )

    def _declared(self, name):
        if name not in self.specs:
            raise SpecError(f"no array named {name!r} is declared; declared: {', '.join(self.specs) or 'none'}")

    def free(self, name):
        """Free the declared array ``name`` on every PE. Collective."""
        self._require_running("free")
        self._declared(name)
        replies = self._call("free", name)
        del self.specs[name]
        self._after_heap_change(replies, "freed")

    def gather(self, name):
        """Copy the symmetric array ``name`` from every PE: an ndarray of shape ``(npes, *shape)``.

        ``name`` is a declared array or any name cells bound to a symmetric array
        (``B = shmem.zeros(8)``). Not collective.
        """
        self._require_running("gather")
        self._gathers += 1
        prefix = transfer_prefix(self._token) + f"gather{self._gathers}-" if self._transfer_by_file() else None
        try:
            values = self._values("gather", name, prefix)
            shapes = {(v.dtype.name, v.shape) for v in values.values()}
            if len(shapes) > 1:
                where = "; ".join(f"PE {pe}: {v.dtype.name}{list(v.shape)}" for pe, v in values.items())
                raise InputError(
                    f"{name!r} has a different dtype or shape on different PEs ({where}); "
                    f"use `%shmem pull {name}` (job.pull({name!r})) to get each PE's value"
                )
            first = values[0]
            stacked = np.empty((self.n, *first.shape), first.dtype)
            for pe, value in values.items():
                if isinstance(value, _File):
                    value.read_into(stacked[pe])
                else:
                    stacked[pe] = value
            self.last_gather = {"files": sum(isinstance(v, _File) for v in values.values()), "pes": self.n}
            return stacked
        finally:
            if prefix is not None:
                for path in glob.glob(glob.escape(prefix) + "*"):
                    with contextlib.suppress(FileNotFoundError):
                        os.unlink(path)

    def _transfer_by_file(self):
        """Whether gather may hand arrays over through /dev/shm: every PE on this host, rc.gather 'shm'."""
        here = socket.gethostname()
        return rc.gather == "shm" and os.path.isdir(SHM_DIR) and all(
            info.get("host") == here for info in self.pes.values()
        )

    def pull(self, name, stack=None):
        """The value bound to ``name`` on every PE. Not collective.

        Returns ``{pe: value}``, or with ``stack=None`` (default) one ndarray of
        shape ``(npes, ...)`` when every PE holds an array or number of the
        same shape; ``stack=True`` insists on that, ``stack=False`` always gives the dict.
        """
        self._require_running("pull")
        values = self._values("pull", name)
        stackable = all(isinstance(v, (np.ndarray, np.generic, int, float, complex)) for v in values.values()) and len(
            {np.shape(v) for v in values.values()}
        ) == 1
        if stack and not stackable:
            raise InputError(
                f"{name!r} cannot be stacked: the PEs hold values that are not arrays or numbers of one shape; "
                f"use job.pull({name!r}) to get {{pe: value}}"
            )
        if stackable and stack is not False:
            return np.stack([np.asarray(values[pe]) for pe in range(self.n)])
        return values

    def _values(self, op, name, *args):
        """``{pe: value}`` of the ``gather``/``pull`` request for ``name``, or one clear error."""
        if not isinstance(name, str) or not name.isidentifier():
            raise InputError(f"{op} takes a variable name, got {name!r}")
        problems, values = {}, {}
        for pe, (status, value) in enumerate(self._call(op, name, *args)):
            if status == "ok":
                values[pe] = value
            elif status == "file":
                values[pe] = _File(pe, *value)
            else:
                problems.setdefault((status, value), []).append(pe)
        if not problems:
            return values
        (status, detail), pes = next(iter(problems.items()))
        where = "any PE" if len(pes) == self.n else f"PE {pe_ranges(pes)}"
        if status == "missing":
            hint = (f"declared arrays: {', '.join(self.specs) or 'none'}; names exist once a cell assigned them"
                    if op == "gather" else "names exist once a cell assigned them")
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

    def arrays(self):
        """Declared arrays: one dict per array with name, dtype, shape, bytes."""
        return [
            {"name": s.name, "dtype": s.dtype, "shape": s.shape(self.n), "bytes": s.nbytes(self.n)}
            for s in self.specs.values()
        ]
