# Two entry points keep working on a fresh machine: `make run` and `make test`.
# Each creates .venv and installs what it needs first.
PYTHON ?= python3
VENV ?= .venv
PY := $(VENV)/bin/python
PORT ?= 8080
# Some machines (this project's CI among them) set PYTHONDONTWRITEBYTECODE: then every process the tests
# start compiles skyloop's sources again, and pytest rewrites every test module again in each worker
# (collection: 22 s of CPU a worker instead of 12). The recipes keep Python's caches, as a default
# install does; .gitignore and the Lambda assets (infra/assets.py) leave __pycache__ out.
unexport PYTHONDONTWRITEBYTECODE

.PHONY: check coverage iam-policies bubblewrap constraints unasync run test before-tests test-caches node-tools console console-check chromium browser lint typecheck typecheck-skyloop typecheck-infra unit integration e2e infra format bench clean synth layer lock

$(PY):
	$(PYTHON) -m venv $(VENV)
	$(PY) -m pip install -q --upgrade pip

$(VENV)/.local-installed: pyproject.toml constraints.txt | $(PY)
	$(PY) -m pip install -q -c constraints.txt -e ".[local]"
	touch $@

$(VENV)/.dev-installed: pyproject.toml constraints.txt | $(PY)
	$(PY) -m pip install -q -c constraints.txt -e ".[dev]"
	touch $@ $(VENV)/.local-installed

# Node tools the tests run (asl-validator), pinned by package-lock.json; Node and npm come with the machine.
NODE_TOOLS := node_modules/.installed
$(NODE_TOOLS): package.json package-lock.json
	npm ci --no-audit --no-fund --loglevel=error
	touch $@
node-tools: $(NODE_TOOLS)

# The web console (console/): Preact + TypeScript built by Vite into console/dist, which `skyloop dev`
# serves at / and the CDK stack deploys to S3. Pinned by console/package-lock.json.
CONSOLE_DEPS := console/node_modules/.installed
CONSOLE_DIST := console/dist/index.html
CONSOLE_SRC := $(shell find console/src console/public -type f 2>/dev/null) console/index.html \
	console/vite.config.ts console/tsconfig.json
$(CONSOLE_DEPS): console/package.json console/package-lock.json
	cd console && npm ci --no-audit --no-fund --loglevel=error
	touch $@
$(CONSOLE_DIST): $(CONSOLE_DEPS) $(CONSOLE_SRC)
	cd console && npm run --silent build
console: $(CONSOLE_DIST)
## console-check: the console's ESLint, TypeScript and Vitest unit tests
console-check: $(CONSOLE_DEPS)
	cd console && npx eslint . && npx tsc --noEmit && npx vitest run

# The browser tests drive Debian's Chromium (no browser download): installed when missing. After bubblewrap:
# two apt-get at once would contend for dpkg's lock.
chromium: bubblewrap
	@command -v chromium >/dev/null 2>&1 || (apt-get update -q && DEBIAN_FRONTEND=noninteractive apt-get install -y -q chromium)

# Hosted tools run in bubblewrap on the local stack (skyloop.environments.local): installed when missing.
bubblewrap:
	@command -v bwrap >/dev/null 2>&1 || (apt-get update -q && DEBIAN_FRONTEND=noninteractive apt-get install -y -q bubblewrap)

## run: the local stack on http://127.0.0.1:$(PORT) with the example agent `coder` and the web console at /
run: $(VENV)/.local-installed $(CONSOLE_DIST) bubblewrap
	$(VENV)/bin/skyloop dev --port $(PORT)

COVERAGE := --cov=skyloop.turns --cov=skyloop.store --cov-report=term:skip-covered
# pytest-xdist workers. tests/conftest.py hands each a whole file at a time, longest first. Three on two
# cores: the end-to-end files spend much of their time waiting on the processes they started.
WORKERS ?= 3

## test: lint and types, then the whole suite (unit, integration on moto, e2e over real HTTP/SSE, infra) on
## pytest-xdist workers: about 6.5 minutes on two cores (bench/README.md, "make test's wall time")
test:
	@$(MAKE) --no-print-directory -j4 --output-sync=target before-tests
	$(PY) -m pytest -n $(WORKERS)

# What the suite needs first, side by side (`make test` runs them on four jobs, each one's output together): on
# a fresh clone the installs and the type checks (mypy over the CDK's types alone is a minute) took three
# minutes one after another, two side by side.
before-tests: lint typecheck $(NODE_TOOLS) console-check $(CONSOLE_DIST) chromium bubblewrap test-caches

# The builds the suite would make on first use inside a worker (omnigent's venv, the layer for this machine),
# and skyloop's bytecode: see the script.
test-caches: $(VENV)/.dev-installed
	$(PY) scripts/prepare_test_caches.py

