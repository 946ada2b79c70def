PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
DEMO_HOME ?= $(CURDIR)/demo-instance
STAMP := $(VENV)/.installed
PROMTOOL := $(BIN)/promtool
DATASETTE1 := .venv-datasette1/bin/datasette
# the real coding-agent harnesses the agent tests run (pinned): Codex's app-server and Claude Code, from npm
HARNESSES := .harnesses/node_modules/.bin/codex
HARNESS_PACKAGES := @openai/codex@0.171.0 @anthropic-ai/claude-code@2.1.332
# Four test processes on two cores: most of a test is spent waiting on worker
# processes and SQLite, so the suite takes about 60% of its serial time.
PYTEST_ARGS ?= -n 4

.PHONY: install test test-fast lint run bench clean tools docs docs-serve reference

$(STAMP): pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(BIN)/pip install --quiet --upgrade pip
	$(BIN)/pip install --quiet -e '.[test]'
	touch $(STAMP)

install: $(STAMP) tools

# tmux runs `nerve top` in a real 80x24 terminal in the tests; Debian's chromium is the browser the console's tests
# drive (Playwright with executable_path: no browser is downloaded); the coding-agent harnesses run in the agent tests
tools: $(PROMTOOL) $(DATASETTE1) $(HARNESSES)
	@command -v tmux >/dev/null 2>&1 || { apt-get update -qq && apt-get install -y -qq tmux >/dev/null; } \
		|| { echo "tmux is needed by the tests: install it (apt-get install tmux)"; exit 1; }
	@test -x /usr/bin/chromium || { apt-get update -qq && apt-get install -y -qq chromium >/dev/null; } \
		|| { echo "chromium is needed by the console's tests: install it (apt-get install chromium)"; exit 1; }

# Datasette 1.0 (a pre-release, pinned) in a venv of its own: `nerve datasette` is tested under it and under the
# 0.65 the test extra installs, since 1.0 reads its configuration from -c where 0.65 reads metadata
$(DATASETTE1):
	$(PYTHON) -m venv .venv-datasette1
	.venv-datasette1/bin/pip install --quiet 'datasette==1.0a41'

# Codex and Claude Code in a project-local folder (node and npm from Debian's packages when missing)
$(HARNESSES):
	@command -v npm >/dev/null 2>&1 || { apt-get update -qq && apt-get install -y -qq nodejs npm >/dev/null; } \
		|| { echo "npm is needed to install the coding-agent harnesses the tests run: apt-get install nodejs npm"; exit 1; }
	npm install --silent --no-audit --no-fund --prefix .harnesses $(HARNESS_PACKAGES)

# promtool (Prometheus' metrics linter and alert-rule tester) lints a real scrape and runs deploy/'s rule
# tests: the one on PATH, else unpacked from Debian's prometheus package into the venv (no server is
# installed or started)
$(PROMTOOL): $(STAMP)
	@if command -v promtool >/dev/null 2>&1; then ln -sf "$$(command -v promtool)" $@; else \
		tmp=$$(mktemp -d) && cd $$tmp && { apt-get download prometheus >/dev/null 2>&1 \
			|| { apt-get update -qq && apt-get download prometheus >/dev/null 2>&1; }; } \
		&& dpkg-deb -x prometheus_*.deb root && cp root/usr/bin/promtool $(CURDIR)/$@ && cd / && rm -rf $$tmp \
		|| { echo "promtool is needed by the tests: apt-get install prometheus, or put promtool on PATH"; exit 1; }; fi

test: $(STAMP) tools
	$(BIN)/python -m pytest $(PYTEST_ARGS)

# the in-process tests (tests/conftest.py FAST): no worker, engine or CLI process; under a minute
test-fast: $(STAMP)
	$(BIN)/python -m pytest -m fast $(PYTEST_ARGS)

# the gate CI runs before the tests: ruff (mistakes, import order) and mypy (types), both configured in
# pyproject.toml; every change passes it
lint: $(STAMP)
	$(BIN)/ruff check nerve_cli tests bench scripts
	$(BIN)/mypy

# the documentation site from docs/ (MkDocs, Material theme) into site/; --strict: a warning (a broken link, an
# orphan page) fails the build. Material's notice about its own end of life is not a warning about these docs.
docs: $(STAMP)
	NO_MKDOCS_2_WARNING=1 $(BIN)/mkdocs build --strict

# the reference pages made from the code (the CLI, nerve.yaml's model, the JSON Schemas, the log's vocabulary, the
# metrics, the error types): written again; tests/test_docs_reference.py fails while a committed one is stale
reference: $(STAMP)
	$(BIN)/python scripts/gen_reference.py

# the site at http://127.0.0.1:8000, rebuilt as a page is saved
docs-serve: $(STAMP)
	NO_MKDOCS_2_WARNING=1 $(BIN)/mkdocs serve --strict

run: $(STAMP)
	@test -f $(DEMO_HOME)/nerve.yaml || $(BIN)/nerve init --home $(DEMO_HOME)
	$(BIN)/nerve config check --home $(DEMO_HOME)
	$(BIN)/nerve run --home $(DEMO_HOME) -v

# every script, then the goal rows they recorded (each beside its floor from the same script's run)
bench: $(STAMP)
	@goals=$$(mktemp); for f in bench/*.py; do echo "== $$f"; NERVE_BENCH_GOALS=$$goals $(BIN)/python $$f || exit 1; done; \
		$(BIN)/python bench/_kit.py goals $$goals; rm -f $$goals

clean:
	rm -rf $(VENV) .venv-datasette1 .harnesses $(DEMO_HOME) site .pytest_cache .mypy_cache .ruff_cache
