"""``barrier_all`` and ``sync_all`` noted on the wait board in C (shared: the client builds, PEs load).

A PE notes on the wait board when it enters and leaves a call that waits for other PEs
(:mod:`shmem_notebook.engine.shims.board`). Around ``barrier_all`` a Python wrapper (a frame, a
clock read, two stores) made the call 1.5x slower at 2 PEs (0.89 against 0.59 us, in one job).
Here the bookkeeping is C: shmem4py's own ``barrier_all`` runs with a ``lib`` whose
``shmem_barrier_all`` is :data:`SOURCE`'s, which notes and calls the library's (1.04x), and a
stack dump still shows shmem4py's ``barrier_all`` frame, which tells the client where a PE waits.

:func:`build` compiles it once per user, source and Python, with cffi and the C compiler
shmem4py's own build needed, into the user's cache (:mod:`.native_cache`), before ``oshrun``
starts; :func:`load` imports it on a PE. Where it cannot be built or loaded (no compiler, a
read-only home, ``SHMEM_NOTEBOOK_NATIVE=0``) the PEs keep the Python wrapper.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from .native_cache import CachedModule

if TYPE_CHECKING:
    from types import ModuleType

__all__ = ["CDEF", "SOURCE", "build", "directory", "load"]

NAME = "_shmem_notebook_board"
CDEF = """
void noted_init(int64_t *slot, void (*barrier_all)(void), void (*sync_all)(void));
void noted_barrier_all(void);
void noted_sync_all(void);
"""
#: the board slot gets the monotonic clock in ns (as ``time.monotonic_ns``) on entry, 0 on return
SOURCE = r"""
#include <stdint.h>
#include <time.h>

static int64_t *slot;
static void (*barrier_all)(void), (*sync_all)(void);

static int64_t now(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (int64_t)t.tv_sec * 1000000000 + t.tv_nsec;
}

void noted_init(int64_t *s, void (*b)(void), void (*y)(void)) {
    slot = s, barrier_all = b, sync_all = y;
}

#define NOTED(call)                                                              \
    void noted_##call(void) {                                                    \
        int64_t *s = __atomic_load_n(&slot, __ATOMIC_RELAXED);                  \
        if (s) __atomic_store_n(s, now(), __ATOMIC_RELAXED);                     \
        call();                                                                  \
        if (s) __atomic_store_n(s, 0, __ATOMIC_RELAXED);                         \
    }
NOTED(barrier_all)
NOTED(sync_all)
"""


_MODULE = CachedModule(NAME, "board", f"{CDEF}{SOURCE}", __name__)


def directory() -> str:
    """Where this source's build for this Python lives (in the user's cache)."""
    return _MODULE.directory()


def build() -> str | None:
    """The path of the built module, compiled first if missing (in a process of its own, about 1 s
    once); None where it cannot be built. A stat when it is there."""
    return _MODULE.build()


def load() -> ModuleType | None:
    """The built module (``ffi``, ``lib``) on a PE, or None (not built, or switched off)."""
    return _MODULE.load()


def _compile() -> None:
    import cffi

    ffi = cffi.FFI()
    ffi.cdef(CDEF)
    ffi.set_source(NAME, SOURCE, extra_compile_args=["-O2"])
    _MODULE.compile_into(lambda scratch: ffi.compile(tmpdir=scratch))


if __name__ == "__main__":
    _compile()
