"""Reading oshrun's output and PE stack dumps: pure text, no OpenSHMEM."""

import os
import resource
import signal
import subprocess
import sys
import time

import pytest

from race_score import library_crash
from shmem_notebook.analysis.postmortem import (
    UNREPORTED,
    cell_location,
    cell_thread_place,
    crash_causes,
    crash_site,
    describe_exit,
    thread_stacks,
    where_report,
    with_first_deaths,
)
from shmem_notebook.errors import PEDiedError, PEError
from shmem_notebook.job.processes import LocalPEs, alive, wait
from shmem_notebook.protocol import GLOBAL_EXIT_MARK

EXIT_CODE = """--------------------------------------------------------------------------
oshrun detected that one or more processes exited with non-zero status, thus causing
the job to be terminated. The first process to do so was:

  Process name: [[18175,1],1]
  Exit code:    3
--------------------------------------------------------------------------"""
SIGNAL = "oshrun noticed that process rank 2 with PID 0 on node vm exited on signal 9 (Killed)."
UCX = "[vm:10731:0:10731] Caught signal 11 (Segmentation fault: address not mapped to object at address (nil))"


HYDRA = """
===================================================================================
=   BAD TERMINATION OF ONE OF YOUR APPLICATION PROCESSES
=   PID 6126 RUNNING AT vm
=   EXIT CODE: 9
=   CLEANING UP REMAINING PROCESSES
=   YOU CAN IGNORE THE BELOW CLEANUP MESSAGES
===================================================================================
YOUR APPLICATION TERMINATED WITH THE EXIT STRING: Killed (signal 9)
This typically refers to a problem with your application."""


def test_crash_causes_in_mpich_hydras_words():
    """Sandia OpenSHMEM's oshrun runs mpiexec.hydra, which names the PE by its pid."""
    assert crash_causes(HYDRA, pids={0: 6125, 1: 6126}) == {1: "signal 9 (SIGKILL)"}
    exited = HYDRA.replace("EXIT CODE: 9", "EXIT CODE: 3").split("YOUR APPLICATION TERMINATED")[0]
    assert crash_causes(exited, pids={0: 6125, 1: 6126}) == {1: "exit code 3"}
    assert crash_causes(HYDRA, pids={0: 1, 1: 2}) == {}


