"""The one table of adaptations of shmem4py (engine/shims): order, install, undo; on fake
shmem modules (no OpenSHMEM), plus what a PE of a real job reports."""

import types

import pytest

from shmem_notebook.engine import shims
from shmem_notebook.engine.context import this_pe
from shmem_notebook.engine.shims import missing
from shmem_notebook.engine.shims.patches import Patches


def fake_shmem(version=(1, 4)):
    module = types.ModuleType("shmem4py.shmem")

    def _chkerr(ierr, func="shmem"):
        if ierr != 0:
            raise NotImplementedError(func)

    def put_signal(*args):
        return "the library's put_signal"

    module.__dict__.update(
        _chkerr=_chkerr,
        put_signal=put_signal,
        atomic_fetch_inc_nbi=lambda *a: "nbi",
        info_get_name=lambda: "http://www.open-mpi.org/",
        info_get_version=lambda: version,
    )
    return module


def test_the_table_is_ordered_and_named_once():
    names = [shim.name for shim in shims.SHIMS]
    assert names == [
        "numpy2_array",
        "numpy2_scalars",
        "missing",
        "pitfalls",
        "late_zeroing",
        "ctx_invalid",
        "teams",
        "signals",
        "locks",
        "mistakes",
        "board",
        "diagnostics",
    ]
    assert len(set(names)) == len(names)
    assert all(callable(s.applies) and callable(s.install) and s.adapts for s in shims.SHIMS)


def test_patches_undo_restores_what_was_there_newest_first():
    owner = types.SimpleNamespace(f=1)
    patches = Patches()
    patches.set(owner, "f", 2)
    patches.set(owner, "f", 3)
    patches.set(owner, "g", 4)  # absent before
    assert (owner.f, owner.g) == (3, 4)
    patches.undo()
    assert owner.f == 1 and not hasattr(owner, "g")


def test_a_14_library_refuses_the_15_routines_with_one_error_class_and_their_own_names(monkeypatch):
    monkeypatch.setattr("shmem_notebook.engine.shims.pitfalls.ompi_version", lambda: (4, 1, 4))
    shmem = fake_shmem((1, 4))
    original = shmem.put_signal
    undo = missing.install(shmem)
    with pytest.raises(
        missing.UnsupportedError,
        match=r"^shmem.put_signal is an OpenSHMEM 1.5 routine, but "
        r"Open MPI 4.1.4's OSHMEM implements OpenSHMEM 1.4 and lacks it; instead, use shmem.put",
    ):
        shmem.put_signal(None)
    with pytest.raises(NotImplementedError, match="without _nbi"):
        shmem.atomic_fetch_inc_nbi(None, 0)
    stub = shmem.atomic_fetch_inc_nbi
    assert stub.__qualname__ == "atomic_fetch_inc_nbi" and "locals" not in repr(stub)
    assert repr(stub).startswith("<function atomic_fetch_inc_nbi at ")
    undo()
    assert shmem.put_signal is original and shmem.atomic_fetch_inc_nbi(None) == "nbi"


def test_a_15_library_keeps_its_routines_and_only_its_error_check_is_wrapped():
    shmem = fake_shmem((1, 5))
    original = shmem.put_signal
    undo = missing.install(shmem)
    assert shmem.put_signal is original
    with pytest.raises(missing.UnsupportedError, match="shmem_team_split_2d is an OpenSHMEM 1.5 routine"):
        shmem._chkerr(missing.NOT_IMPLEMENTED, "shmem_team_split_2d")
    undo()
    with pytest.raises(NotImplementedError) as info:
        shmem._chkerr(missing.NOT_IMPLEMENTED, "x")
    assert type(info.value) is NotImplementedError


def test_install_applies_what_applies_in_order_once_and_uninstall_undoes(monkeypatch):
    done = []
    table = [
        shims.Shim("a", "", lambda sh: True, lambda sh: (done.append("+a"), lambda: done.append("-a"))[1]),
        shims.Shim("b", "", lambda sh: False, lambda sh: done.append("+b")),
        shims.Shim("c", "", lambda sh: True, lambda sh: (done.append("+c"), lambda: done.append("-c"))[1]),
    ]
    monkeypatch.setattr(shims, "SHIMS", table)
    monkeypatch.setattr(this_pe, "shims", [])  # the shims installed are the PE's (engine/context.py)
    monkeypatch.setattr(this_pe, "shmem", this_pe.shmem)
    assert shims.install(None) == ["a", "c"]
    assert shims.install(None) == ["a", "c"] and done == ["+a", "+c"]  # a second install changes nothing
    shims.uninstall()
    assert done == ["+a", "+c", "-c", "-a"] and shims.installed() == []
