"""What hvdbench itself costs, measured alternately in one process (so drift hits both sides alike):

- ``--compare harness``: throughput through the harness / a bare Horovod training loop of the same
  model, batch and threads (target: at least 0.99);
- ``--compare telemetry``: throughput through the harness with the telemetry sampler on / off
  (target: at most 0.5% lost);
- ``--compare null``: the harness's own cost per step (timing, sync, one record) around a step that
  does nothing, which bounds its overhead on any workload without the noise of training.

    python benchmarks/overhead.py --compare harness --model resnet20 --batch-size 32 --rounds 15 --steps 30
"""

from __future__ import annotations

import argparse
import copy
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Callable

import horovod.torch as hvd
import torch
import torch.nn.functional as F

from hvdbench.suite import harness, timing
from hvdbench.suite.catalog import get_benchmark
from hvdbench.suite.cifar10 import build
from hvdbench.suite.gpu import Nvml, TelemetrySampler, telemetry_for, visible_device
from hvdbench.suite.pytorch import BuildContext, TorchRuntime, Trainer, pick_device, set_threads


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--compare", choices=["harness", "telemetry", "null"], default="harness")
    parser.add_argument("--model", default="resnet20")
    parser.add_argument("--batch-size", type=int, default=32)
    parser.add_argument("--steps", type=int, default=30, help="steps per side per round")
    parser.add_argument("--rounds", type=int, default=15)
    parser.add_argument("--interval", type=float, default=1.0, help="telemetry interval (seconds)")
    args = parser.parse_args()
    hvd.init()
    flags = get_benchmark("cifar10").check(["--model", args.model, "--batch-size", str(args.batch_size)])
    device, _ = pick_device("auto", hvd.local_rank())
    threads = set_threads(flags, hvd.local_size()) if device.type == "cpu" else None
    runtime = TorchRuntime(hvd, device)
    torch.manual_seed(flags.seed)
    ctx = BuildContext(flags, device, hvd.rank(), hvd.size())
    workload = build(ctx)
    bare_model = copy.deepcopy(workload.model).to(device).train()
    trainer = Trainer(hvd, workload, flags, device, ctx.data_generator(), flags.seed + 1)
    images, labels = (t.to(device) for t in workload.make_batch(ctx.data_generator()))
    bare_optimizer = hvd.DistributedOptimizer(torch.optim.SGD(bare_model.parameters(), lr=flags.lr, momentum=0.9),
                                              named_parameters=bare_model.named_parameters())

    def bare(steps: int) -> float:
        """What a user would write: Horovod's optimizer, a fixed batch, no records, one sync at the end."""
        start = time.perf_counter()
        for _ in range(steps):
            bare_optimizer.zero_grad()
            F.cross_entropy(bare_model(images), labels).backward()
            bare_optimizer.step()
        runtime.sync()
        return steps * args.batch_size / (time.perf_counter() - start)

    with tempfile.TemporaryDirectory() as tmp:
        writer = harness.open_writer(runtime, Path(tmp), echo=False)

        def through_harness(steps: int, telemetry: bool = False) -> float:
            nvml = Nvml()
            handle = nvml.handle(None, visible_device(hvd.local_rank())) if device.type == "cuda" else None
            sampler = TelemetrySampler(writer, args.interval if telemetry else 0, *telemetry_for(nvml, handle)).start()
            try:
                summary = timing.timed_loop(runtime, writer, trainer.step, lambda t: float(t.item()),
                                            warmup_steps=0, steps=steps)
                return summary["samples"] / summary["window_s"]  # wall time, as the bare loop measures it
            finally:
                sampler.stop()

        if args.compare == "null":
            nothing = timing.StepOutcome(torch.zeros(()), {"samples": 1.0})
            steps = 20 * args.steps * args.rounds
            summary = timing.timed_loop(runtime, writer, lambda: nothing, lambda t: float(t.item()),
                                         warmup_steps=0, steps=steps)
            nvml = Nvml()
            sample, _ = telemetry_for(nvml, nvml.handle(None, visible_device(hvd.local_rank())) if device.type == "cuda" else None)
            start = time.perf_counter()
            for _ in range(1000):
                writer.write("telemetry", **sample())
            per_sample = (time.perf_counter() - start) / 1000
            writer.close()
            print(f"harness cost per step around a no-op step: {summary['window_s'] / steps * 1e6:.1f} us "
                  f"(median {summary['median_step_s'] * 1e6:.1f} us inside the step's sync), {steps} steps")
            print(f"one telemetry sample and its record: {per_sample * 1e6:.1f} us "
                  f"({'NVML' if nvml.available else 'process CPU/RSS only'}); at a 1 s interval "
                  f"{per_sample * 100:.4f}% of one core")
            return 0
        sides: tuple[Callable[[int], float], Callable[[int], float]]
        if args.compare == "harness":
            sides, labels_ = (through_harness, bare), ("harness", "bare loop")
        else:
            sides, labels_ = (lambda n: through_harness(n, True), through_harness), ("telemetry on", "telemetry off")
        for side in sides:  # warm both paths
            side(3)
        ratios = []
        for index in range(args.rounds):
            order = (0, 1) if index % 2 == 0 else (1, 0)  # alternate which side goes first
            result = {i: sides[i](args.steps) for i in order}
            ratios.append(result[0] / result[1])
            print(f"round {index + 1:2d}: {labels_[0]} {result[0]:9.1f} img/s, {labels_[1]} {result[1]:9.1f} img/s, "
                  f"ratio {ratios[-1]:.4f}", flush=True)
        writer.close()
    where = f"{threads} CPU thread(s)" if threads else torch.cuda.get_device_name(device)
    print(f"{args.model}, batch {args.batch_size}, {where}: {labels_[0]} / {labels_[1]} throughput, median of "
          f"{args.rounds} alternating rounds = {statistics.median(ratios):.4f} "
          f"(min {min(ratios):.4f}, max {max(ratios):.4f})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
