"""The public API is explicit, and the client side never touches OpenSHMEM."""

import subprocess
import sys

import shmem_notebook


def test_public_api_is_pinned():
    assert sorted(shmem_notebook.__all__) == sorted(
        [
            "start",
            "current_job",
            "Job",
            "CellResult",
            "Race",
            "Access",
            "ArraySpec",
            "rc",
            "ShmemNotebookError",
            "InputError",
            "LaunchError",
            "NoJobError",
            "JobStateError",
            "HeapFullError",
            "PEError",
            "PEDiedError",
            "CellStoppedError",
            "CellSyntaxError",
            "SpecError",
            "inspect",
            "replay",
            "load_ipython_extension",
            "unload_ipython_extension",
        ]
    )
    for name in shmem_notebook.__all__:
        assert hasattr(shmem_notebook, name), name


def test_client_side_imports_without_openshmem():
    code = (
        "import sys; sys.modules['shmem4py'] = None\n"  # any import of shmem4py would now fail
        "import shmem_notebook, shmem_notebook.magics, shmem_notebook.launcher, shmem_notebook.job\n"
        "from IPython.testing.globalipapp import start_ipython\n"
        "ip = start_ipython(); ip.run_line_magic('load_ext', 'shmem_notebook')\n"
        "assert 'pxshmem' in ip.magics_manager.magics['cell']\n"
        "print('clean')\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip().endswith("clean")


def test_rc_is_strict_and_env_overrides(monkeypatch):
    import pytest

    from shmem_notebook.rc import _RC

    with pytest.raises(TypeError, match="unknown option 'hep'"):
        shmem_notebook.rc.hep = "1G"
    monkeypatch.setenv("SHMEM_NOTEBOOK_HEAP", "1G")
    monkeypatch.setenv("SHMEM_NOTEBOOK_TIMEOUT", "2.5")
    rc = _RC()
    assert rc.heap == "1G" and rc.timeout == 2.5


def test_bad_pe_counts_are_refused_before_anything_starts():
    import pytest

    for n in (0, -1, 2.5, "4", True):
        with pytest.raises(shmem_notebook.InputError, match="positive integer"):
            shmem_notebook.Job(n)


def test_a_bad_node_count_names_nodes_with_or_without_slurm():
    import pytest

    for nodes in (0, -1, 2.5, True):
        for slurm in ({}, {"slurm": True, "ip": "0.0.0.0"}):
            with pytest.raises(shmem_notebook.InputError, match=r"^nodes must be a positive integer") as caught:
                shmem_notebook.Job(2, nodes=nodes, **slurm)
            assert "number of PEs" not in str(caught.value)


def test_bad_timeouts_are_refused():
    import pytest

    for timeout in (0, -3, "soon", True):
        with pytest.raises(shmem_notebook.InputError, match="a timeout is a positive number of seconds"):
            shmem_notebook.Job(2, timeout=timeout)
