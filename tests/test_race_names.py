"""Race reports name memory by what the program wrote (issue 48 item 6): an allocation kept in an
attribute (``self.inbox = shmem.zeros(...)``), a dict or a list is named so, not ``symmetric memory``."""

import io

import pytest

from conftest import job_fixture

job = job_fixture(2, heap="8M", timeout=60, sos=(2,), oshmpi=(2,))

#: PE 0 puts into PE 1's buffer while PE 1 reads it: {setup} makes ``buf``, {sync} orders them or not
RACE = """{setup}
shmem.barrier_all()
if me == 0:
    shmem.put({buf}, np.arange(4, dtype=np.int64), 1)
{sync}
if me == 1:
    seen = int({buf}[2])
shmem.barrier_all()
"""

RING = """class Ring:
    def __init__(self):
        self.inbox = shmem.zeros(4, dtype=np.int64)
        self.slots = [shmem.zeros(4, dtype=np.int64) for _ in range(2)]
        self.bufs = {"halo": shmem.zeros(4, dtype=np.int64)}
"""

#: PE 0 puts into PE 1's buffer while PE 1 reads it, all inside a function: nothing is left to name it by at the end
IN_FUNCTION = """{setup}
def main():
    {make}
    shmem.barrier_all()
    if me == 0:
        shmem.put({buf}, np.arange(4, dtype=np.int64), 1)
    {sync}
    if me == 1:
        seen = int({buf}[2])
    shmem.barrier_all()
main()
"""

#: (template, setup, how the function makes the buffer, the buffer as the cell writes it, the name reported)
SHAPES = {
    "attribute": (RACE, RING + "ring = Ring()", "", "ring.inbox", "ring.inbox"),
    "attribute's list": (RACE, RING + "ring = Ring()", "", "ring.slots[1]", "ring.slots[1]"),
    "attribute's dict": (RACE, RING + "ring = Ring()", "", "ring.bufs['halo']", "ring.bufs['halo']"),
    "class attribute": (RACE, "class Box:\n    data = shmem.zeros(4, dtype=np.int64)", "", "Box.data", "Box.data"),
    # gone from the namespace at the end: named by what the allocation was assigned to
    "instance in a function": (IN_FUNCTION, RING, "r = Ring()", "r.inbox", "self.inbox"),
    "dict in a function": (
        IN_FUNCTION,
        "",
        "bufs = {}\n    bufs['halo'] = shmem.zeros(4, dtype=np.int64)",
        "bufs['halo']",
        "bufs['halo']",
    ),
}


def _run(job, code):
    return job.run(code, race=True, stdout=io.StringIO(), stderr=io.StringIO())


@pytest.mark.parametrize("shape", list(SHAPES))
def test_memory_named_as_the_program_wrote_it(job, shape):
    template, setup, make, buf, name = SHAPES[shape]
    racy = _run(job, template.format(setup=setup, make=make, buf=buf, sync="pass"))
    assert [r.array for r in racy.races] == [name], [str(r) for r in racy.races]
    assert f"{name}[2]" in str(racy.races[0])
    fixed = _run(job, template.format(setup=setup, make=make, buf=buf, sync="shmem.barrier_all()"))
    assert fixed.races == []
