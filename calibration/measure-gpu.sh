#!/usr/bin/env bash
# The measured calibration run that is still pending (calibration/README.md, "Measured run").
#
# Run from the repository root on a machine with one CUDA GPU and a CUDA build of torch:
#     calibration/measure-gpu.sh [MODEL]          # MODEL defaults to qwen3-30b-a3b
# Takes about 5 minutes on an H100/H200 (quick smoke run < 1 min, full suite < 5 min). Writes
#     calibration/<gpu>-<model>.json          the measured profile (commit it)
#     calibration/raw/<gpu>-<model>/*.csv     every repetition of every benchmark (commit them)
# and prints the fitted parameters and the per-pass errors on the held-out layer-stack points.
set -euo pipefail
cd "$(dirname "$0")/.."
python="${PYTHON:-python}"
model="${1:-qwen3-30b-a3b}"
gpu="$("$python" -c 'import torch
from simspec.commands.calibrate import detect_gpu
print(detect_gpu(torch.cuda.get_device_name()) or "cuda-gpu")')"
out="calibration/${gpu}-${model}.json"

echo "== smoke: quick suite (under a minute)"
"$python" -m simspec calibrate --device cuda --quick --model "$model" \
    --out "/tmp/${gpu}-${model}-quick.json"

echo "== full suite (under five minutes)"
"$python" -m simspec calibrate --device cuda --model "$model" --out "$out" \
    --raw "calibration/raw/${gpu}-${model}"

if [ "$gpu" != "cuda-gpu" ] && [ "$model" = "qwen3-30b-a3b" ]; then
    echo "== the simulator with the measured profile (roofline vs calibrated)"
    for cost_model in roofline calibrated; do
        "$python" -m simspec run scenarios/qwen3-30b-h100-batch32.toml \
            --set hardware.gpu="$gpu" --set costs.model="$cost_model" \
            --set costs.profile="$out" --set workload.num_requests=32
    done
fi
echo "done: commit $out and calibration/raw/${gpu}-${model}/, and fill in calibration/README.md"
