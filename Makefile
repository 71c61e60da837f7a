BENCH_ARGS ?=

# benchmarks: prints the table, writes bench/results.json and bench/results.png
# (make bench BENCH_ARGS=--update-readme also rewrites the README section)
.PHONY: bench
bench:
	.venv/bin/python bench/run.py $(BENCH_ARGS)
