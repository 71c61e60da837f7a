"""The words for a job's and a PE's state, defined once (client side): ``%shmem status`` (per PE),
the job's state file and the instructor's view (``python -m shmem_notebook.jobs_view``, per job) and
the docs use these and no others.
"""

__all__ = ["IDLE", "BUSY", "HUNG", "DEAD", "MEANING", "pe_state", "job_state"]

IDLE, BUSY, HUNG, DEAD = "idle", "busy", "hung", "dead"

#: word -> what it means, of a PE and of a job (a job is in the state of its worst PE)
MEANING = {
    IDLE: "waits for the next cell",
    BUSY: "runs a cell",
    HUNG: "blocked for good by the last cell (paused, no CPU): `%shmem restart`",
    DEAD: "gone (crashed, killed, or the notebook's kernel died)",
}


def pe_state(job_state: str, dead: bool, running_cell: bool) -> str:
    """A PE's word: ``dead`` when its process is gone, ``hung`` when it is still in the cell of a
    job marked hung, ``busy`` while it runs a cell (or answers a request), ``idle`` otherwise."""
    if dead:
        return DEAD
    if running_cell:
        return HUNG if job_state == HUNG else BUSY
    return IDLE


def job_state(state: str) -> str:
    """The word for a :class:`~shmem_notebook.Job`'s ``state`` (``running`` is said ``idle``)."""
    return {"running": IDLE}.get(state, state)
