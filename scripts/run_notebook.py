"""Execute a notebook headless with nbclient: run_notebook.py IN.ipynb OUT.ipynb.

The kernel talks to this process over IPC (Unix sockets in a private temporary directory), not TCP:
nothing is sent in plain text over the network, and ipykernel does not print its "Kernel is running
over TCP without encryption" warning on a newcomer's first screen.
"""

import os
import sys
import tempfile
from pathlib import Path

import nbformat
from nbclient import NotebookClient
from nbclient.exceptions import CellExecutionError
from traitlets.config import Config


def main(src, dst):
    with tempfile.TemporaryDirectory(prefix="kernel-") as sockets:  # mode 0700: this user's only
        return _run(src, dst, os.path.join(sockets, "ipc"))


def _run(src, dst, sockets):
    nb = nbformat.read(src, as_version=4)
    # the kernel manager nbclient makes (and shuts down) takes these; ip: an absolute path, as the kernel
    # runs in the notebook's directory and the client here
    config = Config({"KernelManager": {"transport": "ipc", "ip": sockets}})
    client = NotebookClient(
        nb, timeout=600, kernel_name="python3", config=config, resources={"metadata": {"path": str(Path(src).parent)}}
    )
    # the kernel's own messages (not the cells' output, which comes over its sockets) go to a file, shown only
    # when the run failed: its shutdown over IPC may log a closed socket's queued callback after every cell ran
    with tempfile.TemporaryFile("w+") as kernel_log:
        try:
            client.execute(stderr=kernel_log)
        except BaseException as exc:
            kernel_log.seek(0)
            sys.stderr.write(kernel_log.read())
            if not isinstance(exc, CellExecutionError):
                raise
            nbformat.write(nb, dst)
            print(f"{src}: a cell failed; the partly executed copy is {dst}\n{exc}", file=sys.stderr)
            return 1
    Path(dst).parent.mkdir(parents=True, exist_ok=True)
    nbformat.write(nb, dst)
    print(f"{src}: all {sum(c.cell_type == 'code' for c in nb.cells)} code cells ran; executed copy: {dst}")
    return 0


if __name__ == "__main__":
    sys.exit(main(*sys.argv[1:3]))
