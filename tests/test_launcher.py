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
    monkeypatch.setattr(L.environment, "local_slots", lambda: 2)
    args = args_for(2, heap="64M")
    assert args[:3] == ["oshrun", "-n", "2"]
    assert "--oversubscribe" not in args
    i = args.index("-m")
    assert args[i - 1 : i + 2][1:] == ["-m", "shmem_notebook.engine"]
    exported = {args[k + 1] for k, a in enumerate(args) if a == "-x"}
    # the engines find their controller through the environment, forwarded to every node
    assert {
        "SMA_SYMMETRIC_SIZE",
        "SHMEM_SYMMETRIC_SIZE",
        "OMPI_MCA_osc",
        "IPP_PROFILE_DIR",
        "IPP_CLUSTER_ID",
    } <= exported


def test_oversubscribe_when_more_pes_than_cores(monkeypatch):
    monkeypatch.setattr(L.environment, "local_slots", lambda: 2)
    monkeypatch.delenv("SLURM_JOB_ID", raising=False)
    assert "--oversubscribe" in args_for(4)
    assert "--oversubscribe" not in args_for(4, oversubscribe=False)
    assert "--oversubscribe" in args_for(1, oversubscribe=True)


def test_no_automatic_oversubscribe_with_hostfile_or_slurm(monkeypatch, tmp_path):
    monkeypatch.setattr(L.environment, "local_slots", lambda: 2)
    hostfile = tmp_path / "hosts"
    args = args_for(8, hostfile=str(hostfile))
    assert "--oversubscribe" not in args
    assert args[args.index("--hostfile") + 1] == str(hostfile)
    monkeypatch.setenv("SLURM_JOB_ID", "42")
    assert "--oversubscribe" not in args_for(8)


def test_platform_environment_defaults_and_user_wins():
    env = L.platform_environment({}, heap="1G")
    assert env["OMPI_MCA_osc"] == "^rdma"
    assert env["OMPI_MCA_opal_common_ucx_opal_mem_hooks"] == "0"  # no stale UCX hook to jump to (ompi#10765)
    assert env["SMA_SYMMETRIC_SIZE"] == env["SHMEM_SYMMETRIC_SIZE"] == str(1 << 30)
    assert "OMPI_MCA_osc" not in L.platform_environment({"OMPI_MCA_osc": "ucx"})
    assert "OMPI_MCA_osc" not in L.platform_environment({"OMPI_MCA_opal_common_ucx_opal_mem_hooks": "0"})
    assert env["IPATH_NO_BACKTRACE"] == env["HFI_NO_BACKTRACE"] == "1"  # no crash file in the user's folder
    assert "IPATH_NO_BACKTRACE" not in L.platform_environment({"IPATH_NO_BACKTRACE": "0"})
    assert env["PMIX_MCA_gds"] == "hash"  # no shared-memory store that only oshrun maps (8 MiB)
    assert "PMIX_MCA_gds" not in L.platform_environment({"PMIX_MCA_gds": "ds21"})


def test_root_gets_allow_run_as_root(monkeypatch):
    monkeypatch.setattr(L.environment.os, "geteuid", lambda: 0)
    env = L.platform_environment({})
    assert env["OMPI_ALLOW_RUN_AS_ROOT"] == env["OMPI_ALLOW_RUN_AS_ROOT_CONFIRM"] == "1"
    monkeypatch.setattr(L.environment.os, "geteuid", lambda: 1000)
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
    assert env["OMPI_MCA_mtl"] == "^psm,psm2,ofi"  # network-only MTLs whose libraries sleep as they load
    assert "OMPI_MCA_mtl" not in L.platform_environment({"OMPI_MCA_mtl": "psm2"}, local_only=True)
    assert "UCX_TLS" not in L.platform_environment({"UCX_TLS": "rc"}, local_only=True)
    assert "UCX_TLS" not in L.platform_environment({}, local_only=False)
    assert env["OMPI_MCA_hwloc_base_binding_policy"] == "none"  # Open MPI bound every job to cores 0, 1, ...
    assert "OMPI_MCA_hwloc_base_binding_policy" not in L.platform_environment(
        {"OMPI_MCA_hwloc_base_binding_policy": "core"}, local_only=True
    )


