"""The fork stubs (C and Python) against a stand-in for the fork server: this test process.

What oshrun sees of a forked PE is its stub, so each stub must hand over what the server reads
(its streams, and from ``/proc`` its environment, working directory, arguments and cores, bytes that are
not UTF-8 included), forward the signals oshrun sends, end as the PE ended (an exit status, or the
same signal), tell the server the PE ended or, killed, let it see the connection close. The "PE" here
is a child of this process, left a zombie until the stub said "ended", as the server leaves it. The C
stub is also checked to be what a job uses where it compiles, and to fall back to the Python one where
it cannot (no compiler)."""

import os
import signal
import socket
import subprocess
import sys
import time
import uuid

import psutil
import pytest

from shmem_notebook import native_cache
from shmem_notebook.engine.forkserver import REAP_AGAIN, reap_due, stub_state
from shmem_notebook.launcher import stub_program
from shmem_notebook.launcher.stub_program import is_stub

C_STUB = stub_program.build()
NO_COMPILER = pytest.mark.skipif(C_STUB is None, reason="no C compiler here: the Python stub stands in")
#: "c-poll", "python-poll": each stub as on a kernel without pidfd_open (before Linux 5.3): it looks at /proc
KINDS = [pytest.param("c", marks=NO_COMPILER), pytest.param("c-poll", marks=NO_COMPILER), "python", "python-poll"]
#: the Python stub run with os.pidfd_open taken away
WITHOUT_PIDFD = "import os, runpy; del os.pidfd_open; runpy.run_path({!r}, run_name='__main__')"


@pytest.fixture(scope="module")
def polling_stub(tmp_path_factory):
    program = str(tmp_path_factory.mktemp("stub") / "fork_stub")
    subprocess.run(["cc", "-O2", "-DFORK_STUB_POLL", "-o", program, stub_program.SOURCE], check=True, timeout=120)
    return program


@pytest.fixture
def stub_command(kind, request):
    """``stub_command(address, *args)``: the command line of a stub of ``kind`` (the test's parameter)."""
    if kind == "python":
        program = [sys.executable, "-I", "-S", stub_program.PYTHON_STUB]
    elif kind == "python-poll":
        program = [sys.executable, "-I", "-S", "-c", WITHOUT_PIDFD.format(stub_program.PYTHON_STUB)]
    else:
        program = [C_STUB if kind == "c" else request.getfixturevalue("polling_stub")]
    return lambda address, *args: [*program, address, *args]


class StandIn:
    """A listening abstract socket; :meth:`serve` takes one stub, starts ``pe`` (a command) as the PE."""

    def __init__(self):
        self.address = f"@shmem-notebook-test-{uuid.uuid4().hex}"
        self.listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self.listener.bind("\0" + self.address[1:])
        self.listener.listen(4)
        self.listener.settimeout(20)
        self.taken = []  # connections and processes, closed and waited for at the end

    def serve(self, pe):
        conn, _ = self.listener.accept()
        self.taken.append(conn)
        conn.settimeout(20)
        message, fds, _, _ = socket.recv_fds(conn, 16, 3)
        creds = conn.getsockopt(socket.SOL_SOCKET, socket.SO_PEERCRED, 12)
        stub = int.from_bytes(creds[:4], sys.byteorder)
        state = stub_state(stub, int(message))
        child = subprocess.Popen(pe, pass_fds=(), stdin=fds[0], stdout=fds[1], stderr=fds[2])
        for fd in fds:
            os.close(fd)
        conn.sendall(str(child.pid).encode())
        self.taken.append(child)
        return conn, child, state

    def close(self):
        self.listener.close()
        for taken in self.taken:
            if isinstance(taken, subprocess.Popen):
                taken.kill()
                taken.wait(5)
            else:
                taken.close()


@pytest.fixture
def server():
    stand_in = StandIn()
    yield stand_in
    stand_in.close()


def _said(conn):
    """What the stub says when its PE ended, b"" when it went without a word."""
    try:
        return conn.recv(16)
    except OSError:
        return b""


@pytest.mark.parametrize("kind", KINDS)
def test_the_stub_hands_over_what_the_pe_runs_with_and_ends_with_its_exit_status(kind, stub_command, server, tmp_path):
    odd = os.fsdecode(b"caf\xe9")  # not UTF-8: a name a user may have, carried as bytes
    env = dict(os.environ, SHMEM_NOTEBOOK_TEST_ODD=odd, SHMEM_NOTEBOOK_TEST_QUOTE='a "b" \\c\n')
    stub = subprocess.Popen(stub_command(server.address, "--x", odd, ""), env=env, cwd=tmp_path)
    conn, child, (seen_env, cwd, argv, cpus) = server.serve([sys.executable, "-c", "import sys; sys.exit(7)"])
    assert argv == ["--x", odd, ""]
    assert cwd == str(tmp_path)
    assert seen_env["SHMEM_NOTEBOOK_TEST_ODD"] == odd and seen_env["SHMEM_NOTEBOOK_TEST_QUOTE"] == 'a "b" \\c\n'
    assert cpus == sorted(os.sched_getaffinity(stub.pid))
    assert stub.wait(20) == 7
    assert _said(conn) == b"ended"
    assert child.wait(5) == 7  # the PE stayed a zombie until the stub read how it ended


