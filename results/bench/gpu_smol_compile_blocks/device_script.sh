#!/bin/bash
# Issue 50 item 5, third GPU session: badpo per-judgment against TRL-precomputed, blocks interleaved,
# three eager runs; one run with badpo's per-block model.compile beside them; then the compile check.
set -o pipefail
export PYTHONUNBUFFERED=1 TOKENIZERS_PARALLELISM=false HF_HUB_OFFLINE=1
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl || exit 3
nvidia-smi --query-gpu=name,memory.total,driver_version,clocks.sm,temperature.gpu --format=csv | tee $OUT/checks.txt
echo "tree: $(cat .dev/commit.txt) (clean, HEAD of this session)" | tee -a $OUT/checks.txt
export PYTHONPATH=/tmp/site:$PWD/src
python3 -c "import torch, transformers, trl, datasets, accelerate; print(torch.__version__, transformers.__version__, trl.__version__, datasets.__version__, accelerate.__version__)" 2>&1 | tee -a $OUT/checks.txt
B="benchmarks/bench_vs_trl.py --sizes smollm2-135m-shape --world .dev/world --shape-source .dev/smol_shape --attributes length markdown --judgments 512 --judgments-per-step 16 --max-length 160 --block 10"
run() { local name=$1; shift; echo "=== $name $(date +%T) at ${SECONDS}s" | tee -a $OUT/checks.txt; "$@" 2>&1 | grep -v -i -E "warn|^\s*$|Loading weights|Writing model" | tail -n 12; }
left() { echo $((${DEADLINE:-555} - SECONDS)); }
run eager_r1 timeout 140 python3 $B --warmup 4 --rounds 8 --configs trl/precomputed badpo/per_judgment --out $OUT/eager_r1.json
run compiled timeout $(( $(left) < 230 ? $(left) : 230 )) python3 $B --warmup 6 --rounds 8 --configs trl/precomputed badpo/per_judgment badpo/per_judgment+compile --out $OUT/compiled.json
[ $(left) -gt 100 ] && run eager_r2 timeout $(( $(left) < 130 ? $(left) : 130 )) python3 $B --warmup 4 --rounds 8 --configs trl/precomputed badpo/per_judgment --out $OUT/eager_r2.json
[ $(left) -gt 100 ] && run eager_r3 timeout $(( $(left) < 130 ? $(left) : 130 )) python3 $B --warmup 4 --rounds 8 --configs trl/precomputed badpo/per_judgment --out $OUT/eager_r3.json
[ $(left) -gt 40 ] && run compile_check timeout $(left) python3 .dev/compile_check.py .dev/smol_shape
echo "=== done $(date +%T) at ${SECONDS}s" | tee -a $OUT/checks.txt
