PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
DEMO_HOME ?= $(CURDIR)/demo-instance
STAMP := $(VENV)/.installed
# Four test processes on two cores: most of a test is spent waiting on worker
# processes and SQLite, so the suite takes about 60% of its serial time.
PYTEST_ARGS ?= -n 4

.PHONY: install test test-fast lint run bench clean tools

$(STAMP): pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(BIN)/pip install --quiet --upgrade pip
	$(BIN)/pip install --quiet -e '.[test]'
	touch $(STAMP)

install: $(STAMP) tools

# tmux runs `nerve top` in a real 80x24 terminal in the tests
tools:
	@command -v tmux >/dev/null 2>&1 || { apt-get update -qq && apt-get install -y -qq tmux >/dev/null; } \
		|| { echo "tmux is needed by the tests: install it (apt-get install tmux)"; exit 1; }

test: $(STAMP) tools
	$(BIN)/python -m pytest $(PYTEST_ARGS)

# the in-process tests (tests/conftest.py FAST): no worker, engine or CLI process; under a minute
test-fast: $(STAMP)
	$(BIN)/python -m pytest -m fast $(PYTEST_ARGS)

# the gate CI runs before the tests: ruff (mistakes, import order) and mypy (types), both configured in
# pyproject.toml; every change passes it
lint: $(STAMP)
	$(BIN)/ruff check nerve_cli tests bench
	$(BIN)/mypy

run: $(STAMP)
	@test -f $(DEMO_HOME)/nerve.yaml || $(BIN)/nerve init --home $(DEMO_HOME)
	$(BIN)/nerve config check --home $(DEMO_HOME)
	$(BIN)/nerve run --home $(DEMO_HOME) -v

# every script, then the goal rows they recorded (each beside its floor from the same script's run)
bench: $(STAMP)
	@goals=$$(mktemp); for f in bench/*.py; do echo "== $$f"; NERVE_BENCH_GOALS=$$goals $(BIN)/python $$f || exit 1; done; \
		$(BIN)/python bench/_kit.py goals $$goals; rm -f $$goals

clean:
	rm -rf $(VENV) $(DEMO_HOME) .pytest_cache .mypy_cache .ruff_cache
