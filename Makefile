# The two commands of the README: `make demo` and `make test`. Both set up everything they need.
PYTHON ?= python3
VENV   ?= .venv
BIN    := $(VENV)/bin
STAMP  := $(VENV)/.installed-stamp

.PHONY: demo test check lint typecheck imports unit everything bench docs tools clean proto

# servescope and, beside it, servescope-sim (sim/: the simulator, the demo, the mock OpenAI server and the
# fake dcgmi), which the demo, the tests and the benchmarks run and the production wheel does not carry.
$(STAMP): pyproject.toml sim/pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip
	$(BIN)/python -m pip install --quiet -e '.[test]' -e ./sim
	touch $(STAMP)

tools:
	./scripts/install-debian-tools.sh

# The kubelet pod-resources stubs (committed; tests/k8s fails when they differ from a fresh generation).
proto: $(STAMP)
	$(BIN)/python -m grpc_tools.protoc -Iservescope/exporter/k8s --python_out=servescope/exporter/k8s \
		--pyi_out=servescope/exporter/k8s servescope/exporter/k8s/podresources.proto

# The whole stack on loopback: simulated node, exporter, runbook service, Prometheus, Alertmanager.
demo: $(STAMP)
	./scripts/install-debian-tools.sh --demo
	$(BIN)/servescope demo --scenario tour

lint: $(STAMP)
	$(BIN)/ruff check servescope sim tests bench scripts
	$(BIN)/ruff format --check servescope sim tests bench scripts

# mypy sees the whole package as one, with the simulator's package (strict both; tests/ and bench/,
# relaxed); the script proves it refuses a wrong name used across folders.
typecheck: $(STAMP)
	$(BIN)/mypy servescope sim/servescope_sim
	$(BIN)/mypy tests bench scripts
	MYPY=$(BIN)/mypy ./scripts/check-typing-sees-across.sh

# The house's boundaries (pyproject.toml [tool.importlinter]): the products independent over the core,
# no simulator in production code, layers, no cycles.
imports: $(STAMP)
	$(BIN)/lint-imports --no-cache

# The tiers are pytest markers (pyproject.toml): the unit tier is every test not marked e2e, slow or
# real_vllm.
UNIT_TIER := not e2e and not slow and not real_vllm
unit: $(STAMP)
	$(BIN)/python -m pytest -m "$(UNIT_TIER)" -n 2 -q

# loadscope: each module runs whole on one worker, so that its module fixtures (the demo stacks, the
# backfilled Prometheus, the installed package) start once, not once per worker; in collection order
# (no reorder), which tests/conftest.py sets longest first (tests/support/order.py's long poles, then
# modules with slow tests, then e2e), so the long ones start at once and the short ones fill the
# end. Eight workers on two cores: the four longest modules wait on real time (a live cluster's, the
# demos' clocks, the weekly job's steps) more than on the CPU, and four workers are left for the CPU's
# work; beside CPU-bound neighbours the suite's share of the cores follows how many of its processes
# are ready to run.
# Bytecode written and compiled first: the suite starts hundreds of Python processes (its workers, the
# CLI, the servers), and where the environment says not to write it (PYTHONDONTWRITEBYTECODE) each one
# compiled the package again, and each worker rewrote every test module's asserts again.
everything: $(STAMP)
	PYTHONDONTWRITEBYTECODE= $(BIN)/python -m compileall -q servescope sim/servescope_sim tests bench scripts
	PYTHONDONTWRITEBYTECODE= $(BIN)/python -m pytest -n 8 --dist loadscope --no-loadscope-reorder --durations=15

# While changing code: lint, types, boundaries and the unit tier (~1 minute).
check: lint typecheck imports unit

# The README's test command: installs what the tests run for real, then every check and every test.
test: $(STAMP) tools lint typecheck imports everything

# Minutes on a 2-core machine: scrape ~3.5, ingest ~0.3, dcgm ~0.7, derived ~0.8, footprint ~10.1,
# memory ~2.3, alert quality ~2.6, series per node ~1, load client ~2 (~23 in all; a clean clone adds
# ~1 for the virtualenv).
# bench/results/REPORT.md then compares them, marks each target and says how long each part took; it
# counts only results written after this target started.
bench: $(STAMP)
	./scripts/install-debian-tools.sh --bench
	started=$$(date +%s) && \
	$(BIN)/python bench/scrape.py && \
	$(BIN)/python bench/ingest.py && \
	$(BIN)/python bench/dcgm.py && \
	$(BIN)/python bench/derived.py && \
	$(BIN)/python bench/footprint.py && \
	$(BIN)/python bench/memory.py && \
	$(BIN)/python bench/alert_quality.py && \
	$(BIN)/python bench/series_per_node.py && \
	$(BIN)/python bench/load_client.py && \
	$(BIN)/python bench/report.py --since $$started

docs: $(STAMP)
	$(BIN)/servescope docs
	$(BIN)/python scripts/import_table.py

clean:
	rm -rf $(VENV) .pytest_cache .ruff_cache .mypy_cache
