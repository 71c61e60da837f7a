"""The instructor's view (``python -m shmem_notebook.jobs_view``) of a job with spare PEs: the spare set is shown
apart from the job's PEs, before and after a restart takes it (issue 45 item 4)."""

import json
import os
import subprocess
import sys

import psutil
import pytest

from conftest import job_fixture
from shmem_notebook import jobs_view as J
from shmem_notebook.job.processes import wait
from shmem_notebook.job.watchdog import owned_by

job = job_fixture(2, heap="8M", timeout=60, spare=True)


def view_of(job):
    """The job's :class:`JobView`, once its spare set waits (the event: every spare PE noted itself ready)."""
    assert wait(lambda: job.spares.waiting() == job.n, 60), f"{job.spares.waiting()} of {job.n} spare PEs wait"
    (view,) = [v for v in J.jobs(sample=0.05) if v.token == job._token]
    return view


@pytest.mark.parametrize("restarted", [False, True], ids=["fresh", "restarted"])
def test_spare_pes_are_shown_apart_from_the_jobs(job, restarted):
    if restarted:
        job.restart()  # the spare set becomes the job's PEs, and a new one waits
    view = view_of(job)
    assert (view.pes, view.n, view.spare, view.state) == (2, 2, 2, "idle"), view.as_dict()
    assert view.kernel == os.getpid()  # found through the job's watchdog (python -I -S -c ...), our child
    assert "  2/2 (+2 spare)  " in J.table([view])


def test_the_json_says_the_spare_pes_apart(job):
    view_of(job)
    out = subprocess.run(
        [sys.executable, "-m", "shmem_notebook.jobs_view", "--json"], capture_output=True, text=True, check=True
    ).stdout
    (mine,) = [d for d in map(json.loads, out.splitlines()) if d["token"] == job._token]
    assert (mine["pes"], mine["n"], mine["spare"]) == (2, 2, 2), mine


def test_a_process_of_the_job_that_ends_while_we_look_leaves_the_job_shown(job):
    """A restart's old ``oshrun`` lingers 1-2 s with the job's token: when it ended between the listing
    and the reading of its CPU, the whole job went missing from the view (a CI run of stop 52)."""
    view_of(job)
    with owned_by(job._token):
        brief = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(0.2)"])
    ended = psutil.Process(brief.pid)  # listed while it runs ...
    brief.wait()  # ... and gone before it is read
    view = J._view(job._token, J._owned()[job._token] + [ended])
    assert view is not None, "the job went missing from the view"
    assert (view.pes, view.n, view.spare) == (2, 2, 2), view.as_dict()
