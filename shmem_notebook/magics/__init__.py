from .shmem_magics import ShmemMagics  # noqa
