.PHONY: install test check protos bench serve robustness

install:            ## editable install with the development tools, in .venv (what the README gives)
	python3 -m venv .venv && .venv/bin/pip install -e '.[dev]'

test:               ## the test suite (what the README gives)
	.venv/bin/python -m pytest

check:              ## everything CI runs
	bash .ci/run

protos:             ## regenerate the committed stubs from proto/
	python3 scripts/generate_protos.py

# every script in bench/ (a module with a __main__ block; the others are helpers they import)
BENCHES = $(shell grep -l '^if __name__ == "__main__":' bench/*.py)

bench:              ## every benchmark in bench/, each beside same-run baselines (about fifteen minutes)
	.venv/bin/pip install -q -e '.[dev]'
	set -e; for bench in $(filter-out bench/scale_out.py,$(BENCHES)); do echo "== $$bench"; .venv/bin/python $$bench; done
	.venv/bin/python bench/scale_out.py --db "$$(scripts/postgres_for_tests.sh)"  # needs root, as CI has

robustness:         ## seeded fault-injection runs checked against the reference model (about four minutes)
	.venv/bin/python -m tests.robustness run --seeds 10 --duration 15 --out robustness-results

serve:              ## the server (state and skills) on 127.0.0.1:50051 with ./skillstate.db
	.venv/bin/skillstate serve