def test_the_pes_seen_ending_first_correct_a_report_that_names_a_pe_killed_after():
    """Under load hydra may name PE 0, which it killed once PE 1 had died: the PE seen ending first wins."""
    killed, segv = signal.SIGKILL, signal.SIGSEGV
    hydra_blames_0 = crash_causes(HYDRA, pids={0: 6126, 1: 6127})
    assert hydra_blames_0 == {0: "signal 9 (SIGKILL)"}
    assert with_first_deaths(hydra_blames_0, {1: killed}, watched={0, 1}) == {1: "signal 9 (SIGKILL)"}
    assert with_first_deaths(hydra_blames_0, {1: None}, watched={0, 1}) == {1: UNREPORTED}
    # the report agrees with what was seen, or both were seen ended at once: keep it, add what was seen
    assert with_first_deaths({1: "signal 9 (SIGKILL)"}, {1: None}, {0, 1}) == {1: "signal 9 (SIGKILL)"}
    # both seen ended, one already reaped while the other was a zombie that hydra names: either may have
    # died first (soaks met both: hydra naming PE 0, killed after PE 1 died and was reaped; and hydra
    # naming PE 1, which killed itself, while PE 0, killed after, was reaped first): both are named
    assert with_first_deaths(hydra_blames_0, {0: killed, 1: None}, watched={0, 1}) == {
        0: "signal 9 (SIGKILL)",
        1: UNREPORTED,
    }
    # hydra said nothing (under load, a CI run met it): PE 0 already reaped, PE 1 seen killed; either may have
    # died first (PE 1 killed itself, or PE 0 died and hydra killed PE 1): both are named
    assert with_first_deaths({}, {0: None, 1: killed}, {0, 1}) == {0: UNREPORTED, 1: "signal 9 (SIGKILL)"}
    hydra_blames_1 = {1: "signal 9 (SIGKILL)"}
    assert with_first_deaths(hydra_blames_1, {0: None, 1: killed}, {0, 1}) == {0: UNREPORTED, **hydra_blames_1}
    assert with_first_deaths({1: "signal 9 (SIGKILL)"}, {0: killed, 1: None}, {0, 1})[1] == "signal 9 (SIGKILL)"
    both = with_first_deaths(hydra_blames_0, {0: killed, 1: killed}, {0, 1})
    assert both == {0: "signal 9 (SIGKILL)", 1: "signal 9 (SIGKILL)"}
    assert with_first_deaths({1: "exit code 3"}, {1: 3 << 8}, {0, 1}) == {1: "exit code 3"}
    # hydra SIGTERMs the others when a PE aborts, and may name PE 0 (a soak met it on Sandia OpenSHMEM)
    term, abort = signal.SIGTERM, signal.SIGABRT
    hydra_terms_0 = {0: "signal 15 (SIGTERM)"}
    assert with_first_deaths(hydra_terms_0, {1: abort}, {0, 1}) == {1: "signal 6 (SIGABRT)"}
    assert with_first_deaths(hydra_terms_0, {1: None}, {0, 1}) == {1: UNREPORTED}
    assert with_first_deaths(hydra_terms_0, {0: term, 1: None}, {0, 1}) == {**hydra_terms_0, 1: UNREPORTED}
    # both seen as zombies: the one the launcher did not end came first
    assert with_first_deaths(hydra_terms_0, {0: term, 1: abort}, {0, 1}) == {1: "signal 6 (SIGABRT)"}
    assert with_first_deaths(hydra_blames_0, {0: killed, 2: segv}, {0, 1, 2}) == {2: "signal 11 (SIGSEGV)"}
    # hydra names both the PE that aborted and one it killed after (a soak met it on Sandia OpenSHMEM):
    # the launcher's PE is dropped, with or without what was seen, unless it was seen ending first
    both_named = {0: "signal 9 (SIGKILL)", 1: "signal 6 (SIGABRT)"}
    for seen in ({}, {1: abort}, {1: None}, {0: killed, 1: abort}, {0: term, 1: None}):
        assert with_first_deaths(both_named, seen, {0, 1}) == {1: "signal 6 (SIGABRT)"}, seen
    assert with_first_deaths({**both_named, 2: "signal 15 (SIGTERM)"}, {}, {0}) == {1: "signal 6 (SIGABRT)"}
    assert with_first_deaths(both_named, {0: None}, {0, 1}) == both_named  # PE 0 reaped first: kept
    # a PE seen ended by SIGTERM alone (a user's kill) keeps its cause
    assert with_first_deaths(hydra_terms_0, {0: term}, {0, 1}) == hydra_terms_0
    # not corrected: a cause other than the launcher's, a PE on another host, nothing seen
    assert with_first_deaths({0: "signal 11 (SIGSEGV)"}, {1: segv}, {0, 1}) == {0: "signal 11 (SIGSEGV)"}
    assert with_first_deaths({3: "signal 9 (SIGKILL)"}, {0: killed}, {0, 1}) == {3: "signal 9 (SIGKILL)"}
    assert with_first_deaths(hydra_blames_0, {}, {0, 1}) == hydra_blames_0


