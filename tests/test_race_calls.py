"""Races inside functions point at the lines users edit (issue 48 item 4): an access made in a function
the cell calls (defined in the cell, a method of a class in the cell, a function of the user's module)
is reported at the cell line of the call that led to it, with its own place (``own_file``, ``own_line``,
``function``); the fix puts a barrier between the two call lines, and the fixed cell runs without races.
Both accesses inside one call: the hint says the fix belongs in the function, with its lines."""

import io

import pytest

from conftest import job_fixture

job = job_fixture(2, heap="8M", timeout=60, sos=(2,))

MODULE = """import numpy as np
from shmem4py import shmem


def produce(buf, me):
    if me == 0:
        shmem.put(buf, np.arange(4, dtype=np.int64), 1)


def consume(buf, me):
    if me == 1:
        return int(buf[2])


def exchange(buf, me):
    produce(buf, me)
    return consume(buf, me)
"""

IN_CELL = """def produce(buf):
    if me == 0:
        shmem.put(buf, np.arange(4, dtype=np.int64), 1)

def consume(buf):
    if me == 1:
        return int(buf[2])

buf = shmem.zeros(4, dtype=np.int64)
shmem.barrier_all()
produce(buf)
{sync}
consume(buf)
shmem.barrier_all()
"""

METHOD = """class Ring:
    def __init__(self):
        self.inbox = shmem.zeros(4, dtype=np.int64)

    def send(self):
        if me == 0:
            shmem.put(self.inbox, np.arange(4, dtype=np.int64), 1)

    def receive(self):
        if me == 1:
            return int(self.inbox[2])

ring = Ring()
shmem.barrier_all()
ring.send()
{sync}
ring.receive()
shmem.barrier_all()
"""

IN_MODULE = """import sys
sys.path.insert(0, {folder!r})
import racy_kernels
buf = shmem.zeros(4, dtype=np.int64)
shmem.barrier_all()
racy_kernels.produce(buf, me)
{sync}
racy_kernels.consume(buf, me)
shmem.barrier_all()
"""

#: template -> (array, (call line, own line, function) of the put and of the load, own file in the module)
SHAPES = {
    "function in the cell": (IN_CELL, "buf", (11, 3, "produce"), (13, 7, "consume"), False),
    "method of a class in the cell": (METHOD, "ring.inbox", (15, 7, "Ring.send"), (17, 11, "Ring.receive"), False),
    "function in a module": (IN_MODULE, "buf", (6, 7, "produce"), (8, 12, "consume"), True),
}


@pytest.fixture(scope="module")
def folder(tmp_path_factory):
    """A folder holding the user's module, on the PEs' sys.path once a cell puts it there."""
    path = tmp_path_factory.mktemp("kernels")
    (path / "racy_kernels.py").write_text(MODULE)
    return str(path)


def _run(job, code):
    return job.run(code, race=True, stdout=io.StringIO(), stderr=io.StringIO())


@pytest.mark.parametrize("shape", list(SHAPES))
def test_race_in_functions_is_at_the_call_lines_and_fixed_there(job, folder, shape):
    template, array, put, load, in_module = SHAPES[shape]
    racy = _run(job, template.format(sync="pass", folder=folder))
    assert len(racy.races) == 1, [str(r) for r in racy.races]
    race = racy.races[0]
    assert race.array == array
    own_file = f"{folder}/racy_kernels.py" if in_module else None
    for access, (line, own_line, function), op in zip(race.accesses, (put, load), ("put", "load")):
        assert (access.pe, access.line, access.op) == ((0, line, op) if op == "put" else (1, line, op))
        assert (access.own_file, access.own_line, access.function) == (own_file, own_line, function)
    own = "racy_kernels.py:{}" if in_module else "line {}"
    assert (
        f"PE 0 {own.format(put[1])} ({put[2]}), called at line {put[0]} put (write) / "
        f"PE 1 {own.format(load[1])} ({load[2]}), called at line {load[0]} load (read) are unordered"
    ) in str(race)
    assert f"between line {put[0]} and line {load[0]}" in race.hint
    assert race.fix is not None and [e.line for e in race.fix.edits] == [(put[0], load[0])]
    fixed = racy.fixed_code
    assert fixed == template.format(sync="pass", folder=folder).replace(
        f"{template.splitlines()[put[0] - 1]}\n", f"{template.splitlines()[put[0] - 1]}\nshmem.barrier_all()\n"
    )
    assert _run(job, fixed).races == []
    assert _run(job, template.format(sync="shmem.barrier_all()", folder=folder)).races == []


#: both accesses inside what one call runs: (cell, call line, the put's and the load's own lines and functions)
ONE_CALL = {
    "in the cell": (
        IN_CELL.replace("def produce", "def exchange(buf):\n    produce(buf)\n    return consume(buf)\n\ndef produce")
        .replace("produce(buf)\n{sync}\nconsume(buf)\n", "exchange(buf)\n")
        .replace("{sync}", "pass"),
        15,
        (7, "produce"),
        (11, "consume"),
        "line {}",
    ),
    "in a module": (
        IN_MODULE.replace("racy_kernels.produce(buf, me)\n{sync}\n", "").replace("consume", "exchange"),
        6,
        (7, "produce"),
        (12, "consume"),
        "racy_kernels.py:{}",
    ),
}


@pytest.mark.parametrize("shape", list(ONE_CALL))
def test_both_accesses_in_one_call_are_fixed_in_the_function(job, folder, shape):
    cell, call, put, load, own = ONE_CALL[shape]
    racy = _run(job, cell.format(folder=folder))
    assert len(racy.races) == 1, [str(r) for r in racy.races]
    race = racy.races[0]
    assert [(a.line, a.own_line, a.function) for a in race.accesses] == [(call, *put), (call, *load)]
    assert race.fix is None and racy.fixed_code is None
    assert race.hint == (
        f"both are in what the cell's line {call} calls: make the change in the function: a shmem.barrier_all() "
        f"between {own.format(put[0])} and {own.format(load[0])} (or put + quiet + a flag the reader waits on) "
        "orders them"
    )
