"""The race detector sees code outside the cell: helpers of earlier cells, the user's modules (also
reloaded), ``exec``'d code, ``shmem.ptr`` views, compiled code, ``arr.flat`` (real 2- and 4-PE jobs;
racy and fixed twins)."""

import io
import os
import re
import subprocess
import sys
import textwrap

import pytest

from conftest import job_fixture, quiet
from shmem_notebook.analysis.places import cell_labels
from shmem_notebook.launcher.environment import platform_environment

job = job_fixture(2, 4, heap="16M", timeout=60)

SETUP = """
g = shmem.zeros(2, dtype=np.int64)
p = shmem.zeros(2, dtype=np.int64)
c = shmem.zeros(4, dtype=np.int64)
fl = shmem.zeros(4, dtype=np.int64)
src = np.ones(1, dtype=np.int64)
right, left = (me + 1) % npes, (me - 1) % npes
"""


@pytest.fixture(autouse=True)
def arrays(request):
    """The arrays of :data:`SETUP`, zeroed before each test that runs cells on ``job``."""
    if "job" not in request.fixturenames:
        return
    job = request.getfixturevalue("job")
    if not hasattr(job, "_outside_setup"):
        quiet(job, SETUP)
        job._outside_setup = True
    quiet(job, "g[:] = 0; p[:] = 0; c[:] = 0; fl[:] = 0; shmem.barrier_all()")


def _define(job, code):
    """Run ``code`` (untraced) and return its label in the race report (``cell 7`` outside IPython, ``In [7].2``
    where the test session made an IPython shell: as the job's history records it)."""
    quiet(job, code)
    return cell_labels(job.history[-1:]).popitem()[1]


def _race(job, code):
    out = io.StringIO()
    result = quiet(job, code, race=True, stdout=out)
    return result.races, out.getvalue()


#: how a report goes on after the place of an access made in a function the cell called (issue 48 item 4)
_CALLED = re.compile(r"( \([\w.]+\))?, called at line \d+$")


def _places(races):
    """Where the accesses of ``races`` are (``{"cell 7 line 3", ...}``); the same for every race (at 4 PEs
    a race may be reported once per PE whose memory it is)."""
    assert races
    found = [{_CALLED.sub("", str(a).split(" ", 2)[2].rsplit(" ", 2)[0]) for a in race.accesses} for race in races]
    assert all(f == found[0] for f in found), found
    return found[0]


# -- helpers defined in earlier cells --------------------------------------------------------------
PUT_RIGHT = """\
def put_right(g):
    shmem.put(g[1:2], g[0:1], right)
"""

RING_SHIFT = """\
def ring_shift(g):
    put_right(g)
    shmem.barrier_all()
    v = int(g[1])
    shmem.barrier_all()
    return v
"""

RING_SHIFT_RACY = """\
def ring_shift_racy(g):
    put_right(g)
    v = int(g[1])
    shmem.barrier_all()
    return v
"""


def test_a_correct_helper_of_an_earlier_cell_has_no_race(job):
    _define(job, PUT_RIGHT)
    _define(job, RING_SHIFT)
    races, out = _race(job, "g[0] = me\nv = ring_shift(g)\nassert v == left\n")
    assert races == [], out


def test_a_racy_helper_is_reported_at_its_own_lines_with_its_cell(job):
    put_cell = _define(job, PUT_RIGHT)
    racy_cell = _define(job, RING_SHIFT_RACY)
    races, out = _race(job, "g[0] = me\nv = ring_shift_racy(g)\n")
    assert _places(races) == {f"{put_cell} line 2", f"{racy_cell} line 3"}, out
    assert all(race.array == "g" and race.indices == (range(1, 2),) for race in races), out
    assert all(race.fix is None for race in races)  # a fix would edit the helpers, not the cell
    assert f"{racy_cell} line 3" in races[0].hint, races[0].hint


SHAPES = """\
def make_shift(buf):
    def shift(scale=1):
        shmem.put(buf[1:2], buf[0:1], right)
        {sync}return int(buf[1]) * scale
    return shift
class Base:
    def sync(self):
        shmem.barrier_all()
class Ring(Base):
    def exchange(self, g):
        shmem.put(g[1:2], g[0:1], right)
        {super_sync}v = int(g[1])
        super().sync()
        self.__seen = v
        return v
shift, ring = make_shift(g), Ring()
"""


