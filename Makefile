# Every target that runs code first makes sure .venv holds the project and what it needs,
# so `make demo` and `make test` work on a fresh machine.
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed

.PHONY: demo test test-slow lint bench clean gavel-env bench-headline

# The compiled kernels are built by the install: a changed .pyx file reinstalls.
KERNEL_SOURCES := $(shell find fleetplan -name '*.pyx')

$(STAMP): pyproject.toml $(KERNEL_SOURCES)
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip
	$(BIN)/python -m pip install --quiet -e ".[dev,distributed,service]"
	touch $(STAMP)

demo: $(STAMP)
	$(BIN)/fleetplan demo

test: $(STAMP)
	$(BIN)/python -m pytest

test-slow: $(STAMP)
	$(BIN)/python -m pytest -m slow

lint: $(STAMP)
	$(BIN)/ruff check fleetplan tests

# Gavel's published policies need an environment of their own (cvxpy with ECOS), used only by
# benchmarks/scripts/gavel_side.py; nothing else depends on it, `make test` included.
GAVEL_VENV := .venv-gavel

gavel-env: $(GAVEL_VENV)/.installed

$(GAVEL_VENV)/.installed: benchmarks/gavel-env/requirements.txt
	test -x $(GAVEL_VENV)/bin/python || $(PYTHON) -m venv $(GAVEL_VENV)
	$(GAVEL_VENV)/bin/python -m pip install --quiet --upgrade pip
	$(GAVEL_VENV)/bin/python -m pip install --quiet -r benchmarks/gavel-env/requirements.txt
	touch $@

clean:
	rm -rf $(VENV) $(GAVEL_VENV) build *.egg-info

# Re-run the headline rows of benchmarks/RESULTS.md that benchmarks/headline.yaml gives a
# command for (times: run it on a quiet machine; ROWS="id ..." for some of them,
# MAX_MINUTES=M to skip the rows planned longer than M minutes).
bench-headline: $(STAMP)
	$(BIN)/fleetplan bench headline $(if $(ROWS),--rows $(ROWS)) $(if $(MAX_MINUTES),--max-minutes $(MAX_MINUTES))
