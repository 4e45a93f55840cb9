"""The projection's model against published 1- and 8-GPU training tables: from the 1-GPU throughput, the
model's gradients and the node's allreduce bandwidth, the 8-GPU efficiency the model allows (exchange
not overlapped, and fully overlapped with backward) next to the efficiency published.

Sources (public READMEs): NVIDIA DeepLearningExamples, PyTorch ResNet-50 v1.5 (DDP + NCCL, 8 GPUs in one
node, synthetic-free real-data training, pytorch-21.03 container): DGX-1 16 GB (8x V100) and DGX A100
80 GB. Allreduce bus bandwidth within the node: ~200 GB/s on 8 A100 with NVSwitch as nccl-tests users
report it (nccl-tests issues 149 and 178); 40 GB/s assumed for the DGX-1 V100 (conservative, below its
NVLink rate). Batch 256 per GPU, the script's default, is assumed; FP32 on a 16 GB V100 may have used less.

    python benchmarks/published_scaling.py
"""

from __future__ import annotations

from hvdbench.analysis.projection.allreduce_model import Link, StepModel, ring_allreduce_s

RESNET50_PARAMETERS, RESNET50_TENSORS = 25_557_032, 161
BATCH = 256
# system, precision, 1-GPU img/s, 8-GPU img/s, allreduce bus bandwidth GB/s within the node
PUBLISHED = [
    ("DGX-1 16GB (8x V100)", "FP32", 367, 2855, 40.0),
    ("DGX-1 16GB (8x V100)", "AMP", 1200, 8322, 40.0),
    ("DGX A100 80GB", "TF32", 938, 7248, 200.0),
    ("DGX A100 80GB", "AMP", 2470, 16621, 200.0),
]


def main() -> int:
    print(f"{'system':<22} {'precision':<9} {'step ms':>8} {'exchange ms':>11} {'model: serial':>14} "
          f"{'overlapped':>11} {'published':>10}")
    for system, precision, one, eight, busbw in PUBLISHED:
        step = BATCH / one
        link = Link("nvlink", 5e-6, 1.0 / (busbw * 1e9))  # 5 µs per ring step (NCCL's order of magnitude)
        model = StepModel(step, step * 2 / 3, RESNET50_PARAMETERS * 4, RESNET50_TENSORS)
        exchange, full, none = model.bounds(lambda b: ring_allreduce_s(b, 8, link))
        print(f"{system:<22} {precision:<9} {step * 1e3:>8.1f} {exchange * 1e3:>11.2f} {step / none:>14.1%} "
              f"{step / full:>11.1%} {eight / one / 8:>10.1%}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
