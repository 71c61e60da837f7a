"""Merging per-PE output: labels, grouping of identical lines, holding, partial lines."""

from shmem_notebook.cells.output import OutputMerger
from shmem_notebook.folding import pe_ranges


def test_pe_ranges():
    assert pe_ranges([0]) == "0"
    assert pe_ranges([3, 1, 2, 0]) == "0-3"
    assert pe_ranges([0, 2, 3, 5]) == "0,2-3,5"


class Clock:
    def __init__(self):
        self.t = 0.0

    def __call__(self):
        return self.t


def merger(n, hold=0.25):
    lines, clock = [], Clock()
    return OutputMerger(range(n), lines.append, hold=hold, clock=clock), lines, clock


def test_identical_lines_print_once_with_the_pe_set():
    m, lines, _ = merger(4)
    for pe in range(4):
        m.feed(pe, "hello\n")
    m.flush()
    assert lines == ["[PE 0-3] hello\n"]


def test_different_lines_keep_pe_order():
    m, lines, _ = merger(3)
    for pe in (2, 0, 1):
        m.feed(pe, f"I am {pe}\n")
    m.flush()
    assert lines == ["[PE 0] I am 0\n", "[PE 1] I am 1\n", "[PE 2] I am 2\n"]


def test_a_line_waits_for_the_others_then_goes_alone():
    m, lines, clock = merger(2)
    m.feed(0, "early\n")
    m.flush()
    assert lines == []  # PE 1 may still print the same line
    clock.t = 0.3
    m.flush()
    assert lines == ["[PE 0] early\n"]


def test_finished_pes_are_not_waited_for():
    m, lines, _ = merger(2)
    m.finish(1)
    m.feed(0, "only me\n")
    m.flush()
    assert lines == ["[PE 0] only me\n"]


def test_partial_lines_join_and_close_emits_the_rest():
    m, lines, _ = merger(2)
    m.feed(0, "ab")
    m.feed(1, "ab")
    m.feed(0, "c\nx")
    m.feed(1, "c\n")
    m.flush()
    assert lines == ["[PE 0-1] abc\n"]
    m.close()
    assert lines[-1] == "[PE 0] x\n"


def test_lines_differing_only_by_each_pes_pid_fold():
    lines = []
    pids = {0: 4711, 1: 4712, 2: 815, 3: 4714}
    m = OutputMerger(range(4), lines.append, own={pe: {"pid": pid} for pe, pid in pids.items()})
    for pe, pid in pids.items():
        m.feed(pe, f"UserWarning: process {pid} (rank of {pid}) is slow\n")
        m.feed(pe, f"value {pe}\n")  # PE numbers are not folded
        m.feed(pe, f"pid {pid} got {47120 + pe}\n")  # other numbers still differ
    m.close()
    assert lines[0] == "[PE 0-3] UserWarning: process <pid> (rank of <pid>) is slow\n"
    assert lines[1:5] == [f"[PE {pe}] value {pe}\n" for pe in range(4)]
    assert lines[5:] == [f"[PE {pe}] pid {pids[pe]} got {47120 + pe}\n" for pe in range(4)]


def test_a_pid_inside_a_longer_number_is_not_replaced():
    lines = []
    m = OutputMerger(range(2), lines.append, own={0: {"pid": 12}, 1: {"pid": 13}})
    m.feed(0, "x 123 12\n")
    m.feed(1, "x 123 13\n")
    m.close()
    assert lines == ["[PE 0-1] x 123 <pid>\n"]


def test_a_busy_machine_holds_lines_longer():
    """Thirty students' PEs on two cores print the same line seconds apart: the wait scales with the
    load per core, up to a bound, so that their lines still fold."""
    from shmem_notebook.cells.output import HOLD, MAX_HOLD, busy_hold

    assert busy_hold(load=0.1, cpus=2) == HOLD
    assert busy_hold(load=12.0, cpus=2) == 6 * HOLD
    assert busy_hold(load=70.0, cpus=2) == MAX_HOLD
    m, lines, clock = merger(2, hold=busy_hold(load=12.0, cpus=2))
    m.feed(1, "squares: [0 1]\n")
    clock.t = 1.0  # PE 0's line is a second late
    m.flush()
    assert lines == []
    m.feed(0, "squares: [0 1]\n")
    m.flush()
    assert lines == ["[PE 0-1] squares: [0 1]\n"]
