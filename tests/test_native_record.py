"""The race recording's hot path in C (native_record.c) records what the Python recording records,
event for event: each program below is recorded twice in one job, with the C module and without
it (the same heap, so the same offsets), and the PEs' events, operation counts and cut-off lines
must be equal, and the C path must have been the one taken. Built once into the user's cache;
``SHMEM_NOTEBOOK_NATIVE=no-record`` (or ``0``) leaves the recording in Python."""

import os
import pickle

import pytest

from conftest import job_fixture, quiet
from shmem_notebook import native_board, native_record
from shmem_notebook.distinct import Events, numbering
from shmem_notebook.operations import FIELD

job = job_fixture(2, 4, heap="16M", sos=(2,))

ARRAYS = ["cell8=int64[8]", "flag=int64[4]", "big=float64[64]", "grid=int64[4,6]"]

#: name -> a cell: the usual and the unusual ways a cell touches memory
PROGRAMS = {
    "merged puts and gets": """
src = np.arange(8, dtype=np.int64)
other = (me + 1) % npes
for i in range(40):
    shmem.put(cell8[i % 8:i % 8 + 1], src[i % 8:i % 8 + 1], other)
shmem.barrier_all()
for i in range(8):
    shmem.get(src[i:i + 1], cell8[i:i + 1], other)
""",
    "a put to itself, a NumPy PE, keywords": """
one = np.ones(2, dtype=np.int64)
shmem.put(cell8[0:2], one, me)
shmem.put(cell8[2:4], one, np.int64((me + 1) % npes))
shmem.put(target=cell8[4:6], source=one, pe=(me + 1) % npes)
shmem.put(cell8[6:8], one, (me + 1) % npes, 1)
shmem.barrier_all()
""",
    "rows, blocks and strided views": """
local = np.arange(64, dtype=np.float64)
rows = np.ones((2, 6), dtype=np.int64)
shmem.put(grid[1:3], rows, (me + 1) % npes)
shmem.put(grid[3], rows[0], (me + 1) % npes)
shmem.barrier_all()
big[::2] = local[::2]
big[1::4] = 3.0
x = big[::3].sum()
""",
    "a put_nbi's buffer reused before quiet": """
buf = np.zeros(8, dtype=np.int64)
shmem.put_nbi(cell8, buf, (me + 1) % npes)
buf[3] = 1
buf[0:2] = 5
y = buf[4]
shmem.quiet()
buf[5] = 2
shmem.barrier_all()
""",
    "loads and stores of every kind": """
flag[0] = 1
flag[1:3] = 2
flag[-1] = me
v = cell8[3]
w = cell8[-2]
big[2:10] = 1.5
big[::4] = 0.0
grid[1, 2] = 3
grid[2] = 4
grid[0:2, 1:3] = 5
cell8[1] += 1
big.flat[5] = 2.0
z = big + 1
s = cell8.sum()
t = flag[[0, 2]]
cell8[np.int64(4)] = 9
shmem.barrier_all()
""",
    "a race and a flag": """
if me == 0:
    shmem.put(cell8[0:4], np.arange(4, dtype=np.int64), 1)
    shmem.atomic_set(flag[0:1], 1, 1)  # no fence: the put may land after the flag
if me == 1:
    shmem.wait_until(flag[0:1], "==", 1)
    seen = cell8[0:4].copy()
    early = cell8[5]
shmem.barrier_all()
""",
    "a spin on a flag": """
if me == 0:
    shmem.put(cell8[0:4], np.arange(4, dtype=np.int64), 1)
    shmem.atomic_set(flag[0:1], 1, 1)
if me == 1:
    while flag[0] == 0:
        pass
    seen = cell8[0:4].copy()
shmem.barrier_all()
""",
    "a bad PE raised inside a recorded call": """
try:
    shmem.put(cell8[0:1], np.ones(1, dtype=np.int64), npes + 3)
except Exception as exc:
    caught = type(exc).__name__
shmem.put(cell8[1:2], np.ones(1, dtype=np.int64), (me + 1) % npes)
shmem.barrier_all()
""",
    "a stencil": """
u = big[0:34]
new = np.zeros(34)
left, right = (me - 1) % npes, (me + 1) % npes
for sweep in range(12):
    shmem.put(u[33:34], u[1:2], left)
    shmem.put(u[0:1], u[32:33], right)
    shmem.barrier_all()
    new[1:-1] = 0.5 * (u[:-2] + u[2:])
    shmem.barrier_all()
    u[1:-1] = new[1:-1]
    shmem.barrier_all()
""",
    "a helper from an earlier cell": """
helper(cell8, (me + 1) % npes)
helper(cell8, (me + 1) % npes)
""",
}

#: programs whose operation count depends on timing
SPINS = {"a spin on a flag"}

