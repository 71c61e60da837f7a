"""Shared fixtures: real OpenSHMEM jobs, the quiet run, the ``pe`` marker, and a check that no
process outlives a test module.

Every process started by this test session inherits SHMEM_NOTEBOOK_TEST_SESSION,
so leftovers are found by that marker even when other jobs run on the machine.

``pe`` marks every test that starts OpenSHMEM PEs, Slurm, a kernel, JupyterLab or a browser,
or runs notebooks or benchmarks; ``make test-quick`` (``pytest -m "not pe"``) runs the rest in
seconds. A test is ``pe`` when it uses a fixture made by :func:`job_fixture` (directly or through
another fixture), when its module sets ``pytestmark = pytest.mark.pe``, or when it is decorated
with ``@pytest.mark.pe``. When ``pe`` tests are deselected, every other test runs with an
``oshrun`` that refuses (first on PATH, inherited by subprocesses): a test that starts PEs without
the marker fails at once, saying so.
"""

import contextlib
import io
import json
import os
import re
import resource
import signal
import stat
import subprocess
import sys
import threading
import time
import uuid

import psutil
import pytest

from shmem_notebook.analysis.postmortem import thread_stacks
from shmem_notebook.job.watchdog import owned_processes

#: the test process is a client: importing shmem4py here would call shmem_init, start a
#: singleton orted that outlives every module and segfault pytest at exit (ompi#11604)
sys.modules.setdefault("shmem4py", None)

#: the tests press Ctrl-C (``_thread.interrupt_main``): as in a terminal it raises KeyboardInterrupt,
#: also where pytest was started with SIGINT ignored (a background job: ``.ci/run &``)
signal.signal(signal.SIGINT, signal.default_int_handler)

MARKER = "SHMEM_NOTEBOOK_TEST_SESSION"
os.environ.setdefault(MARKER, uuid.uuid4().hex)
if os.environ.get("PYTEST_XDIST_WORKER"):  # each worker (pytest -n) finds only what its own tests started
    os.environ[MARKER] = f"{os.environ[MARKER].split('-')[0]}-{os.environ['PYTEST_XDIST_WORKER']}"


def session_processes():
    """Live processes (not us) started by this test session: oshrun, engines, controller, watchdogs."""
    return owned_processes(os.environ[MARKER], MARKER)


def wait_for_no_processes(timeout=15.0):
    """The session's leftover processes after up to ``timeout`` seconds (empty when clean)."""
    deadline = time.monotonic() + timeout
    while True:
        left = []
        for proc in session_processes():
            try:
                cmdline = " ".join(proc.cmdline())
            except psutil.Error:
                continue
            if "pytest" not in cmdline:
                left.append(cmdline[:120])
        if not left or time.monotonic() > deadline:
            return left
        time.sleep(0.2)


def shared_memory():
    """This user's shared memory that no process maps: the names in /dev/shm, SysV segment ids
    (what other jobs running on the machine use is mapped, so it is not counted)."""
    names = set(os.listdir("/dev/shm")) if os.path.isdir("/dev/shm") else set()
    for maps in _readable("/proc/*/maps"):
        names -= {line.rsplit("/dev/shm/", 1)[1].split(" (")[0] for line in maps if "/dev/shm/" in line}
    with open("/proc/sysvipc/shm") as f:
        rows = [line.split() for line in f.readlines()[1:]]
    return names | {f"SysV shmid {row[1]}" for row in rows if int(row[7]) == os.getuid() and row[6] == "0"}


def shared_memory_left(before, settle=10.0):
    """What :func:`shared_memory` has that ``before`` had not, once it stays for up to ``settle``
    seconds: a job stopping in another test (pytest -n) unmaps its segments a moment before it
    removes them, and what is really left stays."""
    deadline = time.monotonic() + settle
    while True:
        left = shared_memory() - before
        if not left or time.monotonic() > deadline:
            return left
        time.sleep(0.2)


def left_of(segments):
    """``(files in /dev/shm, SysV shmids)`` of a :class:`~shmem_notebook.launcher.shm.Segments` that still
    exist: what one job's processes made (mapped when noted, created by them, named by their Open MPI job id),
    not what another test's job (pytest -n) leaves meanwhile. Empty when the job's clean-up removed it all."""
    files, shmids = segments.left()
    return {f for f in files if f.startswith("/dev/shm/")}, shmids


