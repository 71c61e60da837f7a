"""The PE's recording state shared by the layer's parts: the cell files being recorded and the
code outside the cell that runs rewritten. (The engine's shell is :data:`..context.this_pe`'s.)"""

__all__ = ["cell_files", "outside"]

#: code file names of the cell being recorded (filled as the cell runs; see layer.cell_line)
cell_files: set[str] = set()

#: code file name -> place * RACE_LINES of code outside the cell that runs rewritten, while a race
#: recording runs (see .outside)
outside: dict[str, int] = {}
