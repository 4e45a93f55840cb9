"""FLOPs per sample of a training step, counted once per run on rank 0, on PyTorch's meta device (shapes only:
no memory, no time on the GPU), and recorded in every rank's env record.

Counting rule: PyTorch's FLOP counter (``torch.utils.flop_counter``) counts the matrix work (matmul, conv,
attention) with a multiply-add as 2 FLOPs, and sees the backward pass when it runs inside the counter, so
forward + backward is counted, not assumed. Where only the forward can be seen (a model the meta device
cannot run, counted on the CPU in inference mode), backward is taken as 2x forward: 3x in all. Elementwise
work (activations, normalisation, the optimizer) is not counted, as in published model-FLOP figures: the
count is the floor of the work a step does. The batch counted is the run's, up to COUNT_BATCH samples (a
per-sample figure; models whose samples differ in length count the average of that batch).

TensorFlow workloads use the count of the PyTorch benchmark with the same models and sizing flags (its
``twin``), made in a separate process (``python -m hvdbench.suite.flops``) so that TensorFlow's process never
holds PyTorch: the same model has one figure whichever framework trains it.
"""

from __future__ import annotations

import argparse
import hashlib
import importlib
import json
import os
import subprocess
import sys
import warnings
from pathlib import Path
from typing import Any, Sequence

RULE = 1  # the counting rule's version: a new rule counts again instead of reading old counts
BACKWARD_FACTOR = 3.0  # forward + backward where backward cannot be counted
COUNT_BATCH = 4
COUNTED = "PyTorch FLOP counter on the meta device, forward and backward, multiply-add = 2 FLOPs"
FORWARD_ONLY = "PyTorch FLOP counter on the CPU, forward only, backward taken as 2x forward, multiply-add = 2 FLOPs"


def not_counted(why: str) -> dict[str, Any]:
    """The env fields of a run whose FLOPs could not be counted, with why."""
    return {"flops_per_sample": None, "flops_forward_per_sample": None, "flops_counted": f"not counted: {why}"}


def _counting_flags(flags: argparse.Namespace) -> argparse.Namespace:
    counted = argparse.Namespace(**vars(flags))
    counted.batch_size = min(flags.batch_size, COUNT_BATCH)
    counted.compile, counted.channels_last, counted.precision = False, False, "fp32"
    counted.target_accuracy = counted.target_loss = None  # a count needs the model and a batch, not a held-out set
    return counted


def count_torch(benchmark: str, flags: argparse.Namespace) -> dict[str, Any]:
    """FLOPs per sample of one training step of a PyTorch benchmark with these flags: ``flops_per_sample``
    (forward + backward), ``flops_forward_per_sample`` and ``flops_counted`` (how; or why not)."""
    import torch
    from torch.utils.flop_counter import FlopCounterMode

    from hvdbench.core.catalog import get_benchmark
    from .torchdata import BuildContext

    info = get_benchmark(benchmark)
    build = importlib.import_module(f"hvdbench.suite.{info.script.removesuffix('.py')}").build
    flags = _counting_flags(flags)
    host_ctx = BuildContext(flags, torch.device("cpu"), 0, 1)
    try:
        with torch.device("meta"):
            workload = build(BuildContext(flags, torch.device("meta"), 0, 1))
        host = workload.make_batch(host_ctx.data_generator())
        samples = (workload.count or (lambda b: {"samples": float(b[0].shape[0])}))(host)["samples"]
    except Exception as exc:  # noqa: BLE001 - an uncountable model is a missing column, not a failed run
        return not_counted(f"{type(exc).__name__}: {str(exc)[:160]}")
    try:
        batch = tuple(t.to("meta") for t in host)
        with FlopCounterMode(display=False) as counter:
            loss = workload.loss(workload.model, batch)
            forward = counter.get_total_flops()
            loss.backward()
        return {"flops_per_sample": counter.get_total_flops() / samples, "flops_forward_per_sample": forward / samples,
                "flops_counted": COUNTED}
    except Exception:  # noqa: BLE001 - some models cannot run on the meta device (packed sequences): the CPU
        pass
    try:
        workload = build(host_ctx)
        # oneDNN's fused RNN kernels are invisible to the counter; without them an LSTM/GRU is its matmuls
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # oneDNN's note on TF32 for Intel GPUs
            with torch.backends.mkldnn.flags(enabled=False), torch.inference_mode(), \
                    FlopCounterMode(display=False) as counter:
                workload.loss(workload.model, host)
        forward = counter.get_total_flops()
    except Exception as exc:  # noqa: BLE001
        return not_counted(f"{type(exc).__name__}: {str(exc)[:160]}")
    return {"flops_per_sample": BACKWARD_FACTOR * forward / samples, "flops_forward_per_sample": forward / samples,
            "flops_counted": FORWARD_ONLY}


