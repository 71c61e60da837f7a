"""The documentation site: ``make docs``'s build passes with warnings as errors, every page is
there with its key sections, the references are written from the code (every public name, every
``%shmem`` subcommand and option), the notebooks' executed copies match the notebooks, and the
README stays a short entrance whose links resolve."""

import html
import re
import subprocess
import sys
import time
from pathlib import Path

import nbformat
import pytest

import shmem_notebook
from shmem_notebook.magics import shmem_magics

ROOT = Path(__file__).parent.parent
DOCS = ROOT / "docs"

#: page -> phrases it must hold (headings and the sentences a reader comes for)
# fmt: off
PAGES = {
    "install": ["Install (fresh Debian bookworm)", "scripts/setup.sh", "scripts/test.sh", "Tests", "binder/"],
    "quickstart": ["%shmem start -n 4", "shmem_notebook.start(n=4", "The notebooks", "01-quickstart.ipynb"],
    "magics": ["Magics reference", "Every subcommand and option", "%%pxshmem"],
    "api": ["Python API", "shmem_notebook.start", "Job.run", "CellResult", "SHMEM_NOTEBOOK_HEAP"],
    "inspector": ["Inspector", "%shmem inspect", "Refresh", "snap.payload_bytes"],
    "races": ["Race detector", "How it works", "Hints and fixes", "Stress mode", "Races across cells",
              "What the detector models, and what it does not", "Exact footprints", "precision / recall"],
    "teams": ["Teams and collectives", "Native or emulated", "Collectives step by step", "%shmem replay"],
    "libraries": ["Three libraries", "--library sos", "libraries.json", "OSHRUN_LAUNCHER"],
    "many-nodes": ["Many nodes", "Inside a Slurm allocation", "From a login node", "With a hostfile",
                   "--sbatch-prologue"],
    "export": ["From notebook to batch job", "%shmem export", "Race-check any shmem4py program"],
    "classroom": ["Classroom", "several users on one machine", "site policy"],
    "troubleshooting": ["Troubleshooting", "A PE crashes", "One PE raises, the others wait for it", "A cell hangs",
                        "The heap does not fit", "Known platform limits", "Sandia OpenSHMEM 1.5.3"],
    "benchmarks": ["Benchmarks", "Library against library", "Results", "make bench"],
    "architecture": ["Architecture", "One direction per call.", "The boundary is tested", "Security"],
}
# fmt: on


def text_of(page):
    """The visible text of a built page, whitespace folded."""
    body = re.sub(r"<(script|style)\b.*?</\1>", " ", page, flags=re.S)
    body = re.sub(r"</?(span|a|code|em|strong|wbr)\b[^>]*>", "", body)  # inline: highlighted code stays whole
    return " ".join(html.unescape(re.sub(r"<[^>]+>", " ", body)).split())


@pytest.fixture(scope="module")
def site(tmp_path_factory):
    """The site built as ``make docs`` builds it (warnings as errors), into a fresh directory."""
    out = tmp_path_factory.mktemp("docs") / "html"
    started = time.perf_counter()
    run = subprocess.run(
        [sys.executable, "-m", "sphinx", "-W", "--keep-going", "-q", "-b", "html", str(DOCS), str(out)],
        capture_output=True,
        text=True,
        timeout=180,
        cwd=ROOT,
    )
    seconds = time.perf_counter() - started
    assert run.returncode == 0, f"the docs build failed (make docs to see it):\n{run.stderr[-4000:]}"
    print(f"docs built in {seconds:.1f} s")
    return out


def page(site, name):
    path = site / f"{name}.html"
    assert path.exists(), f"docs/{name}.md was not built into {path.name}"
    return path.read_text()


@pytest.mark.parametrize("name", sorted(PAGES))
def test_each_page_is_built_with_its_key_sections(site, name):
    text = text_of(page(site, name))
    missing = [phrase for phrase in PAGES[name] if phrase not in text]
    assert not missing, f"docs/{name}.md lacks {missing}"


def test_every_page_is_in_the_table_of_contents(site):
    index = page(site, "index")
    for md in DOCS.glob("*.md"):
        if md.stem != "index":
            assert f'href="{md.stem}.html"' in index, f"docs/{md.name} is not linked from the index"


