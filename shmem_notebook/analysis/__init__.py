"""Client-side reasoning over what the PEs and ``oshrun`` sent back.

- :mod:`.postmortem`: why PEs died (``oshrun``'s output) and where hung PEs are
  (their stack dumps), as cell lines.
- :mod:`.happens_before`: put/get races by happens-before over the PEs' traces
  (:class:`~.happens_before.Race`, :class:`~.happens_before.Access`); :mod:`.hints`: the fix each report proposes, in
  prose and as an edit of the cell;
  :mod:`.carry`: what a cell leaves in flight for the next; :mod:`.partial`: what a capped trace
  lets it check.
- :mod:`.trace`: the ``--trace`` model (events, heap per epoch, replay frames).

Pure analysis: no processes, no OpenSHMEM; everything here is testable alone.
"""
