"""``cells.ctrl_c``: a Ctrl-C that lands in a finalizer (Python drops it as "Exception ignored") is
kept while a cell, a start or a restart runs and raised again at the next check, nothing else
changes; presses while a job stops are held, so that the stop ends and leaves nothing running."""

import _thread
import signal
import sys
import threading

import pytest

from conftest import wait_for_no_processes
from shmem_notebook import Job, LaunchError
from shmem_notebook.cells import ctrl_c


class Pressed:
    """Ctrl-C arriving while this object is finalized: its ``__del__`` raises KeyboardInterrupt."""

    def __del__(self):
        raise KeyboardInterrupt


class Failing:
    def __del__(self):
        raise ValueError("not an interrupt")


def test_a_dropped_ctrl_c_is_raised_at_the_next_check_once():
    with ctrl_c.watching():
        Pressed()  # finalized at once: Python drops the KeyboardInterrupt
        with pytest.raises(KeyboardInterrupt):
            ctrl_c.check()
        ctrl_c.check()  # raised once, not again


def test_nothing_is_raised_without_a_drop_or_outside_the_block():
    with ctrl_c.watching():
        ctrl_c.check()
    seen = []
    previous, sys.unraisablehook = sys.unraisablehook, seen.append
    try:
        Pressed()  # outside the block: Python's own way (here: the hook in place)
        ctrl_c.check()
    finally:
        sys.unraisablehook = previous
    assert [u.exc_type for u in seen] == [KeyboardInterrupt]


def test_a_drop_left_unchecked_is_forgotten_at_the_end_and_the_hook_is_restored():
    before = sys.unraisablehook
    with ctrl_c.watching():
        Pressed()
    assert sys.unraisablehook is before
    ctrl_c.check()  # the next cell does not inherit it


def test_other_unraisable_errors_go_to_the_hook_in_place():
    seen = []
    previous, sys.unraisablehook = sys.unraisablehook, seen.append
    try:
        with ctrl_c.watching():
            Failing()
            ctrl_c.check()
    finally:
        sys.unraisablehook = previous
    assert [u.exc_type for u in seen] == [ValueError]


@pytest.mark.pe
@pytest.mark.parametrize("what", ["start", "restart"])
def test_a_start_whose_ctrl_c_a_finalizer_dropped_is_interrupted_and_leaves_nothing(monkeypatch, what):
    """The press lands in a finalizer while the job waits for its PEs (as it may in any kernel with
    garbage to collect): the start, or restart, is interrupted as if Python had raised it there."""
    job = Job(2, heap="16M")
    if what == "restart":
        job.start()
    note, pressed = Job._note_segments, []

    def noting(self):  # called in the loop that waits for the PEs (and as a restart lets the old ones go)
        if not pressed:
            Pressed()  # finalized at once: Python drops its KeyboardInterrupt
            pressed.append(True)
        return note(self)

    monkeypatch.setattr(Job, "_note_segments", noting)
    try:
        with pytest.raises(LaunchError, match=f"^the {what} of 2 PEs was interrupted; its processes were stopped"):
            getattr(job, what)()
    finally:
        job.stop()
    assert pressed and job.state == "stopped"
    assert wait_for_no_processes() == []


def test_presses_while_held_are_counted_not_raised_and_the_handler_is_restored():
    previous = signal.signal(signal.SIGINT, signal.default_int_handler)
    try:
        with ctrl_c.held() as presses:
            _thread.interrupt_main()
            _thread.interrupt_main()
            sum(range(10))  # the handler runs here
        assert presses and signal.getsignal(signal.SIGINT) is signal.default_int_handler
        with pytest.raises(KeyboardInterrupt):
            _thread.interrupt_main()
            sum(range(10))
    finally:
        signal.signal(signal.SIGINT, previous)


@pytest.mark.pe
def test_ctrl_c_during_a_stop_lets_it_end_and_leaves_nothing():
    """The user presses Ctrl-C (twice) while ``%shmem stop`` runs: before, a bare KeyboardInterrupt
    from ipyparallel's insides left the controller and the watchdog running and the job "running"."""
    job = Job(2, heap="16M").start()
    previous = signal.signal(signal.SIGINT, signal.default_int_handler)
    timers = [threading.Timer(after, _thread.interrupt_main) for after in (0.05, 0.3)]
    try:
        for timer in timers:
            timer.start()
        try:
            job.stop()
        except KeyboardInterrupt:
            pytest.fail("the press escaped job.stop")
        for timer in timers:
            timer.join()  # both pressed: neither was left for later
    finally:
        signal.signal(signal.SIGINT, previous)
        job.stop()
    assert job.state == "stopped"
    assert wait_for_no_processes() == []
