"""What the client reads when a PE is stuck or exits (PE side).

SIGUSR1 dumps every thread's stack to a file the client reads (it works while the
PE is blocked in a shmem call), so does a fatal signal (the client names the cell's line a PE died at),
and a thread tells which call and with what
(:mod:`.blocked_call`); ``shmem.global_exit`` leaves a note in oshrun's
output and a file, so the client can say which PE ended the job and with what status.
"""

from __future__ import annotations

import faulthandler
import os
import signal
from typing import TYPE_CHECKING, Any

from ...protocol import GLOBAL_EXIT_MARK, crash_path, exit_path, stack_path
from . import blocked_call
from .patches import Patches

__all__ = ["install"]

if TYPE_CHECKING:
    from collections.abc import Callable


def install(shmem: Any) -> Callable[[], None]:
    """Register the stack dump and note ``shmem.global_exit``; return the undo."""
    where = (os.environ.get("IPP_PROFILE_DIR", "/tmp"), os.environ.get("IPP_CLUSTER_ID", ""), shmem.my_pe())
    path = stack_path(*where)
    os.makedirs(os.path.dirname(path), exist_ok=True)
    stack_file = open(path, "a")  # append: the client truncates it before each dump
    faulthandler.register(signal.SIGUSR1, file=stack_file, all_threads=True)
    crash_file = open(crash_path(*where), "w")  # this PE's own: empty unless it dies of a signal
    faulthandler.enable(file=crash_file, all_threads=True)  # then the library's own handler runs, as before
    told = blocked_call.install(shmem, *where[:2]) if os.environ.get("IPP_CLUSTER_ID") else lambda: None
    global_exit = shmem.global_exit

    def noted_global_exit(status: int = 0) -> None:
        with open(exit_path(*where), "w") as f:
            f.write(f"{int(status)}\n")
        os.write(2, (GLOBAL_EXIT_MARK.format(pe=shmem.my_pe(), status=status) + "\n").encode())
        global_exit(status)

    noted_global_exit.__doc__ = global_exit.__doc__
    patches = Patches()
    patches.set(shmem, "global_exit", noted_global_exit)

    def undo() -> None:
        patches.undo()
        told()
        faulthandler.unregister(signal.SIGUSR1)
        faulthandler.disable()
        stack_file.close()
        crash_file.close()

    return undo
