"""The notebooks are tests: executed headless with nbclient, their recorded outputs asserted, on
Open MPI's OSHMEM and on Sandia OpenSHMEM (``SHMEM_NOTEBOOK_LIBRARY=sos`` in the kernel's
environment: the notebooks' own ``%shmem start`` picks it up; skipped where SOS is not built), and
01 and 04 on OSHMPI too (``every_library``)."""

import re
from pathlib import Path

import nbformat
import pytest
from nbclient import NotebookClient

pytestmark = pytest.mark.pe

NOTEBOOKS = Path(__file__).parent.parent / "notebooks"


#: what `%shmem status` says of teams, per library
TEAMS = {
    "oshmem": "teams: emulated (OpenSHMEM 1.4 library",
    "sos": "teams: native (the library's OpenSHMEM 1.5 teams)",
    "oshmpi": "teams: emulated (OpenSHMEM 1.4 library",
}


def execute(name, tmp_path):
    nb = nbformat.read(NOTEBOOKS / name, as_version=4)
    NotebookClient(nb, timeout=300, kernel_name="python3", resources={"metadata": {"path": str(tmp_path)}}).execute()
    nbformat.write(nb, tmp_path / name)
    return nb


def text_of(cell):
    parts = []
    for out in cell.outputs:
        parts.append(out.get("text") or out.get("data", {}).get("text/plain", ""))
    return "".join(parts)


def cell_starting(nb, prefix):
    return next(c for c in nb.cells if c.cell_type == "code" and c.source.startswith(prefix))


def test_quickstart(tmp_path, every_library):
    nb = execute("01-quickstart.ipynb", tmp_path)
    for c in nb.cells:
        assert not any(o.get("output_type") == "error" for o in c.get("outputs", [])), c.source
    assert "OpenSHMEM job ready: 4 PEs" in text_of(cell_starting(nb, "%shmem start"))
    put = text_of(cell_starting(nb, "%%pxshmem right"))
    assert put.splitlines() == [
        f"[PE {pe}] received from my left neighbour: [{n} {n} {n} {n}]" for pe, n in enumerate([3, 0, 1, 2])
    ]
    assert text_of(cell_starting(nb, "%%pxshmem src")) == "[PE 0-3] squares of all PE numbers: [0 1 4 9]\n"
    assert (
        text_of(cell_starting(nb, "received")).split()
        == "array([[3, 3, 3, 3], [0, 0, 0, 0], [1, 1, 1, 1], [2, 2, 2, 2]])".split()
    )
    check = cell_starting(nb, "import numpy")
    assert "array([3, 0, 1, 2])" in text_of(check)
    assert "% npes" in check.source and "arange(4)" not in check.source  # no PE count hard-coded
    status = text_of(cell_starting(nb, "%shmem status")).strip().splitlines()
    rows = [line for line in status[1:] if line[:1].isdigit()]  # one row per PE (a teams note may follow)
    assert len(rows) == 4 and all(line.split()[1] == "idle" for line in rows)
    assert text_of(cell_starting(nb, "%shmem stop")).strip() == "OpenSHMEM job stopped: 4 PEs"


