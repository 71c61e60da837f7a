"""Client-side reasoning over what the PEs and ``oshrun`` sent back.

- :mod:`.postmortem`: why PEs died (``oshrun``'s output) and where hung PEs are
  (their stack dumps), as cell lines.

Pure analysis: no processes, no OpenSHMEM; everything here is testable alone.
"""