#: a job's cluster id (``1796004259-rtmy``) in the names of the files it keeps in the profile
CLUSTER_ID = re.compile(r"\d{9,}-[a-z0-9]{4}")


def profile_files():
    """``{folder/name: cluster id}`` of the files ipyparallel clusters keep in the default profile's
    ``log`` and ``security`` folders (connection files, sockets, logs, ``engines<ID>.json``, the
    PEs' stack and exit notes)."""
    from IPython.paths import get_ipython_dir

    found = {}
    for folder in ("log", "security"):
        with contextlib.suppress(OSError):
            for name in os.listdir(os.path.join(get_ipython_dir(), "profile_default", folder)):
                match = CLUSTER_ID.search(name)
                if match:
                    found[f"{folder}/{name}"] = match.group()
    return found


def profile_files_left(before, settle=10.0):
    """The files of :func:`profile_files` that ``before`` had not and whose cluster no live process
    belongs to, once they stay for up to ``settle`` seconds (a job of another session may be stopping)."""
    deadline = time.monotonic() + settle
    while True:
        new = {name: cid for name, cid in profile_files().items() if name not in before}
        if new:
            live = _live_clusters()
            new = {name: cid for name, cid in new.items() if cid not in live}
        if not new or time.monotonic() > deadline:
            return sorted(new)
        time.sleep(0.2)


def _live_clusters():
    """The cluster ids named in a live process's command line or ``IPP_CLUSTER_ID``."""
    ids = set()
    for proc in psutil.process_iter():
        try:
            ids.update(CLUSTER_ID.findall(" ".join(proc.cmdline())))
            ids.add(proc.environ().get("IPP_CLUSTER_ID", ""))
        except (psutil.Error, OSError):
            continue
    return ids


def _readable(pattern):
    """The lines of each file matching ``pattern`` that can still be read (processes come and go)."""
    import glob

    for path in glob.glob(pattern):
        try:
            with open(path) as f:
                yield f.read().splitlines()
        except OSError:
            continue


#: (test module, shared memory it left) for the session's summary
SHARED_MEMORY_LEFT = []
#: a cell of a test that hangs ends this long before pytest's own limit (tool's report, not pytest's stack)
CELL_MARGIN = 60


@pytest.fixture(scope="session", autouse=True)
def cells_end_before_the_test(pytestconfig):
    """A cell that hangs in a test ends in the tool's own hang report (``CellStoppedError``: the line
    and call of every PE), a minute before pytest-timeout would end the test with only the test's
    stack: ``rc.timeout`` for every job of the session (a job or cell given its own keeps it)."""
    from shmem_notebook.rc import rc

    before, limit = rc.timeout, float(pytestconfig.getini("timeout") or 0)
    if before is None and limit > CELL_MARGIN:
        rc.timeout = limit - CELL_MARGIN
    yield
    rc.timeout = before


@pytest.fixture(scope="module", autouse=True)
def no_leftover_processes(request):
    """After each test module, nothing it started may still run nor keep a file in the ipyparallel
    profile; shared memory it left (which a job's clean-up should have removed) is listed at the end
    of the session."""
    before, costs, files = shared_memory(), _costs(), set(profile_files())
    yield
    assert wait_for_no_processes() == [], "processes left behind by this test module"
    assert profile_files_left(files) == [], "files left behind in the ipyparallel profile by this test module"
    MODULE_COSTS.append((request.module.__name__, *(b - a for a, b in zip(costs, _costs()))))
    left = shared_memory_left(before, settle=2.0)
    if left:
        SHARED_MEMORY_LEFT.append((request.module.__name__, sorted(left)))


#: (module, wall s, CPU s of this process and of every process it started and reaped: jobs, PEs)
MODULE_COSTS = []


def _costs():
    own, reaped = resource.getrusage(resource.RUSAGE_SELF), resource.getrusage(resource.RUSAGE_CHILDREN)
    return time.monotonic(), own.ru_utime + own.ru_stime + reaped.ru_utime + reaped.ru_stime


_TIMES = {}  # nodeid -> [seconds in setup, call and teardown so far, outcome so far, time limit, CPU s at its start]


