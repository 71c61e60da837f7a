"""The PE's recording state shared by the layer's parts: the engine's shell (set once by
:func:`shmem_notebook.engine.runtime.bind`) and the cell files being recorded."""

__all__ = ["shell", "cell_files", "outside"]

#: the engine's IPython shell: its namespace names memory, its ast_transformers rewrite cells
shell = None

#: code file names of the cell being recorded (filled as the cell runs; see layer.cell_line)
cell_files = set()

#: code file name -> place * RACE_LINES of code outside the cell that runs rewritten, while a race
#: recording runs (see .outside)
outside = {}
