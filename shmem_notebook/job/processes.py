"""Small helpers over processes and waiting (client side)."""

import time

import psutil

__all__ = ["alive", "process", "wait"]


def alive(proc):
    """Whether a psutil process still runs (the launcher's own state lags behind)."""
    try:
        return proc is not None and proc.status() != psutil.STATUS_ZOMBIE
    except psutil.NoSuchProcess:
        return False


def process(pid):
    """A psutil handle on ``pid``, or None if it is gone."""
    try:
        return psutil.Process(pid)
    except psutil.NoSuchProcess:
        return None


def wait(condition, timeout, step=0.02):
    """Poll ``condition`` until true or ``timeout`` seconds; return its last value."""
    deadline = time.monotonic() + timeout
    while not (ok := condition()) and time.monotonic() < deadline:
        time.sleep(step)
    return ok
