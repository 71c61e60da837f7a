"""Beginners' mistakes in shmem calls (issue 29 item 5, shim ``mistakes``): refused before the library
is called, in one sentence naming the PEs, the line and what was wrong; the next cell runs on the same
PEs (their variables kept). Each mistake has a fixed twin that runs and gives the right values.
Item 6: a site library whose oshrun starts N one-PE jobs is refused at start, naming the cause."""

import json
import os
import time

import pytest

import shmem_notebook
from conftest import job_fixture, needs_sos, quiet
from shmem_notebook import LaunchError, PEError
from shmem_notebook.launcher.library import SOS_DIR, Library
from shmem_notebook.rc import rc

job = job_fixture(2, 4, heap="16M", timeout=60, sos=(2, 4))

SETUP = (
    "kept = 10 + me\nx = shmem.zeros(4)\nu = shmem.zeros(16)\nn8 = shmem.zeros(1, dtype=np.int64)\n"
    "i3 = shmem.zeros(3, dtype=np.int64)\nright = (me + 1) % npes\nshmem.barrier_all()"
)


@pytest.fixture
def fresh(job):
    """The job with the arrays of :data:`SETUP` zeroed and ``kept`` set on every PE."""
    quiet(job, SETUP)
    return job


def refused(job, code):
    """Run ``code``, which must raise on every PE; the error's message, after checking that the
    job is still the same one (``kept`` survived) and runs the next cell."""
    with pytest.raises(PEError) as info:
        quiet(job, code)
    message = str(info.value)
    assert "\n" not in message and "ShmemArgumentError" in message, message
    assert job.state == "running"
    out = quiet(job, "print(kept - me, float(x.sum()) + float(u.sum()))").stdout
    assert out == {pe: "10 0.0\n" for pe in range(job.n)}, out  # nothing reached the library
    return message


def everyone(job, what):
    """The summary when every PE raised the same ``what``."""
    return f"the cell raised on {job.n} of {job.n} PEs: PE 0-{job.n - 1}: ShmemArgumentError: {what}"


# -- each mistake, and its fixed twin --------------------------------------------------------------
def test_a_put_to_a_pe_that_does_not_exist(fresh):
    n = fresh.n
    message = refused(fresh, "y = 1\nshmem.put(x[0:1], x[1:2], npes + 1)")
    assert message == everyone(fresh, f"shmem.put at line 2 names PE {n + 1}, but valid PEs are 0-{n - 1}")
    quiet(fresh, "x[1] = me + 1\nshmem.barrier_all()\nshmem.put(x[0:1], x[1:2], npes - 1)\nshmem.barrier_all()")
    assert fresh.pull("x")[n - 1][0] in range(1, n + 1)  # some PE's value arrived


@pytest.mark.parametrize(
    "call",
    [
        "shmem.get(np.zeros(1), x[0:1], -1)",
        "shmem.put_nbi(x[0:1], x[1:2], -1)",
        "shmem.get_nbi(np.zeros(1), x[0:1], -1)",
        "shmem.iput(x, u[:4], -1)",
        "shmem.iget(np.zeros(4), x, -1)",
        "shmem.atomic_add(n8, 1, -1)",
        "shmem.atomic_fetch_inc(n8, pe=-1)",
        "shmem.atomic_compare_swap(n8, 0, 1, -1)",
    ],
)
def test_every_rma_and_atomic_names_a_pe_out_of_range(fresh, call):
    name = call.split("(")[0]
    message = refused(fresh, call)
    assert message == everyone(fresh, f"{name} at line 1 names PE -1, but valid PEs are 0-{fresh.n - 1}")


def test_int64_into_float64(fresh):
    message = refused(fresh, "y = np.arange(3)\nshmem.put(x[0:3], y, right)")
    assert message == everyone(fresh, "shmem.put at line 2 copies int64 into float64; give both arrays one dtype")
    quiet(fresh, "shmem.put(x[0:3], np.arange(3.0), right)\nshmem.barrier_all()")
    assert fresh.pull("x")[0].tolist() == [0, 1, 2, 0]


