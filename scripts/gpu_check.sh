#!/usr/bin/env bash
# Issue 23's GPU check in one go: the HF vision-language path (Qwen2.5-VL architecture at ~0.5B
# parameters from a config, random weights, bf16) on one GPU — proposals per second, seconds per
# GRPO update (LoRA and full fine-tuning), LoRA adapter sync vs a full reload, bf16 log-prob gap.
# Nothing is downloaded; no Django, database or browser. docs/scale.md ("GPU check") says how to
# read the figures.
#
#   scripts/gpu_check.sh            # on a machine with a GPU (the device image's python3 has torch,
#                                   # transformers, peft, pillow, safetensors)
#   scripts/gpu_check.sh --quick    # fewer calls, one update
#   PYTHON=.venv/bin/python scripts/gpu_check.sh --device cpu --quick   # dry run of the code path here
#
# Results: $OUT/gpu_check.json (OUT defaults to var/gpu_check), the log next to it; the JSON line is
# also the last line printed. Budget: ~2 minutes of device time on an H100 for the full check.
set -euo pipefail
cd "$(dirname "$0")/.."
OUT="${OUT:-var/gpu_check}"
PY="${PYTHON:-python3}"
mkdir -p "$OUT"
export PYTHONUNBUFFERED=1 TOKENIZERS_PARALLELISM=false
if command -v nvidia-smi >/dev/null; then
    nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv | tee "$OUT/nvidia-smi.csv"
fi
"$PY" -c 'import torch, transformers, peft; print("torch", torch.__version__, "cuda", torch.version.cuda, "available", torch.cuda.is_available(), "transformers", transformers.__version__, "peft", peft.__version__)' | tee "$OUT/versions.txt"
timeout "${GPU_CHECK_TIMEOUT_S:-420}" "$PY" -m workers.rl.gpu_check --out "$OUT/gpu_check.json" "$@" 2>&1 | tee "$OUT/gpu_check.log"
