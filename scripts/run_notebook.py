"""Execute a notebook headless with nbclient: run_notebook.py IN.ipynb OUT.ipynb."""

import sys
from pathlib import Path

import nbformat
from nbclient import NotebookClient
from nbclient.exceptions import CellExecutionError


def main(src, dst):
    nb = nbformat.read(src, as_version=4)
    client = NotebookClient(
        nb, timeout=600, kernel_name="python3", resources={"metadata": {"path": str(Path(src).parent)}}
    )
    try:
        client.execute()
    except CellExecutionError as exc:
        nbformat.write(nb, dst)
        print(f"{src}: a cell failed; the partly executed copy is {dst}\n{exc}", file=sys.stderr)
        return 1
    Path(dst).parent.mkdir(parents=True, exist_ok=True)
    nbformat.write(nb, dst)
    print(f"{src}: all {sum(c.cell_type == 'code' for c in nb.cells)} code cells ran; executed copy: {dst}")
    return 0


if __name__ == "__main__":
    sys.exit(main(*sys.argv[1:3]))
