"""The job's controller (shmem_notebook.launcher.controller): its heart monitor beats fast only
while PEs are missing or an engine just left, and a PE that stops answering for a while is not declared dead sooner
than at the normal pace. The tests' native stacks of a late cell's PEs (``conftest.native_stacks``)
read its PEs, running or paused."""

import glob
import json
import os
import re
import signal
import threading
import time

import psutil
import pytest
import zmq

from conftest import job_fixture, native_stacks, native_stacks_if_late
from shmem_notebook.rc import rc

job = job_fixture(2, heap="8M")


def _ping_times(job, seconds, then=None):
    """When the heart monitor pinged during ``seconds`` (monotonic), after ``then()`` (called once subscribed)."""
    cluster = job._cluster
    (path,) = glob.glob(os.path.join(cluster.profile_dir, "security", f"ipcontroller-{cluster.cluster_id}-engine.json"))
    info = json.load(open(path))
    sub = zmq.Context.instance().socket(zmq.SUB)
    sub.setsockopt(zmq.SUBSCRIBE, b"")
    sub.connect(f"{info['interface']}:{info['hb_ping']}")
    try:
        sub.poll(2000)  # the first ping: subscribed
        sub.recv()
        if then is not None:
            then()
        times, end = [], time.monotonic() + seconds
        while (left := end - time.monotonic()) > 0:
            if sub.poll(left * 1000):
                sub.recv()
                times.append(time.monotonic())
        return times
    finally:
        sub.close(linger=0)


def _pings_per_second(job, seconds=1.0):
    """Pings the controller's heart monitor sends per second, heard on its ping socket."""
    return len(_ping_times(job, seconds)) / seconds


def test_the_controller_is_ours_and_beats_at_the_normal_pace_once_every_pe_answers(job):
    controller = psutil.Process(job._cluster.controller.process.pid)
    assert "shmem_notebook.launcher.controller" in controller.cmdline()
    normal = 1000 / rc.heartbeat_ms
    assert _pings_per_second(job, 1.5) <= normal * 1.5


def test_a_silent_pe_makes_it_beat_fast_and_is_not_declared_dead_early(job):
    pe = psutil.Process(job.pes[1]["pid"])
    pe.send_signal(signal.SIGSTOP)
    try:
        time.sleep(0.3)
        fast = _pings_per_second(job, 1.5)  # silent for 2 s in all: at 250 ms a heart fails after 2.5 s
    finally:
        pe.send_signal(signal.SIGCONT)
    assert fast >= 3 * 1000 / rc.heartbeat_ms, fast  # about 40 a second against 4
    time.sleep(0.5)
    assert _pings_per_second(job, 1.5) <= 1.5 * 1000 / rc.heartbeat_ms
    assert sorted(job._client.ids) == [0, 1], "a PE silent for 2 s must not be unregistered"
    job.run("x = me")
    assert job.pull("x").tolist() == [0, 1]


def test_an_engine_leaving_makes_it_beat_fast_at_once(job):
    """A restart's PEs leave while every heart still answers, and the monitor would see the gap a beat
    or two later: the hub hurries it when an engine unregisters (here: a request to unregister an id no
    engine has, which changes nothing else); then, every heart answering, it beats at the normal pace."""
    client = job._client

    def unregister_nobody():
        client._io_loop.add_callback(
            client.session.send, client._query_stream, "unregistration_request", content={"id": 99}
        )

    gaps = lambda times: [b - a for a, b in zip(times, times[1:])]  # noqa: E731
    before = gaps(_ping_times(job, 1.0))
    hurried = gaps(_ping_times(job, 0.6, then=unregister_nobody))
    after = gaps(_ping_times(job, 1.0))
    period = rc.heartbeat_ms / 1000
    assert min(before) > 0.6 * period and min(after) > 0.6 * period, (before, after)  # the normal pace
    assert min(hurried) < 0.6 * period, hurried  # fast beats (25 ms), impossible at the normal pace
    assert sorted(client.ids) == [0, 1]
    job.run("x = me")
    assert job.pull("x").tolist() == [0, 1]


