"""The site policy (site.json) and admission: limits, the default heap, malformed files, running jobs
per user, and heaps that must fit with room for others; refused before anything launches."""

import json
import os
import time

import pytest

import shmem_notebook
from conftest import ipython_shell
from shmem_notebook.errors import LaunchError
from shmem_notebook.job import site
from shmem_notebook.job.options import given
from shmem_notebook.launcher.library import known
from shmem_notebook.rc import rc

MiB, GiB = 1 << 20, 1 << 30


@pytest.fixture
def write_site(tmp_path, monkeypatch):
    """Write a site policy (a dict, or text as is) and point SHMEM_NOTEBOOK_SITE at it; its path."""
    path = tmp_path / "site.json"
    path.write_text("{}")  # a site without limits until the test writes some
    monkeypatch.setenv("SHMEM_NOTEBOOK_SITE", str(path))

    def write(policy):
        path.write_text(policy if isinstance(policy, str) else json.dumps(policy))
        return str(path)

    return write


_before = {}


@pytest.fixture(autouse=True)
def _current_job_before():
    """The current job before the test (a job another test module stopped may still be current)."""
    _before["job"] = shmem_notebook.current_job()


def _no_new_job():
    """No job became the current one during the test."""
    return shmem_notebook.current_job() is _before["job"]


def _refused(match, n=2, **options):
    """``start()`` is refused with ``match`` at once, and nothing of a job was launched."""
    t0 = time.monotonic()
    with pytest.raises(LaunchError, match=match) as info:
        shmem_notebook.start(n, **options)
    assert time.monotonic() - t0 < 2.0 and _no_new_job()
    message = str(info.value)
    assert "\n" not in message and message.count("; ") <= 2
    return message


# -- limits --------------------------------------------------------------------------------------
def test_a_start_beyond_a_limit_is_refused_naming_the_sites_limit(write_site):
    write_site({"max_pes": 4, "max_heap": "512M", "max_timeout": 60})
    said = _refused(r"this site allows at most 4 PEs per job \(site\.json: max_pes\); you asked for 8 PEs", n=8)
    assert said == "this site allows at most 4 PEs per job (site.json: max_pes); you asked for 8 PEs"
    _refused(r"a heap of at most 512M per PE \(site\.json: max_heap\); you asked for 1G", heap="1G")
    _refused(r"a cell timeout of at most 60 s \(site\.json: max_timeout\)", timeout=120)
    write_site({"max_spare": 0})  # a class server that cannot afford idle spare PEs
    said = _refused(r"at most 0 spare sets of PEs per job \(site\.json: max_spare\)", spare=True)
    assert said.endswith("you asked for one (--spare)"), said


def test_the_users_own_settings_may_lower_the_limits_never_raise_them(write_site, monkeypatch):
    write_site({"max_pes": 4, "max_heap": "512M"})
    assert site.within_site(given(n=4, heap="512M")) == "512M"  # at the limit
    assert site.within_site(given(n=2, heap="64M")) == "64M"  # lower
    monkeypatch.setattr(rc, "heap", "1G")  # the user's rc (or SHMEM_NOTEBOOK_HEAP) above the limit
    _refused(r"a heap of at most 512M per PE \(site\.json: max_heap\); you asked for 1G")
    monkeypatch.setattr(rc, "heap", "128M")
    assert site.within_site(given(n=2)) == "128M"


def test_a_start_without_heap_gets_the_sites_default_heap(write_site):
    write_site({"default_heap": "64M", "max_heap": "512M"})
    assert site.within_site(given(n=2)) == "64M"
    write_site({"max_heap": "128M"})  # only max_heap: the smaller of the tool's default (256M) and it
    assert site.within_site(given(n=2)) == "128M"
    write_site({"max_heap": "1G"})
    assert site.within_site(given(n=2)) == rc._defaults["heap"] == "256M"
    assert shmem_notebook.Job(2).heap == "256M"  # the Job takes it too (nothing launched)