@pytest.mark.parametrize("traced", [False, True], ids=["untraced", "traced"])
def test_closures_defaults_and_methods_of_an_earlier_cell(job, traced):
    """A closure with a default argument and a method calling ``super()`` and setting a private
    attribute, defined in an earlier cell (traced too: its code was rewritten with that cell's lines),
    racy and fixed."""
    racy = SHAPES.format(sync="", super_sync="")
    quiet(job, racy, race=traced)
    label = cell_labels(job.history[-1:]).popitem()[1]
    races, out = _race(job, "g[0] = me\nshift()\nshmem.barrier_all()\n")
    assert _places(races) == {f"{label} line 3", f"{label} line 4"}, out
    races, out = _race(job, "g[0] = me\nring.exchange(g)\nshmem.barrier_all()\n")
    assert _places(races) == {f"{label} line 11", f"{label} line 12"}, out
    quiet(job, SHAPES.format(sync="shmem.barrier_all()\n        ", super_sync="super().sync()\n        "), race=traced)
    races, out = _race(
        job,
        "g[0] = me\nassert shift(2) == 2 * left\nshmem.barrier_all()\n"
        "assert ring.exchange(g) == left\nassert ring._Ring__seen == left\n",
    )
    assert races == [], out


SHIFTER = """\
class Shifter:
    def __init__(self, g, scale=1):
        shmem.put(g[1:2], g[0:1], right)
        {sync}self.v = int(g[1]) * scale
        shmem.barrier_all()
"""


def test_a_constructor_of_an_earlier_cell_is_looked_into(job):
    """``Shifter(g)`` of a class defined in an earlier cell: its ``__init__``'s put and load, racy and fixed."""
    label = _define(job, SHIFTER.format(sync=""))
    races, out = _race(job, "g[0] = me\ns = Shifter(g)\n")
    assert _places(races) == {f"{label} line 3", f"{label} line 4"}, out
    _define(job, SHIFTER.format(sync="shmem.barrier_all()\n        "))
    races, out = _race(job, "g[0] = me\ns = Shifter(g, scale=2)\nassert s.v == 2 * left\n")
    assert races == [], out


# -- a kernel in the user's module, edited and reloaded ----------------------------------------------
KERNEL = """\
try:  # an import in a block: the compiler still calls the module's functions its own way
    from shmem4py import shmem
except ImportError:
    shmem = None


def exchange(buf, me, npes):
{body}
    return v
"""
RACY_BODY = """\
    shmem.put(buf[1:2], buf[0:1], (me + 1) % npes)
    v = int(buf[1])
    shmem.barrier_all()"""
FIXED_BODY = """\
    shmem.put(buf[1:2], buf[0:1], (me + 1) % npes)
    shmem.barrier_all()
    v = int(buf[1])
    shmem.barrier_all()"""
MOVED_BODY = """\
    # the same race two lines further down
    right = (me + 1) % npes
    shmem.put(buf[1:2], buf[0:1], right)
    v = int(buf[1])
    shmem.barrier_all()"""


def test_a_module_kernel_is_reported_at_its_file_and_line_and_after_a_reload(job, tmp_path):
    module = f"kernels_{job.n}"
    path = tmp_path / f"{module}.py"
    path.write_text(KERNEL.format(body=RACY_BODY))
    quiet(job, f"import sys, importlib\nsys.path.insert(0, {str(tmp_path)!r})\nimport {module} as kernels\n")
    cell = "g[0] = me\nv = kernels.exchange(g, me, npes)\n"
    races, out = _race(job, cell)
    assert _places(races) == {f"{module}.py:8", f"{module}.py:9"}, out

    path.write_text(KERNEL.format(body=FIXED_BODY))
    quiet(job, "kernels = importlib.reload(kernels)")
    races, out = _race(job, cell)
    assert races == [], out

    path.write_text(KERNEL.format(body=MOVED_BODY))
    quiet(job, "kernels = importlib.reload(kernels)")
    races, out = _race(job, cell)
    assert _places(races) == {f"{module}.py:10", f"{module}.py:11"}, out


