#!/usr/bin/env bash
# The whole GPU tier in one call on a lent GPU machine (docs/performance.md, "GPU tier"): what a lease of about 15
# minutes, start-up included, allows. Run from the repository's root after `python benchmarks/gpu_pack.py --deepspeed`
# here, with the device tool's carry=['.gpu-pack'] (and '.gpu-fallback', see below):
#
#     bash benchmarks/gpu_tier.sh            # writes its logs and JSON under $OUT (the device tool's folder)
#
# In order, each step bounded so that the ones after it still run and every file comes back:
#   1. install the pack, record the machine and versions (env.txt); if the machine's own transformers cannot import
#      TRL or this package, install this environment's (.gpu-fallback/: wheels of transformers and what it needs);
#   2. `pytest -m gpu tests/gpu/test_gpu_tier.py` (tier.log);
#   3. `benchmarks/gpu_step.py --model paper` (Qwen2.5-Math-1.5B's shape, bf16): gpu_step_paper.json, steps.log;
#   4. the one-process ZeRO-3 job (zero3.log);
#   5. with time left, `gpu_step.py --model smollm2` (SmolLM2-135M's shape): gpu_step_smollm2.json.
set -u
OUT=${OUT:-/tmp/gpu-tier}
BUDGET=${GPU_TIER_BUDGET_S:-540}
PACK=.gpu-pack
mkdir -p "$OUT"
START=$(date +%s)
left() { echo $((BUDGET - ($(date +%s) - START))); }
bounded() {  # bounded SECONDS LOG COMMAND...: at most SECONDS, never past the budget; appends to LOG
    local limit=$1 log=$2
    shift 2
    local remaining
    remaining=$(left)
    ((remaining < limit)) && limit=$remaining
    if ((limit < 20)); then
        echo "SKIPPED (budget spent): $*" >>"$log"
        return 0
    fi
    echo "=== $(date -u +%H:%M:%S) (limit ${limit} s): $*" >>"$log"
    timeout --kill-after=10 "$limit" "$@" >>"$log" 2>&1
    echo "=== exit $? after $(($(date +%s) - START)) s" >>"$log"
}

python3 -m pip install -q --no-index --no-deps --no-compile --target "$PACK/site" "$PACK"/*/*.whl 2>&1 | tail -3
export PYTHONPATH=$PWD:$PWD/$PACK/site CODAPO_TRL_CACHE=$PWD/$PACK/cache HF_HUB_OFFLINE=1 PYTHONUNBUFFERED=1
export TRL_EXPERIMENTAL_SILENCE=1
VERSIONS='import importlib.metadata as m, torch
print("cuda", torch.version.cuda, torch.cuda.get_device_name(0))
for n in ("torch", "transformers", "trl", "accelerate", "peft", "datasets", "deepspeed", "math-verify",
          "huggingface-hub", "tokenizers", "pytest"):
    try: print(n, m.version(n))
    except m.PackageNotFoundError: print(n, "missing")
import trl, codapo_trl, datasets, math_verify  # noqa
print("imports ok")'
{
    nvidia-smi
    nproc
    free -g
    python3 --version
} >"$OUT/env.txt" 2>&1
if ! python3 -c "$VERSIONS" >>"$OUT/env.txt" 2>&1 && [ -d .gpu-fallback ]; then
    echo "--- the machine's transformers failed; installing .gpu-fallback's" >>"$OUT/env.txt"
    python3 -m pip install -q --no-index --no-deps --no-compile --target "$PACK/site" --upgrade .gpu-fallback/*.whl \
        >>"$OUT/env.txt" 2>&1
    python3 -c "$VERSIONS" >>"$OUT/env.txt" 2>&1
fi

bounded 200 "$OUT/tier.log" python3 -m pytest -m gpu tests/gpu/test_gpu_tier.py -rA -p no:cacheprovider \
    --timeout 150
bounded 300 "$OUT/steps.log" python3 benchmarks/gpu_step.py --device cuda --model paper \
    --output "$OUT/gpu_step_paper.json"
bounded 150 "$OUT/zero3.log" python3 -m pytest -m gpu tests/gpu/test_zero3_one_process.py -rA -p no:cacheprovider
bounded 120 "$OUT/steps.log" python3 benchmarks/gpu_step.py --device cuda --model smollm2 \
    --output "$OUT/gpu_step_smollm2.json"
nvidia-smi --query-gpu=name,memory.used,memory.total --format=csv >>"$OUT/env.txt" 2>&1
echo "total $(($(date +%s) - START)) s" >>"$OUT/env.txt"
tail -n 3 "$OUT"/*.log