def test_no_policy_file_changes_nothing(monkeypatch):
    monkeypatch.delenv("SHMEM_NOTEBOOK_SITE", raising=False)
    monkeypatch.setattr(site, "SITE_FILE", "/nonexistent/site.json")
    assert site.policy().path is None and site.within_site(given(n=64, heap="2G")) == "2G"


# -- malformed files -----------------------------------------------------------------------------
@pytest.mark.parametrize(
    "text, said",
    [
        ('{"max_pes": 4,', r"cannot be read \(Expecting"),
        ('{"max_pe": 4}', r"is malformed: 'max_pe' is not a key \(the keys are: default_heap, libraries, max_heap"),
        ('{"max_pes": "4"}', r"is malformed: max_pes must be a positive integer, got '4'"),
        ('{"max_pes": 0}', r"is malformed: max_pes must be a positive integer, got 0"),
        ('{"max_heap": "lots"}', r"is malformed: max_heap must be a positive value, got 'lots'"),
        ('{"max_jobs": true}', r"is malformed: max_jobs must be a positive integer, got True"),
        ('{"default_heap": "1G", "max_heap": "512M"}', r"is malformed: default_heap \(1G\) is larger than max_heap"),
        ('{"libraries": {"cray": {"python": "/x"}}}', r"as expected in its 'libraries' \(an entry has no 'oshrun'\)"),
        ("[4]", r"must be a JSON object"),
    ],
)
def test_a_malformed_policy_names_the_file_and_the_key_and_nothing_starts(write_site, text, said):
    path = write_site(text)
    with pytest.raises(ValueError if "libraries" in text else LaunchError, match=said) as info:
        shmem_notebook.start(2)
    message = str(info.value)
    assert path in message and "\n" not in message and "no job starts" in message
    assert _no_new_job()


def test_a_missing_policy_named_by_the_environment_refuses(tmp_path, monkeypatch):
    monkeypatch.setenv("SHMEM_NOTEBOOK_SITE", str(tmp_path / "nope.json"))
    _refused(r"nope\.json \(SHMEM_NOTEBOOK_SITE\) does not exist")


def test_the_sites_libraries_are_known_and_the_users_replace_them(write_site, tmp_path, monkeypatch):
    write_site({"libraries": {"cray": {"oshrun": "/opt/cray/bin/oshrun", "polls": False}}})
    assert known()["cray"].oshrun == "/opt/cray/bin/oshrun" and not known()["cray"].polls
    mine = tmp_path / "libraries.json"
    mine.write_text(json.dumps({"cray": {"oshrun": "/home/me/oshrun"}}))
    monkeypatch.setenv("SHMEM_NOTEBOOK_LIBRARIES", str(mine))
    assert known()["cray"].oshrun == "/home/me/oshrun" and "oshmem" in known()


# -- admission -----------------------------------------------------------------------------------
def test_admission_keeps_room_for_others():
    site.admission(2, 256 * MiB, free=4 * GiB, total=8 * GiB, shm_free=GiB, shm_size=GiB, heap_in_shm=False)
    with pytest.raises(LaunchError) as info:  # 2 x (256M + 128M) fits in 1G free, but not with 800M kept
        site.admission(2, 256 * MiB, free=GiB, total=8 * GiB, shm_free=GiB, shm_size=GiB)
    assert str(info.value) == (
        "not admitted: 2 PEs x heap 256.0 MiB need 768.0 MiB of memory (with the PE processes) but this server has "
        "1.0 GiB free, of which 819.2 MiB is kept for others; ask for a smaller heap or fewer PEs, or wait for "
        "others' jobs to end"
    )


