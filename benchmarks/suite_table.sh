#!/usr/bin/env bash
# Throughput of every PyTorch workload at its default model size, 1 and 2 ranks, then one report.
# Batch sizes are small enough for a 2-core CPU machine; pass OUT and STEPS to change where and how long.
set -euo pipefail
cd "$(dirname "$0")/.."
OUT=${OUT:-results/suite-table}
STEPS=${STEPS:-6}
NP=${NP:-1,2}
run() { .venv/bin/hvdbench run "$1" --np "$NP" --output "$OUT" --no-report --steps "$STEPS" --warmup-steps "${WARMUP:-2}" "${@:2}" || true; }
for m in resnet20 resnet56 resnet110; do run cifar10 --model "$m" --batch-size 32; done
for m in densenet40_k12 densenet100_k12; do run cifar10 --model "$m" --batch-size 16; done
run imagenet --model resnet50 --batch-size 8
for m in resnet101 resnet152 inception_v3 vgg16; do run imagenet --model "$m" --batch-size 4; done
run imagenet --model alexnet --batch-size 32
run mlp --batch-size 256
# The recurrent and large-vocabulary models take a minute or more per step on 2 CPU cores: fewer steps.
STEPS=${HEAVY_STEPS:-3} WARMUP=1 run speech --batch-size 1
STEPS=${HEAVY_STEPS:-3} WARMUP=1 run translation --batch-size 2
STEPS=${HEAVY_STEPS:-3} WARMUP=1 run lm --batch-size 1
.venv/bin/hvdbench report "$OUT"
