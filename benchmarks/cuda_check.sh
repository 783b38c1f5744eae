#!/usr/bin/env bash
# The checks that need a CUDA GPU, as one script for a lent GPU machine (no network there: the packages it lacks
# travel as wheels in .whl/, the stand-in models' configs and tokenizers in .devrun/specs/; see docs/performance.md, On a GPU).
#   bash benchmarks/cuda_check.sh OUT_DIR
# 1. tests/runtime/test_cuda.py and the device tests of test_runs.py (every method, metric and analysis on CUDA
#    equals the CPU; a leaderboard run with device = "cuda" stores the CPU run's rows);
# 2. forward cost by batch shape (bench_batching.py) on random-weight stand-ins of MiniLM and SmolLM2;
# 3. the full config's per-example cost on the GPU (bench_leaderboard.py --device cuda) on the stand-ins;
# 4. each method's seconds per example on the GPU (the timing evaluation), as docs/methods.md gives them on the CPU:
#    MiniLM on 10 SST-2 dev examples, SmolLM2 on 4 Linzen items.
# 5. the engine-overhead proxy (bench_proxy.py: every method and the scoring metrics on tiny-llama) on the GPU, n = 24
#    in one shard, the engine of this tree (and, where the copy has git history, the engine before batching
#    beside it: BEFORE=rev).
# 6. the peers side by side (bench_peers.py): SST-2's 872 dev sentences by gradient x input, IG and LIME, attrbench
#    against ferret (MiniLM classifier) and inseq (SmolLM2), on the stand-ins, each peer for PEER_SECONDS per method.
# SUITES (bench_leaderboard --suites), PEER_METHODS (bench_peers --methods) and the *_S limits narrow a run that must
# fit less device time. STEPS picks steps (default: "tests leaderboard peers"; all: "tests batching leaderboard costs proxy peers"). Each
# step has its own time limit and writes its log and JSON to OUT_DIR as it goes.
set -u
out=${1:?usage: cuda_check.sh OUT_DIR}
mkdir -p "$out"
export PYTHONUNBUFFERED=1 TOKENIZERS_PARALLELISM=false
if [ -d .whl ]; then
  python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl \
    || exit 1
  export PYTHONPATH=/tmp/site:$PWD
fi
nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader | tee "$out/machine.txt"
python3 -c "import torch, transformers, captum; print('torch', torch.__version__, 'transformers', transformers.__version__,
'captum', captum.__version__, 'cpus', __import__('os').cpu_count())" | tee -a "$out/machine.txt"
steps=${STEPS:-tests leaderboard peers}
has() { [[ " $steps " == *" $1 "* ]]; }
has tests && timeout "${TESTS_S:-120}" python3 -m pytest -q -p no:cacheprovider -rfE --durations=10 tests/runtime/test_cuda.py \
  tests/runtime/test_runs.py -k "cuda or device" 2>&1 | tee "$out/tests.log" | tail -60
python3 benchmarks/stand_ins.py build .devrun/specs /tmp/stand-ins 2>&1 | grep -v "Loading\|Writing"
has batching && timeout "${BATCHING_S:-90}" python3 benchmarks/bench_batching.py /tmp/stand-ins/minilm-l6-sst2 /tmp/stand-ins/smollm2-135m \
  --device cuda --json "$out/batching-cuda.json" 2>&1 | grep -v "Loading" | tee "$out/batching.log"
has leaderboard && timeout "${LEADERBOARD_S:-150}" python3 benchmarks/bench_leaderboard.py /tmp/stand-ins/full-stand-ins.toml --device cuda \
  --n "${N:-8}" ${SUITES:+--suites "$SUITES"} --add '' --out /tmp/bench --json "$out/leaderboard-cuda.json" 2>&1 | grep -v "Loading" \
  | tee "$out/leaderboard.log" | tail -20
if has costs; then
  for suite in "minilm-l6-sst2 sst2 10" "smollm2-135m sva-linzen 4"; do
    set -- $suite
    timeout "${COSTS_S:-120}" python3 -m attrbench.cli eval --model /tmp/stand-ins/$1 --dataset $2 --n $3 --eval timing \
      --method all --device cuda --out "$out/costs" 2>&1 | grep "seconds_per_example\|results:"
  done
fi
has proxy && timeout "${PROXY_S:-150}" python3 benchmarks/bench_proxy.py --device cuda --geometry gpu --n 24 --shard 24 \
  --repeat 1 ${BEFORE:+--before "$BEFORE"} --json "$out/proxy-cuda.json" 2>&1 | grep -v "Loading" | tee "$out/proxy.log" \
  | tail -16
has peers && timeout "${PEERS_S:-240}" python3 benchmarks/bench_peers.py --classifier /tmp/stand-ins/minilm-l6-sst2 \
  --lm /tmp/stand-ins/smollm2-135m --n "${PEER_N:-872}" --device cuda --peer-seconds "${PEER_SECONDS:-15}" ${PEER_METHODS:+--methods "$PEER_METHODS"} \
  --peer-batch 32 --json "$out/peers-cuda.json" 2>&1 | grep -v "Loading\|Batched" | tee "$out/peers.log"
echo "cuda_check: ${SECONDS} s"
