"""Matplotlib figures as PNG: the one place a figure becomes bytes (:func:`figure_png`) and is shown
under the running cell (:func:`show_png`). Used by the race pictures, the trace charts and the
inspector's widgets; matplotlib itself is imported by their drawing modules, on first use.
"""

from __future__ import annotations

import base64
import io
from typing import Any

__all__ = ["figure_png", "show_png"]


def figure_png(fig: Any, dpi: float | None = None) -> bytes:
    """PNG bytes of a matplotlib Figure, at ``dpi`` (the figure's own by default)."""
    out = io.BytesIO()
    fig.savefig(out, format="png", dpi=dpi or fig.dpi)
    return out.getvalue()


def show_png(fig: Any, text: str | None = None, dpi: float | None = None) -> bool:
    """Display ``fig`` as a PNG under the running cell (whatever matplotlib backend is set), with
    ``text`` as its plain-text form; whether it was shown (False outside IPython)."""
    try:
        from IPython import get_ipython
        from IPython.display import display
    except ImportError:
        return False
    if get_ipython() is None:
        return False
    bundle = {"image/png": base64.b64encode(figure_png(fig, dpi)).decode("ascii")}
    display(  # type: ignore[no-untyped-call]  # IPython: untyped
        {**bundle, "text/plain": text or "<matplotlib figure>"},
        raw=True,
    )
    return True
