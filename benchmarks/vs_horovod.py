"""The harness against what users run instead: Horovod's own examples/pytorch/pytorch_synthetic_benchmark.py
(give its path; it comes with Horovod's repository and needs torchvision), hvdbench's suite/imagenet.py with the
same model, batch and threads, and "bare": hvdbench's model in Horovod's loop (zero_grad, forward, cross-entropy,
backward, plain SGD step through hvd.DistributedOptimizer on one fixed batch, timed 10 batches at a time), which
separates the model from the loop. Variants run in alternated rounds, one process each, so drift of the machine
falls on all alike; each round's hvdbench/reference ratio is kept and the median ratio gets a 95% interval.

    python benchmarks/vs_horovod.py --horovod-script ~/horovod/examples/pytorch/pytorch_synthetic_benchmark.py \\
        --model resnet50 --batch-size 64          # on a GPU node: 5 rounds of 2 processes, about 3 minutes
    python benchmarks/vs_horovod.py --model resnet50 --batch-size 8 --threads 2 --rounds 12 \\
        --variants bare,bare-momentum,hvdbench,hvdbench-quiet                   # CPU, no torchvision

The device is the node's first GPU where one is visible (--device cpu to measure the CPU). Variants:
"horovod" (needs --horovod-script), "hvdbench" as a user runs it, "hvdbench-quiet" without telemetry
(--telemetry-interval 0), "bare", "bare-momentum" (the bare loop with SGD momentum 0.9, as hvdbench
trains; Horovod's script has none), and for DDP "ddp-bare" (PyTorch's own DDP loop: a process group of one,
the model in DistributedDataParallel, momentum 0.9) against "hvdbench-ddp" (suite/imagenet.py --exchange ddp).
Default: horovod and hvdbench with a script, else bare and hvdbench.
Each round starts one process per variant, so the cost is rounds x variants process starts.
"""

from __future__ import annotations

import argparse
import importlib.util
import os
import re
import shlex
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

import numpy as np

REPO = Path(__file__).resolve().parents[1]
MIN_ROUNDS = 3  # a bootstrap over fewer rounds is no interval
STANDIN = Path(__file__).resolve().with_name("standin")  # torchvision.models from the suite's models

# The timed loop every bare variant shares: one fixed batch, zero_grad / forward / cross-entropy / backward / step,
# timed 10 batches at a time (a device sync ends each 10, so queued GPU work is counted)
TIMED_LOOP = r"""
side = 299 if model_name == "inception_v3" else 224
data, target = torch.randn(batch, 3, side, side, device=device), torch.randint(0, 1000, (batch,), device=device)
def step():
    optimizer.zero_grad()
    out = model(data)
    F.cross_entropy(out[0] if isinstance(out, tuple) else out, target).backward()
    optimizer.step()
def ten():
    for _ in range(10):
        step()
    if cuda:
        torch.cuda.synchronize()
for _ in range(warmup):
    step()
rates = [batch * 10 / timeit.timeit(ten, number=1) for _ in range(iters)]
print(f"Img/sec per device: {sum(rates) / len(rates):.3f}")
"""
BARE = r"""
import sys, timeit, torch, torch.nn.functional as F, horovod.torch as hvd
from hvdbench.suite.models.imagenet import imagenet_model
model_name, batch, warmup, iters, threads, cuda = sys.argv[1], *map(int, sys.argv[2:7])
momentum = float(sys.argv[7])
hvd.init()
if threads:
    torch.set_num_threads(threads)
device = torch.device(f"cuda:{hvd.local_rank()}" if cuda else "cpu")
torch.backends.cudnn.benchmark = True
model = imagenet_model(model_name).to(device)
optimizer = hvd.DistributedOptimizer(torch.optim.SGD(model.parameters(), lr=0.01, momentum=momentum),
                                     named_parameters=model.named_parameters())
""" + TIMED_LOOP
# PyTorch's own DDP loop (its tutorial's shape: a process group, the model wrapped in DistributedDataParallel,
# zero_grad / forward / loss / backward / step) on hvdbench's model, SGD momentum 0.9 as hvdbench trains
BARE_DDP = r"""
import sys, timeit, torch, torch.nn.functional as F, torch.distributed as dist
from torch.nn.parallel import DistributedDataParallel as DDP
from hvdbench.suite.models.imagenet import imagenet_model
model_name, batch, warmup, iters, threads, cuda = sys.argv[1], *map(int, sys.argv[2:7])
if threads:
    torch.set_num_threads(threads)
device = torch.device("cuda:0" if cuda else "cpu")
store = dist.TCPStore("127.0.0.1", 0, 1, True)
dist.init_process_group("nccl" if cuda else "gloo", store=store, rank=0, world_size=1)
torch.backends.cudnn.benchmark = True
model = DDP(imagenet_model(model_name).to(device), device_ids=[0] if cuda else None)
optimizer = torch.optim.SGD(model.parameters(), lr=0.01, momentum=0.9)
""" + TIMED_LOOP + "dist.destroy_process_group()\n"
RATE = {"horovod": re.compile(r"Img/sec per (?:CPU|GPU|XPU): ([0-9.]+)"),
        "bare": re.compile(r"Img/sec per device: ([0-9.]+)"), "ddp": re.compile(r"Img/sec per device: ([0-9.]+)"),
        "hvdbench": re.compile(r"rank\(s\), ([0-9,.]+) images/s total")}