HELPER = """
def helper(a, pe):
    shmem.put(a[0:4], np.arange(4, dtype=np.int64), pe)
    shmem.barrier_all()
    return a[4] + a[5]
"""

RESET = "cell8[:] = 0; flag[:] = 0; big[:] = 0; grid[:] = 0; shmem.barrier_all()"

SWITCH = """
import shmem_notebook.engine.record.in_c as _in_c
if not hasattr(_in_c, "_saved_module"):
    _in_c._saved_module = _in_c.module
_in_c.module = _in_c._saved_module if {on} else (lambda: None)
"""


def _recorded(job, code, c, cap=None):
    """Each PE's (events, ops, truncated) of ``code`` recorded with the C module or without it."""
    quiet(job, SWITCH.format(on=c))
    quiet(job, RESET, arrays=ARRAYS)
    job.ask("race_start", {"cap": cap} if cap else {})
    quiet(job, code, arrays=ARRAYS)
    traces = job.ask("race_stop")
    quiet(job, SWITCH.format(on=True))
    return {pe: ([_private_as_lengths(e) for e in t["events"]], t["ops"], t["truncated"]) for pe, t in traces.items()}


def _private_as_lengths(event):
    """``event`` with the addresses of private memory (a fresh NumPy array's, different in each run) as
    the length they span."""
    event = list(event)
    for kind, space, lo, hi in (("mem", "space", "lo", "hi"), ("rma", "lspace", "llo", "lhi")):
        f = FIELD[kind]
        if event[0] == kind and event[f[space]] == "priv":
            event[f[lo]], event[f[hi]] = 0, event[f[hi]] - event[f[lo]]
    return event


@pytest.fixture(scope="module")
def with_helper(job):
    quiet(job, HELPER)
    return job


@pytest.mark.parametrize("name", list(PROGRAMS))
def test_the_c_recording_records_what_the_python_one_does(with_helper, name):
    job = with_helper
    python = _recorded(job, PROGRAMS[name], c=False)
    c = _recorded(job, PROGRAMS[name], c=True)
    if name in SPINS:  # how many times a loop went round is the machine's: not compared
        c, python = ({pe: (events, truncated) for pe, (events, _, truncated) in x.items()} for x in (c, python))
    assert c == python
    assert any(recorded[0] for recorded in c.values())


def test_the_cell_ran_with_the_c_wrapper_and_without_it(job):
    printed = {}
    for on in (True, False):
        quiet(job, SWITCH.format(on=on))
        job.ask("race_start", {})
        result = job.run("print(type(shmem.put).__name__, type(_shmem_race_get).__name__)", arrays=ARRAYS)
        job.ask("race_stop")
        printed[on] = set(result.stdout.values())
    quiet(job, SWITCH.format(on=True))
    assert printed[True] == {"Recorded builtin_function_or_method\n"}
    assert printed[False] == {"function function\n"}


def test_a_cut_off_recording_stops_at_the_same_line(with_helper):
    code = (
        "for i in range(30):\n    cell8[i % 8] = i\n"
        "    shmem.put(big[i:i + 1], big[i + 1:i + 2], (me + 1) % npes)\n    shmem.quiet()\n"
    )
    python = _recorded(with_helper, code, c=False, cap=20)
    c = _recorded(with_helper, code, c=True, cap=20)
    assert c == python
    assert all(truncated in (2, 3, 4) for _, _, truncated in c.values()), c


def test_race_verdicts_agree(with_helper):
    job = with_helper
    verdicts = {}
    for on in (False, True):
        quiet(job, SWITCH.format(on=on))
        quiet(job, RESET, arrays=ARRAYS)
        result = job.run(PROGRAMS["a race and a flag"], arrays=ARRAYS, race=True)
        verdicts[on] = [str(r) for r in result.races]
        job.race_reset()
    quiet(job, SWITCH.format(on=True))
    assert verdicts[True] == verdicts[False]
    assert len(verdicts[True]) == 1 and verdicts[True][0].startswith("RACE cell8[0:4] on PE 1"), verdicts


# -- the build (no PEs) ------------------------------------------------------------------------
@pytest.fixture
def cache(tmp_path, monkeypatch):
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
    monkeypatch.delenv("SHMEM_NOTEBOOK_NATIVE", raising=False)
    return tmp_path


def test_built_once_into_the_users_cache_and_switched_off_alone(cache, monkeypatch):
    assert native_record.load() is None
    path = native_record.build()
    assert path and path.startswith(str(cache))
    made = os.stat(path).st_mtime_ns
    assert native_record.build() == path and os.stat(path).st_mtime_ns == made  # a stat, not a build
    module = native_record.load()
    assert {"Recorded", "PlainRMA", "Access", "get", "read", "set", "setup"} <= set(dir(module))
    native_board.build()
    monkeypatch.setenv("SHMEM_NOTEBOOK_NATIVE", "no-record")
    assert native_record.load() is None and native_board.load() is not None
    monkeypatch.setenv("SHMEM_NOTEBOOK_NATIVE", "0")
    assert native_record.load() is None and native_board.load() is None


