"""The job's state file for the instructor's view (job/state_file.py), without PEs: each note is
written in place (one file, mode 0600, never a half-replaced one) and reads back whole."""

import os
import types

from shmem_notebook.job.state_file import note_state, read_state, state_path


def _job(tmp_path, state="running"):
    (tmp_path / "log").mkdir(exist_ok=True)
    cluster = types.SimpleNamespace(profile_dir=str(tmp_path), cluster_id="c1")
    return types.SimpleNamespace(_cluster=cluster, state=state, n=4, library=types.SimpleNamespace(name="sos"))


def test_notes_are_written_in_place_and_read_back_whole(tmp_path):
    job = _job(tmp_path)
    note_state(job, "busy")
    path = state_path(str(tmp_path), "c1")
    inode = os.stat(path).st_ino
    assert read_state(str(tmp_path), "c1")["state"] == "busy"
    job.library.name = "a-site-library-with-a-long-name"
    note_state(job, "busy")
    job.library.name = "sos"
    note_state(job)  # a shorter note after a longer one leaves nothing of it
    note = read_state(str(tmp_path), "c1")
    assert (note["state"], note["n"], note["library"], note["kernel"]) == ("idle", 4, "sos", os.getpid())
    assert os.stat(path).st_ino == inode and os.stat(path).st_mode & 0o777 == 0o600
    assert os.listdir(tmp_path / "log") == [os.path.basename(path)]


def test_a_job_not_started_notes_nothing_and_garbage_reads_as_none(tmp_path):
    note_state(types.SimpleNamespace(state="stopped"))
    assert read_state(str(tmp_path), "c1") is None
    (tmp_path / "log").mkdir()
    with open(state_path(str(tmp_path), "c1"), "w") as f:
        f.write('{"state": "bu')
    assert read_state(str(tmp_path), "c1") is None
