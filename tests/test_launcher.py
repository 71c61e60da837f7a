"""The oshrun launcher: command line and environment, built without spawning anything."""

import pytest
from ipyparallel.cluster.launcher import find_launcher_class

from shmem_notebook import launcher as L
from shmem_notebook.errors import LaunchError


def args_for(n, **traits):
    launcher = L.OshrunEngineSetLauncher(profile_dir="/tmp", cluster_id="t", **traits)
    launcher.n = n
    return launcher.find_args()


def test_entry_point_resolves_by_name():
    assert find_launcher_class("oshrun", "engine") is L.OshrunEngineSetLauncher


def test_command_line_runs_the_pe_module_under_oshrun(monkeypatch):
    monkeypatch.setattr(L, "local_slots", lambda: 2)
    args = args_for(2, heap="64M")
    assert args[:3] == ["oshrun", "-n", "2"]
    assert "--oversubscribe" not in args
    i = args.index("-m")
    assert args[i - 1 : i + 2][1:] == ["-m", "shmem_notebook.engine"]
    exported = {args[k + 1] for k, a in enumerate(args) if a == "-x"}
    # the engines find their controller through the environment, forwarded to every node
    assert {"SMA_SYMMETRIC_SIZE", "SHMEM_SYMMETRIC_SIZE", "OMPI_MCA_osc", "IPP_PROFILE_DIR", "IPP_CLUSTER_ID"} <= exported


def test_oversubscribe_when_more_pes_than_cores(monkeypatch):
    monkeypatch.setattr(L, "local_slots", lambda: 2)
    monkeypatch.delenv("SLURM_JOB_ID", raising=False)
    assert "--oversubscribe" in args_for(4)
    assert "--oversubscribe" not in args_for(4, oversubscribe=False)
    assert "--oversubscribe" in args_for(1, oversubscribe=True)


def test_no_automatic_oversubscribe_with_hostfile_or_slurm(monkeypatch, tmp_path):
    monkeypatch.setattr(L, "local_slots", lambda: 2)
    hostfile = tmp_path / "hosts"
    args = args_for(8, hostfile=str(hostfile))
    assert "--oversubscribe" not in args
    assert args[args.index("--hostfile") + 1] == str(hostfile)
    monkeypatch.setenv("SLURM_JOB_ID", "42")
    assert "--oversubscribe" not in args_for(8)


def test_platform_environment_defaults_and_user_wins():
    env = L.platform_environment({}, heap="1G")
    assert env["OMPI_MCA_osc"] == "^rdma"
    assert env["SMA_SYMMETRIC_SIZE"] == env["SHMEM_SYMMETRIC_SIZE"] == str(1 << 30)
    assert "OMPI_MCA_osc" not in L.platform_environment({"OMPI_MCA_osc": "ucx"})
    assert "OMPI_MCA_osc" not in L.platform_environment({"OMPI_MCA_opal_common_ucx_opal_mem_hooks": "0"})


def test_root_gets_allow_run_as_root(monkeypatch):
    monkeypatch.setattr(L.os, "geteuid", lambda: 0)
    env = L.platform_environment({})
    assert env["OMPI_ALLOW_RUN_AS_ROOT"] == env["OMPI_ALLOW_RUN_AS_ROOT_CONFIRM"] == "1"
    monkeypatch.setattr(L.os, "geteuid", lambda: 1000)
    assert "OMPI_ALLOW_RUN_AS_ROOT" not in L.platform_environment({})


def test_missing_oshrun_names_the_packages():
    with pytest.raises(LaunchError) as info:
        L.check_oshrun("oshrun-not-installed")
    assert "apt-get install openmpi-bin libopenmpi-dev" in str(info.value)


def test_missing_hostfile_is_reported(tmp_path):
    with pytest.raises(LaunchError, match="hostfile .* does not exist"):
        L.check_oshrun(hostfile=str(tmp_path / "nope"))


def test_our_settings_reach_every_pe_but_not_the_owner_token():
    env = L.platform_environment({"SHMEM_NOTEBOOK_PITFALLS": "off", "SHMEM_NOTEBOOK_OWNER": "x", "HOME": "/root"})
    assert env["SHMEM_NOTEBOOK_PITFALLS"] == "off"
    assert "SHMEM_NOTEBOOK_OWNER" not in env and "HOME" not in env


def test_local_only_keeps_pes_off_the_network_unless_the_user_chose():
    env = L.platform_environment({}, local_only=True)
    assert env["UCX_TLS"] == "self,sm" and env["OMPI_MCA_btl"] == "self,vader"
    assert "UCX_TLS" not in L.platform_environment({"UCX_TLS": "rc"}, local_only=True)
    assert "UCX_TLS" not in L.platform_environment({}, local_only=False)
