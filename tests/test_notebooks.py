"""The notebooks are tests: executed headless with nbclient, their recorded outputs asserted."""

from pathlib import Path

import nbformat
from nbclient import NotebookClient

NOTEBOOKS = Path(__file__).parent.parent / "notebooks"


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


def test_quickstart(tmp_path):
    nb = execute("01-quickstart.ipynb", tmp_path)
    for c in nb.cells:
        assert not any(o.get("output_type") == "error" for o in c.get("outputs", [])), c.source
    assert "OpenSHMEM job ready: 4 PEs" in text_of(cell_starting(nb, "%shmem start"))
    put = text_of(cell_starting(nb, "%%pxshmem right"))
    assert put.splitlines() == [f"[PE {pe}] received from my left neighbour: [{n} {n} {n} {n}]" for pe, n in enumerate([3, 0, 1, 2])]
    assert text_of(cell_starting(nb, "%%pxshmem src")) == "[PE 0-3] squares of all PE numbers: [0 1 4 9]\n"
    assert text_of(cell_starting(nb, "received")).split() == "array([[3, 3, 3, 3], [0, 0, 0, 0], [1, 1, 1, 1], [2, 2, 2, 2]])".split()
    assert "array([3, 0, 1, 2])" in text_of(cell_starting(nb, "import numpy"))
    status = text_of(cell_starting(nb, "%shmem status")).strip().splitlines()
    assert len(status) == 5 and all(line.split()[1] == "idle" for line in status[1:])
    assert text_of(cell_starting(nb, "%shmem stop")).strip() == "OpenSHMEM job stopped"


def test_races(tmp_path):
    """notebooks/03-races.ipynb: three races found, then fixed."""
    nb = execute("03-races.ipynb", tmp_path)
    for c in nb.cells:
        assert not any(o.get("output_type") == "error" for o in c.get("outputs", [])), c.source
    cells = [text_of(c) for c in nb.cells if c.cell_type == "code" and c.source.startswith("%%pxshmem --race")]
    barrier, barrier_fixed, nbi, nbi_fixed, flag, flag_fixed = cells
    assert "RACE remote[0] on PE 1: PE 0 line 4 put (write) / PE 1 line 6 load (read) are unordered" in barrier
    assert "RACE mine[0] on PE 0-1: PE 0-1 line 5 get_nbi (write) / PE 0-1 line 6 load (read)" in nbi
    assert "call shmem.quiet() between them" in nbi
    assert "RACE data[0:4] on PE 1: PE 0 line 5 put (write) / PE 1 line 8 sum (read)" in flag and "shmem.fence()" in flag
    for text in (barrier, nbi, flag):
        assert "1 race found (cell traced:" in text
    for text in (barrier_fixed, nbi_fixed, flag_fixed):
        assert "no races found (cell traced:" in text and "RACE" not in text
    assert "[PE 1] received 406" in flag_fixed
    data = text_of(cell_starting(nb, "import shmem_notebook"))
    assert "[(0, 3, 'put', 'write'), (1, 5, 'store', 'write')]" in " ".join(data.split())
