"""A process's children and descendants from the kernel's lists (launcher/proc_tree.py), against psutil's
answer, for the trees the tool walks: oshrun's PEs and their children, a fork server's PEs (forked by a
thread of a process), zombies not yet reaped, processes gone."""

import os
import subprocess
import sys
import threading
import time

import psutil
import pytest

from shmem_notebook.launcher import proc_tree

# a parent with two children, one of which has a child of its own
TREE = "sleep 30 & (sleep 30 & wait) & wait"


@pytest.fixture(params=["kernel", "psutil"])
def way(request, monkeypatch):
    """Each test with the kernel's lists and with the fallback a kernel without them takes."""
    if request.param == "kernel" and not proc_tree._kernel_lists_children():
        pytest.skip("this kernel does not list a thread's children (CONFIG_PROC_CHILDREN)")
    if request.param == "psutil":
        monkeypatch.setattr(proc_tree, "_kernel_lists_children", lambda: False)
    return request.param


@pytest.fixture
def tree():
    shell = subprocess.Popen(["bash", "-c", TREE], start_new_session=True)
    try:
        deadline = time.monotonic() + 10
        while len(psutil.Process(shell.pid).children(recursive=True)) < 3 and time.monotonic() < deadline:
            time.sleep(0.02)
        yield shell
    finally:
        os.killpg(shell.pid, 9)
        shell.wait()


def test_children_and_descendants_are_psutils(way, tree):
    expected_children = sorted(p.pid for p in psutil.Process(tree.pid).children())
    expected_all = sorted(p.pid for p in psutil.Process(tree.pid).children(recursive=True))
    assert len(expected_children) == 2 and len(expected_all) == 3  # a sleep and a subshell, and its sleep
    assert sorted(proc_tree.children(tree.pid)) == expected_children
    assert sorted(proc_tree.descendants(tree.pid)) == expected_all


def test_a_child_a_thread_made_is_found_while_the_thread_runs_and_after(way):
    """The fork server's PEs and ipyparallel's launchers are children of threads other than the main one."""
    made, done = [], threading.Event()

    def maker():
        made.append(subprocess.Popen(["sleep", "30"]))
        done.wait(30)

    thread = threading.Thread(target=maker)
    thread.start()
    while not made:
        time.sleep(0.01)
    child = made[0]
    try:
        assert child.pid in proc_tree.children(os.getpid())  # listed under the thread that made it
        done.set()
        thread.join()  # the kernel hands the child to another thread of this process
        assert child.pid in proc_tree.children(os.getpid())
        assert child.pid in proc_tree.descendants(os.getpid())
    finally:
        done.set()
        child.kill()
        child.wait()


def test_a_zombie_is_still_a_child(way):
    child = subprocess.Popen([sys.executable, "-c", "pass"])
    deadline = time.monotonic() + 10
    while psutil.Process(child.pid).status() != psutil.STATUS_ZOMBIE and time.monotonic() < deadline:
        time.sleep(0.02)
    try:
        assert psutil.Process(child.pid).status() == psutil.STATUS_ZOMBIE
        assert child.pid in proc_tree.children(os.getpid())
    finally:
        child.wait()
    assert child.pid not in proc_tree.children(os.getpid())  # reaped: gone


def test_a_process_that_is_gone_has_none(way):
    child = subprocess.Popen(["true"])
    child.wait()
    assert proc_tree.children(child.pid) == [] and proc_tree.descendants(child.pid) == []


def test_the_kernels_way_reads_only_the_asked_processes_files(tree, monkeypatch):
    """What makes it cheap on a crowded login node: nothing of the machine's other processes is read."""
    if not proc_tree._kernel_lists_children():
        pytest.skip("this kernel does not list a thread's children (CONFIG_PROC_CHILDREN)")
    read = []
    real_open, real_listdir = open, os.listdir

    def noted(real):
        return lambda path, *args, **kwargs: read.append(path) or real(path, *args, **kwargs)

    monkeypatch.setattr(proc_tree, "open", noted(real_open), raising=False)
    monkeypatch.setattr(proc_tree.os, "listdir", noted(real_listdir))
    found = proc_tree.descendants(tree.pid)
    assert len(found) == 3
    allowed = {f"/proc/{pid}/" for pid in [tree.pid, *found]}
    assert read and all(any(str(path).startswith(prefix) for prefix in allowed) for path in read), read