def test_races(tmp_path, library):
    """notebooks/03-races.ipynb: four races found, then fixed; a race across two cells."""
    nb = execute("03-races.ipynb", tmp_path)
    for c in nb.cells:
        assert not any(o.get("output_type") == "error" for o in c.get("outputs", [])), c.source
    cells = [text_of(c) for c in nb.cells if c.cell_type == "code" and c.source.startswith("%%pxshmem --race")]
    barrier, barrier_fixed, nbi, nbi_fixed, flag, flag_fixed, queue, queue_fixed = cells
    assert "RACE remote[0] on PE 1: PE 0 line 4 put (write) / PE 1 line 6 load (read) are unordered" in barrier
    assert "RACE mine[0] on PE 0-1: PE 0-1 line 5 get_nbi (write) / PE 0-1 line 6 load (read)" in nbi
    assert "call shmem.quiet() after line 5" in nbi
    assert (
        "RACE data[0:4] on PE 1: PE 0 line 5 put (write) / PE 1 line 8 sum (read)" in flag and "shmem.fence()" in flag
    )
    # the counter queue: the consumer frees a slot (line 17) before it reads it (line 18)
    assert "RACE slots[:, 0] on PE 1: PE 0 line 10 put (write) / PE 1 line 18 load (read) are unordered" in queue, queue
    for text in (barrier, nbi, flag, queue):
        assert "1 race found (cell traced:" in text
    for text in (barrier_fixed, nbi_fixed, flag_fixed, queue_fixed):
        assert "no races found (cell traced:" in text and "RACE" not in text
    assert "[PE 1] received 406" in flag_fixed
    assert "[PE 1] received [1, 2, 3, 4, 5, 6]" in queue_fixed
    # a race across two cells (%shmem race on): found, naming both cells, then fixed by a quiet
    reading = [text_of(c) for c in nb.cells if c.cell_type == "code" and c.source.startswith("%%pxshmem\nif me == 1:")]
    across, across_fixed = reading
    found = re.search(
        r"RACE inbox\[0\] on PE 1: PE 0 In \[(\d+)\] line 3 put \(write\) / PE 1 In \[(\d+)\] line 2 "
        r"load \(read\) are unordered; ",
        across,
    )
    assert found and int(found.group(2)) == int(found.group(1)) + 1, across
    assert f"shmem.quiet() at the end of In [{found.group(1)}]" in across and "1 race found (cell traced:" in across
    assert "no races found (cell traced:" in across_fixed and "RACE" not in across_fixed
    data = text_of(cell_starting(nb, "import shmem_notebook"))
    assert "[(0, 3, 'put', 'write'), (1, 5, 'store', 'write')]" in " ".join(data.split())
    # under each race's report its picture (a PNG, whose text names the race); none where no race was found
    code = [c for c in nb.cells if c.cell_type == "code"]
    for c in code:
        pictures = [o["data"] for o in c.outputs if "image/png" in o.get("data", {})]
        races = re.findall(r"^RACE (.+?) on PE", "".join(o.get("text", "") for o in c.outputs), re.M)
        assert [p["text/plain"].split(" on PE")[0] for p in pictures] == [f"<race picture: RACE {r}" for r in races]
    assert sum(len(re.findall("image/png", str(c.outputs))) for c in code) == 6  # the six racy cells
    picture = " ".join(text_of(cell_starting(nb, "picture = race.picture()")).split())
    assert picture == "((0, 1), [(0, 'line 3 put (write)'), (1, 'line 5 store (write)')], 'shmem.barrier_all()')"