def test_a_module_edited_and_not_reloaded_runs_its_old_code(job, tmp_path):
    module = f"version_{job.n}"
    (tmp_path / f"{module}.py").write_text("def version(buf):\n    return int(buf[0]) + 1\n")
    quiet(job, f"import sys\nsys.path.insert(0, {str(tmp_path)!r})\nimport {module} as version_module\n")
    (tmp_path / f"{module}.py").write_text("def version(buf):\n    return int(buf[0]) + 2\n")
    out = io.StringIO()
    quiet(job, "print(version_module.version(g))", race=True, stdout=out)
    assert "] 1" in out.getvalue() and "] 2" not in out.getvalue(), out.getvalue()


# -- exec'd code -------------------------------------------------------------------------------------------
def test_execd_code_is_recorded_at_its_own_lines(job):
    racy = (
        'code = """\nshmem.put(g[1:2], g[0:1], right)\nv = int(g[1])\nshmem.barrier_all()\n"""\ng[0] = me\nexec(code)\n'
    )
    races, out = _race(job, racy)  # the text's first line is empty
    assert _places(races) == {"exec'd code line 2 (called at line 7)", "exec'd code line 3 (called at line 7)"}, out
    fixed = racy.replace("right)\n", "right)\nshmem.barrier_all()\n")
    races, out = _race(job, fixed)
    assert races == [], out


def test_texts_execd_in_a_loop_share_the_place_of_their_exec(job):
    loop = (
        "g[0] = me\nfor k in range(3):\n"
        "    exec(f'shmem.put(g[1:2], g[0:1], right)\\nv{k} = int(g[1])\\nshmem.barrier_all()')\n"
    )
    races, out = _race(job, loop)
    assert _places(races) == {f"exec'd code line {n} (called at line 3)" for n in (1, 2)}, out
    races, out = _race(job, loop.replace("right)", "right); shmem.barrier_all()"))
    assert races == [], out


def test_exec_in_a_helper_with_its_own_namespace(job):
    helper = _define(
        job,
        textwrap.dedent("""\
        def run_kernel(text, g):
            exec(text, {"shmem": shmem, "g": g, "right": right})
    """),
    )
    racy = "g[0] = me\nrun_kernel('shmem.put(g[1:2], g[0:1], right)\\nv = int(g[1])\\nshmem.barrier_all()', g)\n"
    races, out = _race(job, racy)
    assert _places(races) == {f"exec'd code line {n} (called at {helper} line 2)" for n in (1, 2)}, out


EXEC_KERNEL = "shmem.put(g[1:2], g[0:1], right)\n{sync}v = int(g[1])\nshmem.barrier_all()\n"


def test_execd_code_objects_compiled_in_the_cell_are_recorded_at_their_own_lines(job):
    cell = "k = compile({text!r}, '<kernel>', 'exec')\ng[0] = me\nexec(k)\n"
    races, out = _race(job, cell.format(text=EXEC_KERNEL.format(sync="")))
    assert _places(races) == {"exec'd code line 1 (called at line 3)", "exec'd code line 2 (called at line 3)"}, out
    races, out = _race(job, cell.format(text=EXEC_KERNEL.format(sync="shmem.barrier_all()\n")))
    assert races == [], out


def test_execd_code_objects_of_a_file_compiled_in_an_earlier_cell(job, tmp_path):
    for name, sync in (("racy", ""), ("fixed", "shmem.barrier_all()\n")):
        path = tmp_path / f"kernel_{name}_{job.n}.py"
        path.write_text(EXEC_KERNEL.format(sync=sync))
        quiet(job, f"kernel = compile(open({str(path)!r}).read(), {str(path)!r}, 'exec')")  # not race-checked
        races, out = _race(job, "g[0] = me\nexec(kernel)\n")
        if sync:
            assert races == [], out
        else:
            assert _places(races) == {f"exec'd code line {n} (called at line 2)" for n in (1, 2)}, out


# -- shmem.ptr views ---------------------------------------------------------------------------------
PTR = """\
near = shmem.ptr(p, left)
assert near is not None, "shmem.ptr gave no view of a PE of this node"
shmem.put(p[0:1], src, right)
{sync}v = int(near[0])
shmem.barrier_all()
"""