def pytest_runtest_setup(item):
    """Note the test's time limit (pytest-timeout's) for the soak's report (scripts/soak.py)."""
    marker = item.get_closest_marker("timeout")
    limit = marker.args[0] if marker and marker.args else item.config.getini("timeout")
    _TIMES[item.nodeid] = [0.0, "passed", float(limit or 0), _costs()[1]]


def pytest_runtest_logreport(report):
    """With ``SHMEM_NOTEBOOK_TEST_TIMES`` set (``make soak``): one JSON line per test in that file,
    its outcome, seconds (setup, call and teardown), time limit and CPU seconds (see :func:`_costs`)."""
    path = os.environ.get("SHMEM_NOTEBOOK_TEST_TIMES")
    entry = _TIMES.get(report.nodeid)
    if not path or entry is None:
        return
    entry[0] += report.duration
    if report.outcome != "passed" and entry[1] != "failed":
        entry[1] = report.outcome  # failed wins over skipped
    if report.when == "teardown":
        row = {"nodeid": report.nodeid, "outcome": entry[1], "duration": entry[0], "limit": entry[2]}
        # with its processes' once reaped: a module's job counts where it stops (the module's last test, or
        # the first test of the fixture's next parameter)
        row["cpu"] = _costs()[1] - entry[3]
        with open(path, "a") as f:
            f.write(json.dumps(row) + "\n")


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item, call):
    """A test that failed on a PE's death shows the stacks the PE wrote as it died (``PEDiedError.dumps``),
    the crashing thread's first, and its stderr in the cell (the library's report): a CI log's excerpt then
    names the place of a crash that comes by chance."""
    outcome = yield
    report = outcome.get_result()
    error = call.excinfo.value if call.excinfo is not None else None
    for pe, dump in sorted(getattr(error, "dumps", {}).items()):
        blocks = thread_stacks(dump)  # the header, the signalled thread, the others
        report.sections.append((f"PE {pe}'s stacks when it died", "\n".join(blocks)[:6000]))
        stderr = getattr(getattr(error, "result", None), "stderr", {}).get(pe, "")
        if stderr.strip():  # the library's own report (UCX's backtrace of the signalled thread)
            report.sections.append((f"PE {pe}'s stderr in the cell", stderr[-4000:]))


def pytest_sessionfinish(session):
    """A worker of ``pytest -n`` hands what it found to the controller (:func:`pytest_testnodedown`)."""
    output = getattr(session.config, "workeroutput", None)
    if output is not None:
        output["shared_memory_left"] = SHARED_MEMORY_LEFT
        output["module_costs"] = MODULE_COSTS


@pytest.hookimpl(optionalhook=True)
def pytest_testnodedown(node, error):
    output = getattr(node, "workeroutput", {})
    SHARED_MEMORY_LEFT.extend(tuple(x) for x in output.get("shared_memory_left", ()))
    MODULE_COSTS.extend(tuple(x) for x in output.get("module_costs", ()))


def pytest_terminal_summary(terminalreporter):
    """The costliest modules (the suite is CPU-bound: their CPU, not their wall time, sets its length);
    the modules after which shared memory was left (other users of the machine can add to it)."""
    if MODULE_COSTS:
        total = sum(cpu for _, _, cpu in MODULE_COSTS)
        terminalreporter.section(f"CPU per test module, the 15 costliest (all modules: {total / 60:.1f} CPU-min)")
        for module, wall, cpu in sorted(MODULE_COSTS, key=lambda row: -row[2])[:15]:
            terminalreporter.write_line(f"{cpu:8.1f} CPU-s {wall:8.1f} s  {module}")
    if SHARED_MEMORY_LEFT:
        terminalreporter.section("shared memory left after a test module")
        for module, names in SHARED_MEMORY_LEFT:
            terminalreporter.write_line(f"{module}: {', '.join(names)}")


def native_stacks(pids):
    """``{pe: every thread's native stack}`` of the PEs (``{pe: pid}``), by ``gdb -batch``, which, unlike
    py-spy, reads a PE the governor has paused and leaves it paused; what went wrong instead, if it did.
    A hang whose cause is below Python (a library's progress thread) shows there."""
    stacks = {}
    for pe, pid in sorted(pids.items()):
        command = ["gdb", "-nx", "-p", str(pid), "-batch", "-ex", "thread apply all bt"]
        try:
            done = subprocess.run(command, capture_output=True, text=True, timeout=60)
            stacks[pe] = "\n".join(line for line in done.stdout.splitlines() if line.startswith(("Thread", "#")))
        except (OSError, subprocess.TimeoutExpired) as e:
            stacks[pe] = f"gdb failed: {e}"
    return stacks


