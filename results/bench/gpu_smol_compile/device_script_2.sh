export PYTHONUNBUFFERED=1 TOKENIZERS_PARALLELISM=false HF_HUB_OFFLINE=1
ls /tmp/site >/dev/null 2>&1 || python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl
export PYTHONPATH=/tmp/site:$PWD/src
nproc; python3 -c "import torch._inductor.config as c; print('compile_threads', c.compile_threads)"
timeout 250 python3 .dev/compile_check.py .dev/smol_shape 2>&1 | grep -v -E "Loading weights|Writing model" | tail -n 40
