# Two commands on a fresh clone: `make run` and `make test`. Only Python 3.11+ must be present.
PYTHON ?= python3
VENV   := .venv
BIN    := $(VENV)/bin
HOST   ?= 127.0.0.1
PORT   ?= 8765

.PHONY: run test lint bench clean

$(BIN)/python:
	$(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip

# Stamps re-run the install whenever pyproject.toml changes.
$(VENV)/.runtime: pyproject.toml | $(BIN)/python
	$(BIN)/python -m pip install --quiet -e .
	@touch $@

$(VENV)/.dev: pyproject.toml | $(BIN)/python
	$(BIN)/python -m pip install --quiet -e ".[dev]"
	@touch $@ $(VENV)/.runtime

run: $(VENV)/.runtime
	$(BIN)/mcp-memory serve --transport streamable-http --host $(HOST) --port $(PORT)

lint: $(VENV)/.dev
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .
	$(BIN)/mypy

test: lint
	$(BIN)/pytest -n auto

# LoCoMo last: it needs the dev set beside the clone (../shared/data/locomo, or --data), the others nothing.
bench: $(VENV)/.dev
	$(BIN)/python bench/search.py
	$(BIN)/python bench/transfer.py
	$(BIN)/python bench/loop.py
	$(BIN)/python bench/lessons.py
	$(BIN)/python bench/locomo.py

clean:
	rm -rf $(VENV) build *.egg-info .mypy_cache .ruff_cache
