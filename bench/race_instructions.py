"""Instructions per stencil sweep, untraced and race-checked, counted by callgrind on one PE.

    .venv/bin/python bench/race_instructions.py [SWEEPS]

Runs ``oshrun -n 1 valgrind --tool=callgrind`` four times on this file's PE side (``--pe``), which binds
the engine's namespace into an IPython ``InteractiveShell`` and runs the stencil cell of
:mod:`races` twice through ``run_cell`` (the second run is the rerun a user makes), race-checked or not,
with 0 and ``SWEEPS`` sweeps; the difference over the sweeps run is the cost of one sweep. Instruction
counts do not depend on the machine's load. Prints the table and writes ``bench/race_instructions.json``.
"""

from __future__ import annotations

import json
import os
import pathlib
import re
import subprocess
import sys
import tempfile

HERE = pathlib.Path(__file__).resolve().parent


def pe(sweeps: int, traced: bool) -> None:
    """The PE side: the stencil cell twice, recorded or not."""
    from IPython.core.interactiveshell import InteractiveShell

    sys.path.insert(0, str(HERE))
    import races

    from shmem_notebook.engine import record, runtime
    from shmem_notebook.engine.record import in_c

    shell = InteractiveShell.instance()
    runtime.bind(shell)
    for _ in range(2):
        if traced:
            record.race_start({})
        shell.run_cell(races.STENCIL.format(size=1000, sweeps=sweeps)).raise_error()
        if traced:
            record.race_stop()
    print("native recording:", in_c.module() is not None)


def count(sweeps: int, traced: bool) -> int:
    from shmem_notebook.launcher.environment import platform_environment

    env = dict(os.environ)
    env.update({k: v for k, v in platform_environment(environ=os.environ).items() if k not in os.environ})
    with tempfile.TemporaryDirectory() as tmp:
        out = os.path.join(tmp, "callgrind.out")
        ran = subprocess.run(
            [
                "oshrun",
                "-n",
                "1",
                "valgrind",
                "--tool=callgrind",
                f"--callgrind-out-file={out}",
                sys.executable,
                __file__,
                "--pe",
                str(sweeps),
                "traced" if traced else "plain",
            ],  # fmt: skip
            env=env,
            capture_output=True,
            text=True,
            check=True,
        )
    return int(re.search(r"I\s+refs:\s+([\d,]+)", ran.stderr).group(1).replace(",", ""))


def main(sweeps: int = 2000) -> None:
    from shmem_notebook import native_record

    native_record.build()  # the PEs load it as a job's start would have built it
    per = {}
    for traced in (False, True):
        counts = [count(n, traced) for n in (0, sweeps)]
        per["traced" if traced else "untraced"] = (counts[1] - counts[0]) / (2 * sweeps)  # the cell runs twice
    per["added"] = per["traced"] - per["untraced"]
    print("| instructions per sweep | untraced | race-checked | added by the recording |")
    print("| --- | --- | --- | --- |")
    print(f"| stencil, 1 PE | {per['untraced']:,.0f} | {per['traced']:,.0f} | {per['added']:,.0f} |")
    (HERE / "race_instructions.json").write_text(json.dumps({"sweeps": sweeps, **per}, indent=1) + "\n")


if __name__ == "__main__":
    if sys.argv[1:2] == ["--pe"]:
        pe(int(sys.argv[2]), sys.argv[3] == "traced")
    else:
        main(*(int(a) for a in sys.argv[1:2]))
