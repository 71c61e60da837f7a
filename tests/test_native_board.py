"""barrier_all and sync_all's board bookkeeping in C (native_board.py): built once into the user's
cache, loaded by the PEs; the slot holds the monotonic clock while the call runs and 0 after;
released, it is never written again; switched off or unbuildable, nothing is loaded. No PEs here:
the library's function is a Python callback (tests/test_polite.py runs it on real PEs)."""

import mmap
import os
import time

import pytest

from shmem_notebook import native_board


@pytest.fixture
def cache(tmp_path, monkeypatch):
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
    monkeypatch.delenv("SHMEM_NOTEBOOK_NATIVE", raising=False)
    return tmp_path


def test_built_once_into_the_users_cache(cache):
    assert native_board.load() is None  # nothing built yet: the PEs keep the Python wrapper
    path = native_board.build()
    assert path and path.startswith(str(cache)) and os.path.dirname(path) == native_board.directory()
    made = os.stat(path).st_mtime_ns
    assert native_board.build() == path and os.stat(path).st_mtime_ns == made  # a stat, not a build
    assert [p.name for p in cache.rglob("*") if p.is_file()] == [os.path.basename(path)]  # no scratch left


def test_the_slot_holds_the_clock_while_the_call_runs(cache):
    native_board.build()
    module = native_board.load()
    ffi, lib = module.ffi, module.lib
    pages = mmap.mmap(-1, 64)
    slots = ffi.cast("int64_t *", ffi.from_buffer(pages))
    seen = []

    @ffi.callback("void(void)")
    def barrier_all():
        seen.append(("barrier_all", slots[3], time.monotonic_ns()))

    @ffi.callback("void(void)")
    def sync_all():
        seen.append(("sync_all", slots[3], time.monotonic_ns()))

    lib.noted_init(slots + 3, barrier_all, sync_all)
    before = time.monotonic_ns()
    lib.noted_barrier_all()
    lib.noted_sync_all()
    assert [name for name, _, _ in seen] == ["barrier_all", "sync_all"]
    assert all(before <= entered <= at for _, entered, at in seen), (before, seen)
    assert slots[3] == 0 and slots[2] == slots[4] == 0  # its own slot only, and 0 on return

    lib.noted_init(ffi.NULL, barrier_all, sync_all)  # released: calls still go through, unnoted
    seen.clear()
    lib.noted_barrier_all()
    assert [entered for _, entered, _ in seen] == [0]


def test_switched_off_nothing_is_built_or_loaded(cache, monkeypatch):
    native_board.build()
    monkeypatch.setenv("SHMEM_NOTEBOOK_NATIVE", "0")
    assert native_board.build() is None and native_board.load() is None


def test_a_cache_that_cannot_be_written_leaves_the_python_wrapper(cache, monkeypatch):
    blocked = cache / "file"
    blocked.write_text("")
    monkeypatch.setenv("XDG_CACHE_HOME", str(blocked))  # a file where a directory should be
    assert native_board.build() is None and native_board.load() is None
