#!/usr/bin/env bash
# The scratch venv of `make test-interop` (var/interop-venv): verl 0.9.1 and LLaMA-Factory 0.9.5
# with what their dataset classes import, and nothing that pulls GPU wheels:
# - both packages --no-deps (their full requirements pull CUDA torch, vLLM, gradio, ...);
# - torch 2.14.1 + torchvision 0.29.1 (the pair the registry has; verl's and qwen-vl-utils' image
#   path imports torchvision, whose registry builds are CUDA builds that need this torch; it runs on
#   the CPU here, no GPU is used); transformers 5.5.4 (verl wants >=5.5.3,<5.11 and LLaMA-Factory
#   <=5.6.0; 5.6.0 is excluded by verl);
# - torchaudio (imported at module level by LLaMA-Factory's mm_plugin, used only for audio):
#   PyPI only has CUDA builds, so its compiled kernels are removed and it imports as pure Python.
# Idempotent: a stamp file records a finished install of this exact list.
set -euo pipefail
ROOT="$(cd "$(dirname "$0")/../.." && pwd)"
VENV="${INTEROP_VENV:-$ROOT/var/interop-venv}"
PACKAGES=(torch==2.14.1 torchvision==0.29.1 transformers==5.5.4 "datasets==4.0.0" "pandas" "pyarrow" "pillow" "omegaconf"
          "hydra-core" "tensordict==0.10.0" "codetiming" "dill" "peft==0.18.1" "accelerate==1.11.0" "ray"
          "tokenizers" "jinja2" "qwen-vl-utils" "av==16.0.0"
          # verl 0.9.1's agent loop imports these, which its own install does not pull in
          "cachetools" "fastapi" "uvicorn"
          # flywheel_verl.exercise imports workers.policy (its OpenAI client retries with tenacity)
          "tenacity"
          # flywheel_verl.exercise runs real MiniWoB++ pages (workers.envs browser: Playwright + Chromium)
          "playwright==1.65.2" "miniwob==1.1.0")
NODEPS=(verl==0.9.1 llamafactory==0.9.5 torchaudio==2.11.0 trl==0.24.0)
STAMP="$VENV/.flywheel-interop-$(echo "${PACKAGES[*]} ${NODEPS[*]}" | sha1sum | cut -c1-12)"
if [[ -f "$STAMP" ]]; then
  echo "interop venv ready: $VENV"
  exit 0
fi
PYTHON="${PYTHON:-$(command -v python3.11 || command -v python3)}"
"$PYTHON" -m venv "$VENV"
"$VENV/bin/pip" install -q "${PACKAGES[@]}"
"$VENV/bin/pip" install -q --no-deps "${NODEPS[@]}"
rm -f "$VENV"/lib/python3*/site-packages/torchaudio/lib/*.so
"$VENV/bin/python" -c "import verl.utils.dataset.rl_dataset, llamafactory.data; print('verl', __import__('verl').__version__, 'llamafactory', __import__('llamafactory').__version__)"
touch "$STAMP"
