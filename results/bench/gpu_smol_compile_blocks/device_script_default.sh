#!/bin/bash
# Issue 50 item 5: the bench's plain badpo per-judgment config now takes the library default, which
# compiles the decoder blocks on a CUDA GPU; interleaved against TRL-precomputed, as many runs as fit.
set -o pipefail
export PYTHONUNBUFFERED=1 TOKENIZERS_PARALLELISM=false HF_HUB_OFFLINE=1
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl || exit 3
nvidia-smi --query-gpu=name,memory.total,driver_version,clocks.sm,temperature.gpu --format=csv | tee $OUT/checks.txt
echo "tree: $(cat .dev/commit.txt) (HEAD of this session; experiments/analyses/training_pair_lean.py untracked beside it)" | tee -a $OUT/checks.txt
export PYTHONPATH=/tmp/site:$PWD/src
B="benchmarks/bench_vs_trl.py --sizes smollm2-135m-shape --world .dev/world --shape-source .dev/smol_shape --attributes length markdown --judgments 512 --judgments-per-step 16 --max-length 160 --block 10 --warmup 6 --rounds 6 --configs trl/precomputed badpo/per_judgment"
run() { local name=$1; shift; echo "=== $name $(date +%T) at ${SECONDS}s" | tee -a $OUT/checks.txt; "$@" 2>&1 | grep -v -i -E "warn|^\s*$|Loading weights|Writing model" | grep -E "over_trl|>= 1.0x|Error|error" ; }
left() { echo $((${DEADLINE:-235} - SECONDS)); }
for r in 1 2 3; do
  [ $(left) -gt 75 ] && run default_r$r timeout $(left) python3 $B --out $OUT/default_r$r.json
done
echo "=== done $(date +%T) at ${SECONDS}s" | tee -a $OUT/checks.txt
