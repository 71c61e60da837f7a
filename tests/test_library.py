"""Libraries a job can run on (launcher/library.py), without starting PEs: names, a site's file,
the command lines, and the one-sentence errors before launch."""

import json

import pytest

from shmem_notebook import Job
from shmem_notebook.errors import InputError, LaunchError
from shmem_notebook.launcher import OshrunEngineSetLauncher
from shmem_notebook.launcher.library import Library, known, library
from shmem_notebook.rc import rc


def test_the_default_is_open_mpis_oshmem_and_rc_or_the_environment_changes_it(monkeypatch):
    assert library().name == "oshmem" and library().launcher == "openmpi"
    monkeypatch.setattr(rc, "library", "sos")
    assert library().name == "sos" and library().env["OSHRUN_LAUNCHER"] == "mpiexec.hydra"
    assert library("oshmem").name == "oshmem"


def test_an_unknown_library_is_one_sentence_naming_the_known_ones():
    with pytest.raises(
        InputError, match=r"unknown OpenSHMEM library 'cray'; use one of oshmem, sos, oshmpi \(a site's own go in "
    ):
        Job(2, library="cray")


def test_a_sites_file_adds_libraries_and_a_bad_one_says_what_is_wrong(tmp_path, monkeypatch):
    path = tmp_path / "libraries.json"
    path.write_text(
        json.dumps(
            {
                "cray": {
                    "oshrun": "/opt/cray/bin/oshrun",
                    "python": "/venv/bin/python",
                    "launcher": "hydra",
                    "env": {"X": "1"},
                    "caution": "its fcollect is wrong at 3 PEs",
                }
            }
        )
    )
    monkeypatch.setenv("SHMEM_NOTEBOOK_LIBRARIES", str(path))
    cray = library("cray")
    assert (cray.oshrun, cray.python, cray.launcher, cray.env, cray.caution) == (
        "/opt/cray/bin/oshrun",
        "/venv/bin/python",
        "hydra",
        {"X": "1"},
        "its fcollect is wrong at 3 PEs",
    )
    assert set(known()) == {"oshmem", "sos", "oshmpi", "cray"}
    with pytest.raises(LaunchError, match=r"'/opt/cray/bin/oshrun' \(cray's oshrun\) was not found; fix its entry in "):
        cray.check()
    path.write_text(json.dumps({"cray": {"oshrun": "x", "launcher": "aprun"}}))
    with pytest.raises(InputError, match="does not describe libraries as expected .*launcher 'aprun'"):
        library("cray")
    path.write_text("{not json")
    with pytest.raises(InputError, match="does not describe libraries as expected"):
        library()


def test_command_lines_per_launcher():
    openmpi = Library("o", "oshrun")
    assert openmpi.command(4, {"B": "1", "A": "2"}, oversubscribe=True, hostfile="h") == [
        "oshrun",
        "-n",
        "4",
        "--oversubscribe",
        "--hostfile",
        "h",
        "-x",
        "A",
        "-x",
        "B",
    ]
    hydra = Library("s", "/sos/bin/oshrun", launcher="hydra")
    assert hydra.command(4, {"A": "2"}, oversubscribe=True, hostfile="h") == ["/sos/bin/oshrun", "-n", "4", "-f", "h"]


def test_binding_in_each_launchers_words():
    """bind_to: Open MPI's ``--bind-to`` (PEs beyond the cores allowed on them), Hydra's ``-bind-to``."""
    openmpi, hydra = Library("o", "oshrun"), Library("s", "oshrun", launcher="hydra")
    assert openmpi.command(2, {}, bind_to="core")[-2:] == ["--bind-to", "core"]
    assert openmpi.command(4, {}, oversubscribe=True, bind_to="core")[-2:] == ["--bind-to", "core:overload-allowed"]
    assert openmpi.command(4, {}, oversubscribe=True, bind_to="none")[-2:] == ["--bind-to", "none"]
    assert hydra.command(4, {}, oversubscribe=True, bind_to="socket") == ["oshrun", "-n", "4", "-bind-to", "socket"]
    assert "--bind-to" not in openmpi.command(2, {}) and "-bind-to" not in hydra.command(2, {})


def test_the_launcher_runs_the_librarys_oshrun_python_and_environment(monkeypatch):
    monkeypatch.delenv("FI_PROVIDER", raising=False)
    launcher = OshrunEngineSetLauncher(library="sos", n=2)
    sos = library("sos")
    args = launcher.find_args()
    assert args[:3] == [sos.oshrun, "-n", "2"] and "-x" not in args and "--oversubscribe" not in args
    assert args[3:6] == [sos.python, "-m", "shmem_notebook.engine"]
    assert launcher.get_env()["FI_PROVIDER"] == "sockets"
    monkeypatch.setenv("FI_PROVIDER", "tcp")  # what the user set wins
    assert "FI_PROVIDER" not in OshrunEngineSetLauncher(library="sos", n=2).get_env()


def test_sos_under_slurm_is_refused_in_one_sentence():
    with pytest.raises(InputError, match="the sos library is not supported there yet"):
        Job(2, library="sos", slurm=True, ip="10.0.0.1")


def test_a_library_not_built_says_how_to_build_it(monkeypatch, tmp_path):
    monkeypatch.setenv("SHMEM_NOTEBOOK_SOS_DIR", str(tmp_path))
    with pytest.raises(
        LaunchError, match=r"\(sos's oshrun\) was not found; build it with `scripts/setup.sh --with-sos"
    ):
        library("sos").check()


@pytest.mark.parametrize("shared", [True, False], ids=["shared-heaps", "libfabric"])
def test_sos_with_shared_heaps_syncs_by_dissemination_unless_told_otherwise(monkeypatch, tmp_path, shared):
    """SOS's linear sync hangs on the shared-heaps build (docs/libraries.md): its PEs get the dissemination
    sync; a user's SHMEM_BARRIER_ALGORITHM wins, and the libfabric build keeps SOS's own choice."""
    (tmp_path / "install").mkdir()
    if shared:
        (tmp_path / "install" / ".cma-built").touch()
    monkeypatch.setenv("SHMEM_NOTEBOOK_SOS_DIR", str(tmp_path))
    monkeypatch.delenv("SHMEM_BARRIER_ALGORITHM", raising=False)
    sos = library("sos")
    assert sos.shares_heaps is shared and sos.polls is shared
    assert sos.env.get("SHMEM_BARRIER_ALGORITHM") == ("dissem" if shared else None)
    # and its known wrong reductions are said when a job starts (docs/libraries.md), the libfabric build's not
    assert ("wrong reduction results" in sos.caution) is shared
    monkeypatch.setenv("SHMEM_BARRIER_ALGORITHM", "tree")
    assert "SHMEM_BARRIER_ALGORITHM" not in OshrunEngineSetLauncher(library="sos", n=2).get_env()


def test_a_build_with_known_wrong_results_says_so_at_start(monkeypatch, tmp_path):
    """The shared-heaps SOS build's caution is a warning at start (here before its missing oshrun is said)."""
    (tmp_path / "install").mkdir()
    (tmp_path / "install" / ".cma-built").touch()
    monkeypatch.setenv("SHMEM_NOTEBOOK_SOS_DIR", str(tmp_path))
    with pytest.warns(UserWarning, match=r"wrong reduction results"), pytest.raises(LaunchError, match="not found"):
        Job(2, library="sos").start()
