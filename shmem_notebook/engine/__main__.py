"""``python -m shmem_notebook.engine <ipengine args>``: what ``oshrun`` starts on each PE."""

from .runtime import main

main()