VARIANTS = ("horovod", "hvdbench", "hvdbench-quiet", "bare", "bare-momentum", "ddp-bare", "hvdbench-ddp")


def command(variant: str, args: argparse.Namespace, log_dir: Path) -> list[str]:
    """One round of a variant: the same model, batch, warm-up and number of timed batches for all."""
    timed = 10 * args.iters
    if variant == "horovod":
        return [sys.executable, str(args.horovod_script), "--model", args.model, "--batch-size", str(args.batch_size),
                "--num-warmup-batches", str(args.warmup), "--num-batches-per-iter", "10", "--num-iters",
                str(args.iters), *([] if args.cuda else ["--no-cuda"])]
    if variant in ("bare", "bare-momentum"):
        return [sys.executable, "-c", BARE, args.model, str(args.batch_size), str(args.warmup), str(args.iters),
                str(args.threads or 0), str(int(args.cuda)), "0.9" if variant == "bare-momentum" else "0"]
    if variant == "ddp-bare":
        return [sys.executable, "-c", BARE_DDP, args.model, str(args.batch_size), str(args.warmup), str(args.iters),
                str(args.threads or 0), str(int(args.cuda))]
    quiet = ["--telemetry-interval", "0"] if variant == "hvdbench-quiet" else []
    exchange = ["--exchange", "ddp"] if variant == "hvdbench-ddp" else []
    return [sys.executable, str(REPO / "suite" / "imagenet.py"), "--model", args.model, "--batch-size",
            str(args.batch_size), "--steps", str(timed), "--warmup-steps", str(args.warmup),
            "--device", "cuda" if args.cuda else "cpu", *(["--threads", str(args.threads)] if args.threads else []),
            *quiet, *exchange, "--log-dir", str(log_dir)]


def one_round(variant: str, args: argparse.Namespace, scratch: Path, index: int) -> float:
    env = {**os.environ, **({"OMP_NUM_THREADS": str(args.threads)} if args.threads else {})}
    env.setdefault("HOROVOD_GLOO_IFACE", "lo")  # one process: Gloo on loopback, not the host name's address
    if variant == "horovod" and args.standin:
        env["PYTHONPATH"] = os.pathsep.join(filter(None, (str(STANDIN), env.get("PYTHONPATH"))))
    proc = subprocess.run(command(variant, args, scratch / f"{variant}-{index}"), capture_output=True, text=True,
                          check=False, env=env)
    match = RATE[variant.split("-")[0]].search(proc.stdout)
    if proc.returncode or match is None:
        raise SystemExit(f"{variant} failed (exit {proc.returncode}): {(proc.stderr or proc.stdout)[-800:]}")
    return float(match.group(1).replace(",", ""))