def test_admission_counts_dev_shm_with_room_for_others(tmp_path):
    with pytest.raises(
        LaunchError,
        match=r"need 272\.0 MiB of /x/shm \(the heaps and transport files\) but it "
        r"has 300\.0 MiB free, of which 75\.0 MiB is kept",
    ):  # a quarter
        site.admission(2, 128 * MiB, 64 * GiB, 64 * GiB, 300 * MiB, 300 * MiB, "/x/shm", heap_in_shm=True)
    site.admission(2, 128 * MiB, 64 * GiB, 64 * GiB, 300 * MiB, 300 * MiB, "/x/shm", heap_in_shm=False)
    with pytest.raises(LaunchError, match=r"of /x/shm \(the transport files\)"):  # 64 PEs' 8M each
        site.admission(64, MiB, 64 * GiB, 64 * GiB, 300 * MiB, 300 * MiB, "/x/shm", heap_in_shm=False)
    # the seam of admit(): a directory of its own (its file system's free space) and a memory
    st = os.statvfs(tmp_path)
    free = st.f_bavail * st.f_frsize
    with pytest.raises(LaunchError, match=rf"of {tmp_path} \(the heaps"):
        site.admit(2, free // 2, library="oshmpi", shm_dir=str(tmp_path), memory=(free * 4, free * 4))


@pytest.mark.parametrize("library", ["oshmem", "sos"])
def test_heaps_outside_dev_shm_are_counted_in_memory_only(tmp_path, library):
    # OSHMEM's heaps are SysV segments, SOS's private memory (measured: docs/oshmpi.md, "The heap")
    st = os.statvfs(tmp_path)
    free = st.f_bavail * st.f_frsize
    site.admit(2, free // 2, library=library, shm_dir=str(tmp_path), memory=(free * 4, free * 4))


def test_admission_refuses_a_heap_beyond_the_room_before_launch(monkeypatch):
    from shmem_notebook.job.heap_fit import PE_OVERHEAD, node_memory

    free, _ = node_memory()
    heap = (free - PE_OVERHEAD * 2) // 2 - 64 * MiB  # fits in what is free, not with the room for others
    monkeypatch.delenv("SHMEM_NOTEBOOK_SITE", raising=False)  # no policy: admission still holds
    _refused(
        r"^not admitted: 2 PEs x heap .* of memory \(with the PE processes\) but this server has .* free, of "
        r"which .* is kept for others",
        heap=f"{heap >> 20}M",
    )


# -- running jobs per user, and real starts ------------------------------------------------------
@pytest.mark.pe
def test_max_jobs_counts_this_users_running_jobs(write_site):
    job = shmem_notebook.start(2, heap="32M")
    try:
        mine = site.running_jobs()
        assert job._token in mine and job.n == 2
        write_site({"max_jobs": len(mine), "max_pes": 2, "max_heap": "64M", "default_heap": "32M"})
        other = shmem_notebook.Job
        with pytest.raises(
            LaunchError,
            match=rf"at most {len(mine)} running jobs? per user \(site\.json: "
            rf"max_jobs\) and you have {len(mine)}",
        ):
            other(2)
        assert job.run("from shmem4py import shmem; r = shmem.my_pe()").outcome == "ok"  # the running one is untouched
    finally:
        job.stop()
        shmem_notebook.job._current = None
    assert job._token not in site.running_jobs()


@pytest.mark.pe
def test_a_start_within_the_policy_runs_with_the_sites_default_heap(write_site):
    write_site({"max_pes": 2, "max_heap": "64M", "default_heap": "32M", "max_jobs": 50})
    job = shmem_notebook.start(2)
    try:
        assert job.heap == "32M" and job.state == "running"
        assert job.run("from shmem4py import shmem; r = shmem.n_pes()").outcome == "ok"
    finally:
        job.stop()
        shmem_notebook.job._current = None


def test_shmem_start_shows_a_refusal_as_one_line(write_site, capsys):
    write_site({"max_pes": 4})
    shell = ipython_shell()
    result = shell.run_cell("%shmem start -n 8")
    captured = capsys.readouterr()
    lines = [line for line in (captured.out + captured.err).splitlines() if line.strip()]
    assert not result.success and len(lines) == 1, lines
    assert lines[0].endswith("this site allows at most 4 PEs per job (site.json: max_pes); you asked for 8 PEs")
    assert _no_new_job()