def test_native_stacks_read_every_pe_running_or_paused(job):
    pids = {pe: info["pid"] for pe, info in job.pes.items()}
    os.kill(pids[1], signal.SIGSTOP)  # as the governor pauses a PE that waits long
    try:
        stacks = native_stacks(pids)
        paused = psutil.Process(pids[1]).status()
    finally:
        os.kill(pids[1], signal.SIGCONT)
    assert paused == psutil.STATUS_STOPPED
    for pe in (0, 1):
        assert re.search(r"^Thread 1 .*\n#0 ", stacks[pe], re.M), stacks[pe]
        assert "PyEval" in stacks[pe]  # the interpreter's frames: the stack was unwound, not only its top
    assert psutil.Process(pids[1]).status() != psutil.STATUS_STOPPED  # gdb detached: SIGCONT resumes it
    job.run("pass")


def test_native_stacks_are_taken_only_when_a_cell_is_late(job, tmp_path):
    fifo = str(tmp_path / "go")
    os.mkfifo(fifo)
    cell = f"import os\nfd = os.open({fifo!r}, os.O_RDONLY)\nos.read(fd, 1)\nos.close(fd)"  # blocks until told

    def release_once_taken(stacks):  # the PEs wait in open() until every PE's stacks are in
        deadline = time.monotonic() + 120
        while len(stacks) < job.n and time.monotonic() < deadline:
            time.sleep(0.05)
        fd = os.open(fifo, os.O_WRONLY)
        os.write(fd, b"x" * job.n)
        os.close(fd)

    with native_stacks_if_late(job, after=0.5) as late:
        releaser = threading.Thread(target=release_once_taken, args=(late,))
        releaser.start()
        job.run(cell)
        releaser.join()
    with native_stacks_if_late(job, after=30) as prompt:
        job.run("pass")
    # taken while the cell ran (it could not end before): every PE's, each a stack, unwound
    assert sorted(late) == [0, 1] and all(re.search(r"^#0 ", text, re.M) for text in late.values()), late
    assert prompt == {}


HURRY_PROBE = """
import asyncio, threading, time
import zmq
from zmq.eventloop.zmqstream import ZMQStream
from shmem_notebook.launcher.controller import EagerHeartMonitor

ctx, beats, ready = zmq.Context(), [], threading.Event()

def monitor():  # as ipyparallel's controller runs it: a thread with its own event loop
    asyncio.set_event_loop(asyncio.new_event_loop())
    sockets = {kind: ctx.socket(kind) for kind in (zmq.PUB, zmq.ROUTER, zmq.XPUB)}
    for kind, socket in sockets.items():
        socket.bind(f"inproc://{kind}")
    hub = ctx.socket(zmq.SUB)  # the hub's subscription, which start() waits for
    hub.setsockopt(zmq.SUBSCRIBE, b"")
    hub.connect(f"inproc://{zmq.XPUB}")
    streams = [ZMQStream(sockets[kind]) for kind in (zmq.PUB, zmq.ROUTER, zmq.XPUB)]
    heart = EagerHeartMonitor(ping_stream=streams[0], pong_stream=streams[1], monitor_stream=streams[2], period=250)
    heart.beat = lambda beat=heart.beat: (beats.append((time.monotonic(), threading.current_thread().name)), beat())
    heart.start()
    ready.set()
    asyncio.get_event_loop().run_forever()

threading.Thread(target=monitor, name="heart", daemon=True).start()
ready.wait(5)
time.sleep(0.6)
hurried = time.monotonic()
EagerHeartMonitor.hurry()  # from this thread, as the hub calls it
time.sleep(0.4)
after = [(t, name) for t, name in beats if t > hurried]
print(len(after), sorted({name for _, name in after}))
"""