def test_bind_to_reaches_oshrun_and_srun(monkeypatch):
    from shmem_notebook.rc import rc

    monkeypatch.setattr(L.environment, "local_slots", lambda: 2)
    args = args_for(2, bind_to="core")
    assert args[args.index("--bind-to") + 1] == "core"
    assert "--bind-to" not in args_for(2)  # one node: unbound through the environment (LOCAL_ONLY)
    monkeypatch.setattr(rc, "slurm_runner", "srun")
    script = args_for(4, slurm=True, bind_to="socket")
    assert script[script.index("--wrap") + 1].startswith(
        "exec srun --mpi=pmix --kill-on-bad-exit=1 --ntasks=4 --cpu-bind=sockets "
    )


# -- Slurm: the batch job's command lines, built without Slurm -----------------------------


def test_slurm_mode_runs_the_batch_proxy_process_around_sbatch(monkeypatch):
    monkeypatch.setattr(L.environment, "local_slots", lambda: 2)
    args = args_for(8, slurm=True, partition="debug", time="10", nodes=2, account="proj", sbatch_args=["--qos=low"])
    assert args[1:3] == ["-m", "shmem_notebook.launcher.batch_proxy"]
    sbatch = args[args.index("--") + 1 :]
    assert sbatch[:2] == ["sbatch", "--parsable"]
    for option in ("--ntasks=8", "--nodes=2", "--partition=debug", "--time=10", "--account=proj", "--qos=low"):
        assert option in sbatch
    assert "--job-name=shmem_notebook" in sbatch
    log = args[args.index("--log") + 1]
    assert f"--output={log}" in sbatch and log.endswith("%j.out")
    script = sbatch[sbatch.index("--wrap") + 1]
    assert script.startswith("exec oshrun -n 8 ") and script.endswith("-m shmem_notebook.engine")
    assert "--oversubscribe" not in script  # Slurm gives the slots
    assert "-x IPP_PROFILE_DIR" in script  # the engines find the controller on every node


def test_slurm_mode_keeps_network_transports_and_leaves_out_unset_options(monkeypatch):
    launcher = L.OshrunEngineSetLauncher(profile_dir="/tmp", cluster_id="t", slurm=True)
    launcher.n = 2
    assert "UCX_TLS" not in launcher.get_env() and "OMPI_MCA_btl" not in launcher.get_env()
    sbatch = launcher.find_args()
    assert not [a for a in sbatch if a.split("=")[0] in ("--nodes", "--partition", "--time", "--account")]


def test_queue_lines_parse():
    from shmem_notebook.launcher.batch_proxy import MARK, all_marks, parse_marks
    from shmem_notebook.launcher.slurm import parse_queue_line, squeue_command

    assert "--jobs=12" in squeue_command(12)
    assert parse_queue_line("PENDING|Resources|0:00|\n") == {
        "state": "PENDING", "reason": "Resources", "elapsed": "0:00", "nodes": ""
    }  # fmt: skip
    assert parse_queue_line("") is None
    text = (f"noise\n{MARK} job=7 state=PENDING reason=Job's_QOS nodes=- t=1.5\n"
            f"{MARK} job=7 state=RUNNING reason=None nodes=n[1-2] t=2.5\n")  # fmt: skip
    assert parse_marks(text) == {"job": "7", "state": "RUNNING", "reason": "None", "nodes": "n[1-2]", "t": "2.5"}
    assert all_marks(text)[0]["reason"] == "Job's QOS"
    assert parse_marks("nothing") is None