def count_twin(twin: str, sizing: dict[str, Any], timeout: float = 300.0) -> dict[str, Any]:
    """The count of PyTorch benchmark ``twin`` with these sizing flags, from a separate process (a
    TensorFlow rank never imports PyTorch, and the count never touches a GPU)."""
    env = {**os.environ, "CUDA_VISIBLE_DEVICES": ""}
    try:
        proc = subprocess.run([sys.executable, "-m", "hvdbench.suite.flops", twin, json.dumps(sizing)],
                              capture_output=True, text=True, timeout=timeout, env=env, check=False)
    except (OSError, subprocess.TimeoutExpired) as exc:
        return not_counted(f"the counting process did not finish ({type(exc).__name__})")
    lines = proc.stdout.strip().splitlines()
    if proc.returncode or not lines:
        return not_counted(f"the counting process failed: {(proc.stderr.strip().splitlines() or ['no output'])[-1]}")
    return dict(json.loads(lines[-1]))


def cache_file() -> Path:
    """Where counts are kept across runs: $HVDBENCH_CACHE (default ~/.cache/hvdbench)/flops.json."""
    return Path(os.environ.get("HVDBENCH_CACHE") or Path.home() / ".cache" / "hvdbench") / "flops.json"


def flops_of(benchmark: str, flags: argparse.Namespace) -> dict[str, Any]:
    """The FLOP fields of a run's env record: counted once per model and size (the PyTorch twin's count for a
    TensorFlow workload) and kept in ``cache_file()``, so a sweep's second run of a model reads the first's."""
    from hvdbench.core.catalog import get_benchmark

    info = get_benchmark(benchmark)
    twin = info.twin or info.name
    sizing = {**info.sizing(flags), "batch_size": min(flags.batch_size, COUNT_BATCH)}
    if sizing.get("model_file"):  # a user's model: its source decides the count, not its path
        sizing["model_file"] = hashlib.sha256(Path(sizing["model_file"]).read_bytes()).hexdigest()
    key = json.dumps([RULE, twin, sizing], sort_keys=True, default=str)
    path = cache_file()
    try:
        cached = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        cached = {}
    if not isinstance(cached, dict):
        cached = {}
    if key in cached:
        result = dict(cached[key])
    else:
        result = count_torch(twin, flags) if info.twin is None else count_twin(twin, sizing)
        if result.get("flops_per_sample") is not None:
            _store(path, {**cached, key: result})
    if info.twin is not None and result.get("flops_per_sample") is not None:
        result["flops_counted"] = f"{result['flops_counted']}, on PyTorch {twin} (the same model and sizes)"
    return result


def _store(path: Path, counts: dict[str, Any]) -> None:
    """Write the cache atomically; a cache that cannot be written is only a count made again next time."""
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        partial = path.with_name(f"{path.name}.{os.getpid()}.tmp")
        partial.write_text(json.dumps(counts, indent=1, sort_keys=True), encoding="utf-8")
        os.replace(partial, path)
    except OSError:
        pass


def main(argv: Sequence[str] | None = None) -> int:
    """``python -m hvdbench.suite.flops BENCHMARK '{"model": ..., "batch_size": ...}'``: the count as JSON."""
    from hvdbench.core.catalog import get_benchmark

    name, sizing = (list(sys.argv[1:] if argv is None else argv) + ["{}"])[:2]
    flags = get_benchmark(name).parser().parse_args([])
    for key, value in json.loads(sizing).items():
        setattr(flags, key, value)
    print(json.dumps(count_torch(name, flags)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