def test_slices_of_different_lengths(fresh):
    message = refused(fresh, "shmem.put(u[11:13], u[9:11][:1], right)")
    assert message == everyone(
        fresh,
        "shmem.put at line 1 copies 1 element into 2 (source 1, target 2), and shmem4py "
        "would silently use only 1; make both the same length, or pass size=1",
    )
    message = refused(fresh, "shmem.get(x[0:1], u[0:2], right)")
    assert "shmem.get at line 1 copies 2 elements into 1 (source 2, target 1)" in message
    # fixed: the same lengths, or size= says that fewer are meant; a whole array as the longer side is
    # shmem4py's meaning (its first elements)
    quiet(
        fresh,
        "u[9:11] = me + 1\nshmem.barrier_all()\nshmem.put(u[11:13], u[9:11], right)\n"
        "shmem.put(u[0:2], u[9:11], right, size=1)\nshmem.put(x, np.ones(1), right)\nshmem.barrier_all()",
    )
    u, x = fresh.pull("u"), fresh.pull("x")
    for pe in range(fresh.n):
        left = (pe - 1) % fresh.n + 1
        assert u[pe][[0, 1, 11, 12]].tolist() == [left, 0, left, left] and x[pe].tolist() == [1, 0, 0, 0]


@pytest.mark.parametrize(
    "call, what",
    [
        ("shmem.put(np.zeros(4), x, right)", "shmem.put at line 1 has a target that is not symmetric"),
        ("shmem.get(x, np.zeros(4), right)", "shmem.get at line 1 has a source that is not symmetric"),
        (
            "shmem.atomic_inc(np.zeros(1, dtype=np.int64), right)",
            "shmem.atomic_inc at line 1 has a target that is not symmetric",
        ),
        ("shmem.broadcast(x, np.zeros(4), 0)", "shmem.broadcast at line 1 has a source that is not symmetric"),
    ],
)
def test_a_remote_buffer_that_is_not_symmetric(fresh, call, what):
    message = refused(fresh, call)
    assert message.startswith(everyone(fresh, what)) and message.endswith("the library would kill the PE"), message


def test_an_atomic_on_more_than_one_element_and_its_fixed_twin(fresh):
    message = refused(fresh, "shmem.atomic_add(i3, 1, 0)")
    assert message == everyone(
        fresh,
        "shmem.atomic_add at line 1 works on one element, but its target has 3; pass a 1-element slice such as a[0:1]",
    )
    quiet(fresh, "shmem.atomic_add(i3[1:2], 1, 0)\nshmem.barrier_all()")
    assert fresh.pull("i3")[0].tolist() == [0, fresh.n, 0]


@pytest.mark.parametrize(
    "call, what",
    [
        ("shmem.broadcast(x, x, npes)", "shmem.broadcast at line 1 has root {n}, but valid PEs are 0-{last}"),
        ("shmem.broadcast(u[:4], x[:2], 0)", "shmem.broadcast at line 1 copies 2 elements into 4"),
        (
            "shmem.sum_reduce(x[:1], n8)",
            "shmem.sum_reduce at line 1 reduces int64 into float64; give both arrays one dtype",
        ),
        (
            "shmem.fcollect(x, u[:3])",
            ("shmem.fcollect at line 1 gathers 3 elements from each of {n} PEs ({n3}), but its target holds only 4"),
        ),
    ],
)
def test_collectives_are_refused_on_every_pe(fresh, call, what):
    n = fresh.n
    message = refused(fresh, call)
    assert message.startswith(everyone(fresh, what.format(n=n, last=n - 1, n3=3 * n))), message
    quiet(fresh, "x[:] = me + 1\nshmem.barrier_all()\nshmem.broadcast(u[:4], x, 0)\nshmem.sum_reduce(x[:1], u[:1])")
    assert [row[0] for row in fresh.pull("x")] == [n] * n  # fixed twins: PE 0's values, summed


def test_the_line_of_a_function_of_the_cell_is_named(fresh):
    message = refused(fresh, "def halo(v):\n    shmem.put(v[0:1], v[1:3], right)\n\nhalo(u)")
    assert message.startswith(everyone(fresh, "shmem.put at line 2 (in halo) copies 2 elements into 1")), message


def test_one_pe_mistaken_while_the_others_wait(fresh):
    """The last PE puts to its right neighbour without the modulo; the others wait in the barrier:
    the PE is named with its line, the others are released, the next cell runs."""
    n = fresh.n
    with pytest.raises(PEError) as info:
        quiet(fresh, "shmem.put(x[0:1], x[1:2], me + 1)\nshmem.barrier_all()")
    message = str(info.value)
    assert message.startswith(
        f"PE {n - 1} raised ShmemArgumentError: shmem.put at line 1 names PE {n}, but valid PEs are 0-{n - 1}; PE 0"
    ), message
    assert quiet(fresh, "print(kept)").stdout == {pe: f"{10 + pe}\n" for pe in range(n)}