def test_its_functions_refuse_to_run_before_setup(cache):
    native_record.build()
    module = native_record.load()  # a fresh import: setup() not called in this process
    with pytest.raises(RuntimeError, match="setup"):
        module.Recorded(None, print, [(), (), None], (), print)


def test_a_stopped_recording_is_freed_at_once(with_helper):
    """The C access handler holds its recording; the stop lets go of it, so the recording and its
    events go when the stop drops them, not at some later collection (the collector is off here)."""
    job = with_helper
    quiet(job, "import gc as _gc\n_gc.collect()\n_gc.disable()")
    try:
        job.run(PROGRAMS["a stencil"], arrays=ARRAYS, race=True)
        left = job.run('print(sum(type(o).__name__ == "RaceRecording" for o in _gc.get_objects()))')
    finally:
        quiet(job, "_gc.enable()")
        job.race_reset()
    assert set(left.stdout.values()) == {"0\n"}


def test_the_collector_does_not_look_at_events_made_in_c(with_helper):
    """Events hold numbers, strings and lists of them: those made in C are not tracked by the collector,
    which otherwise walked every one of a long loop's events at each collection; the Python recording's are."""
    job = with_helper
    tracked = {}
    for c in (True, False):
        quiet(job, SWITCH.format(on=c))
        job.ask("race_start", {})
        quiet(job, PROGRAMS["a stencil"], arrays=ARRAYS)
        counted = job.run(
            "import gc as _gc\nfrom shmem_notebook.engine.record import layer as _layer\n"
            "_events = _layer.attached('race').events\n"
            "print(sum(map(_gc.is_tracked, _events)), len(_events) > 10)"
        )
        job.ask("race_stop")
        tracked[c] = set(counted.stdout.values())
    quiet(job, SWITCH.format(on=True))
    assert tracked[True] == {"0 True\n"}, tracked
    assert tracked[False] != {"0 True\n"}, tracked


def test_distinct_events_are_the_same_type_and_value():
    """``distinct`` (what a PE's events cross to the client as, shmem_notebook/distinct.py) finds an
    event's earlier copy only if every field is the same type and value: 1 is not 1.0 nor True,
    0.0 is not -0.0; a field that has no hash makes the event an entry of its own."""
    native_record.build()
    distinct = native_record.load().distinct
    put = ["rma", "put", 3, 1, 0, 8, "<i8", "priv", 8, 16, 0, [1], None, None]
    events = [
        put,
        list(put),
        [*put[:11], [1.0], None, None],
        [*put[:11], [True], None, None],
        ["mem", "load", 2, "read", "sym", 0.0, 8, "<f8", None],
        ["mem", "load", 2, "read", "sym", -0.0, 8, "<f8", None],
        ["mem", "store", 3, "write", "sym", 0, 56, "<i8", (8, ((4, 16),))],
        ["mem", "store", 3, "write", "sym", 0, 56, "<i8", (8, ((4, 16),))],
        ["wait", "wait_until", 4, {"unhashable": 1}],
        ["wait", "wait_until", 4, {"unhashable": 1}],
        ["sync", "barrier_all", 9, 0, None],
    ] * 3
    table, ids = distinct(events)
    assert [table[i] for i in ids] == events
    assert [repr(table[i]) for i in ids] == [repr(e) for e in events]  # 1 stays 1, -0.0 stays -0.0
    firsts = [e for i, e in enumerate(events) if "unhashable" in repr(e) or repr(e) not in map(repr, events[:i])]
    assert table == firsts and all(a is b for a, b in zip(table, firsts))  # in order of first appearance
    assert len(table) == 7 + 2 * 3  # the waits with a dict: their own entries each time
    with pytest.raises(TypeError, match="list"):
        distinct(tuple(events))


def test_events_cross_as_their_distinct_events():
    native_record.build()
    distinct = native_record.load().distinct
    two = [["sync", "barrier_all", 9, 0, None], ["mem", "load", 2, "read", "sym", 0, 8, None]]
    events = [list(e) for e in two * 500]
    numbered = Events.numbered(events, distinct)
    back = pickle.loads(pickle.dumps(numbered))
    assert back == events and back.ids == numbered.ids and len(back.table) == 2
    assert back[0] is back[2]  # a repeated event is one object
    assert len(pickle.dumps(numbered)) < len(pickle.dumps(events)) / 4
    plain = pickle.loads(pickle.dumps(Events(events)))
    assert plain == events and plain.ids is None and plain.table is None
    assert numbering(back) == (back.table, back.ids) and numbering(plain) is None and numbering(events) is None
    back.append(["sync", "barrier_all", 9, 0, None])  # changed: its numbers no longer say which event is which
    assert numbering(back) is None
