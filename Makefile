# KV Forensics: every target uses the project's own virtual environment.
PY ?= python3.11
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed
TEST_STAMP := $(VENV)/.installed-test

.PHONY: demo test test-sglang check lint sample clean bench schema-doc

$(STAMP): pyproject.toml
	@test -x $(BIN)/python || $(PY) -m venv $(VENV) || python3 -m venv $(VENV)
	$(BIN)/pip install -q --upgrade pip
	$(BIN)/pip install -q -e '.[dev]'
	@touch $(STAMP)

# the tests also run the Ray executor in a local Ray instance (skipped if Ray cannot be installed)
$(TEST_STAMP): $(STAMP)
	$(BIN)/pip install -q -e '.[dev,ray]' || echo "Ray could not be installed: its test will be skipped"
	@touch $(TEST_STAMP)

demo: $(STAMP)
	$(BIN)/forensics investigate sample_data/bundle --out out/sample
	@echo "Open in a browser: $(CURDIR)/out/sample/report.html"

# two workers, a test file per worker at a time (its module fixtures are built once), the heaviest files
# first in the order tests/conftest.py gives them (HEAVY), so that the workers end together
PYTEST_DIST := -n 2 --dist loadfile --no-loadscope-reorder
test: $(TEST_STAMP)
	$(BIN)/python -m pytest $(PYTEST_DIST)
	@$(MAKE) --no-print-directory test-sglang

# the SGLang plugin's tests (tests/sglang_plugin) in a venv of their own per release: SGLang's wheel on
# CPU torch, built by scripts/sglang_test_venv.sh into a cache outside the checkout, keyed by the script
# and the release (SGL_CACHE/sglang-<release>-<hash>): a clean clone, or a second checkout, reuses it and
# builds nothing; a changed script builds anew. The checkout's .venv-sglang (0.5.11: page size 1) and
# .venv-sglang-0.5.23 (its paged allocator too) link to it. The venv names no checkout: the tests run
# with PYTHONPATH=$(CURDIR), and the plugin's entry point (a dist-info of its own) names the module.
# If a build fails (no registry), the target says SKIPPED and why, and passes; a test that fails fails it.
# SGL_TESTS narrows the run (e.g. SGL_TESTS=tests/sglang_plugin/test_multiproc.py).
SGL_CACHE ?= $(or $(XDG_CACHE_HOME),$(HOME)/.cache)/kv-forensics
SGL_VENVS := 0.5.11:.venv-sglang 0.5.23:.venv-sglang-0.5.23
SGL_TESTS ?= tests/sglang_plugin
test-sglang:
	@mkdir -p $(SGL_CACHE); for pair in $(SGL_VENVS); do rel=$${pair%%:*}; link=$${pair#*:}; \
	  key=$$( (cat scripts/sglang_test_venv.sh; echo "$$rel") | sha256sum | cut -c1-16); \
	  venv=$(SGL_CACHE)/sglang-$$rel-$$key; log=$$venv.build.log; \
	  if ! flock $$venv.lock sh -c 'test -f "$$1/.installed" && exit 0; rm -rf "$$1"; \
	      echo "building $$1 (SGLang $$2) with scripts/sglang_test_venv.sh (log: $$3)"; \
	      SGLANG_RELEASE=$$2 sh scripts/sglang_test_venv.sh "$$1" > "$$3" 2>&1 && touch "$$1/.installed"' \
	      _ $$venv $$rel $$log; then \
	    echo "SKIPPED tests/sglang_plugin on SGLang $$rel: building $$venv failed: $$(grep -iE 'error|not found|no matching' $$log | tail -n 1) (full log: $$log)"; \
	    continue; fi; \
	  if [ -e $$link ] && [ ! -L $$link ]; then rm -rf $$link; fi; ln -sfn $$venv $$link; \
	  echo "KVF_SGLANG_REQUIRED=1 $$link/bin/python -m pytest -n 2 --dist loadfile $(SGL_TESTS) (SGLang $$rel, $$venv)"; \
	  KVF_SGLANG_REQUIRED=1 PYTHONPATH=$(CURDIR) $$venv/bin/python -m pytest -n 2 --dist loadfile -p no:cacheprovider $(SGL_TESTS) || exit 1; \
	done

lint: $(STAMP)
	$(BIN)/ruff check forensics tests
	$(BIN)/ruff format --check forensics tests
	$(BIN)/mypy forensics

# the fast loop: lint, types and the tests not marked slow (make test runs them all)
check: lint
	$(BIN)/python -m pytest $(PYTEST_DIST) -m "not slow"

# docs/schema.md from the comments of the sample's database (tests/whole/test_catalog.py keeps it current)
schema-doc: demo
	$(BIN)/python -m forensics.catalog out/sample/incident.duckdb > docs/schema.md

# Regenerate the bundled sample incident (bundle + ground truth); deterministic: same bytes every run.
sample: $(STAMP)
	rm -rf sample_data/bundle sample_data/truth
	$(BIN)/forensics simulate sample_data --seed 7 --preset incident --allocator coalesce

# Benchmarks: investigate vs a plain DuckDB scan vs a per-event replay; see benchmarks/README.md.
# e.g. make bench BENCH_ARGS="--sizes 100M --timeout 3600"
# logs_only.py: ingest and investigate of logs-only bundles (forensics simulate --scale), e.g. LOGS_ARGS="--sizes 2M"
BENCH_ARGS ?=
SHAPES_ARGS ?=
LOGS_ARGS ?=
bench: $(STAMP)
	$(BIN)/python benchmarks/run.py $(BENCH_ARGS)
	$(BIN)/python benchmarks/shapes.py $(SHAPES_ARGS)
	$(BIN)/python benchmarks/logs_only.py $(LOGS_ARGS)

clean:
	rm -rf out .pytest_cache