@pytest.mark.parametrize("descriptors", ["few", "over_1024"])
def test_local_pes_note_which_pe_ended_first_and_how(descriptors):
    """The watcher reads how the first PE ended from its zombie, before its parent reaps it; also in a
    kernel whose descriptors are numbered past select's limit (a long-lived notebook's)."""
    sleepers = [subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"]) for _ in range(3)]
    held, limits = [], resource.getrlimit(resource.RLIMIT_NOFILE)
    if descriptors == "over_1024":
        soft, hard = limits
        if hard != resource.RLIM_INFINITY and hard < 1200:
            pytest.skip(f"this process may open only {hard} files")
        resource.setrlimit(resource.RLIMIT_NOFILE, (max(soft, 1200), hard))
        held = [os.open(os.devnull, os.O_RDONLY) for _ in range(1100)]
    try:
        pes = LocalPEs({pe: p.pid for pe, p in enumerate(sleepers)})
        assert pes.first == {} and sorted(pes) == [0, 1, 2]
        started = time.monotonic()
        assert pes.first_deaths(timeout=5.0) == {} and time.monotonic() - started < 1.0  # all run: no wait
        os.kill(sleepers[2].pid, signal.SIGSEGV)
        assert wait(lambda: not alive(pes[2]), 5.0)
        seen = pes.first_deaths()  # a client that saw the end waits for the watcher's note, not polls it
        assert seen == pes.first
        assert list(seen) == [2] and with_first_deaths({}, seen, pes) == {2: "signal 11 (SIGSEGV)"}
        sleepers[1].kill()
        sleepers[1].wait()
        assert pes.first == seen, "only the first wake counts"
    finally:
        for fd in held:
            os.close(fd)
        resource.setrlimit(resource.RLIMIT_NOFILE, limits)
        for p in sleepers:
            p.kill()
            p.wait()


def test_local_pes_order_deaths_by_their_lifelines():
    """A PE whose files closed (the first step of its exit, which the launcher reacts to) came first,
    even when its exit then takes longer than that of a PE the launcher killed after it."""
    first = subprocess.Popen(
        [sys.executable, "-c", LIFELINE_HOLDER], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True
    )
    killed = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
    try:
        lifeline = int(first.stdout.readline())
        pes = LocalPEs({0: first.pid, 1: killed.pid}, {0: lifeline, 1: None})
        first.stdin.write("\n")
        first.stdin.flush()
        assert first.stdout.readline().strip() == "closed"
        time.sleep(0.4)  # the launcher reacts, while the first PE is still exiting (its zombie comes later)
        killed.kill()
        assert wait(lambda: not alive(pes[1]), 5.0)
        # how it ended is read from its zombie, waited for up to 1 s (None if a loaded machine made it later)
        assert list(pes.first_deaths(timeout=5.0)) == [0] and pes.first[0] in (3 << 8, None), pes.first
        assert list(with_first_deaths({1: "signal 9 (SIGKILL)"}, pes.first, pes)) == [0]
    finally:
        for p in (first, killed):
            p.kill()
            p.wait()


#: a PE's lifeline (engine.runtime.lifeline): it closes its files, then takes 0.8 s more to exit
LIFELINE_HOLDER = """import os, sys, time
read, write = os.pipe()
os.close(read)
print(write, flush=True)
sys.stdin.readline()
os.close(write)
print("closed", flush=True)
time.sleep(0.8)
os._exit(3)
"""


def test_crash_causes():
    assert crash_causes(EXIT_CODE) == {1: "exit code 3"}
    assert crash_causes(SIGNAL) == {2: "signal 9 (SIGKILL)"}
    assert crash_causes(UCX, pids={0: 10730, 3: 10731}) == {3: "signal 11 (SIGSEGV)"}
    assert crash_causes(GLOBAL_EXIT_MARK.format(pe=1, status=2) + "\n" + EXIT_CODE) == {1: "shmem.global_exit(2)"}
    assert crash_causes("nothing to see") == {}


def test_describe_exit():
    assert describe_exit(-11) == describe_exit(139) == "signal 11 (SIGSEGV)"
    assert describe_exit(3) == "exit code 3"


DUMP = """Thread 0x00007f0000000001 (most recent call first):
  File "/venv/lib/python3.11/site-packages/zmq/devices/basedevice.py", line 248 in run
  File "/usr/lib/python3.11/threading.py", line 982 in run

Current thread 0x00007f0000000002 (most recent call first):
  File "/venv/lib/python3.11/site-packages/shmem4py/shmem.py", line 2480 in barrier_all
  File "/tmp/ipykernel_123/3725.py", line 3 in <module>
  File "/venv/lib/python3.11/site-packages/IPython/core/interactiveshell.py", line 3577 in run_code
  File "/venv/lib/python3.11/site-packages/IPython/core/interactiveshell.py", line 3517 in run_ast_nodes
"""


def test_cell_location():
    assert cell_location(DUMP) == (3, "barrier_all")
    assert cell_location(
        DUMP.replace('  File "/venv/lib/python3.11/site-packages/shmem4py/shmem.py", line 2480 in barrier_all\n', "")
    ) == (3, None)
    assert cell_location('Thread 0x1 (most recent call first):\n  File "x.py", line 1 in f\n') is None


def test_crash_site_names_the_thread_a_signal_struck_off_the_cells_lines():
    fatal = "Fatal Python error: Segmentation fault\n\n"
    assert crash_site(fatal + DUMP) is None  # it struck the cell's thread: cell_location names the line
    engine = (
        fatal
        + DUMP.replace("Current thread", "Thread")
        + (
            "\nCurrent thread 0x00007f0000000003 (most recent call first):\n"
            '  File "/work/shmem_notebook/engine/record/__init__.py", line 120 in race_stop\n'
            '  File "/venv/lib/python3.11/site-packages/ipyparallel/engine/kernel.py", line 80 in apply_request\n'
        )
    )
    assert crash_site(engine) == "in race_stop (shmem_notebook/engine/record/__init__.py:120)"
    assert cell_location(engine) == (3, "barrier_all")  # where the cell was meanwhile
    thread = fatal + 'Current thread 0x1 (most recent call first):\n  File "/usr/lib/python3.11/a.py", line 9 in f'
    assert crash_site(thread) == "in f (a.py:9)"
    native = fatal + DUMP.replace("Current thread", "Thread")  # no thread is the signalled one: it runs no Python
    assert crash_site(native).startswith("in a thread that runs no Python code")
    assert crash_site("") is None and crash_site(DUMP) is None  # nothing written: no fatal signal
    header, signalled, *others = thread_stacks(engine)  # a failed test's report shows the struck thread first
    assert header.strip() == fatal.strip() and "line 120 in race_stop" in signalled and signalled.startswith("Current")
    assert others and all(block.startswith("Thread") for block in others)


#: CI's dump of a PE whose C thread died while the cell's thread had left line 3 and IPython compiled line 4
BETWEEN = """Fatal Python error: Segmentation fault

Thread 0x00007f37ed2fa6c0 (most recent call first):
  File "/usr/lib/python3.11/threading.py", line 327 in wait
  File "/work/shmem_notebook/engine/cell_receiver.py", line 255 in _flusher

Thread 0x00007f382de61b80 (most recent call first):
  File "/usr/lib/python3.11/codeop.py", line 125 in __call__
  File "/venv/lib/python3.11/site-packages/IPython/core/interactiveshell.py", line 3760 in run_ast_nodes
  File "/venv/lib/python3.11/site-packages/IPython/core/interactiveshell.py", line 3518 in run_cell_async
  File "/venv/lib/python3.11/site-packages/ipykernel/ipkernel.py", line 460 in do_execute
"""


def test_the_cell_threads_place_is_a_line_or_between_two_statements():
    assert cell_thread_place(DUMP) == "at line 3"
    assert cell_location(BETWEEN) is None and cell_thread_place(BETWEEN) == "between two of its statements"
    assert crash_site(BETWEEN).startswith("in a thread that runs no Python code")
    engine_only = 'Thread 0x1 (most recent call first):\n  File "/x/ipyparallel/engine/kernel.py", line 80 in f\n'
    assert cell_thread_place(engine_only) is None and cell_thread_place("") is None  # no cell running


def test_the_catalogue_runs_a_case_again_only_after_a_crash_in_a_library_thread():
    """tests/race_score.py's rule: a PE that died of a signal in a thread running no Python code (CI's dump: the
    header, no thread) gets its case a second run; one that died in Python code, or left no stacks, fails."""
    fatal = "Fatal Python error: Segmentation fault\n\n"
    library = fatal + "\nExtension modules: numpy._core._multiarray_umath, zmq.backend.cython._zmq (total: 2)\n"
    assert library_crash(PEDiedError("PE 0 died", {0: "signal 11"}, {0: library}))
    ours = fatal + 'Current thread 0x1 (most recent call first):\n  File "/x/shmem_notebook/y.py", line 9 in f\n'
    assert not library_crash(PEDiedError("PE 0-1 died", {0: "signal 11", 1: "signal 11"}, {0: library, 1: ours}))
    assert not library_crash(PEDiedError("PE 0 died", {0: "signal 9"}))  # SIGKILL: no stacks
    assert not library_crash(PEError({0: ("ValueError", "x", "")}, 2))


def test_where_report_groups_pes_and_quotes_the_line():
    code = "x = 1\nif me == 0:\n    shmem.barrier_all()\nhelper()"
    where = {0: (3, "barrier_all"), 2: (4, "wait_until"), 3: (4, "wait_until")}
    assert where_report(where, code, 4) == [
        "PE 0: line 3, shmem.barrier_all()",
        "PE 1: finished",
        "PE 2-3: line 4, helper()  (blocked in shmem.wait_until)",
    ]
    # a teaching collective whose name contains the library's call still names the call (CI's SOS hang
    # said only "line 45, collectives.allreduce(...)" while every PE was in the library's reduce)
    code = 'collectives.allreduce(out, big, "sum", algorithm=alg)\nshmem.reduce(out, big)\nreduce(out, big)'
    where = {0: (1, "reduce"), 1: (2, "reduce"), 2: (3, "reduce")}
    assert where_report(where, code, 3) == [
        'PE 0: line 1, collectives.allreduce(out, big, "sum", algorithm=alg)  (blocked in shmem.reduce)',
        "PE 1: line 2, shmem.reduce(out, big)",
        "PE 2: line 3, reduce(out, big)",
    ]


def test_a_syntax_error_names_the_cells_line_not_a_temporary_file():
    from shmem_notebook.analysis.postmortem import cell_error

    code = "x = 1\nif x = 2:\n    pass"
    error = (
        "SyntaxError",
        "invalid syntax. Maybe you meant '==' or ':=' instead of '='? (2614432101.py, line 2)",
        "tb",
    )
    assert cell_error(error, code) == (
        "SyntaxError",
        "invalid syntax. Maybe you meant '==' or ':=' instead of '='? (line 2 of the cell: if x = 2:)",
        "tb",
    )
    indent = ("IndentationError", "unexpected indent (<string>, line 3)", "")
    assert cell_error(indent, code)[1] == "unexpected indent (line 3 of the cell: pass)"
    other = ("ValueError", "bad (x.py, line 2)", "")
    assert cell_error(other, code) == other


def test_srun_reports_name_the_task():
    from shmem_notebook.analysis.postmortem import crash_causes

    out = "srun: error: n2: task 3: Exited with exit code 7\nsrun: error: n1: tasks 0-2: Killed\n"
    assert crash_causes(out) == {3: "exit code 7"}
    assert crash_causes("srun: error: n2: task 1: Segmentation fault (core dumped)\n") == {1: "signal 11 (SIGSEGV)"}
