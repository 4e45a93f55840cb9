"""Harness overhead: throughput through hvdbench's harness / a bare Horovod training loop of the same
model, batch and threads, measured alternately in one process. Prints each round and the median ratio.

    python benchmarks/harness_overhead.py --model resnet20 --batch-size 32 --rounds 7 --steps 20
"""

from __future__ import annotations

import argparse
import copy
import statistics
import sys
import tempfile
import time
from pathlib import Path

import horovod.torch as hvd
import torch
import torch.nn.functional as F

from hvdbench.suite import harness
from hvdbench.suite.catalog import get_benchmark
from hvdbench.suite.cifar10 import build
from hvdbench.suite.pytorch import BuildContext, TorchRuntime, Trainer, set_threads


def bare_loop(model: torch.nn.Module, optimizer: torch.optim.Optimizer, images: torch.Tensor,
              labels: torch.Tensor, steps: int) -> float:
    """What a user would write: Horovod's optimizer, a fixed batch, no records, no per-step sync."""
    start = time.perf_counter()
    for _ in range(steps):
        optimizer.zero_grad()
        F.cross_entropy(model(images), labels).backward()
        optimizer.step()
    return time.perf_counter() - start


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", default="resnet20")
    parser.add_argument("--batch-size", type=int, default=32)
    parser.add_argument("--steps", type=int, default=20)
    parser.add_argument("--rounds", type=int, default=7)
    parser.add_argument("--threads", type=int, default=None)
    args = parser.parse_args()
    hvd.init()
    flags = get_benchmark("cifar10").check(["--model", args.model, "--batch-size", str(args.batch_size)]
                                           + (["--threads", str(args.threads)] if args.threads else []))
    device = torch.device("cpu")
    threads = set_threads(flags, hvd.local_size())
    runtime = TorchRuntime(hvd, device)
    torch.manual_seed(flags.seed)
    ctx = BuildContext(flags, device, hvd.rank(), hvd.size())
    workload = build(ctx)
    bare_model = copy.deepcopy(workload.model).train()
    bare_optimizer = hvd.DistributedOptimizer(torch.optim.SGD(bare_model.parameters(), lr=flags.lr, momentum=0.9),
                                              named_parameters=bare_model.named_parameters())
    trainer = Trainer(hvd, workload, flags, device, ctx.data_generator(), flags.seed + 1)
    images, labels = workload.make_batch(ctx.data_generator())
    ratios = []
    with tempfile.TemporaryDirectory() as tmp:
        writer = harness.open_writer(runtime, Path(tmp), echo=False)
        harness.timed_loop(runtime, writer, trainer.step, float, warmup_steps=3, steps=3)  # warm both
        bare_loop(bare_model, bare_optimizer, images, labels, 3)
        for index in range(args.rounds):
            def through_harness() -> float:
                return harness.timed_loop(runtime, writer, trainer.step, lambda t: float(t.item()),
                                          warmup_steps=0, steps=args.steps)["throughput"]

            def bare_() -> float:
                return args.steps * args.batch_size / bare_loop(bare_model, bare_optimizer, images, labels, args.steps)

            if index % 2:  # alternate which goes first, so neither always follows the other
                bare, through = bare_(), through_harness()
            else:
                through, bare = through_harness(), bare_()
            ratios.append(through / bare)
            print(f"round {index + 1}: harness {through:.1f} img/s, bare {bare:.1f} img/s, "
                  f"ratio {ratios[-1]:.4f}", flush=True)
        writer.close()
    print(f"{args.model} batch {args.batch_size}, {threads} thread(s): harness / bare throughput, median of "
          f"{args.rounds} alternating rounds = {statistics.median(ratios):.4f} "
          f"(min {min(ratios):.4f}, max {max(ratios):.4f})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
