"""What hvdbench itself costs, measured alternately in one process (so drift hits both sides alike):

- ``--compare harness``: throughput through the harness / a bare Horovod training loop of the same
  model, batch and threads (target: at least 0.99);
- ``--compare telemetry``: throughput through the harness with the telemetry sampler on / off
  (target: at most 0.5% lost);
- ``--compare null``: the harness's own cost per step (timing, sync, one record) around a step that
  does nothing, which bounds its overhead on any workload without the noise of training.

    python benchmarks/overhead.py --compare harness --model resnet20 --batch-size 32 --rounds 15 --steps 30
    python benchmarks/overhead.py --compare telemetry --benchmark imagenet --model resnet50 --batch-size 256 \
        --precision amp --rounds 15 --steps 30                                   # on a GPU node

Flags the script does not know go to the benchmark (cifar10 or imagenet): --model, --batch-size,
--precision, --channels-last, ... The bare loop trains as a user would at that precision: autocast and a
gradient scaler (CUDA) for amp, fp16/bf16 weights for fp16/bf16, NHWC where --channels-last.
"""

from __future__ import annotations

import argparse
import copy
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any, Callable

import horovod.torch as hvd
import torch

from hvdbench.suite import cifar10, harness, imagenet, timing
from hvdbench.core.catalog import get_benchmark
from hvdbench.core.environment import gloo_on_loopback
from hvdbench.core.errors import UsageError
from hvdbench.core.gpu import Nvml, TelemetrySampler, telemetry_for, visible_device
from hvdbench.suite.pytorch import BuildContext, TorchRuntime, Trainer, math_settings, pick_device, set_threads
from hvdbench.suite.torchdata import autocast, weight_dtype

BUILDS = {"cifar10": cifar10.build, "imagenet": imagenet.build}
DEFAULTS = {"cifar10": ["--model", "resnet20", "--batch-size", "32"], "imagenet": []}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--compare", choices=["harness", "telemetry", "null"], default="harness")
    parser.add_argument("--benchmark", choices=sorted(BUILDS), default="cifar10")
    parser.add_argument("--steps", type=int, default=30, help="steps per side per round")
    parser.add_argument("--rounds", type=int, default=15)
    parser.add_argument("--interval", type=float, default=1.0, help="telemetry interval (seconds)")
    parser.add_argument("--dry-run", action="store_true", help="check the flags, print the settings, run nothing")
    args, bench_args = parser.parse_known_args()
    try:
        flags = get_benchmark(args.benchmark).check(DEFAULTS[args.benchmark] + bench_args)  # later flags win
    except UsageError as error:
        print(f"overhead: error: {error}", file=sys.stderr)
        return 2
    if args.dry_run:
        print(f"overhead: --compare {args.compare}, {args.rounds} rounds x {args.steps} steps a side, "
              f"{args.benchmark} {flags.model} batch {flags.batch_size} {flags.precision} on --device {flags.device}")
        return 0
    gloo_on_loopback()
    hvd.init()
    device, _ = pick_device(flags.device, hvd.local_rank())
    math_settings(flags, device)  # cuDNN autotuning as the harness sets it, for both sides alike
    threads = set_threads(flags, hvd.local_size()) if device.type == "cpu" else None
    runtime = TorchRuntime(hvd, device)
    torch.manual_seed(flags.seed)
    ctx = BuildContext(flags, device, hvd.rank(), hvd.size())
    workload = BUILDS[args.benchmark](ctx)
    trainer = Trainer(hvd, workload, flags, device, ctx.data_generator(), flags.seed + 1)
    with tempfile.TemporaryDirectory() as tmp:
        writer = harness.open_writer(runtime, Path(tmp), echo=False)
        if args.compare == "null":
            null_cost(runtime, writer, args, device)
            return 0

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

        if args.compare == "harness":
            sides = (through_harness, bare_loop(workload, flags, device, ctx, runtime))
            labels = ("harness", "bare loop")
        else:
            sides, labels = (lambda n: through_harness(n, True), through_harness), ("telemetry on", "telemetry off")
        ratios = alternate(sides, labels, args.rounds, args.steps)
        writer.close()
    where = f"{threads} CPU thread(s)" if threads else torch.cuda.get_device_name(device)
    print(f"{args.benchmark} {flags.model}, batch {flags.batch_size}, {flags.precision}"
          f"{', NHWC' if flags.channels_last else ''}, {where}: {labels[0]} / {labels[1]} throughput, median of "
          f"{args.rounds} alternating rounds = {statistics.median(ratios):.4f} "
          f"(min {min(ratios):.4f}, max {max(ratios):.4f})")
    return 0


def bare_loop(workload: Any, flags: argparse.Namespace, device: torch.device, ctx: BuildContext,
              runtime: TorchRuntime) -> Callable[[int], float]:
    """What a user would write: Horovod's optimizer, a fixed batch, no records, one sync at the end (amp on
    CUDA: Horovod's documented order, synchronize, then the scaler's step without a second one)."""
    dtype = weight_dtype(flags.precision)
    layout = torch.channels_last if flags.channels_last else torch.contiguous_format
    model = copy.deepcopy(workload.model).to(device, dtype).to(memory_format=layout).train()
    images, labels = workload.make_batch(ctx.data_generator())
    batch = (images.to(device, dtype).contiguous(memory_format=layout), labels.to(device))
    optimizer = hvd.DistributedOptimizer(torch.optim.SGD(model.parameters(), lr=flags.lr, momentum=0.9),
                                         named_parameters=model.named_parameters())
    scaler = torch.amp.GradScaler("cuda") if flags.precision == "amp" and device.type == "cuda" else None

    def run(steps: int) -> float:
        start = time.perf_counter()
        for _ in range(steps):
            optimizer.zero_grad()
            with autocast(flags.precision, device):
                loss = workload.loss(model, batch)
            if scaler is None:
                loss.backward()
                optimizer.step()
                continue
            scaler.scale(loss).backward()
            optimizer.synchronize()
            with optimizer.skip_synchronize():
                scaler.step(optimizer)
            scaler.update()
        runtime.sync()
        return steps * flags.batch_size / (time.perf_counter() - start)

    return run


def null_cost(runtime: TorchRuntime, writer: Any, args: argparse.Namespace, device: torch.device) -> None:
    """The harness's own cost per step around a step that does nothing, and one telemetry sample's."""
    nothing = timing.StepOutcome(torch.zeros(()), {"samples": 1.0})
    steps = 20 * args.steps * args.rounds
    summary = timing.timed_loop(runtime, writer, lambda: nothing, lambda t: float(t.item()), warmup_steps=0,
                                steps=steps)
    nvml = Nvml()
    handle = nvml.handle(None, visible_device(hvd.local_rank())) if device.type == "cuda" else None
    sample, _ = telemetry_for(nvml, handle)
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


def alternate(sides: tuple[Callable[[int], float], Callable[[int], float]], labels: tuple[str, str], rounds: int,
              steps: int) -> list[float]:
    """Both sides warmed, then ``rounds`` rounds in alternating order; each round's ratio first / second."""
    for side in sides:
        side(3)
    ratios = []
    for index in range(rounds):
        order = (0, 1) if index % 2 == 0 else (1, 0)  # alternate which side goes first
        result = {i: sides[i](steps) for i in order}
        ratios.append(result[0] / result[1])
        print(f"round {index + 1:2d}: {labels[0]} {result[0]:9.1f} img/s, {labels[1]} {result[1]:9.1f} img/s, "
              f"ratio {ratios[-1]:.4f}", flush=True)
    return ratios


if __name__ == "__main__":
    sys.exit(main())
