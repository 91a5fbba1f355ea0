# ge-plugin: the two commands that matter are `make demo` and `make test`.
# Everything is set up by `make setup`, idempotently: a second run with nothing changed takes seconds.

PYTHON ?= python3
VENV ?= .venv
PY := $(VENV)/bin/python
STAMPS := $(VENV)/.stamps
EXT := ge_plugin/_fastpath$(shell $(PYTHON) -c "import sysconfig; print(sysconfig.get_config_var('EXT_SUFFIX'))")
PYTEST_ARGS ?=

.PHONY: setup system-deps test test-py test-fast test-packaging test-docs coverage demo bench bench-micro lint typecheck format dist clean

setup: system-deps $(STAMPS)/installed $(EXT)

# Debian packages (libb64-0d for perf_analyzer); installs only what is missing.
system-deps:
	@scripts/system-deps.sh

$(PY):
	$(PYTHON) -m venv $(VENV)

$(STAMPS)/requirements: requirements.txt constraints.txt | $(PY)
	$(PY) -m pip install --quiet --disable-pip-version-check -r requirements.txt -c constraints.txt
	@mkdir -p $(STAMPS) && touch $@

$(STAMPS)/installed: $(STAMPS)/requirements pyproject.toml setup.py
	$(PY) -m pip install --quiet --disable-pip-version-check --no-build-isolation --no-deps -e .
	@touch $@

$(EXT): ge_plugin/_fastpath.pyx $(wildcard ge_plugin/_fastpath.pxd) setup.py $(STAMPS)/requirements
	$(PY) setup.py --quiet build_ext --inplace

# Every test, the wheel built and installed as users do included (CI runs it once, here: test-py leaves it out).
test: setup
	$(PY) -m pytest $(PYTEST_ARGS)

# The tests that can see which fast path runs, again on its pure-Python twin (GE_PLUGIN_NO_EXTENSIONS=1).
# The rule: a test belongs here when the code it runs imports ge_plugin.fastpath, directly or through the
# engine: tests/fastpath, tests/engine, tests/backend, and every e2e test (a tritonserver serving ge models,
# whose stubs run the engine), wherever it lives. Spec, render, atc, sim, models, migrate, deploy, tune's
# planning and the serve front never touch the fast path, so they would only run twice.
FASTPATH_TESTS := tests/fastpath tests/engine tests/backend tests/e2e
test-py: setup
	GE_PLUGIN_NO_EXTENSIONS=1 $(PY) -m pytest $(FASTPATH_TESTS) -m "not packaging" $(PYTEST_ARGS)
	GE_PLUGIN_NO_EXTENSIONS=1 $(PY) -m pytest tests -m "e2e and not packaging" \
	  $(addprefix --ignore=,$(FASTPATH_TESTS)) $(PYTEST_ARGS)

# A developer's loop: no tritonserver, no perf_analyzer, no wheel build.
test-fast: setup
	$(PY) -m pytest tests -m "not e2e and not packaging" --ignore=tests/e2e $(PYTEST_ARGS)

# The wheel and the sdist built and installed as users do, alone (minutes; make test runs them too).
test-packaging: setup
	$(PY) -m pytest -m packaging $(PYTEST_ARGS)

# The docs' slow command blocks (servers, bench, tune, the wheel), run as written in a scratch checkout
# (tests/docs/README.md); make test runs the fast ones. CI runs it after make test.
test-docs: setup
	GE_PLUGIN_DOCS_SLOW=1 $(PY) -m pytest tests/docs -m docs_slow $(PYTEST_ARGS)

# Line coverage of ge_plugin's Python code (the twin included) over make test's tests; the compiled module
# is not traced (Cython line tracing needs a second, slower build of the extension). HTML in htmlcov/.
coverage: setup
	$(PY) -m pytest -m "not packaging" --cov=ge_plugin --cov-report=term-missing:skip-covered \
	  --cov-report=html $(PYTEST_ARGS)

demo: setup
	$(VENV)/bin/ge-plugin demo

# The proof of the project's targets (benchmarks/proof, not in the wheel): the seed's table replicated, ge
# against its floors, the report in bench-results/. `ge-plugin bench SPEC...` is what users run on their own.
bench: setup
	$(PY) -m benchmarks.proof

bench-micro: setup
	$(PY) -m pytest benchmarks -q --benchmark-columns=min,median,max,ops --benchmark-sort=name

lint: setup typecheck
	$(VENV)/bin/ruff check .
	$(VENV)/bin/ruff format --check .

# mypy --strict over ge_plugin (pyproject.toml [tool.mypy]), then over the tests of the fast path and the
# backend with the settings alone; one run each, as both directories have a conftest module.
typecheck: setup
	$(VENV)/bin/mypy --strict
	$(VENV)/bin/mypy tests/fastpath
	$(VENV)/bin/mypy tests/backend

format: setup
	$(VENV)/bin/ruff format .
	$(VENV)/bin/ruff check --fix .

# The wheel and the sdist users install, built from the committed and new files only (nothing git ignores, so
# no in-place extension or venv leaks in), with the pinned build requirements; constraints.txt beside them
# for the exact tested set (pip install "DIST/ge_plugin-*.whl[sim,serve]" -c DIST/constraints.txt); then
# twine check (metadata, README rendering). DIST=dir to write elsewhere.
DIST ?= dist
DIST_SRC := build/dist-src
dist: setup
	@rm -rf $(DIST_SRC) && mkdir -p $(DIST_SRC) $(DIST)
	git ls-files -z --cached --others --exclude-standard \
	  | tar --null --files-from=- --ignore-failed-read -cf - 2>/dev/null | tar -xf - -C $(DIST_SRC)
	rm -f $(DIST)/ge_plugin-*.tar.gz $(DIST)/ge_plugin-*.whl
	PIP_CONSTRAINT=$(CURDIR)/constraints.txt $(PY) -m build --outdir $(DIST) $(DIST_SRC)
	cp constraints.txt $(DIST)/constraints.txt
	$(VENV)/bin/twine check --strict $(DIST)/ge_plugin-*.tar.gz $(DIST)/ge_plugin-*.whl

clean:
	rm -rf build ge_plugin/*.so ge_plugin/_fastpath.c ge_plugin/*.html .pytest_cache .benchmarks *.egg-info .coverage htmlcov