def test_a_numpy_array_as_put_signals_signal(fresh):
    if fresh.library.name != "sos":  # Open MPI 4.1.4 has no put_signal: the routine is refused as such
        with pytest.raises(PEError, match="UnsupportedError: shmem.put_signal is an OpenSHMEM 1.5 routine"):
            quiet(fresh, "shmem.put_signal(x, x, right, np.zeros(1, dtype=np.uint64), 1, shmem.SIGNAL_SET)")
        return
    message = refused(
        fresh, "flag = shmem.zeros(1, dtype=np.uint64)\nshmem.put_signal(x, x, right, flag, 1, shmem.SIGNAL_SET)"
    )
    assert message == everyone(
        fresh,
        "shmem.put_signal at line 2 has a NumPy array as its signal; pass a signal word "
        "made by sig = shmem.new_signal() and wait for it with "
        "shmem.signal_wait_until(sig, ...)",
    )
    message = refused(fresh, "shmem.signal_wait_until(flag, shmem.CMP.EQ, 1)")
    assert message.startswith(everyone(fresh, "shmem.signal_wait_until at line 1 has a NumPy array as its signal")), (
        message
    )
    out = quiet(
        fresh,
        "sig = shmem.new_signal()\nshmem.barrier_all()\nx[:] = me + 1\n"
        "shmem.put_signal(u[:4], x, right, sig, 1, shmem.SIGNAL_SET)\n"
        "shmem.signal_wait_until(sig, shmem.CMP.EQ, 1)\nprint(int(u[0]))\nshmem.barrier_all()\n"
        "shmem.del_signal(sig)\nu[:] = 0\nx[:] = 0",
    ).stdout
    assert out == {pe: f"{(pe - 1) % fresh.n + 1}\n" for pe in range(fresh.n)}


def test_a_context_of_a_team_counts_the_teams_pes(fresh):
    """A context of a team of half the PEs: PE numbers are the team's."""
    if fresh.library.name != "sos":
        pytest.skip("contexts of teams other than the world need OpenSHMEM 1.5 (Sandia OpenSHMEM here)")
    n, half = fresh.n, fresh.n // 2
    code = (
        "t = shmem.TEAM_WORLD.split_strided(0, 1, npes // 2)\nc = t.create_ctx() if t else None\n"
        "if t:\n    shmem.put(x[0:1], x[1:2], npes // 2, ctx=c)"
    )
    with pytest.raises(PEError) as info:
        quiet(fresh, code)
    valid = "the only valid PE is 0" if half == 1 else f"valid PEs are 0-{half - 1}"
    members = "0" if half == 1 else f"0-{half - 1}"
    assert str(info.value) == (
        f"the cell raised on {half} of {n} PEs: PE {members}: ShmemArgumentError: shmem.put at "
        f"line 4 names PE {half}, but {valid} (its context's team)"
    )
    quiet(
        fresh,
        "if t:\n    shmem.put(x[0:1], x[1:2], npes // 2 - 1, ctx=c)\n    c.destroy()\n    t.destroy()\n"
        "shmem.barrier_all()",
    )


# -- item 6: a site library set up by hand -----------------------------------------------------------
SOS_OSHRUN = f"{SOS_DIR}/install/bin/oshrun"
SOS_PYTHON = f"{SOS_DIR}/venv/bin/python"


def hand_made(tmp_path, monkeypatch, **libraries):
    """A site's libraries.json describing ``libraries`` (name -> entry), as $SHMEM_NOTEBOOK_LIBRARIES."""
    path = tmp_path / "libraries.json"
    path.write_text(json.dumps(libraries))
    monkeypatch.setenv("SHMEM_NOTEBOOK_LIBRARIES", str(path))
    monkeypatch.delenv("OSHRUN_LAUNCHER", raising=False)
    return path


def start_refused(n, library):
    """Start a job of ``n`` PEs on ``library``, which must be refused, leaving no crash file in the working
    directory (a site's entry need not say IPATH_NO_BACKTRACE: the launcher's environment does); (message,
    seconds)."""
    crash_files = lambda: {name for name in os.listdir() if name.endswith(".btr")}  # noqa: E731
    before, started = crash_files(), time.monotonic()
    with pytest.raises(LaunchError) as info:
        shmem_notebook.Job(n, heap="16M", library=library).start()
    assert crash_files() == before, "a PE stopped at the refused start left libinfinipath's crash file"
    return str(info.value), time.monotonic() - started