def ratio_interval(top: list[float], bottom: list[float], n: int = 4000, seed: int = 0) -> tuple[float, float, float]:
    """Median of the per-round ratios and a percentile-bootstrap 95% interval of it (rounds resampled)."""
    ratios = np.array(top) / np.array(bottom)
    rng = np.random.default_rng(seed)
    draws = np.median(ratios[rng.integers(0, len(ratios), size=(n, len(ratios)))], axis=1)
    low, high = np.quantile(draws, [0.025, 0.975])
    return float(np.median(ratios)), float(low), float(high)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--horovod-script", type=Path, default=None,
                        help="Horovod's examples/pytorch/pytorch_synthetic_benchmark.py (omitted: no horovod variant)")
    parser.add_argument("--model", default="resnet50")
    parser.add_argument("--batch-size", type=int, default=8)
    parser.add_argument("--threads", type=int, default=None,
                        help="CPU threads (torch.set_num_threads, OMP_NUM_THREADS)")
    parser.add_argument("--warmup", type=int, default=10, help="warm-up batches of every variant")
    parser.add_argument("--iters", type=int, default=5, help="timed batches = 10 x this, for every variant")
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--variants", default=None,
                        help=f"comma-separated, of {', '.join(VARIANTS)} (default: "
                             "horovod,hvdbench with --horovod-script, else bare,hvdbench)")
    parser.add_argument("--device", choices=["auto", "cuda", "cpu"], default="auto",
                        help="auto: the node's first GPU where one is visible, else the CPU")
    parser.add_argument("--dry-run", action="store_true", help="print one round's commands and the process count")
    args = parser.parse_args()
    variants = (args.variants or ("horovod,hvdbench" if args.horovod_script else "bare,hvdbench")).split(",")
    unknown = sorted(set(variants) - set(VARIANTS))
    if unknown or ("horovod" in variants and args.horovod_script is None):
        parser.error(f"unknown variant(s) {unknown}" if unknown else "variant horovod needs --horovod-script")
    if args.device == "auto":
        import torch

        args.device = "cuda" if torch.cuda.is_available() else "cpu"
    args.cuda = args.device == "cuda"
    args.standin = "horovod" in variants and importlib.util.find_spec("torchvision") is None
    if args.standin:
        print(f"torchvision is not installed: Horovod's script builds {args.model} from the suite's models "
              f"({STANDIN}/torchvision)", flush=True)
    print(f"{args.rounds} rounds x {len(variants)} variants = {args.rounds * len(variants)} processes on the "
          f"{'GPU' if args.cuda else 'CPU'}", flush=True)
    if args.dry_run:
        for variant in variants:
            print(f"{variant}: {shlex.join(command(variant, args, Path('LOGDIR')))}")
        return 0
    rates: dict[str, list[float]] = {v: [] for v in variants}
    with tempfile.TemporaryDirectory(prefix="hvdbench-vs-horovod-") as scratch:
        for index in range(args.rounds):
            for variant in variants if index % 2 == 0 else variants[::-1]:  # alternate the order too
                rates[variant].append(one_round(variant, args, Path(scratch), index))
            print(f"round {index + 1}: " + ", ".join(f"{v} {rates[v][-1]:.3f}" for v in variants), flush=True)
    reference = variants[0]
    print(f"\n{args.model}, batch {args.batch_size}, {10 * args.iters} timed batches, {args.rounds} rounds "
          f"({'GPU' if args.cuda else f'CPU, {args.threads or os.cpu_count()} threads'}), images/s:")
    print("| variant | median | min | max | median ratio to " + reference + " | 95% interval |")
    print("|---|---:|---:|---:|---:|---|")
    for variant in variants:
        ratio, low, high = ratio_interval(rates[variant], rates[reference])
        interval = f"{low:.3f} - {high:.3f}" if args.rounds >= MIN_ROUNDS else f"n/a (under {MIN_ROUNDS} rounds)"
        print(f"| {variant} | {statistics.median(rates[variant]):.3f} | {min(rates[variant]):.3f} | "
              f"{max(rates[variant]):.3f} | {ratio:.3f} | {interval} |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