def test_a_load_through_shmem_ptr_races_with_a_remote_put_to_that_pe(job):
    races, out = _race(job, PTR.format(sync=""))
    assert len(races) == 1, out
    race = races[0]
    assert race.array == "p" and {a.line for a in race.accesses} == {3, 4}, out
    writer, reader = sorted(race.accesses, key=lambda a: a.line)
    assert writer.op == "put" and reader.op == "load", out
    for owner in race.pes:  # PE owner's p[0]: put by its left neighbour, read by its right one
        assert (owner - 1) % job.n in writer.pes and (owner + 1) % job.n in reader.pes


def test_a_load_through_shmem_ptr_after_a_barrier_does_not_race(job):
    races, out = _race(job, PTR.format(sync="shmem.barrier_all()\n"))
    assert races == [], out


PTR_SOURCE = """\
near = shmem.ptr(p, left)
assert near is not None, "shmem.ptr gave no view of a PE of this node"
p[0] = me + 1
{sync}shmem.put(g[0:1], near[0:1], right)
shmem.barrier_all()
"""


def test_a_shmem_ptr_view_as_a_puts_source_is_a_read_of_that_pes_memory(job):
    races, out = _race(job, PTR_SOURCE.format(sync=""))
    assert races and all(race.array == "p" and race.indices == (range(0, 1),) for race in races), out
    for race in races:  # PE owner's p[0]: stored by owner, read by its right neighbour's put
        writer, reader = sorted(race.accesses, key=lambda a: a.line)
        assert (writer.line, writer.op, reader.line, reader.op) == (3, "store", 4, "put"), out
        assert all(owner in writer.pes and (owner + 1) % job.n in reader.pes for owner in race.pes), out
    races, out = _race(job, PTR_SOURCE.format(sync="shmem.barrier_all()\n"))
    assert races == [], out


# -- compiled code ------------------------------------------------------------------------------------
MEMSET = """
import ctypes
fill = ctypes.CDLL(None).memset
fill.argtypes = [np.ctypeslib.ndpointer(np.int64, flags="C"), ctypes.c_int, ctypes.c_size_t]
fill.restype = ctypes.c_void_p
"""


@pytest.mark.parametrize("sync", ["", "shmem.barrier_all()\n"], ids=["racy", "fixed"])
def test_compiled_code_counts_its_arrays_as_read_and_written_and_says_so(job, sync):
    quiet(job, MEMSET)
    races, out = _race(job, f"shmem.put(c[0:1], src, right)\n{sync}fill(c, 0, c.nbytes)\nshmem.barrier_all()\n")
    line = 3 if sync else 2
    assert f"line {line} calls compiled code: its arrays counted as read and written" in out.splitlines(), out
    if sync:
        assert races == [], out
    else:
        assert len(races) == 1 and {(a.line, a.op) for a in races[0].accesses} == {(1, "put"), (2, "memset")}, out


NJIT = """\
import numba
@numba.njit
def zero(a):
    for i in range(a.size):
        a[i] = 0
"""


@pytest.mark.parametrize("sync", ["", "shmem.barrier_all()\n"], ids=["racy", "fixed"])
def test_a_numba_kernel_counts_its_arrays_as_read_and_written(job, sync):
    pytest.importorskip("numba")
    quiet(job, NJIT)
    races, out = _race(job, f"shmem.put(c[0:1], src, right)\n{sync}zero(c)\nshmem.barrier_all()\n")
    line = 3 if sync else 2
    assert f"line {line} calls compiled code: its arrays counted as read and written" in out.splitlines(), out
    assert (races == []) if sync else ({(a.line, a.op) for a in races[0].accesses} == {(1, "put"), (2, "zero")}), out


# -- arr.flat ------------------------------------------------------------------------------------------
@pytest.mark.parametrize("access", ["fl.flat[0] = 5", "v = fl.flat[0]", "fl.flat[0:2] += 1"])
@pytest.mark.parametrize("sync", ["", "shmem.barrier_all()\n"], ids=["racy", "fixed"])
def test_flat_writes_and_reads_are_recorded(job, access, sync):
    races, out = _race(job, f"shmem.put(fl[0:1], src, right)\n{sync}{access}\nshmem.barrier_all()\n")
    if sync:
        assert races == [], out
    else:
        assert len(races) == 1 and races[0].array == "fl" and {a.line for a in races[0].accesses} == {1, 2}, out


