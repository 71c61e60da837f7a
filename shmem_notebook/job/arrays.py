"""Heap bookkeeping of a job: declared symmetric arrays and heap use (client side)."""

import ipyparallel as ipp
import numpy as np

from ..errors import HeapFullError
from ..specs import SpecError, as_specs, format_size, parse_spec

__all__ = ["SymmetricArrays"]


class SymmetricArrays:
    """The :class:`~shmem_notebook.Job` methods that allocate, free and gather arrays."""

    def alloc(self, *declarations, **specs):
        """Allocate symmetric arrays on every PE, zeroed. Collective.

        ``job.alloc("A=int64[8]", flags="int32[npes]")``. A new spec for an
        existing name re-allocates it.
        """
        self._require_running("an allocation")
        parsed = as_specs(list(declarations) + [parse_spec(f"{k}={v}") for k, v in specs.items()])
        self._alloc_on_pes(parsed)

    def _alloc_on_pes(self, specs):
        try:
            decls = [(s.name, s.dtype, s.shape(self.n)) for s in specs]
        except SpecError as exc:
            raise SpecError(f"{exc} (npes={self.n})") from None
        self._check_heap(specs)
        try:
            usage = self._call("alloc", decls)
        except ipp.error.CompositeError as exc:
            raise HeapFullError(f"allocating {' '.join(map(str, specs))} failed on the PEs: {exc}") from None
        for s in specs:
            self.specs.pop(s.name, None)
            self.specs[s.name] = s
        self._record_usage(usage)

    def _record_usage(self, usage):
        for pe, (used, size) in enumerate(usage):
            self.pes.setdefault(pe, {}).update(heap_used=used, heap_size=size)
        self._heap_stale = False

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
        self._record_usage(self._call("free", name))
        del self.specs[name]

    def gather(self, name):
        """Copy array ``name`` from every PE: a NumPy array of shape ``(npes, *shape)``."""
        self._require_running("gather")
        self._declared(name)
        return np.stack(self._call("gather", name))

    def arrays(self):
        """Declared arrays: one dict per array with name, dtype, shape, bytes."""
        return [
            {"name": s.name, "dtype": s.dtype, "shape": s.shape(self.n), "bytes": s.nbytes(self.n)}
            for s in self.specs.values()
        ]
