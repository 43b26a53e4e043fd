# Two commands for a fresh machine: `make demo` and `make test`. Both create .venv/ first.
SHELL := /bin/bash
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed-$(shell cat pyproject.toml | sha256sum | cut -c1-12)
DEMO_WS ?= workspace/demo
# Offline hygiene: nothing phones home, Prefect and HF state stay local.
export PREFECT_SERVER_ANALYTICS_ENABLED := false
export PREFECT_SERVER_API_HOST := 127.0.0.1
export HF_HUB_OFFLINE := 1
export HF_HUB_DISABLE_TELEMETRY := 1
export RAY_USAGE_STATS_ENABLED := 0
export RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER := 0
export RAY_AUTH_MODE := disabled

.PHONY: setup demo test test-fast test-consumers schemas clean

setup: $(STAMP)

$(STAMP): pyproject.toml
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	@echo "installing vrag-data and its dependencies into $(VENV) (PyMuPDF, onnxruntime, Prefect, Ray, torch, ...):"
	@echo "the first time this downloads several GB (torch alone is large) and takes minutes; pip shows each package"
	$(BIN)/python -m pip install --disable-pip-version-check --progress-bar on -e '.[dev,train,scale,dense]'
	rm -f $(VENV)/.installed-* && touch $@

demo: setup
	$(BIN)/vrag-data demo --config configs/demo.yaml

test: setup
	$(BIN)/ruff check --quiet vrag_data pipelines flows tests bench consumers
	$(BIN)/python -m pytest -q -p no:cacheprovider tests

# The quick loop while editing: everything but the tests marked slow (servers, Ray, real-PDF ingests, kill -9 runs)
test-fast: setup
	$(BIN)/python -m pytest -q -p no:cacheprovider -m "not slow" tests

# Conformance: every recipe's export, moved, read by LLaMA-Factory, verl (and EasyR1 and VRAG-RL's verl fork, when
# EASYR1_SRC / VRAGRL_SRC name checkouts or $(CONSUMERS)/src/EasyR1, $(CONSUMERS)/src/VRAG hold them) with their own
# code in their own environments, cached in $(CONSUMERS) (first run: ~10 min, ~14 GB).
CONSUMERS ?= .consumers
test-consumers: setup
	$(BIN)/python consumers/envs.py $(CONSUMERS)
	VRAG_CONSUMERS_DIR=$(CONSUMERS) $(BIN)/python -m pytest -q -p no:cacheprovider consumers

schemas: setup
	$(BIN)/vrag-data schemas dump

clean:
	rm -rf $(VENV) workspace
