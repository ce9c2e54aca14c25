.PHONY: install test check protos bench serve robustness

install:            ## editable install with the development tools
	python3 -m pip install -e '.[dev]'

test:               ## the test suite (what the README gives)
	python3 -m pytest

check:              ## everything CI runs
	bash .ci/run

protos:             ## regenerate the committed stubs from proto/
	python3 scripts/generate_protos.py

bench:              ## every benchmark, each beside same-run baselines (about ten minutes)
	python3 -m pip install -q -e '.[bench]'
	python3 bench/state_server.py
	python3 bench/submit_breakdown.py
	python3 bench/engine.py
	python3 bench/skill_registry.py
	python3 bench/access.py
	python3 bench/scale_out.py --db "$$(scripts/postgres_for_tests.sh)"

robustness:         ## seeded fault-injection runs checked against the reference model (about four minutes)
	python3 -m tests.robustness run --seeds 10 --duration 15 --out robustness-results

serve:              ## the server (state and skills) on 127.0.0.1:50051 with ./skillstate.db
	skillstate serve
