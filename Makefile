BENCH_ARGS ?=
TEST_ARGS ?=

# the whole test suite (installs what is missing first; real PEs, notebooks, browsers, Slurm)
.PHONY: test
test:
	scripts/test.sh $(TEST_ARGS)

# the tests that start no PEs, kernel, browser or Slurm (not marked pe): feedback in seconds
.PHONY: test-quick
test-quick:
	.venv/bin/python -m pytest -q -m "not pe" $(TEST_ARGS)

# the fast tier (seconds): ruff's lint and format check (the style in pyproject.toml) and mypy, as
# scripts/test.sh runs them before the tests
.PHONY: lint
lint:
	.venv/bin/ruff check .
	.venv/bin/ruff format --check .
	.venv/bin/mypy

# the PE tests that meet the machine's timing (hangs, stranded, deadlocks, collectives, transitions,
# reliability, channel, interrupts) 5 times over with two busy loops beside, on every built library; names each test
# that failed or needed more than half its time limit; writes build/soak.json (SOAK_ARGS: --rounds N, modules)
SOAK_ARGS ?=
.PHONY: soak
soak:
	.venv/bin/python scripts/soak.py $(SOAK_ARGS)

# benchmarks: prints the table, writes bench/results.json, bench/results.png and the results
# section of docs/benchmarks.md
.PHONY: bench
bench:
	.venv/bin/python bench/run.py --update-docs $(BENCH_ARGS)

# a class on a real JupyterHub (root: it makes system users): 1, 10, 20 and 30 students at once running
# notebook 01; writes bench/hub.json and the table in docs/classroom.md (about 15 min on 2 cores)
.PHONY: bench-hub
bench-hub:
	.venv/bin/python bench/hub.py --update-docs $(BENCH_ARGS)

# the conformance suite (tests/conformance/, issue 43): every program on every built library at 2 and 4 PEs,
# 5 times each with two busy loops beside (the target starts and ends them, in their own process group);
# writes tests/conformance/results.json and the table in docs/conformance.md (CONFORMANCE_ARGS: --repeat N,
# --load N, --library NAME, --npes N, --program NAME)
CONFORMANCE_ARGS ?=
.PHONY: conformance
conformance:
	PYTHONPATH=tests .venv/bin/python -m conformance --update-docs $(CONFORMANCE_ARGS)

# the documentation site (Sphinx + MyST) into build/docs/html, warnings as errors; the notebooks
# are rendered from their executed copies in docs/notebooks/ (make docs-notebooks rewrites them)
.PHONY: docs
docs:
	.venv/bin/python scripts/race_picture.py docs/race-picture.png
	.venv/bin/python -m sphinx -W --keep-going -q -b html docs build/docs/html

# execute the notebooks headless (real PEs, a few minutes) into docs/notebooks/ for the docs site
.PHONY: docs-notebooks
docs-notebooks:
	for nb in notebooks/*.ipynb; do .venv/bin/python scripts/run_notebook.py $$nb docs/notebooks/$$(basename $$nb) || exit 1; done
	@# the site shows widgets in their static form: their saved state (1 MB for the inspector) is dropped
	.venv/bin/python -c "import glob, nbformat; [nbformat.write(nb, p) for p in glob.glob('docs/notebooks/*.ipynb') \
		for nb in [nbformat.read(p, as_version=4)] if nb.metadata.pop('widgets', None) is not None]"