def test_the_hub_hurries_the_monitor_on_the_monitors_own_thread():
    """``hurry`` comes from the hub's thread; the beats must stay on the monitor's thread and event loop
    (its sockets are that thread's), and come at the fast pace (25 ms) for a while."""
    import subprocess
    import sys

    out = subprocess.run([sys.executable, "-c", HURRY_PROBE], capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stderr[-2000:]
    count, threads = out.stdout.split(" ", 1)
    assert threads.strip() == "['heart']", out.stdout
    assert int(count) >= 4, out.stdout  # 0.4 s at 25 ms: about 16 (at the normal 250 ms: 1 or 2)


def test_a_thread_that_fails_ends_the_controller_saying_why(tmp_path):
    """A controller whose heart monitor cannot bind its port (taken here by a listening socket; in CI once by
    a connection's local end) answers nothing: its PEs would wait for pings that never come. It ends at once,
    naming the thread and the error."""
    import socket
    import subprocess
    import sys

    from shmem_notebook.launcher.listen import unclaimed_tcp_ports

    ports = unclaimed_tcp_ports(8)  # registration, control, mux, task, iopub, hb_ping, hb_pong, broadcast
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", ports[5]))
        taken.listen()
        command = [sys.executable, "-m", "shmem_notebook.launcher.controller", "--pes", "2", "--nodb"]
        command += [f"--profile-dir={tmp_path}", "--ip=127.0.0.1", "--cluster-id=probe"]
        command += [f"--IPController.engine_ports={','.join(map(str, ports))}"]
        ended = subprocess.run(command, capture_output=True, text=True, timeout=60)
    assert ended.returncode == 3, ended.stderr[-2000:]
    # the sentence, wherever it is: the controller's other threads may log after it while it ends (CI once
    # saw a client of another test's job connect to a port the two runs had both found free)
    said = [line for line in ended.stderr.splitlines() if "the controller's thread" in line]
    assert len(said) == 1 and "start_heartmonitor" in said[0], ended.stderr[-2000:]
    assert f"Address already in use (addr='tcp://127.0.0.1:{ports[5]}')" in said[0], said[0]


@pytest.mark.pe
def test_a_controller_that_ends_while_pes_start_is_said_at_once(monkeypatch):
    """The client watches the controller while the PEs register: its end is one sentence, at once (it was a
    wait for the start's timeout), and nothing of the job is left."""
    import shmem_notebook
    from shmem_notebook.errors import LaunchError
    from shmem_notebook.job.job import Job
    from shmem_notebook.job.watchdog import owned_processes

    connected, ended = Job._private_files, []  # called once the client is connected, before the PEs are waited for

    def controller_ends(self):
        connected(self)
        controller = psutil.Process(self._cluster.controller.process.pid)
        controller.kill()
        controller.wait(10)
        ended.append(time.monotonic())

    monkeypatch.setattr(Job, "_private_files", controller_ends)
    job = shmem_notebook.Job(2, heap="8M")
    with pytest.raises(LaunchError, match="the job's controller ended before all 2 PEs registered") as raised:
        job.start()
    assert time.monotonic() - ended[0] < min(10, rc.start_timeout / 2), "it waited for the start's timeout"
    assert "start it again" in str(raised.value)
    deadline = time.monotonic() + 15
    while (left := owned_processes(job._token)) and time.monotonic() < deadline:
        time.sleep(0.2)
    assert left == [], [p.cmdline() for p in left]
    assert job.state == "stopped"


@pytest.mark.pe
def test_a_running_jobs_controller_that_dies_takes_nothing_with_it(monkeypatch):
    """Cells go over the cell channel, not through the controller: they, status and the arrays keep working;
    restart starts a new controller, and neither it nor stop asks the dead one to shut the PEs down politely
    (a request nobody delivers, then 3 s of waiting for PEs that never hear it)."""
    import io

    import shmem_notebook

    with shmem_notebook.Job(2, heap="8M").start() as job:
        controller = psutil.Process(job._cluster.controller.process.pid)
        controller.kill()
        controller.wait(10)
        job.run("x = me + 10", stdout=io.StringIO())
        assert job.pull("x").tolist() == [10, 11]
        assert [row["state"] for row in job.status()] == ["idle", "idle"]
        asked = []
        monkeypatch.setattr(type(job._client), "shutdown", lambda *a, **k: asked.append(k))
        job.restart()
        assert asked == [], "the dead controller was asked to shut the PEs down"
        assert psutil.Process(job._cluster.controller.process.pid).is_running()
        job.run("y = npes * 100 + me", stdout=io.StringIO())
        assert job.pull("y").tolist() == [200, 201]
        assert job.state == "running"
