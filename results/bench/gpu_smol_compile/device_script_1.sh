#!/bin/bash
# Issue 50 item 5, second try: model.compile against TRL's torch_compile, interleaved blocks.
set -o pipefail
export PYTHONUNBUFFERED=1 TOKENIZERS_PARALLELISM=false HF_HUB_OFFLINE=1
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl || exit 3
nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv | tee $OUT/checks.txt
export PYTHONPATH=/tmp/site:$PWD/src
python3 -c "import torch, transformers, trl, datasets, accelerate; print(torch.__version__, transformers.__version__, trl.__version__, datasets.__version__, accelerate.__version__)" 2>&1 | tee -a $OUT/checks.txt
echo "=== compile check $(date +%T)" | tee -a $OUT/checks.txt
timeout 120 python3 .dev/compile_check.py .dev/smol_shape 2>&1 | grep -v -i warn | tail -n 8 | tee -a $OUT/checks.txt
B="benchmarks/bench_vs_trl.py --sizes smollm2-135m-shape --world .dev/world --shape-source .dev/smol_shape --attributes length markdown --judgments 512 --judgments-per-step 16 --max-length 160 --warmup 4 --block 10"
run() { local name=$1; shift; echo "=== $name $(date +%T)"; "$@" 2>&1 | grep -v -i -E "warn|^\s*$" | tail -n 30; }
run r1 timeout 300 python3 $B --rounds 6 --configs trl/precomputed badpo/per_judgment trl/precomputed+compile badpo/per_judgment+compile --out $OUT/r1.json
if [ ! -s $OUT/r1.json ]; then
  run r1_eager timeout 200 python3 $B --rounds 6 --configs trl/precomputed badpo/per_judgment --out $OUT/r1_eager.json
fi
[ $SECONDS -lt 330 ] && run r2 timeout $((520 - SECONDS)) python3 $B --rounds 6 --configs trl/precomputed badpo/per_judgment trl/precomputed+compile badpo/per_judgment+compile --out $OUT/r2.json
git log -1 --format=%H 2>/dev/null | tee -a $OUT/checks.txt
echo "=== done $(date +%T)"
