# situflow: the two commands of the README, and the pieces they are made of.
#   make demo   the aggressive-drivers query through the services, over a local Kafka broker
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

# Every benchmark (several minutes); bench/README.md has the numbers and how to read them.
bench: $(STAMP)
	for b in tpstream tpstream_batches sase plans trends pipeline; do PYTHONPATH=. $(PY) bench/$$b.py || exit 1; done

clean:
	rm -rf $(VENV) .pytest_cache .mypy_cache .ruff_cache .hypothesis
