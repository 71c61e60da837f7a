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

# benchmarks: prints the table, writes bench/results.json and bench/results.png
# (make bench BENCH_ARGS=--update-readme also rewrites the README section)
.PHONY: bench
bench:
	.venv/bin/python bench/run.py $(BENCH_ARGS)
