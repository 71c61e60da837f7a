"""The OpenSHMEM 1.5 routines this library lacks, as stubs (PE side). Being moved to
:mod:`.shims`; the recording that lived here is :mod:`.record`."""

from ..errors import ShmemNotebookError

__all__ = ["start", "stop", "active", "UnsupportedError", "install_unsupported", "UNSUPPORTED"]


class UnsupportedError(ShmemNotebookError, NotImplementedError):
    """The cell used an OpenSHMEM feature the library on the PEs does not implement."""


#: shmem4py functions this OpenSHMEM (Open MPI 4.1.4's OSHMEM, OpenSHMEM 1.4) lacks -> what to use
UNSUPPORTED = {
    **{
        f"atomic_{name}_nbi": f"shmem.atomic_{name}"
        for name in ("fetch", "swap", "compare_swap", "fetch_inc", "fetch_add", "fetch_and", "fetch_or", "fetch_xor")
    },
    "atomic_fetch_op_nbi": "shmem.atomic_fetch_op",
    "put_signal": "shmem.put + shmem.fence() + shmem.atomic_set on a flag",
    "put_signal_nbi": "shmem.put_nbi + shmem.fence() + shmem.atomic_set on a flag",
    "signal_wait_until": "shmem.wait_until on a flag array",
    "signal_fetch": "shmem.atomic_fetch on a flag array",
}


def _unsupported(name, instead):
    def refuse(*args, **kwargs):
        raise UnsupportedError(
            f"shmem.{name} is not supported by this OpenSHMEM (Open MPI's OSHMEM implements "
            f"OpenSHMEM 1.4, which has no non-blocking atomics and no put-with-signal); use {instead} instead"
        )

    refuse.__name__ = name
    return refuse


def install_unsupported(module):
    """Make the functions of :data:`UNSUPPORTED` raise :class:`UnsupportedError` (once, at PE start)."""
    for name, instead in UNSUPPORTED.items():
        if hasattr(module, name):
            setattr(module, name, _unsupported(name, instead))