_GDB_FRAME = re.compile(r"#(\d+)\s+(?:0x[0-9a-f]+ in )?(\S+)")
_GDB_PLACE = re.compile(r" (?:at|from) (\S+)$")


def native_summary(stacks, frames=20):
    """:func:`native_stacks` made short enough for a CI log's excerpt: per PE, its main thread's
    innermost ``frames`` frames below the interpreter (function and file, no arguments) first,
    then each other thread's innermost three on one line."""
    parts = []
    for pe, text in sorted(stacks.items()):
        threads = re.split(r"\n(?=Thread )", text)
        main = [t for t in threads if t.startswith("Thread 1 ")]
        lines = [f"-- PE {pe}, main thread:"]
        for thread in main + [t for t in threads if t not in main]:
            names = []
            for line in thread.splitlines()[1:]:
                frame = _GDB_FRAME.match(line)
                if not frame or frame.group(2).startswith(("_PyEval", "PyEval")):
                    break
                place = _GDB_PLACE.search(line)
                names.append(frame.group(2) + (f" ({os.path.basename(place.group(1))})" if place else ""))
            if thread in main:
                lines += [f"   {name}" for name in names[:frames]]
            else:
                lines.append(f"   {thread.split(' (')[0]}: " + " < ".join(names[:3]))
        parts.append("\n".join(lines) if len(lines) > 1 else f"-- PE {pe}: {text[:200]}")
    return "\n".join(parts)


@contextlib.contextmanager
def native_stacks_if_late(job, after):
    """Within the block: when it is still running ``after`` seconds in, :func:`native_stacks` of every PE
    of ``job`` (before the cell's own limit stops the PEs). Yields the dict it fills then."""
    pids = {pe: info["pid"] for pe, info in job.pes.items() if info.get("pid")}
    stacks = {}
    timer = threading.Timer(after, lambda: stacks.update(native_stacks(pids)))
    timer.daemon = True
    timer.start()
    try:
        yield stacks
    finally:
        timer.cancel()
        timer.join()


def run_race_runner(cwd, program, *options, npes=2, oversubscribe=False, timeout=300):
    """``python -m shmem_notebook.race OPTIONS -- oshrun -n NPES [--oversubscribe] python PROGRAM`` in
    ``cwd`` with the platform's environment: the finished process, its output captured as text."""
    from shmem_notebook.launcher.environment import platform_environment

    launch = ["oshrun", "-n", str(npes)] + (["--oversubscribe"] if oversubscribe else [])
    command = [sys.executable, "-m", "shmem_notebook.race", *options, "--", *launch, sys.executable, program]
    env = dict(os.environ, **platform_environment())
    return subprocess.run(command, cwd=cwd, env=env, capture_output=True, text=True, timeout=timeout)


def ipython_shell():
    """The session's one real IPython shell, with the extension loaded (``globalipapp`` builds
    it on the first call only: ``start_ipython()`` returns None after that)."""
    from IPython.testing import globalipapp

    globalipapp.start_ipython()
    shell = globalipapp.get_ipython()
    if "pxshmem" not in shell.magics_manager.magics["cell"]:
        shell.run_line_magic("load_ext", "shmem_notebook")
    return shell


def running_job(n, setup=None, current=False, **options):
    """Yield a started job of ``n`` PEs (after ``setup(job)``, if given); stop it afterwards.
    ``current``: the job the magics act on while it runs (as ``shmem_notebook.start`` makes it)."""
    import shmem_notebook

    if current:
        shmem_notebook.job._current = None
    job = shmem_notebook.Job(n, **options).start()
    try:
        if current:
            shmem_notebook.job._current = job
        if setup is not None:
            setup(job)
        yield job
    finally:
        job.stop()
        if current:
            shmem_notebook.job._current = None


