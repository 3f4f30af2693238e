# Every target that runs code first makes sure .venv holds the project and what it needs,
# so `make demo` and `make test` work on a fresh machine.
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed

.PHONY: demo test test-slow lint bench clean

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

clean:
	rm -rf $(VENV) build *.egg-info
