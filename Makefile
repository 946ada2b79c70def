PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
DEMO_HOME ?= $(CURDIR)/demo-instance
STAMP := $(VENV)/.installed

.PHONY: install test run bench clean

$(STAMP): pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(BIN)/pip install --quiet --upgrade pip
	$(BIN)/pip install --quiet -e '.[test]'
	touch $(STAMP)

install: $(STAMP)

test: $(STAMP)
	$(BIN)/python -m pytest

run: $(STAMP)
	@test -f $(DEMO_HOME)/nerve.yaml || $(BIN)/nerve init --home $(DEMO_HOME)
	$(BIN)/nerve config check --home $(DEMO_HOME)
	$(BIN)/nerve run --home $(DEMO_HOME) -v

bench: $(STAMP)
	@for f in bench/*.py; do echo "== $$f"; $(BIN)/python $$f || exit 1; done

clean:
	rm -rf $(VENV) $(DEMO_HOME) .pytest_cache