def sos_built():
    """Whether Sandia OpenSHMEM was built into .sos/ (``scripts/setup.sh --with-sos TARBALL``)."""
    from shmem_notebook.launcher.library import library

    sos = library("sos")
    return os.path.isfile(os.path.join(os.path.dirname(os.path.dirname(sos.python)), ".shmem4py-built"))


#: why tests on the "sos" library are skipped when it is not built
NO_SOS = "Sandia OpenSHMEM is not built here: scripts/setup.sh --with-sos SOS-1.5.3.tar.gz builds it"
#: skip mark for tests that need SOS
needs_sos = pytest.mark.skipif(not sos_built(), reason=NO_SOS)


def oshmpi_built():
    """Whether OSHMPI was built into .oshmpi/ (``scripts/setup.sh --with-oshmpi TARBALL``)."""
    from shmem_notebook.launcher.library import library

    oshmpi = library("oshmpi")
    return os.path.isfile(os.path.join(os.path.dirname(os.path.dirname(oshmpi.python)), ".shmem4py-built"))


#: why tests on the "oshmpi" library are skipped when it is not built
NO_OSHMPI = "OSHMPI is not built here: scripts/setup.sh --with-oshmpi /path/to/oshmpi-ee5cf11.tar.gz builds it"
#: skip mark for tests that need OSHMPI
needs_oshmpi = pytest.mark.skipif(not oshmpi_built(), reason=NO_OSHMPI)
#: the libraries besides the default, each skipped where it is not built
OTHER_LIBRARIES = {"sos": needs_sos, "oshmpi": needs_oshmpi}


@pytest.fixture(params=["oshmem", pytest.param("sos", marks=needs_sos)])
def library(request, monkeypatch):
    """Each library in turn, as ``SHMEM_NOTEBOOK_LIBRARY`` (a notebook kernel's own ``%shmem
    start`` picks it up); the name. :func:`every_library` adds OSHMPI."""
    monkeypatch.setenv("SHMEM_NOTEBOOK_LIBRARY", request.param)
    return request.param


@pytest.fixture(params=["oshmem", pytest.param("sos", marks=needs_sos), pytest.param("oshmpi", marks=needs_oshmpi)])
def every_library(request, monkeypatch):
    """:func:`library` with OSHMPI too, for the tests that prove an area on all three (CI time: the
    others run on two)."""
    monkeypatch.setenv("SHMEM_NOTEBOOK_LIBRARY", request.param)
    return request.param


def job_fixture(*ns, setup=None, current=False, sos=(), oshmpi=(), **options):
    """A module-scoped fixture: a real job of ``n`` PEs (``Job(n, **options)``) on Open MPI's
    OSHMEM, started once per module and stopped after it. With several ``ns`` each test runs once
    per PE count (ids ``1pe``, ``2pe``...); ``sos``: PE counts to run on Sandia OpenSHMEM too
    (ids ``2pe-sos``; skipped, saying why, where it is not built), ``oshmpi`` likewise on OSHMPI
    (ids ``2pe-oshmpi``). ``setup(job)`` runs once after
    the start; ``current``: see :func:`running_job`. Tests using it (directly or through another
    fixture) are ``pe``::

        job = job_fixture(2, heap="8M")
        job = job_fixture(1, 2, 4, heap="32M", timeout=120, sos=(2, 4), oshmpi=(2,))
    """

    def fixture(request):
        n, library = getattr(request, "param", (ns[0], "oshmem"))
        yield from running_job(n, setup, current, library=library, **options)

    fixture.starts_pes = True  # read by pytest_collection_modifyitems
    if len(ns) == 1 and not sos and not oshmpi:
        return pytest.fixture(scope="module")(fixture)
    params = [pytest.param((n, "oshmem"), id=f"{n}pe") for n in ns]
    for name, counts in (("sos", sos), ("oshmpi", oshmpi)):
        params += [pytest.param((n, name), id=f"{n}pe-{name}", marks=OTHER_LIBRARIES[name]) for n in counts]
    return pytest.fixture(scope="module", params=params)(fixture)


#: a real OpenSHMEM job of 1, 2 and 4 PEs (one per parameter)
job = job_fixture(1, 2, 4)


def quiet(job, code, **options):
    """``job.run(code, **options)`` printing nothing: stdout and stderr go to StringIOs unless
    given (``stdout=out`` to read what was printed). A time limit for every cell of a module:
    ``job_fixture(n, timeout=120)``."""
    options.setdefault("stdout", io.StringIO())
    options.setdefault("stderr", io.StringIO())
    return job.run(code, **options)


