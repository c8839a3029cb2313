#!/usr/bin/env bash
# Measured calibration profiles on one CUDA GPU (calibration/README.md, "Measured profiles").
#
# Run from the repository root on a machine with one CUDA GPU and a CUDA build of torch:
#     calibration/measure-gpu.sh [MODEL ...]        # default: qwen3-30b-a3b
# For each model, the full suite (`simspec calibrate --device cuda`), bounded by
# MEASURE_TIMEOUT_S seconds (default 300), writes
#     calibration/<gpu>-<model>.json          the measured profile (commit it)
#     calibration/raw/<gpu>-<model>/*.csv     every repetition of every benchmark (commit them)
# and prints the fitted parameters and the per-pass errors on the held-out layer-stack points.
# A model that fails or runs out of time is reported and the next one still runs; the exit
# status is 1 if any failed. PYTHON names the interpreter (default: python).
set -uo pipefail
cd "$(dirname "$0")/.."
python="${PYTHON:-python}"
limit="${MEASURE_TIMEOUT_S:-300}"
models=("$@")
[ ${#models[@]} -gt 0 ] || models=(qwen3-30b-a3b)
gpu="$("$python" -c 'import torch
from simspec.commands.calibrate import detect_gpu
print(detect_gpu(torch.cuda.get_device_name()) or "cuda-gpu")')" || exit 1
status=0
for model in "${models[@]}"; do
    out="calibration/${gpu}-${model}.json"
    echo "== ${model} on ${gpu}: full suite (at most ${limit} s)"
    if ! timeout "$limit" "$python" -m simspec calibrate --device cuda --model "$model" \
        --out "$out" --raw "calibration/raw/${gpu}-${model}"; then
        echo "!! ${model}: failed or ran out of time"
        status=1
    fi
done
exit "$status"
