"""bench/importtime.py and bench/flame.py, no PEs: ``-X importtime`` output in the shape a PE writes
(its own log lines on the same stream) to per-package times and a table; py-spy's collapsed stacks to
group shares and an SVG flame graph whose frames are as wide as their samples."""

import os
import re
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(ROOT, "bench"))

import flame  # noqa: E402
import importtime  # noqa: E402

# one PE: the interpreter's start, shmem4py importing NumPy (which imports a standard module), the
# engine's zmq (importing selectors), a log line of the engine, json imported by the program itself
PE = """\
import time: self [us] | cumulative | imported package
import time:       300 |        300 |   _io
import time:      1500 |       1800 | site
import time:       200 |        200 |       _weakrefset
import time:      5000 |       5200 |     numpy._core
import time:      3000 |       8200 |   numpy
import time:    400000 |     408200 | shmem4py.shmem
2026-11-26 11:00:00.000 [IPEngine] Registering with controller
import time:       100 |        100 |     selectors
import time:      2000 |       2100 |   zmq.sugar
import time:      1000 |       3100 | zmq
import time:        50 |         50 | json
"""


def test_parse_reads_every_import_and_skips_other_lines():
    imports = importtime.parse(PE)
    assert len(imports) == 10
    assert imports[5] == importtime.Import("shmem4py.shmem", 400000, 408200, 0)
    assert [i.level for i in imports[:5]] == [1, 0, 3, 2, 1]
    assert importtime.cumulative(imports)["numpy"] == 8200


def test_by_package_sums_self_times_and_gives_the_standard_library_to_its_importer():
    rows = importtime.by_package(importtime.parse(PE))
    assert rows[importtime.START] == 1800  # _io and site
    assert rows["shmem4py (with shmem_init)"] == 400000
    assert rows["NumPy"] == 8200  # numpy, numpy._core and the _weakrefset numpy imported
    assert rows["zmq"] == 3100  # zmq, zmq.sugar and selectors
    assert rows[importtime.STDLIB] == 50  # json, imported by the program itself
    assert rows["IPython"] == 0
    assert rows["all imports"] == sum(i.self_us for i in importtime.parse(PE))


def test_table_gives_medians_over_processes_side_by_side():
    slower = PE.replace("    400000 |     408200 | shmem4py.shmem", "    600000 |     608200 | shmem4py.shmem")
    third = PE.replace("    400000 |     408200 | shmem4py.shmem", "    500000 |     508200 | shmem4py.shmem")
    floor = "import time:    300000 |     300000 | shmem4py.shmem\n"
    text = importtime.table(
        {
            "floor": [importtime.parse(floor)],
            "PE": [importtime.parse(t) for t in (PE, slower, third)],
        }
    )
    lines = text.splitlines()
    assert lines[0].endswith("| floor | PE |")
    assert "| shmem4py (with shmem_init) | 300 | 500 |" in lines
    assert "| NumPy | 0 | 8 |" in lines
    assert "| zmq | 0 | 3 |" in lines
    assert any(line.startswith("| **all imports** | 300 | 513 |") for line in lines)


MAIN = "<module> (<string>:1);<module> (shmem_notebook/engine/__main__.py:1);"
THREAD = "Thread._bootstrap (threading.py:988);"
STACKS = (
    f"{MAIN}<module> (shmem4py/shmem.py:1);init (shmem4py/shmem.py:137) 50\n"
    f"{MAIN}<module> (shmem4py/shmem.py:1);init (shmem4py/shmem.py:137) 10\n"
    f"{MAIN}_find_and_load (<frozen importlib._bootstrap>:1165);<module> (numpy/__init__.py:1) 20\n"
    f"{THREAD}preload (shmem_notebook/lazy_imports.py:200);<module> (IPython/core/interactiveshell.py:1);"
    "<module> (asyncio/__init__.py:1) 19\n"
    f"{THREAD}Thread.run (threading.py:971) 1\n"
    "not a stack line\n"
)


def test_parse_collapsed_adds_repeated_stacks():
    stacks = flame.parse_collapsed(STACKS)
    assert len(stacks) == 4
    assert sum(stacks.values()) == 100
    assert stacks[tuple(STACKS.splitlines()[0].rsplit(" ", 1)[0].split(";"))] == 60
    assert sum(flame.merge(stacks, stacks).values()) == 200


def test_shares_go_to_the_deepest_package_frame():
    shares = flame.shares(flame.parse_collapsed(STACKS))
    assert shares["shmem4py (shmem_init)"] == 0.6
    assert shares["NumPy"] == 0.2
    assert shares["the engine"] == 0.19  # asyncio, imported by IPython, counts for IPython
    assert shares[flame.PYTHON] == 0.01  # threading alone
    assert shares["shmem_notebook"] == 0.0
    assert flame.group_of_frame("f (/usr/lib/python3.11/site-packages/zmq/sugar/context.py:5)") == "the engine"
    assert flame.group_of_frame("f (psutil/__init__.py:1)") == flame.OTHER


def _rects(svg):
    """{frame: rect width} of the SVG's frames (those with a title)."""
    found = re.findall(r'<title>(.*?): \d+ samples, [^<]*</title><rect x="[\d.]+" y="\d+" width="([\d.]+)"', svg)
    return {name: float(width) for name, width in found}


def test_svg_has_a_rect_per_kept_frame_as_wide_as_its_samples():
    stacks = flame.parse_collapsed(STACKS)
    svg = flame.render_svg(stacks, "test", width=1020)
    rects = _rects(svg)
    assert len(rects) == 12  # "all" and 11 distinct frames
    scale = rects["all"] / 100
    assert rects["all"] == 1000.0  # the width less the margins
    assert rects["&lt;module&gt; (&lt;string&gt;:1)"] == 80 * scale
    assert rects["init (shmem4py/shmem.py:137)"] == 60 * scale
    assert rects["Thread._bootstrap (threading.py:988)"] == 20 * scale
    assert "shmem4py (shmem_init): 60% of the samples" in svg

    pruned = _rects(flame.render_svg(stacks, "test", width=1020, min_share=0.02))
    assert set(rects) - set(pruned) == {"Thread.run (threading.py:971)"}


def test_without_importlib_keeps_samples_and_drops_the_import_machinery():
    stacks = flame.without_importlib(flame.parse_collapsed(STACKS))
    assert sum(stacks.values()) == 100
    assert all("frozen importlib" not in frame for stack in stacks for frame in stack)
    assert max(len(stack) for stack in stacks) == 4
