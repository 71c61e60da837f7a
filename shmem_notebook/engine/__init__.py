"""Everything that runs on a PE, under ``oshrun``; the only package that imports shmem4py.

Importing :mod:`shmem4py` calls ``shmem_init()``, so the client never imports
this package (a test enforces it). Modules:

- :mod:`.runtime`: the PE's process: ``shmem_init``, the ipyparallel engine
  whose id is the PE number, the namespace bound before every cell.
- :mod:`.context`: this PE's state in one object (:data:`~.context.this_pe`: the engine's shell,
  the teams' reserved words and slots, the collectives' scratch), which the others share.
- :mod:`.heap`: the declared symmetric arrays and the heap's use.
- :mod:`.requests`: the operations the client may ask of a PE
  (named in :class:`shmem_notebook.protocol.Op`; see :func:`shmem_notebook.protocol.answer`).
- :mod:`.heap_summary`: the inspector's per-PE summary.
- :mod:`.shims`: every adaptation of shmem4py to the library, in one ordered
  table (NumPy 2, routines the library lacks, bug guards, teams, diagnostics).
- :mod:`.teams`, :mod:`.collectives`: teams (native or emulated), the teaching collectives.
- :mod:`.forkserver`, :mod:`.fork_stub`: PEs forked from one process that imported the engine once.
- :mod:`.record`: one layer over every shmem4py call and the cell's loads/stores,
  with consumers (race recording, trace for replay, stress delays).

From the engine, only the plain shared definitions of the package are
imported (``errors``, ``specs``, ``folding``, ``protocol``, ``arguments``, ``rc``,
``lazy_imports``, ``operations``).
"""

#: what the engine imports before it answers its first request, none of it ours or shmem4py
#: (a thread importing a module the main thread imports in turn could deadlock)
PRELOAD = (
    "ipyparallel.engine.app",
    "ipyparallel.engine.kernel",
    "ipyparallel.controller.dependency",
    "ipykernel.ipkernel",
    "ipykernel.zmqshell",
    "ipykernel.debugger",
    "IPython.core.oinspect",
    "IPython.core.completerlib",
    "IPython.extensions.storemagic",
    "jupyter_client.blocking",
    "sqlite3",
)
