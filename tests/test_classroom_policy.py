"""The shipped notebooks and the heap advice within the classroom policy docs/classroom.md suggests
(issue 45, items 1 and 2).

The policy is read from docs/classroom.md, less ``max_jobs``: it counts every running job of this uid,
and other test runs on this machine start jobs as the same user, so a start could be refused for
them (docs/classroom.md, "How max_jobs counts")."""

import argparse
import json
import re
import shlex
from pathlib import Path

import nbformat
import pytest
from nbclient import NotebookClient

import shmem_notebook
from shmem_notebook import HeapFullError
from shmem_notebook.job import site
from shmem_notebook.job.options import add_arguments
from shmem_notebook.launcher.start_options import JobOptions

ROOT = Path(__file__).parent.parent
NOTEBOOKS = sorted((ROOT / "notebooks").glob("*.ipynb"))
#: the notebook cell that starts jobs from Python (the benchmark over PE counts of notebook 04)
BENCH_CELL = ("04-teams-and-collectives.ipynb", "import json, time\n")


def classroom_policy():
    """The policy docs/classroom.md says the class tests use, without max_jobs (see above)."""
    text = (ROOT / "docs" / "classroom.md").read_text()
    found = re.search(r"The policy the tests use.*?```json\n(\{.*?\})\n```", text, re.S)
    assert found, "docs/classroom.md no longer shows the policy the tests use"
    policy = json.loads(found.group(1))
    assert policy["max_pes"] == 4 and policy["max_heap"] == "64M", policy  # the policy
    policy.pop("max_jobs", None)
    return policy


@pytest.fixture
def classroom(tmp_path, monkeypatch):
    """SHMEM_NOTEBOOK_SITE points at the classroom policy (inherited by notebook kernels); its Policy."""
    path = tmp_path / "site.json"
    path.write_text(json.dumps(classroom_policy()))
    monkeypatch.setenv("SHMEM_NOTEBOOK_SITE", str(path))
    monkeypatch.setenv("SHMEM_NOTEBOOK_LIBRARY", "oshmem")  # the library the notebooks ask 8 PEs of
    return site.policy()


def code_cells(path):
    return [c for c in nbformat.read(path, as_version=4).cells if c.cell_type == "code"]


def test_every_start_in_the_notebooks_is_within_the_policy(classroom):
    """Each notebook's `%shmem start` lines pass the site's check (refused before any launch, so no PE
    starts here); the only Python start() is the benchmark cell, which the test below runs."""
    parser = argparse.ArgumentParser(exit_on_error=False)
    add_arguments(parser)
    starts = []
    for path in NOTEBOOKS:
        for cell in code_cells(path):
            for line in cell.source.splitlines():
                if line.startswith("%shmem start"):
                    options = JobOptions(**vars(parser.parse_args(shlex.split(line)[2:])))
                    heap = site.within_site(options, classroom)  # raises LaunchError beyond the policy
                    starts.append((path.name, line, heap))
            if "shmem_notebook.start(" in cell.source or "Job(" in cell.source:
                assert (path.name, cell.source[: len(BENCH_CELL[1])]) == BENCH_CELL, (path.name, cell.source[:200])
    assert len(starts) >= len(NOTEBOOKS), starts  # every notebook starts its job
    assert ("01-quickstart.ipynb", "%shmem start -n 4", "16M") in starts  # the site's default_heap


@pytest.mark.pe
def test_notebook_04_benchmark_asks_for_what_the_site_allows(classroom, tmp_path):
    """Notebook 04's benchmark cell (and the table and plot after it) under the policy: 2 and 4 PEs run,
    8 are left out, saying so (before: LaunchError 'at most 4 PEs per job ...; you asked for 8 PEs')."""
    cells = code_cells(ROOT / "notebooks" / BENCH_CELL[0])
    bench = next(i for i, c in enumerate(cells) if c.source.startswith(BENCH_CELL[1]))
    nb = nbformat.v4.new_notebook()
    nb.cells = [nbformat.v4.new_code_cell("%load_ext shmem_notebook"), *cells[bench : bench + 3]]
    NotebookClient(nb, timeout=300, kernel_name="python3", resources={"metadata": {"path": str(tmp_path)}}).execute()
    for c in nb.cells:
        assert not any(o.get("output_type") == "error" for o in c.outputs), (c.source[:80], c.outputs)
    said = "".join(o.get("text", "") for o in nb.cells[1].outputs).splitlines()
    assert said[0] == "8 PEs left out: this site allows at most 4 PEs per job (site.json: max_pes)", said
    assert said[-1].startswith("collected ") and said[-1].endswith(" latencies"), said
    table = "".join(o.get("text", "") for o in nb.cells[2].outputs)
    header = next(line for line in table.splitlines() if line.startswith("collective / algorithm"))
    assert re.findall(r"(\d+) PEs", header) == ["2"] * 3 + ["4"] * 3, header
    assert any("image/png" in o.get("data", {}) for o in nb.cells[3].outputs)  # a plot per PE count


def advised(error):
    """The `%shmem start` command a HeapFullError advises, as a JobOptions (None: it advises none)."""
    found = re.search(r"`%shmem start ([^`]*)`", str(error))
    if not found:
        return None
    parser = argparse.ArgumentParser(exit_on_error=False)
    add_arguments(parser)
    return JobOptions(**vars(parser.parse_args(shlex.split(found.group(1)))))


@pytest.mark.pe
def test_heap_full_advice_fits_the_sites_limits(classroom):
    """A real 2-PE job on the site's default heap (16M): a larger heap is advised only up to max_heap
    (before: `--heap 128M`, which the site refuses), and arrays that no heap the site allows can hold
    are said so in one sentence. The checks are the client's: nothing is allocated on the PEs."""
    with shmem_notebook.start(2) as job:
        assert job.heap_bytes == 16 << 20
        with pytest.raises(HeapFullError) as small:
            job.alloc(a="float64[2621440]")  # 20 MiB: a power of two with room, 32M, within the site
        assert str(small.value).endswith("`%shmem stop`, then `%shmem start -n 2 --heap 32M`)"), small.value
        with pytest.raises(HeapFullError) as large:
            job.alloc(a="float64[7864320]")  # 60 MiB: 128M with room, more than the site allows
        assert str(large.value).endswith(
            "`%shmem stop`, then `%shmem start -n 2 --heap 64M`, the largest this site allows (site.json: max_heap))"
        ), large.value
        for error in (small.value, large.value):
            options = advised(error)
            assert site.within_site(options, classroom) == options.heap  # the advice starts on this site
        with pytest.raises(HeapFullError) as beyond:
            job.alloc(a="float64[13107200]")  # 100 MiB: no heap this site allows holds it
        said = str(beyond.value)
        assert advised(said) is None and len(said.splitlines()) == 1, said
        assert said.endswith(
            "; free arrays (`%shmem free NAME`) or declare smaller arrays: 100.0 MiB per PE in all is more than the "
            "largest heap this site allows, 64M (site.json: max_heap); for more, ask the site's administrator"
        ), said
        assert job.specs == {}  # nothing was allocated