def _forwarding(stub):
    """Wait until the stub catches the signals it forwards (it sets its handlers once it knows the PE)."""
    wanted = (1 << (signal.SIGUSR1 - 1)) | (1 << (signal.SIGTERM - 1))
    deadline = time.monotonic() + 20
    while True:
        with open(f"/proc/{stub.pid}/status") as f:
            caught = int(next(line for line in f if line.startswith("SigCgt:")).split()[1], 16)
        if caught & wanted == wanted:
            return
        assert time.monotonic() < deadline, "the stub never set its handlers"
        time.sleep(0.01)


@pytest.mark.parametrize("kind", KINDS)
def test_the_stub_forwards_oshruns_signals_and_ends_by_the_pes_signal(kind, stub_command, server):
    stub = subprocess.Popen(stub_command(server.address), stdout=subprocess.PIPE, text=True)
    pe = (
        "import signal, sys, time; signal.signal(signal.SIGUSR1, lambda *_: sys.exit(5)); "
        "print('ready', flush=True); time.sleep(60)"
    )
    conn, child, _ = server.serve([sys.executable, "-c", pe])
    assert stub.stdout.readline() == "ready\n"  # the PE writes to the stub's streams; its handler is set
    _forwarding(stub)
    stub.send_signal(signal.SIGUSR1)
    assert stub.wait(20) == 5
    stub.stdout.close()
    assert _said(conn) == b"ended"
    child.wait(5)

    stub = subprocess.Popen(stub_command(server.address))
    conn, child, _ = server.serve(["sleep", "60"])
    _forwarding(stub)
    stub.send_signal(signal.SIGTERM)  # as oshrun ends a PE: forwarded, and the stub dies of it too
    assert stub.wait(20) == -signal.SIGTERM
    assert _said(conn) == b"ended"
    assert child.wait(5) == -signal.SIGTERM


@pytest.mark.parametrize("kind", KINDS)
def test_a_killed_stub_leaves_its_connection_closed_without_a_word(kind, stub_command, server):
    stub = subprocess.Popen(stub_command(server.address))
    conn, child, _ = server.serve(["sleep", "60"])
    stub.kill()
    stub.wait(20)
    assert _said(conn) == b""  # the server then kills the PE
    child.kill()
    child.wait(5)


@pytest.mark.parametrize("kind", KINDS)
def test_a_stub_whose_server_is_gone_says_so_in_one_sentence(kind, stub_command):
    nowhere = f"@shmem-notebook-test-{uuid.uuid4().hex}"
    stub = subprocess.run(stub_command(nowhere), capture_output=True, text=True, timeout=20)
    assert stub.returncode == 1
    assert stub.stderr.startswith("shmem_notebook: cannot reach the job's fork server (Connection refused); ")
    assert stub.stderr.count("\n") == 1


@pytest.mark.skipif(C_STUB is None, reason="no C compiler here")
def test_the_c_stub_is_what_oshrun_runs_and_holds_a_tenth_of_a_megabyte():
    assert stub_program.command("python", "@a") == [C_STUB, "@a"] and is_stub([C_STUB, "@a"])
    listener = StandIn()
    try:
        stub = subprocess.Popen([C_STUB, listener.address])
        conn, child, _ = listener.serve(["sleep", "60"])
        assert psutil.Process(stub.pid).memory_full_info().uss < 1 << 20  # the Python stub: about 4 MiB
        child.kill()
        assert stub.wait(20) == -signal.SIGKILL
    finally:
        listener.close()


def test_without_a_compiler_oshrun_runs_the_python_stub(monkeypatch, tmp_path):
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))  # nothing built there yet
    monkeypatch.setenv("CC", "/nonexistent/cc")
    assert stub_program.build() is None
    assert stub_program.command("/some/python", "@a") == ["/some/python", "-I", "-S", stub_program.PYTHON_STUB, "@a"]
    assert is_stub(stub_program.command("/some/python", "@a"))
    monkeypatch.setenv("CC", "false")  # a compiler that fails
    assert stub_program.build() is None
    monkeypatch.delenv("CC")
    monkeypatch.setenv("SHMEM_NOTEBOOK_NATIVE", "no-stub")
    assert stub_program.build() is None
    monkeypatch.delenv("SHMEM_NOTEBOOK_NATIVE")
    if C_STUB is not None:
        built = stub_program.build()
        assert built is not None and built.startswith(str(tmp_path)) and native_cache.enabled("stub")


def test_the_server_reaps_a_pe_that_is_slow_to_die_without_waiting_for_it():
    """The server is one thread: a PE killed but not yet gone (exiting in the kernel; here, still asleep)
    must not hold up the stubs after it. It is looked at again until it exited, then reaped."""
    slow = subprocess.Popen(["sleep", "60"])
    try:
        ending = [(0.0, slow.pid)]
        started = time.monotonic()
        reap_due(ending, now=1.0)
        assert time.monotonic() - started < 1.0  # did not wait for it
        assert ending == [(1.0 + REAP_AGAIN, slow.pid)]
        reap_due(ending, now=1.0)  # not due yet: not looked at
        assert ending == [(1.0 + REAP_AGAIN, slow.pid)]
        slow.kill()
        deadline = time.monotonic() + 20
        while ending:
            assert time.monotonic() < deadline, "never reaped"
            reap_due(ending, now=time.monotonic() + 1.0)
            time.sleep(0.01)
        assert not psutil.pid_exists(slow.pid)  # reaped: not even a zombie left
    finally:
        if ending:  # failed before it was reaped
            slow.kill()
            slow.wait()
        slow.returncode = -9  # reaped by reap_due, not by Popen
