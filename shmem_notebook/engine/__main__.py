"""``python -m shmem_notebook.engine <ipengine args>``: what ``oshrun`` starts on each PE.

``shmem_init`` (importing :mod:`.runtime`) mostly waits for the other PEs and oshrun, with the GIL
released: the engine's own imports (:data:`PRELOAD`, most of a PE's CPU before it registers) run
meanwhile in a thread (``bench/profile_start.py`` measures both). A spare PE (a job started with
``spare=True``: :mod:`shmem_notebook.job.spare`) imports them first, then waits, using no CPU,
until a restart takes it (:func:`.spare_wait.wait`); only then does it call ``shmem_init``.
"""

import os

from .. import lazy_imports
from ..protocol import SPARE_ENV
from . import PRELOAD

lazy_imports.install()
lazy_imports.hold_back("debugpy")  # until runtime.bind()
preloading = lazy_imports.preload(PRELOAD)
if os.environ.get(SPARE_ENV):
    from .spare_wait import wait

    preloading.join()
    wait(os.environ[SPARE_ENV])  # exits unless a restart takes this PE

from .runtime import main  # noqa: E402  (shmem_init, while the thread imports)

preloading.join()
main()
