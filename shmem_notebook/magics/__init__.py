from .shmem_magics import ShmemMagics

__all__ = ["ShmemMagics"]