## coverage: the unit and integration suites with line coverage of turns and store (the suites where they
## run in the test's own process; tracing costs them about half again, so make test does not)
coverage: $(VENV)/.dev-installed
	$(PY) -m pytest -n $(WORKERS) tests/unit tests/integration $(COVERAGE)

## check: the inner loop in under a minute: lint, types and the unit tests
check: lint typecheck
	$(PY) -m pytest tests/unit -n 2 -q

## lint: ruff rules and formatting, and no import circles (import-linter's contracts in pyproject.toml)
lint: $(VENV)/.dev-installed
	$(VENV)/bin/ruff check shared functions tests bench infra scripts
	$(VENV)/bin/ruff format --check shared functions tests bench infra scripts
	$(VENV)/bin/lint-imports

## typecheck: mypy (pydantic plugin) over shared/skyloop, scripts and infra
typecheck: typecheck-skyloop typecheck-infra
typecheck-skyloop: $(VENV)/.dev-installed
	$(VENV)/bin/mypy
	$(VENV)/bin/mypy scripts
# a cache of its own: it may run beside typecheck-skyloop (make test), and mypy's cache is not for two writers
typecheck-infra: $(VENV)/.dev-installed
	$(VENV)/bin/mypy --cache-dir .mypy_cache/infra infra

## unit | integration | e2e | infra: one suite at a time
unit: $(VENV)/.dev-installed
	$(PY) -m pytest tests/unit
integration: $(VENV)/.dev-installed
	$(PY) -m pytest -n $(WORKERS) tests/integration $(COVERAGE)
e2e: $(VENV)/.dev-installed
	$(PY) -m pytest -n $(WORKERS) tests/e2e
infra: $(VENV)/.dev-installed $(NODE_TOOLS)
	$(PY) -m pytest tests/infra
## browser: the web console in headless Chromium (Playwright, axe-core)
browser: $(VENV)/.dev-installed $(CONSOLE_DIST) chromium
	$(PY) -m pytest tests/browser

format: $(VENV)/.dev-installed
	$(VENV)/bin/ruff check --fix shared functions tests bench infra scripts
	$(VENV)/bin/ruff format shared functions tests bench infra scripts

## unasync: regenerate the sync client (shared/skyloop/client/_sync/) from the async one (_async/), which
## is the one to edit; tests/unit/test_client_generated.py fails while the two disagree
unasync: $(VENV)/.dev-installed
	$(PY) scripts/unasync_client.py

## synth: the CDK app -> cdk.out/ (offline, no Docker; cdk-nag AwsSolutions checks included)
synth: $(VENV)/.dev-installed $(CONSOLE_DIST)
	JSII_SILENCE_WARNING_END_OF_LIFE_NODE_VERSION=20 $(PY) infra/app.py
	@echo "cdk.out/$$(ls cdk.out | grep -m1 '\.template\.json$$')"

## layer: the Lambda dependencies layer (layers/build) from layers/requirements.lock: wheels for arm64 /
## Python 3.12, with 3.12 bytecode (needs a local python3.12: pyenv install 3.12)
layer: | $(PY)
	$(PY) layers/build.py

## constraints: re-pin constraints.txt to the newest releases pyproject allows (then run make test before committing)
constraints: | $(PY)
	$(PY) -m venv --clear $(VENV)-fresh && $(VENV)-fresh/bin/pip install -q -e ".[dev]"
	{ sed -n '1,3p' constraints.txt; $(VENV)-fresh/bin/pip freeze --exclude-editable; } > constraints.new && mv constraints.new constraints.txt
	rm -rf $(VENV)-fresh

## lock: re-resolve layers/requirements.txt into layers/requirements.lock and layers/runtime.lock
lock: $(VENV)/.dev-installed
	$(PY) layers/build.py --lock

## bench: turn latency on the local stack (not part of `make test`)
bench: $(VENV)/.dev-installed
	$(PY) bench/turn_latency.py

clean:
	rm -rf $(VENV) node_modules console/node_modules console/dist .pytest_cache .ruff_cache cdk.out layers/build layers/build.tmp

## iam-policies: re-export the functions' deployed policies for the local stack's IAM check
## (shared/skyloop/local/iam_policies.json; tests/infra fails while it differs from the synthesized stack)
iam-policies: $(VENV)/.dev-installed
	d=$$(mktemp -d) && CDK_OUTDIR=$$d SKYLOOP_LAYER_DIR=$$d/none SKYLOOP_CONSOLE_DIR=$$d/none $(PY) infra/app.py \
		&& $(PY) -m infra.iam_export $$d/Skyloop.template.json && rm -rf $$d
