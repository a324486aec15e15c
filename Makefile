# paraeval: `make run` sets up .venv and runs the demo; `make test` sets up and runs the tests.
SHELL := /bin/bash
PYTHON ?= $(shell command -v python3.11 || command -v python3)
VENV := .venv
PY := $(VENV)/bin/python
PIP := $(PY) -m pip
export HF_HUB_OFFLINE := 1
export TRANSFORMERS_OFFLINE := 1
export MLFLOW_DISABLE_TELEMETRY := true
export TOKENIZERS_PARALLELISM := false

.PHONY: setup setup-dev wordnet chromium postgresql run test test-fast lint bench clean demo-data

$(VENV)/bin/activate:
	$(PYTHON) -m venv $(VENV)
	$(PIP) install --quiet --upgrade pip

# torch is pinned and installed first: an unpinned torch pulls gigabytes of CUDA packages
$(VENV)/.runtime: $(VENV)/bin/activate pyproject.toml
	$(PIP) install --quiet torch==2.13.0
	$(PIP) install --quiet -e .
	touch $@

# parascore: the ParaScore toolkit, the test oracle of metrics/paraphrase.py. Without its
# dependencies: it asks for an unpinned torch, and everything else it needs is a runtime dependency.
# The ray extra: tests/pipeline/test_cluster.py starts a Ray cluster and sweeps on it
$(VENV)/.dev: $(VENV)/.runtime pyproject.toml
	$(PIP) install --quiet -e ".[dev,ray]"
	$(PIP) install --quiet --no-deps parascore==1.0.5
	touch $@

# PyPI's own `pipeline` and `correlation` distributions, which tests/test_packaging.py installs
# next to the paraeval wheel (offline: tests have no network) to show that the names do not clash
FOREIGN_WHEELS := .cache/foreign-wheels
FOREIGN_PINS := pipeline==0.1 correlation==1.0.0

$(FOREIGN_WHEELS)/.complete: $(VENV)/bin/activate
	$(PIP) download --quiet --no-deps --only-binary=:all: -d $(FOREIGN_WHEELS) $(FOREIGN_PINS)
	touch $@

# WordNet 3.0 for METEOR, from Debian's packages, copied into .cache/nltk_data (never downloaded by NLTK)
wordnet: $(VENV)/.runtime
	@if [ -f scripts/setup_wordnet.py ]; then $(PY) scripts/setup_wordnet.py; fi

setup: $(VENV)/.runtime wordnet

# Chromium (Debian's package) renders report.html in tests/pipeline/test_report_page.py
chromium:
	@command -v chromium >/dev/null || command -v chromium-browser >/dev/null || \
	  (apt-get install -y -q chromium >/dev/null 2>&1 || \
	   (apt-get update -q >/dev/null && apt-get install -y -q chromium >/dev/null)) || \
	  echo "chromium not installed: install Debian's chromium package (the report page test needs it)"

# PostgreSQL (Debian's package): tests/pipeline/test_sql_stores.py starts a server of its own from
# its programs (initdb, pg_ctl), which Debian keeps in /usr/lib/postgresql/<version>/bin
postgresql:
	@ls /usr/lib/postgresql/*/bin/initdb >/dev/null 2>&1 || command -v initdb >/dev/null || \
	  (apt-get install -y -q postgresql >/dev/null 2>&1 || \
	   (apt-get update -q >/dev/null && apt-get install -y -q postgresql >/dev/null)) || \
	  echo "postgresql not installed: install Debian's postgresql package (the SQL store tests need it)"

setup-dev: $(VENV)/.dev $(FOREIGN_WHEELS)/.complete wordnet chromium postgresql

run: setup
	$(VENV)/bin/paraeval

test: setup-dev
	$(VENV)/bin/pytest -q tests

# the edit loop: the tests not marked slow (whole runs, servers, clusters and browsers are)
test-fast: setup-dev
	$(VENV)/bin/pytest -q -m "not slow" tests

lint: setup-dev
	$(VENV)/bin/ruff check .
	$(VENV)/bin/mypy metrics correlation pipeline

# each script times paraeval against its anchor measured in the same run, prints the ratios and
# writes its figures to .cache/bench/<script>.json; docs/performance.md's table is made from them.
# bench_semantic runs on the CPU (its --device cuda needs a GPU)
# BASELINE_PYTHON=PY: bench_run also times another installation (the code before a change)
BENCH_FIGURES := .cache/bench
BASELINE_PYTHON ?=
bench: setup-dev
	rm -rf $(BENCH_FIGURES) && mkdir -p $(BENCH_FIGURES)
	for script in benchmarks/bench_*.py; do \
	  extra=""; \
	  if [ -n "$(BASELINE_PYTHON)" ] && [ $$script = benchmarks/bench_run.py ]; then \
	    extra="--baseline-python $(BASELINE_PYTHON)"; fi; \
	  $(PY) $$script --json $(BENCH_FIGURES)/$$(basename $$script .py).json $$extra || exit 1; \
	done
	$(PY) benchmarks/performance_table.py $(BENCH_FIGURES) docs/performance.md

demo-data: $(VENV)/.runtime
	$(PY) scripts/make_demo.py

clean:
	rm -rf outputs multirun mlflow .pytest_cache .mypy_cache .ruff_cache build dist *.egg-info
