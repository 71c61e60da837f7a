"""Signal words made by ``shmem.new_signal`` kept findable (PE side).

shmem4py's symmetric arrays are listed in ``shmem._heap``, its signal words nowhere. The race
recording reads the value every small symmetric word held when a cell began (a wait the old value
already satisfies orders nothing), so the signals are noted here as they are made.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from ..context import this_pe
from .patches import Patches

__all__ = ["install", "live", "made"]

if TYPE_CHECKING:
    from collections.abc import Callable


def live(shmem: Any) -> list[tuple[int, object]]:
    """``[(address, cdata)]`` of the signal words alive now."""
    return list(this_pe.signals.items())


def made(address: int | None = None) -> int | None:
    """How many signals have been made so far; with ``address``: how many had been when the live
    signal there was made (None: no live signal there)."""
    if address is None:
        return len(this_pe.signals_made) and max(this_pe.signals_made.values())
    return this_pe.signals_made.get(address) if address in this_pe.signals else None


def install(shmem: Any) -> Callable[[], None]:
    """Wrap ``shmem.new_signal`` so that every signal it makes is noted. Returns the undo."""
    patches = Patches()
    make, delete = shmem.new_signal, shmem.del_signal
    serial = [0]

    def new_signal() -> Any:
        signal = make()
        address = int(shmem.ffi.cast("uintptr_t", signal))
        try:
            this_pe.signals[address] = signal
        except TypeError:  # a cdata without weak references: not findable, not kept alive
            return signal
        serial[0] += 1
        this_pe.signals_made[address] = serial[0]
        return signal

    def del_signal(signal: Any) -> Any:
        address = int(shmem.ffi.cast("uintptr_t", signal))
        this_pe.signals.pop(address, None)
        this_pe.signals_made.pop(address, None)
        return delete(signal)

    wrapper: Any
    for wrapper, original in ((new_signal, make), (del_signal, delete)):
        wrapper.__doc__, wrapper.__wrapped__ = original.__doc__, original
        patches.set(shmem, original.__name__, wrapper)
    return patches.undo
