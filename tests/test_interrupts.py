"""Ctrl-C that always works (issue 47, item 2): interrupts at random moments in loops of barriers,
collectives, puts and waits leave the job usable, every time; PEs left blocked in a wait or a world
collective are released by the PEs that stopped (cells/unblock), and the flags they wrote put back.

``SHMEM_NOTEBOOK_INTERRUPTS`` sets how many interrupts each loop gets (CI: 2; ``make soak`` runs this
module 5 times; 25 per loop gives the issue's 100 in a row)."""

import _thread
import os
import random
import signal
import threading

import pytest

from conftest import job_fixture, quiet
from shmem_notebook.errors import CellStoppedError

pytestmark = pytest.mark.pe

job = job_fixture(3, sos=(3,), oshmpi=(3,), heap="16M", timeout=120)

ARRAYS = "acc=int64[1] src=int64[4] dst=int64[4] buf=int64[64] tok=int64[1] F=int64[1]"
#: each loop runs until interrupted; ``tok`` is a token passed round the ring (waits on every PE)
LOOPS = {
    "barrier": "for i in range(10**9):\n    acc[0] += 1\n    shmem.barrier_all()\n",
    "collective": "for i in range(10**9):\n    src[:] = me + i\n    shmem.reduce(dst, src, op=shmem.OP.SUM)\n",
    "put": (
        "for i in range(10**9):\n    shmem.put(buf, buf, (me + 1) % npes)\n    shmem.quiet()\n"
        "    if i % 16 == 0:\n        shmem.barrier_all()\n"
    ),
    "wait": (
        "for i in range(1, 10**9):\n    if me == 0:\n        shmem.atomic_set(tok, i, 1)\n"
        "        shmem.wait_until(tok, shmem.CMP.GE, i)\n    else:\n"
        "        shmem.wait_until(tok, shmem.CMP.GE, i)\n        shmem.atomic_set(tok, i, (me + 1) % npes)\n"
    ),
}
TIMES = int(os.environ.get("SHMEM_NOTEBOOK_INTERRUPTS", "2"))
USABLE = "every PE stopped at the interrupt and the job is still usable"


def interrupted(job, code, *after, **options):
    """Run ``code``, pressing the kernel's stop button ``after`` seconds in (each of them); the
    CellStoppedError's text."""
    previous = signal.signal(signal.SIGINT, signal.default_int_handler)  # also when started with SIGINT ignored
    timers = [threading.Timer(seconds, _thread.interrupt_main) for seconds in after]
    for timer in timers:
        timer.start()
    try:
        with pytest.raises(CellStoppedError) as info:
            quiet(job, code, arrays=ARRAYS, **options)
    except KeyboardInterrupt:  # not pytest's to take: this test's failure
        pytest.fail("a press escaped job.run as a bare KeyboardInterrupt")
    finally:
        for timer in timers:
            timer.cancel()
        signal.signal(signal.SIGINT, previous)
    return str(info.value)


@pytest.mark.parametrize("loop", sorted(LOOPS))
def test_interrupts_at_random_moments_leave_the_job_usable(job, loop):
    """The issue's case and its kin: some cells follow one in which PE 0 computed for a while."""
    seed = random.randrange(1 << 30)
    rng = random.Random(seed)
    for k in range(TIMES):
        if rng.random() < 0.4:  # PE 0 computed for a while, the others waited in the barrier
            spin = rng.uniform(0.5, 3)
            quiet(job, f"import time\nt = time.monotonic()\nwhile me == 0 and time.monotonic() - t < {spin}:\n    pass")
        after = rng.uniform(0.3, 4)
        text = interrupted(job, "tok[0] = 0\nshmem.barrier_all()\n" + LOOPS[loop], after)
        where = f"interrupt {k + 1} of {TIMES}, {after:.2f} s in (seed {seed})"
        assert USABLE in text, f"{where}: {text}"
        assert job.state == "running", where
        assert quiet(job, "print(me)").stdout == {pe: f"{pe}\n" for pe in range(job.n)}, where


def test_a_wait_left_blocked_is_released_and_its_flag_put_back(job):
    """PE 0 waits for F == 7, which nobody writes; the others sleep. The interrupt stops the sleepers;
    one of them puts 7 into PE 0's F, PE 0 stops, and F is 0 again on every PE."""
    quiet(job, "F[0] = 0\nshmem.barrier_all()", arrays=ARRAYS)
    code = (
        "print('go')\nif me == 0:\n    shmem.wait_until(F, shmem.CMP.EQ, 7)\nelse:\n    import time\n    time.sleep(60)"
    )
    text = interrupted(job, code, 2)
    assert USABLE in text, text
    assert job.state == "running"
    assert job.last_result.errors[0][0] == "KeyboardInterrupt"
    assert job.gather("F").tolist() == [[0]] * job.n


def test_pressing_again_while_the_cell_stops_changes_nothing(job):
    """The impatient user: a second press 0.3 s after the first, while the tool waits for the PEs to
    stop and releases PE 0 from its wait. The stopping goes on; the job stays usable, F put back."""
    quiet(job, "F[0] = 0\nshmem.barrier_all()", arrays=ARRAYS)
    code = "if me == 0:\n    shmem.wait_until(F, shmem.CMP.EQ, 7)\nelse:\n    import time\n    time.sleep(60)"
    text = interrupted(job, code, 2, 2.3)
    assert USABLE in text, text
    assert job.state == "running"
    assert job.gather("F").tolist() == [[0]] * job.n
    assert quiet(job, "print(me)").stdout == {pe: f"{pe}\n" for pe in range(job.n)}


def test_a_world_collective_left_blocked_is_joined(job):
    """PE 0 is in a reduction the sleepers never make: after the interrupt they make it with PE 0's
    arguments (their own copies of its symmetric arrays), so PE 0 stops too."""
    code = "if me == 0:\n    shmem.reduce(dst, src, op=shmem.OP.SUM)\nelse:\n    import time\n    time.sleep(60)"
    text = interrupted(job, code, 2)
    assert USABLE in text, text
    assert job.state == "running"
    assert quiet(job, "shmem.barrier_all()\nprint(me)").stdout[0] == "0\n"


def test_a_timeout_releases_as_the_stop_button_does(job):
    """The timeout's path is the interrupt's: a wait left blocked is released there too."""
    code = "if me == 1:\n    shmem.wait_until(F, shmem.CMP.GT, 0)\nelse:\n    import time\n    time.sleep(60)"
    with pytest.raises(CellStoppedError, match=f"did not finish within 2 s; {USABLE}"):
        quiet(job, code, arrays=ARRAYS, timeout=2)
    assert job.gather("F").tolist() == [[0]] * job.n


#: every PE spends nearly all its time in a finalizer: the interrupt lands there, where Python drops
#: the KeyboardInterrupt ("Exception ignored"); the PE must stop all the same
IN_A_FINALIZER = """import time
class Slow:
    def __del__(self):
        started = time.perf_counter()
        while time.perf_counter() - started < 0.05:
            pass
while True:
    Slow()
"""


def test_an_interrupt_that_lands_in_a_finalizer_still_stops_the_cell(job):
    text = interrupted(job, IN_A_FINALIZER, 1.0)
    assert USABLE in text, text
    assert job.state == "running"
    assert {e[0] for e in job.last_result.errors.values()} == {"KeyboardInterrupt"}
    assert quiet(job, "print(me)").stdout == {pe: f"{pe}\n" for pe in range(job.n)}
