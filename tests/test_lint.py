"""The fast tier as tests: ruff's lint and format check and mypy pass under pyproject.toml's config.

scripts/test.sh runs both before the suite; these make a regression fail ``make test-quick`` too.
"""

import pathlib
import subprocess
import sys

ROOT = pathlib.Path(__file__).resolve().parents[1]


def _run(tool, *args):
    exe = pathlib.Path(sys.executable).parent / tool
    assert exe.exists(), f"{tool} is not installed beside {sys.executable}: run scripts/setup.sh --install (dev extra)"
    return subprocess.run([str(exe), *args], cwd=ROOT, capture_output=True, text=True, timeout=180)


def test_ruff_finds_nothing():
    out = _run("ruff", "check", "--output-format", "concise", ".")
    assert out.returncode == 0, out.stdout + out.stderr


def test_the_tree_is_formatted():
    out = _run("ruff", "format", "--check", ".")
    assert out.returncode == 0, out.stdout + out.stderr + "\nrun: .venv/bin/ruff format ."


def test_mypy_finds_nothing():
    out = _run("mypy")
    assert out.returncode == 0, out.stdout + out.stderr
