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