# -- the pe marker ----------------------------------------------------------------------------
#: modules that start PEs in fixtures of their own and have no ``pytestmark`` yet
PE_MODULES = {"test_transitions.py"}
#: what an unmarked test finds on PATH when pe tests are deselected
REFUSED = ("oshrun", "mpirun", "mpiexec", "srun", "sbatch", "salloc")


#: the modules that take longest, the longest first (tests/*.py, seconds of a CI run under
#: ``pytest -n 2``: 150-270 s each, about as long at ``-n 3``; the median module 10 s). The workers of
#: ``pytest -n`` take whole modules (``--dist loadfile``, for the module-scoped jobs) in the order they were
#: collected: these go first, so the run does not end with one worker in a long module and the others idle.
SLOWEST_FIRST = (
    "test_races.py",
    "test_race_runner.py",
    "test_notebooks.py",
    "test_transitions.py",
    "test_inspector.py",
    "test_reliability.py",
    "test_interrupts.py",
    "test_conformance.py",
    "test_hub.py",
    "test_bench_smoke.py",
    "test_deadlock.py",
    "test_unprivileged.py",
    "test_polite.py",
    "test_slurm.py",
    "test_job.py",
    "test_export.py",
)


@pytest.hookimpl(tryfirst=True)  # before -m deselects
def pytest_collection_modifyitems(config, items):
    if os.environ.get("PYTEST_XDIST_WORKER"):  # every worker collects, and in the same order
        rank = {name: i for i, name in enumerate(SLOWEST_FIRST)}
        items.sort(key=lambda item: rank.get(item.path.name, len(rank)))  # stable: modules stay whole
    for item in items:
        defs = getattr(item, "_fixtureinfo", None)
        fixtures = [d.func for ds in (defs.name2fixturedefs.values() if defs else ()) for d in ds]
        if item.path.name in PE_MODULES or any(getattr(func, "starts_pes", False) for func in fixtures):
            item.add_marker(pytest.mark.pe)


def _pe_deselected(config):
    return "not pe" in (config.getoption("markexpr", "") or "")


@pytest.fixture(scope="session")
def refusing_path(tmp_path_factory):
    """A directory of commands (oshrun, srun...) that fail, saying the test is not marked pe."""
    path = tmp_path_factory.mktemp("refused")
    for name in REFUSED:
        script = path / name
        script.write_text(
            "#!/bin/sh\n"
            f"echo '{name} refused (tests/conftest.py): this test starts PEs but is not marked pe, and this run "
            'deselects pe tests (-m "not pe"); mark it with @pytest.mark.pe or pytestmark = pytest.mark.pe, '
            "or use a fixture made by conftest.job_fixture' >&2\n"
            "exit 97\n"
        )
        script.chmod(script.stat().st_mode | stat.S_IXUSR)
    return path


@pytest.fixture(autouse=True)
def _refuse_pes_unless_marked(request, monkeypatch):
    """Under ``-m "not pe"``: an unmarked test that starts PEs (here or in a subprocess) fails loudly."""
    if _pe_deselected(request.config) and request.node.get_closest_marker("pe") is None:
        path = request.getfixturevalue("refusing_path")
        monkeypatch.setenv("PATH", f"{path}{os.pathsep}{os.environ.get('PATH', '')}")
    yield


class ShmTracker:
    """The shared memory (``/dev/shm`` files, SysV segments) of the processes carrying a job's
    token, sampled every 50 ms in a thread: identifies *this* job's segments while other
    jobs run on the machine. ``left()`` -> those of them that still exist."""

    def __init__(self, token):
        import threading

        from shmem_notebook.launcher.shm import Segments

        self.token, self.segments = token, Segments(token)
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._sample, daemon=True)
        self._thread.start()

    def _sample(self):
        while not self._stop.is_set():
            self.sample()
            self._stop.wait(0.05)

    def sample(self):
        self.segments.note(p.pid for p in owned_processes(self.token))

    def stop(self):
        self._stop.set()
        self._thread.join()
        return self

    def left(self):
        files, shmids = self.segments.left()
        return sorted(files), sorted(shmids)
