"""Everything that runs on a PE, under ``oshrun``; the only package that imports shmem4py.

Importing :mod:`shmem4py` calls ``shmem_init()``, so the client never imports
this package (a test enforces it). Modules:

- :mod:`.runtime`: the PE's process: ``shmem_init``, the ipyparallel engine
  whose id is the PE number, the namespace bound before every cell.
- :mod:`.heap`: the declared symmetric arrays and the heap's use.
- :mod:`.requests`: the operations the client may ask of a PE
  (see :func:`shmem_notebook.protocol.request`).
- :mod:`.snapshot`: the inspector's per-PE summary.
- :mod:`.pitfalls`: guards against this platform's OSHMEM bugs.
- :mod:`.recorder`: records one cell's shmem calls and loads/stores (race
  detector, tracer); :mod:`.instrument`: the AST rewriting it uses.

From the engine, only the plain shared definitions of the package are
imported (``errors``, ``specs``, ``folding``, ``protocol``, ``arguments``, ``rc``,
``lean``).
"""