# -- the command-line runner says so too ---------------------------------------------------------------------
PROGRAM = """\
import ctypes
import numpy as np
from shmem4py import shmem

me, npes = shmem.my_pe(), shmem.n_pes()
c = shmem.zeros(4, dtype=np.int64)
fill = ctypes.CDLL(None).memset
fill.argtypes = [np.ctypeslib.ndpointer(np.int64, flags="C"), ctypes.c_int, ctypes.c_size_t]
shmem.barrier_all()
shmem.put(c[0:1], np.ones(1, dtype=np.int64), (me + 1) % npes)
{sync}fill(c, 0, c.nbytes)
shmem.barrier_all()
shmem.free(c)
"""


@pytest.mark.pe
@pytest.mark.parametrize("sync", ["", "shmem.barrier_all()\n"], ids=["racy", "fixed"])
def test_the_runner_notes_compiled_code_too(tmp_path, sync):
    (tmp_path / "prog.py").write_text(PROGRAM.format(sync=sync))
    done = subprocess.run(
        [sys.executable, "-m", "shmem_notebook.race", "--", "oshrun", "-n", "2", sys.executable, "prog.py"],
        cwd=tmp_path,
        env=dict(os.environ, **platform_environment()),
        capture_output=True,
        text=True,
        timeout=240,
        check=False,
    )
    line = 12 if sync else 11
    assert f"prog.py:{line} calls compiled code: its arrays counted as read and written" in done.stdout, done.stderr
    assert done.returncode == (0 if sync else 1), done.stdout + done.stderr
    if not sync:
        assert "prog.py:10 put (write)" in done.stdout and "prog.py:11 memset (write)" in done.stdout, done.stdout


# -- in a notebook: cells are named as the notebook shows them ----------------------------------------------
@pytest.mark.pe
def test_a_notebook_names_the_cell_a_helper_was_defined_in(capsys):
    import shmem_notebook
    from conftest import ipython_shell

    shmem_notebook.job._current = None
    ip = ipython_shell()
    try:
        assert ip.run_cell("%shmem start -n 2 --heap 16M").success
        ip.run_cell("%%pxshmem\ng = shmem.zeros(2, dtype=np.int64)\nright = (me + 1) % npes\n", store_history=True)
        ip.run_cell("%%pxshmem\n" + PUT_RIGHT, store_history=True)
        put_count = ip.execution_count - 1
        ip.run_cell("%%pxshmem\n" + RING_SHIFT_RACY, store_history=True)
        capsys.readouterr()
        ip.run_cell("%%pxshmem --race\ng[0] = me\nv = ring_shift_racy(g)\n", store_history=True)
        out = capsys.readouterr().out
        assert re.search(rf"PE 0 In \[{put_count}\] line 2, called at line 2 put \(write\)", out), out
        assert re.search(rf"PE 1 In \[{put_count + 1}\] line 3, called at line 2 load \(read\)", out), out
    finally:
        ip.run_cell("%shmem stop")


# -- naming lines (pure) -------------------------------------------------------------------------------------
def test_where_names_the_cell_earlier_cells_modules_and_execd_code():
    from shmem_notebook.analysis.places import cell_labels, where
    from shmem_notebook.job.history import CellRecord
    from shmem_notebook.protocol import RACE_LINES

    history = [CellRecord("def f(a):\n    a[0] = 1\n", {}, {}, count=3, number=1)]
    sha = next(iter(cell_labels(history)))
    places = {
        7: ["cell", sha, 1],
        8: ["file", "/tmp/x/kernels.py"],
        9: ["exec", 7 * RACE_LINES + 2],
        10: ["cell", "0" * 40, 5],
    }
    cells = cell_labels(history)
    assert where(12, places, cells) == "line 12"
    assert where(7 * RACE_LINES + 2, places, cells) == "In [3] line 2"
    assert where(8 * RACE_LINES + 12, places, cells) == "kernels.py:12"
    assert where(9 * RACE_LINES + 3, places, cells) == "exec'd code line 3 (called at In [3] line 2)"
    assert where(10 * RACE_LINES + 4, places, cells) == "an earlier cell line 4"
