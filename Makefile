# The two commands of the README: `make demo` and `make test`. Both set up everything they need.
PYTHON ?= python3
VENV   ?= .venv
BIN    := $(VENV)/bin
STAMP  := $(VENV)/.installed-stamp

.PHONY: demo test lint typecheck unit bench docs tools clean

# The virtualenv is refreshed whenever the project's dependencies change.
$(STAMP): pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip
	$(BIN)/python -m pip install --quiet -e '.[test]'
	touch $(STAMP)

tools:
	./scripts/install-debian-tools.sh

# The whole stack on loopback: simulated node, exporter, runbook service, Prometheus, Alertmanager.
demo: $(STAMP)
	./scripts/install-debian-tools.sh --demo
	$(BIN)/servescope demo --scenario tour

lint: $(STAMP)
	$(BIN)/ruff check exporter alerts dashboards tests bench
	$(BIN)/ruff format --check exporter alerts dashboards tests bench

typecheck: $(STAMP)
	$(BIN)/mypy exporter
	$(BIN)/mypy alerts
	$(BIN)/mypy dashboards/common.py dashboards/build.py dashboards/cli.py dashboards/push.py

unit: $(STAMP)
	$(BIN)/python -m pytest

test: $(STAMP) tools lint typecheck unit

# Minutes on a 2-core machine: scrape ~3.5, ingest ~0.3, dcgm ~0.7, derived ~0.8, footprint ~10.1,
# alert quality ~2.6 (~18 in all; a clean clone adds ~1 for the virtualenv). bench/results/REPORT.md then
# compares them, marks each target and says how long each part took; it counts only results written
# after this target started.
bench: $(STAMP)
	./scripts/install-debian-tools.sh --bench
	started=$$(date +%s) && \
	$(BIN)/python bench/scrape.py && \
	$(BIN)/python bench/ingest.py && \
	$(BIN)/python bench/dcgm.py && \
	$(BIN)/python bench/derived.py && \
	$(BIN)/python bench/footprint.py && \
	$(BIN)/python bench/alert_quality.py && \
	$(BIN)/python bench/report.py --since $$started

docs: $(STAMP)
	$(BIN)/servescope docs --readme README.md

clean:
	rm -rf $(VENV) .pytest_cache .ruff_cache .mypy_cache