def test_progress_line_names_job_state_reason_and_elapsed():
    from shmem_notebook.job.batch import progress_text

    assert progress_text(None, 0.4, 0, 8) == "Slurm: submitting the batch job, 0 s"
    mark = {"job": "12", "state": "PENDING", "reason": "Resources", "nodes": "-"}
    assert progress_text(mark, 4.2, 0, 8) == "Slurm job 12: PENDING (Resources), 4 s"
    mark = {"job": "12", "state": "RUNNING", "reason": "None", "nodes": "n[1-2]"}
    assert progress_text(mark, 9, 3, 8) == "Slurm job 12: RUNNING on n[1-2], 3/8 PEs registered, 9 s"
    pending = {"job": "12", "state": "PENDING", "reason": "Resources", "nodes": ""}  # squeue not polled since
    assert progress_text(pending, 9, 8, 8) == "Slurm job 12: RUNNING, 8/8 PEs registered, 9 s"


def test_slurm_options_are_checked_before_anything_starts(monkeypatch):
    import shmem_notebook
    from shmem_notebook import InputError

    monkeypatch.delenv("SHMEM_NOTEBOOK_IP", raising=False)
    with pytest.raises(InputError, match=r"pass ip='0.0.0.0' \(`--ip 0.0.0.0`\)"):
        shmem_notebook.Job(8, slurm=True)
    with pytest.raises(InputError, match="only apply to a Slurm batch job; add slurm=True"):
        shmem_notebook.Job(8, partition="debug")
    with pytest.raises(InputError, match="nodes must be a positive integer"):
        shmem_notebook.Job(8, slurm=True, ip="0.0.0.0", nodes=0)
    with pytest.raises(InputError, match="exclude each other"):
        shmem_notebook.Job(8, slurm=True, ip="0.0.0.0", hostfile="hosts")
    with pytest.raises(InputError, match="list of arguments"):
        shmem_notebook.Job(8, slurm=True, ip="0.0.0.0", sbatch_args="--qos=x")
    job = shmem_notebook.Job(8, slurm=True, ip="0.0.0.0", time=30, sbatch_args=("--qos=x",))
    assert job.batch["time"] == "30" and job.batch["sbatch_args"] == ["--qos=x"]


def test_missing_slurm_commands_are_named(monkeypatch):
    monkeypatch.setenv("PATH", "/nonexistent")
    with pytest.raises(LaunchError, match="--slurm needs sbatch, squeue, scancel on PATH"):
        L.check_slurm()


def test_slurm_runner_srun_starts_the_pes_with_pmix(monkeypatch):
    from shmem_notebook.rc import rc

    monkeypatch.setattr(rc, "slurm_runner", "srun")
    args = args_for(4, slurm=True)
    script = args[args.index("--wrap") + 1]
    assert script.startswith("exec srun --mpi=pmix --kill-on-bad-exit=1 --ntasks=4 ")
    assert script.endswith("-m shmem_notebook.engine")
    with pytest.raises(LaunchError, match="unknown Slurm runner 'mpirun'; use 'oshrun' or 'srun'"):
        args_for(4, slurm=True, batch_runner="mpirun")


def test_bytecode_warm_compiles_stale_modules_once_even_when_python_writes_none(tmp_path):
    import importlib.util
    import pathlib
    import subprocess
    import sys

    from shmem_notebook.launcher import bytecode

    package = tmp_path / "pkg"
    package.mkdir()
    (package / "mod.py").write_text("X = 1\n")
    (package / "broken.py").write_text("def (:\n")  # cannot compile: warm says so, the rest is compiled
    code = f"from shmem_notebook.launcher import bytecode; print(bytecode.warm({str(package)!r}))"
    env = {"PYTHONDONTWRITEBYTECODE": "1", "PATH": "/usr/bin:/bin"}
    out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, check=True)
    assert out.stdout.split() == ["False"]
    pyc = pathlib.Path(importlib.util.cache_from_source(str(package / "mod.py")))
    written = pyc.stat().st_mtime_ns
    assert not bytecode.warm(str(package)) and pyc.stat().st_mtime_ns == written  # fresh: left as it is
