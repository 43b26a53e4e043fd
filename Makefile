# Two commands for a fresh machine: `make demo` and `make test`. Both create .venv/ first.
SHELL := /bin/bash
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
# dependencies installed: keyed by the dependency lists only (a new pytest marker or ruff rule installs nothing);
# the package's own metadata (entry points, scripts): keyed by the whole file, refreshed without dependencies
STAMP := $(VENV)/.installed-$(shell sed -n '/^dependencies = \[/,/^\[project.scripts\]/p' pyproject.toml | sha256sum | cut -c1-12)
META := $(VENV)/.metadata-$(shell cat pyproject.toml | sha256sum | cut -c1-12)
DEMO_WS ?= workspace/demo
# torch first (pyproject pins the version). On Linux the default index's wheel is a multi-GB CUDA build; for the
# ~200 MB CPU build pass TORCH_INDEX=<PyTorch's CPU wheel index URL>
TORCH_VERSION := $(shell sed -n 's/.*"torch==\([0-9.]*\)".*/\1/p' pyproject.toml | head -1)
TORCH_INDEX ?=
# Offline hygiene: nothing phones home, Prefect and HF state stay local.
export PREFECT_SERVER_ANALYTICS_ENABLED := false
export PREFECT_SERVER_API_HOST := 127.0.0.1
export HF_HUB_OFFLINE := 1
export HF_HUB_DISABLE_TELEMETRY := 1
export RAY_USAGE_STATS_ENABLED := 0
export RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER := 0
export RAY_AUTH_MODE := disabled
# Python writes each imported module's bytecode once (installs skip byte-compiling the whole of site-packages): with
# PYTHONDONTWRITEBYTECODE set, every test's subprocess and every consumer check recompiles torch and transformers
unexport PYTHONDONTWRITEBYTECODE

.PHONY: setup setup-py demo test test-fast test-py test-soak test-consumers schemas clean

setup: $(META)

$(META): $(STAMP)
	$(BIN)/python -m pip install --disable-pip-version-check --quiet --no-deps --no-compile -e .
	rm -f $(VENV)/.metadata-* && touch $@

$(STAMP):
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	@echo "step 1/2: torch $(TORCH_VERSION) from $(or $(TORCH_INDEX),the default index) (on Linux the default index's build is a multi-GB CUDA one; TORCH_INDEX=<PyTorch's CPU wheel index URL> takes the ~200 MB CPU build)"
	$(BIN)/python -m pip install --disable-pip-version-check --no-compile --progress-bar on $(if $(TORCH_INDEX),--extra-index-url $(TORCH_INDEX)) 'torch==$(TORCH_VERSION)'
	@echo "step 2/2: vrag-data and its dependencies into $(VENV) (PyMuPDF, onnxruntime, Prefect, Ray, transformers, ...):"
	@echo "the first time this downloads ~1-2 GB and takes minutes; pip prints each package as it goes"
	$(BIN)/python -m pip install --disable-pip-version-check --no-compile --progress-bar on -e '.[dev,train,scale,dense]'
	rm -f $(VENV)/.installed-* $(VENV)/.metadata-* && touch $@ $(META)

demo: setup
	$(BIN)/vrag-data demo --config configs/demo.yaml

test: setup
	$(BIN)/ruff check --quiet vrag_data pipelines flows tests bench consumers
	$(BIN)/python -m pytest -q -p no:cacheprovider -n 2 --dist loadfile --durations=40 -m "not soak" tests

# The minutes-long stress tests: kill -9 at random points of synth and export, thousands of concurrent search
# requests, a planted key through a Prefect deployment run
test-soak: setup
	$(BIN)/python -m pytest -q -p no:cacheprovider -m soak tests

# The quick loop while editing: everything but the tests marked slow (servers, Ray, real-PDF ingests, kill -9 runs)
test-fast: setup
	@echo "running the tests not marked slow on 2 workers (a few minutes; a dot per test, the slowest listed at the end)"
	$(BIN)/python -m pytest --durations=5 -q -p no:cacheprovider -n 2 --dist loadfile -m "not slow and not soak" tests

# The quick loop on another Python (`make test-py PYV=3.12`, `PYV=3.13`; CI runs both): the project with its dev tools
# in .venv-$(PYV), without the train / dense extras (the default index's torch is a multi-GB CUDA build): the tests
# that need torch skip, saying so. `python$(PYV)` is found on PATH, or through pyenv when it manages that version.
PYV ?= 3.12
VENV_PY := .venv-$(PYV)
STAMP_PY := $(VENV_PY)/.installed-$(shell cat pyproject.toml | sha256sum | cut -c1-12)
setup-py: $(STAMP_PY)

$(STAMP_PY):
	test -x $(VENV_PY)/bin/python || PYENV_VERSION=$(PYV) python$(PYV) -m venv $(VENV_PY)
	$(VENV_PY)/bin/python -m pip install --disable-pip-version-check --quiet --no-compile -e '.[dev]'
	rm -f $(VENV_PY)/.installed-* && touch $@

test-py: $(STAMP_PY)
	$(VENV_PY)/bin/python -m pytest --durations=10 -q -p no:cacheprovider -n 2 --dist loadfile -m "not slow and not soak" tests

# Conformance: every recipe's export, moved, read by LLaMA-Factory, verl (and EasyR1 and VRAG-RL's verl fork, when
# EASYR1_SRC / VRAGRL_SRC name checkouts or $(CONSUMERS)/src/EasyR1, $(CONSUMERS)/src/VRAG hold them) with their own
# code in their own environments, cached in $(CONSUMERS) (first run: ~10 min, ~14 GB).
CONSUMERS ?= .consumers
test-consumers: setup
	$(BIN)/python consumers/envs.py $(CONSUMERS)
	VRAG_CONSUMERS_DIR=$(CONSUMERS) $(BIN)/python -m pytest -q -p no:cacheprovider -n 2 --durations=15 consumers

schemas: setup
	$(BIN)/vrag-data schemas dump

clean:
	rm -rf $(VENV) .venv-3.* workspace