def test_teams_and_collectives(tmp_path, every_library):
    """notebooks/04-teams-and-collectives.ipynb: teams, team collectives, two replays, the latency table,
    the library comparison (make bench's, or measured in the notebook)."""
    nb = execute("04-teams-and-collectives.ipynb", tmp_path)
    for c in nb.cells:
        assert not any(o.get("output_type") == "error" for o in c.get("outputs", [])), c.source
    library = every_library
    assert TEAMS[library] in text_of(cell_starting(nb, "%shmem status"))
    split = text_of(cell_starting(nb, "%%pxshmem\neven ="))
    assert "[PE 1] odd team: my_pe 0 of 2, its PE 0 is world PE 1" in split
    assert "[PE 2] even team: my_pe 1 of 2, its PE 0 is world PE 0" in split
    assert text_of(cell_starting(nb, "%%pxshmem x=")).splitlines() == [
        "[PE 0,2] even: fcollect [10, 30], sum 40",
        "[PE 1,3] odd: fcollect [20, 40], sum 60",
    ]
    grid = text_of(cell_starting(nb, "%%pxshmem rowsum"))
    assert "[PE 3] row 1 sum 5, column 1 sum 4" in grid and "[PE 0] row 0 sum 1, column 0 sum 2" in grid
    heap_line = text_of(cell_starting(nb, "%%pxshmem\nfrom shmem_notebook.engine import heap"))
    before, after = heap_line.split(":")[-1].split()
    assert before == after
    binomial = text_of(cell_starting(nb, "%shmem replay --array dst"))
    assert binomial.splitlines()[0] == "replay: 2 steps, 20 events, 4 PEs"  # the root quiets after its own copy
    assert "binomial tree, step 2 of 2" in binomial and "PE 1 -> PE 3: put dst[0:4]" in binomial
    ring = text_of(cell_starting(nb, "ring = %shmem replay"))
    assert [line for line in ring.splitlines() if line.startswith("step")] == [
        "step 1: fcollect (ring): ring, step 1 of 3: PE i puts its own block to PE i+1",
        *(
            f"step {k}: fcollect (ring): ring, step {k} of 3: PE i puts block i-{k - 1} (received in step {k - 1}) "
            f"to PE i+1"
            for k in (2, 3)
        ),
    ]
    assert "[[1 2 3 4]\n [1 2 3 4]\n [1 2 3 4]\n [1 2 3 4]]" in text_of(
        cell_starting(nb, "import shmem_notebook\ntrace")
    )
    timeline = cell_starting(nb, "%matplotlib inline\nimport os, tempfile")
    said = text_of(timeline)
    assert "ring-allgather.json - open it in ui.perfetto.dev" in said
    assert [line.split()[:2] for line in said.splitlines()[1:5]] == [["PE", str(pe)] for pe in range(4)]
    assert any("image/png" in out.get("data", {}) for out in timeline.outputs)  # the timeline figure
    table = text_of(cell_starting(nb, "rows = sorted"))
    rows = [line for line in table.splitlines() if line.startswith(("fcollect/", "alltoall/"))]
    assert len(rows) == 2 * 7  # mean and median tables, 7 collective/algorithm rows each
    pe_counts = 3 if library == "oshmem" else 1  # 2, 4, 8 PEs; SOS: 2 (PEs beyond the cores crawl over sockets)
    for row in rows:
        numbers = [float(x) for x in row.split()[1:]]
        assert len(numbers) == 3 * pe_counts and all(x > 0 for x in numbers)
    assert any(o.get("data", {}).get("image/png") for o in cell_starting(nb, "%matplotlib").outputs)
    comparison = "".join(
        o.get("data", {}).get("text/markdown", "") for o in cell_starting(nb, "import json, pathlib").outputs
    )
    assert "**Library against library**" in comparison and "**Team sync, native against emulated**" in comparison
    start = [line.split("|")[3:5] for line in comparison.splitlines() if line.startswith("| start to ready, s | 2 |")]
    assert len(start) == 1 and all(cell.strip() == "not built" or float(cell) > 0 for cell in start[0]), start


def test_rich_output_from_pes_is_shown_labelled(tmp_path, library):
    """display(), plt.show() and a rich last expression on the PEs appear in the notebook, per PE."""
    nb = nbformat.v4.new_notebook()
    nb.cells = [
        nbformat.v4.new_code_cell("%load_ext shmem_notebook\n%shmem start -n 2 --heap 32M"),
        nbformat.v4.new_code_cell(
            "%%pxshmem\nprint('text first')\nfrom IPython.display import HTML, display\n"
            "import matplotlib.pyplot as plt\n"
            "display(HTML('<b>same on every PE</b>'))\n"
            "plt.figure(figsize=(2, 1)); plt.plot([0, me]); plt.show()\nHTML(f'<i>PE {me}</i>')"
        ),
        nbformat.v4.new_code_cell("%shmem stop"),
    ]
    NotebookClient(nb, timeout=300, kernel_name="python3", resources={"metadata": {"path": str(tmp_path)}}).execute()
    outputs = nb.cells[1].outputs
    assert not any(o.output_type == "error" for o in outputs)
    shown = []  # (label before it, mime types) for every display
    label = None
    for o in outputs:
        if o.output_type == "stream":
            label = o.text.strip().splitlines()[-1]
            assert "IPython.core.display.HTML object" not in o.text
        elif o.output_type == "display_data":
            shown.append((label, o.data))
    assert [lbl for lbl, _ in shown] == ["[PE 0-1]", "[PE 0]", "[PE 1]", "Out[PE 0]:", "Out[PE 1]:"]
    assert shown[0][1]["text/html"] == "<b>same on every PE</b>"
    assert "image/png" in shown[1][1] and "image/png" in shown[2][1] and shown[1][1] != shown[2][1]
    assert [d["text/html"] for _, d in shown[3:]] == ["<i>PE 0</i>", "<i>PE 1</i>"]
    assert "text first" in text_of(nb.cells[1]).splitlines()[0]
