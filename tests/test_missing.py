"""Routines the OpenSHMEM library lacks: the error names the library and an alternative (no OpenSHMEM needed)."""

import types

import pytest

from shmem_notebook.engine.shims import missing


def fake_shmem(name="http://www.open-mpi.org/", version=(1, 4)):
    def _chkerr(ierr, func="shmem"):
        if ierr != 0:
            if ierr == missing.NOT_IMPLEMENTED:
                raise NotImplementedError(func)
            raise RuntimeError(f"{func}: error {ierr}")

    return types.SimpleNamespace(_chkerr=_chkerr, info_get_name=lambda: name, info_get_version=lambda: version)


def test_a_missing_routine_names_the_library_and_what_to_use(monkeypatch):
    import shmem_notebook.engine.shims.pitfalls as pitfalls

    monkeypatch.setattr(pitfalls, "ompi_version", lambda: (4, 1, 4))
    shmem = fake_shmem()
    missing.install(shmem)
    missing.install(shmem)  # twice is harmless
    shmem._chkerr(0, "shmem_long_put")  # success: nothing
    with pytest.raises(RuntimeError, match="error -3"):
        shmem._chkerr(-3, "shmem_long_put")  # other errors unchanged
    with pytest.raises(missing.UnsupportedError) as info:
        shmem._chkerr(missing.NOT_IMPLEMENTED, "shmem_team_split_2d")
    assert isinstance(info.value, NotImplementedError)
    assert str(info.value) == (
        "shmem_team_split_2d is an OpenSHMEM 1.5 routine, but Open MPI 4.1.4's OSHMEM implements OpenSHMEM 1.4 "
        "and lacks it; instead, use the default team, shmem.TEAM_WORLD, or the active-set forms"
    )


@pytest.mark.parametrize(
    "func, fragment",
    [
        ("shmem_long_put_signal", "shmem.fence()"),
        ("shmem_signal_fetch", "shmem.atomic_fetch"),
        ("shmem_long_atomic_fetch_add_nbi", "without _nbi"),
        ("shmem_long_test_any_vector", "loop over the elements"),
        ("shmem_something_new", "OpenSHMEM 1.4 specification"),
    ],
)
def test_each_kind_of_routine_gets_an_alternative(func, fragment):
    assert fragment in missing.explain(func)
    assert "\n" not in missing.explain(func)