def test_the_api_reference_documents_every_public_name(site):
    api = page(site, "api")
    for name in shmem_notebook.__all__:
        assert f'id="shmem_notebook.{name}"' in api, f"shmem_notebook.{name} is not in the API reference"
    methods = [m for m in dir(shmem_notebook.Job) if not m.startswith("_") and callable(getattr(shmem_notebook.Job, m))]
    assert {"run", "alloc", "gather", "stop", "restart", "export"} <= set(methods)
    for method in methods:
        assert f'id="shmem_notebook.Job.{method}"' in api, f"Job.{method} is not in the API reference"
    # written from the docstrings, not by hand
    first = shmem_notebook.start.__doc__.strip().splitlines()[0].replace("``", "")
    assert first in text_of(api), first


def test_the_magics_reference_lists_every_subcommand_and_option(site):
    text = text_of(page(site, "magics"))
    for sub in shmem_magics.subcommands():
        assert f"%shmem {sub}" in text, f"%shmem {sub} is not in the magics reference"
    for sub, parser in shmem_magics.parsers().items():
        for action in parser._actions:  # argparse keeps a parser's options only here
            for option in action.option_strings:
                assert option in text, f"{sub}'s option {option} is not in the magics reference"


def test_the_notebooks_are_rendered_from_their_executed_copies(site):
    text = text_of(page(site, "notebooks/01-quickstart"))
    assert "[PE 0] received from my left neighbour: [3 3 3 3]" in text  # an output, not only the code
    assert "OpenSHMEM job ready: 4 PEs" in text
    for name in ("02-inspector", "03-races", "04-teams-and-collectives"):
        assert page(site, f"notebooks/{name}")
    assert "RACE remote[0] on PE 1" in text_of(page(site, "notebooks/03-races"))
    inspector = page(site, "notebooks/02-inspector")  # a widget, shown in its static form
    assert "OpenSHMEM inspector" in text_of(inspector) and "data:image/png;base64," in inspector


def test_the_benchmark_results_are_the_generated_section(site):
    source = (DOCS / "benchmarks.md").read_text()
    block = source.split("<!-- bench:start -->")[1].split("<!-- bench:end -->")[0]
    assert "`make bench` (= `.venv/bin/python bench/run.py --update-docs`)" in block
    assert "![benchmark results](../bench/results.png)" in block
    for image in ("results.png", "inspector.png", "replay.png"):  # the pictures the pages show
        assert (site / "_images" / image).exists(), f"{image} is not in the built site"


@pytest.mark.parametrize("notebook", sorted(p.name for p in (ROOT / "notebooks").glob("*.ipynb")))
def test_the_executed_copies_match_the_notebooks(notebook):
    """The site shows docs/notebooks/; they must be the notebooks as they are, run to the end."""
    copy = DOCS / "notebooks" / notebook
    assert copy.exists(), f"docs/notebooks/{notebook} is missing: run make docs-notebooks"
    ours, theirs = (nbformat.read(p, as_version=4) for p in (ROOT / "notebooks" / notebook, copy))
    assert [c.source for c in ours.cells] == [c.source for c in theirs.cells], (
        f"docs/notebooks/{notebook} is not notebooks/{notebook} as it is now: run make docs-notebooks"
    )
    for cell in theirs.cells:
        if cell.cell_type == "code":
            assert cell.execution_count is not None, f"a cell of docs/notebooks/{notebook} did not run"
            if "raises-exception" not in cell.metadata.get("tags", []):
                assert not any(o.output_type == "error" for o in cell.outputs), cell.source
                text = "".join(o.get("text", "") for o in cell.outputs)
                assert "Traceback (most recent call last)" not in text, cell.source


def test_the_readme_is_a_short_entrance_with_links_that_resolve():
    readme = (ROOT / "README.md").read_text()
    assert len(readme.splitlines()) <= 300
    assert (
        "scripts/setup.sh    # set up everything, then run the main job (the quickstart notebook, 4 PEs)\n"
        "scripts/test.sh     # run the tests (installs whatever is missing first)\n"
    ) in readme
    links = re.findall(r"\]\((docs/[^)#]*)", readme)
    for name in PAGES:
        assert f"docs/{name}.md" in links, f"the README does not link docs/{name}.md"
    for link in links:
        assert (ROOT / link).exists(), f"the README links {link}, which does not exist"