@pytest.mark.pe
@needs_sos
@pytest.mark.parametrize("n", [2, 4])
def test_sos_oshrun_without_its_launcher_is_refused_at_start(tmp_path, monkeypatch, n):
    """libraries.json pointing at Sandia OpenSHMEM's oshrun without OSHRUN_LAUNCHER: oshrun runs Open
    MPI's mpirun, which starts N one-PE jobs (or refuses to oversubscribe this host)."""
    path = hand_made(
        tmp_path,
        monkeypatch,
        mysos={"oshrun": SOS_OSHRUN, "python": SOS_PYTHON, "launcher": "hydra", "env": {"FI_PROVIDER": "sockets"}},
    )
    message, seconds = start_refused(n, "mysos")
    hint = (
        "Sandia OpenSHMEM's oshrun without OSHRUN_LAUNCHER runs /usr/bin/mpirun, most likely not the launcher it "
        f'was built for: add "OSHRUN_LAUNCHER": "mpiexec.hydra" to the "env" of \'mysos\' (fix its entry in {path})'
    )
    assert message in (
        f"the {n} PEs of 'mysos' are not one OpenSHMEM job: they report n_pes() == 1, not {n}; {hint}",
    ) or message.startswith(f"oshrun ended before all {n} PEs started; {hint}; its output:"), message
    assert seconds < rc.start_timeout / 2, seconds  # when the PEs answered, not at the start's time limit
    # fixed: the same entry with the launcher named starts one job of n PEs
    hand_made(
        tmp_path,
        monkeypatch,
        mysos={
            "oshrun": SOS_OSHRUN,
            "python": SOS_PYTHON,
            "launcher": "hydra",
            "env": {"FI_PROVIDER": "sockets", "OSHRUN_LAUNCHER": "mpiexec.hydra"},
        },
    )
    with shmem_notebook.Job(n, heap="16M", library="mysos").start() as job:
        assert sorted(info["npes"] for info in job.pes.values()) == [n] * n


@pytest.mark.pe
@needs_sos
@pytest.mark.parametrize("n", [2, 4])
def test_open_mpis_oshrun_with_pes_of_another_library_is_refused_at_start(tmp_path, monkeypatch, n):
    path = hand_made(
        tmp_path, monkeypatch, mixed={"oshrun": "oshrun", "python": SOS_PYTHON, "env": {"FI_PROVIDER": "sockets"}}
    )
    message, seconds = start_refused(n, "mixed")
    assert message == (
        f"the {n} PEs of 'mixed' are not one OpenSHMEM job: they report n_pes() == 1, not {n}; oshrun is "
        f"most likely not the launcher of the OpenSHMEM that {SOS_PYTHON}'s shmem4py was built "
        f"against; fix its entry in {path}"
    ), message
    assert seconds < rc.start_timeout / 2, seconds  # when the PEs answered, not at the start's time limit


def test_check_world_names_the_likely_cause(tmp_path, monkeypatch):
    monkeypatch.delenv("OSHRUN_LAUNCHER", raising=False)
    script = tmp_path / "oshrun"
    script.write_text('#!/bin/sh\nif [ ! -z "${OSHRUN_LAUNCHER}" ]; then LAUNCHER="${OSHRUN_LAUNCHER}"; fi\n')
    script.chmod(0o755)
    site = Library("site", str(script), launcher="hydra", hint="fix its entry in libraries.json")
    site.check_world(3, [3, 3, 3])  # one job: nothing to say
    with pytest.raises(
        LaunchError,
        match=r"^the 3 PEs of 'site' are not one OpenSHMEM job: they report n_pes\(\) == 1, "
        r"not 3; Sandia OpenSHMEM's oshrun without OSHRUN_LAUNCHER runs .*"
        r"\"OSHRUN_LAUNCHER\": \"mpiexec.hydra\" to the \"env\" of 'site' \(fix its "
        r"entry in libraries.json\)$",
    ):
        site.check_world(3, [1, 1, 1])
    named = Library("site", str(script), launcher="hydra", env={"OSHRUN_LAUNCHER": "srun"}, hint="fix it")
    assert named.launcher_problem() is None
    with pytest.raises(LaunchError, match=r"n_pes\(\) == 1 and 2, not 3; its OSHRUN_LAUNCHER=srun is not the launcher"):
        named.check_world(3, [1, 2, 2])
