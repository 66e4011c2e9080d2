# situflow: the two commands of the README, and the pieces they are made of.
#   make demo   the aggressive-drivers query over a generated car-sensor stream
#   make test   lint, type check and the whole test suite (what CI runs)

PYTHON ?= python3
VENV   ?= .venv
PY     := $(VENV)/bin/python
STAMP  := $(VENV)/.installed-$(shell cksum pyproject.toml | cut -d' ' -f1)

.PHONY: demo test lint typecheck pytest bench clean

$(STAMP): pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet --upgrade pip
	$(PY) -m pip install --quiet -e '.[dev]'
	rm -f $(VENV)/.installed-* && touch $@

demo: $(STAMP)
	$(VENV)/bin/situflow demo

test: lint typecheck pytest

lint: $(STAMP)
	$(VENV)/bin/ruff check situflow workers topics tests bench

typecheck: $(STAMP)
	$(VENV)/bin/mypy

pytest: $(STAMP)
	$(PY) -m pytest

bench: $(STAMP)
	$(PY) bench/tpstream.py

clean:
	rm -rf $(VENV) .pytest_cache .mypy_cache .ruff_cache .hypothesis
