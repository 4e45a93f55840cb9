"""PyTorch's backend of the harness: Horovod init, device pinning, precision, the gradient exchange (exchange.py), the
per-step work, profiling; the rank sequence itself is ``harness.main``.

A benchmark script supplies ``build(BuildContext) -> TorchWorkload`` and calls ``main``.
"""

from __future__ import annotations

import argparse
import os
import time
from pathlib import Path
from typing import Any, Callable, Sequence

import numpy as np
import torch
from torch import nn

from hvdbench.core.environment import gloo_on_loopback
from hvdbench.core.errors import UsageError
from hvdbench.core.gpu import cuda_bus_id, refuse_unseen_gpus
from hvdbench.core.gpu_choice import GpuChoice, choose_gpu
from hvdbench.core.loaders import IN_MEMORY, LOADERS, Batches, loaders_of
from hvdbench.core.records import RecordWriter
from . import harness
from .exchange import Exchange, make_exchange, scaler_for
from .timing import HorovodObjects, StepOutcome
from .to_target import Held
from .torchrun import TorchrunWorld, launched_by_torchrun
from .torchdata import (BatchSource, Build, BuildContext, TorchWorkload, autocast,
                        check_precision, weight_dtype)

__all__ = ["Build", "BuildContext", "TorchBackend", "TorchWorkload", "main"]  # what a benchmark script imports




class TorchRuntime(HorovodObjects):
    """Horovod's view of this rank, with a device sync for the timed loop."""

    def __init__(self, hvd: Any, device: torch.device) -> None:
        self.hvd = hvd
        self.device = device
        self.rank, self.local_rank = hvd.rank(), hvd.local_rank()
        self.size, self.local_size = hvd.size(), hvd.local_size()

    def barrier(self) -> None:
        self.hvd.barrier()

    def sync(self) -> None:
        if self.device.type == "cuda":
            torch.cuda.synchronize(self.device)



def pick_device(choice: str, local_rank: int, nvml_module: Any = None) -> tuple[torch.device, GpuChoice | None]:
    """Pin this rank to its GPU (core/gpu_choice.py: its placement's, its local rank's or the only one
    visible), or the CPU; the device and the GPU choice (None on the CPU). ``auto`` on a node whose GPUs
    PyTorch cannot see is refused rather than measured on the CPU (``nvml_module`` stands in for pynvml)."""
    if choice == "cpu":
        return torch.device("cpu"), None
    if not torch.cuda.is_available():
        build = (f"PyTorch {torch.__version__} cannot use them (its CUDA {torch.version.cuda} needs a newer driver?)"
                 if torch.version.cuda else f"PyTorch {torch.__version__} is a build without CUDA")
        refuse_unseen_gpus(choice, build, nvml_module)
        return torch.device("cpu"), None
    gpu = choose_gpu(local_rank, count=torch.cuda.device_count())
    torch.cuda.set_device(gpu.cuda_index)
    return torch.device("cuda", gpu.cuda_index), gpu


def set_threads(flags: argparse.Namespace, local_size: int) -> int:
    """CPU threads for this rank: --threads, or the node's cores shared among its ranks."""
    threads = getattr(flags, "threads", None) or max(1, (os.cpu_count() or 1) // local_size)
    torch.set_num_threads(threads)
    return threads


def device_info(device: torch.device) -> dict[str, Any]:
    """The framework's view of the device this rank trains on."""
    info: dict[str, Any] = {"type": device.type, "torch": torch.__version__, "threads": torch.get_num_threads()}
    if device.type == "cuda":
        props = torch.cuda.get_device_properties(device)
        info.update(
            index=device.index, name=props.name, memory_bytes=props.total_memory,
            capability=f"{props.major}.{props.minor}", uuid=str(getattr(props, "uuid", "")) or None,
            pci_bus_id=cuda_bus_id(props), cuda=torch.version.cuda,
            cudnn=torch.backends.cudnn.version(), nccl=".".join(map(str, torch.cuda.nccl.version())),
        )
    return info


def math_settings(flags: argparse.Namespace, device: torch.device) -> dict[str, Any] | None:
    """cuDNN autotuning (on unless --no-cudnn-autotune) and whether fp32 matrix products and convolutions
    may run as TF32, as set for this run on a GPU (None on the CPU, where neither applies)."""
    if device.type != "cuda":
        return None
    torch.backends.cudnn.benchmark = bool(flags.cudnn_autotune)
    return {"cudnn_autotune": torch.backends.cudnn.benchmark, **tf32_settings()}


def tf32_settings() -> dict[str, Any]:
    """Whether fp32 matrix products and convolutions may run as TF32, read so that it never raises: PyTorch 2.9
    and newer keep it as ``fp32_precision`` ("tf32", "ieee"; "none" where nothing asked for TF32), and their
    legacy ``allow_tf32`` getters raise once anything has set the new API; older releases have only the legacy
    flags. ``fp32_precision`` records the new API's own words where it exists."""
    matmul = torch.backends.cuda.matmul
    conv = torch.backends.cudnn.conv if hasattr(torch.backends.cudnn, "conv") else None
    if hasattr(matmul, "fp32_precision") and conv is not None and hasattr(conv, "fp32_precision"):
        said = {"matmul": str(matmul.fp32_precision), "convolution": str(conv.fp32_precision)}
        return {"tf32_matmul": said["matmul"] == "tf32", "tf32_convolution": said["convolution"] == "tf32",
                "fp32_precision": said}
    return {"tf32_matmul": bool(matmul.allow_tf32), "tf32_convolution": bool(torch.backends.cudnn.allow_tf32),
            "float32_matmul_precision": torch.get_float32_matmul_precision()}




class GradientCompression:
    """What Horovod exchanges for a gradient: contiguous (channels-last gradients are not), bf16 as fp32
    (Horovod 0.28 has no bf16 allreduce), then Horovod's own compression (none or fp16)."""

    def __init__(self, inner: Any) -> None:
        self.inner = inner

    def compress(self, tensor: torch.Tensor) -> tuple[torch.Tensor, tuple[torch.dtype, Any]]:
        dtype = tensor.dtype
        tensor = tensor.contiguous()
        if dtype == torch.bfloat16:
            tensor = tensor.float()
        compressed, ctx = self.inner.compress(tensor)
        return compressed, (dtype, ctx)

    def decompress(self, tensor: torch.Tensor, ctx: tuple[torch.dtype, Any]) -> torch.Tensor:
        dtype, inner_ctx = ctx
        return self.inner.decompress(tensor, inner_ctx).to(dtype)


class Trainer:
    """One rank's model, optimizer and batches; ``step`` trains one step, ``breakdown_step`` times its parts. The
    gradients are exchanged as ``--exchange`` says (suite/exchange.py)."""

    def __init__(self, exchange: Exchange, workload: TorchWorkload, flags: argparse.Namespace, device: torch.device,
                 generator: torch.Generator, seed: int, rank: int = 0, size: int = 1) -> None:
        self.workload, self.flags, self.device, self.exchange = workload, flags, device, exchange
        dtype = weight_dtype(flags.precision)
        model = workload.model.to(device)
        exchange.prepare(model)  # in fp32, before any cast: Horovod 0.28 cannot broadcast bf16 tensors
        model = model.to(dtype=dtype)
        if flags.channels_last:
            model = model.to(memory_format=torch.channels_last)  # type: ignore[call-overload]  # not in stubs
        self.params = model
        self.parameters = sum(p.numel() for p in model.parameters())
        self.gradient_tensors = sum(1 for p in model.parameters() if p.requires_grad)
        # backward produces gradients roughly in reverse order of the parameters' registration
        self.gradient_sizes = [p.numel() for p in model.parameters() if p.requires_grad][::-1]
        trained = exchange.wrap(model)
        # A fresh optimizer has the same (empty) state on every rank, so there is nothing to broadcast.
        self.optimizer = exchange.optimizer(lambda params: torch.optim.SGD(params, lr=flags.lr, momentum=0.9))
        self.model: nn.Module = torch.compile(trained) if flags.compile else trained  # type: ignore[assignment]
        self.scaler = scaler_for(exchange, flags, device)
        self.facts = {"exchange": exchange.facts}
        self.unit = workload.unit
        count = workload.count or (lambda batch: {"samples": float(batch[0].shape[0])})
        files: Batches | None = None
        if flags.data == "files" and workload.reads is not None:  # the loader's class, as core/loaders.py names it
            from .filedata import classifier_outputs

            loader = LOADERS[getattr(flags, "loader", None) or loaders_of("pytorch")[0]]
            files = loader.batches_class()(workload.reads, flags, rank, size, device, classifier_outputs(trained))
        self.source = BatchSource(flags.data, workload.make_batch, count, device=device, generator=generator,
                                  seed=seed, distinct=workload.distinct_batches, workers=flags.loader_workers,
                                  dtype=dtype, channels_last=flags.channels_last, files=files,
                                  stream=workload.epochs.next_batch if workload.epochs is not None else None)
        if workload.epochs is not None and workload.epochs.next_batch is None and files is None:
            raise UsageError("a quality target on this workload reads its training set from files: --data files")
        self.model.train()

    def _forward(self) -> tuple[torch.Tensor, dict[str, float]]:
        batch, counts = self.source.next()
        with autocast(self.flags.precision, self.device):
            loss = self.workload.loss(self.model, batch)
        return loss, counts

    def _backward(self, loss: torch.Tensor) -> None:
        (self.scaler.scale(loss) if self.scaler is not None else loss).backward()

    def _exchange(self) -> None:
        """Complete the gradient exchange that backward's hooks started (Horovod, DDP, FSDP), or make it (PS)."""
        self.exchange.after_backward(self.optimizer)

    def _step(self, optimizer: torch.optim.Optimizer) -> None:
        if self.scaler is not None:
            self.scaler.step(optimizer)
            self.scaler.update()
        else:
            optimizer.step()

    def _apply(self) -> None:
        self.exchange.update(self.optimizer, self._step, self.scaler)

    def _zero_grad(self) -> None:
        if self.optimizer is not None:
            self.optimizer.zero_grad()
        if self.optimizer is None or not self.exchange.optimizer_holds_model:
            self.params.zero_grad()  # a parameter server's workers, and its host-memory copy's rank 0

    def step(self) -> StepOutcome:
        """One training step: batch, forward, backward (exchange overlapped), optimizer."""
        self._zero_grad()
        loss, counts = self._forward()
        self._backward(loss)
        self._exchange()
        self._apply()
        return StepOutcome(loss.detach(), counts)

    def breakdown_step(self, sync: Callable[[], None]) -> StepOutcome:
        """One step with each part bounded by a device sync; exchange is what remains after backward."""
        marks = [time.perf_counter()]
        self._zero_grad()
        loss, counts = self._forward()
        for part in (lambda: None, lambda: self._backward(loss), self._exchange, self._apply):
            part()
            sync()
            marks.append(time.perf_counter())
        names = ("forward", "backward", "exchange", "optimizer")
        return StepOutcome(loss.detach(), counts, {n: b - a for n, a, b in zip(names, marks, marks[1:])})

    def evaluate(self) -> Held:
        """This rank's share of the held-out set, evaluated in the run's precision (a workload read in epochs)."""
        if self.workload.epochs is None:
            raise UsageError("a quality target needs a held-out set: this workload has none (fashion_mnist has; "
                             "imagenet with --data files and --eval-dir)")
        self.model.eval()
        try:
            with torch.no_grad(), autocast(self.flags.precision, self.device):
                return Held(*self.workload.epochs.evaluate(self.model))
        finally:
            self.model.train()

    @property
    def steps_per_epoch(self) -> int | None:
        """Steps an epoch gives every rank, for a workload read in epochs."""
        return self.workload.epochs.steps_per_epoch if self.workload.epochs is not None else None

    def set_lr(self, lr: float) -> None:
        """The learning rate of every parameter group from now on (a run to target's schedule)."""
        for group in self.optimizer.param_groups if self.optimizer is not None else ():
            group["lr"] = lr

    def data_step(self) -> StepOutcome:
        """The input pipeline alone (--data-only): the next batch on the device, no model."""
        _, counts = self.source.next()
        return StepOutcome(torch.zeros(()), counts)

    def data_facts(self) -> dict[str, Any]:
        """What reading files came to (the summary's ``data``), or the dataset held in memory; nothing for synthetic
        batches."""
        epochs = self.workload.epochs
        if epochs is not None and epochs.next_batch is not None:
            facts = epochs.facts()
            return {"data": {"dir": facts["source"], "kind": "idx", "loader": IN_MEMORY,
                             "samples": facts["train_images"], **facts}}
        read = self.source.files.facts() if self.source.files is not None else {}
        if epochs is not None and "data" in read:
            read["data"]["held_out"] = epochs.facts()
        return read

    def checksum(self) -> float:
        """Sum of every parameter (the full ones, where sharded): equal on all ranks when gradients are exchanged."""
        with torch.no_grad():
            return float(sum(p.double().sum().item() for p in self.exchange.parameters()))

    def close(self) -> None:
        """End the exchange's process group, if it started one."""
        self.exchange.close()


def profile(trainer: Trainer, runtime: TorchRuntime, writer: RecordWriter, steps: int, log_dir: Path) -> None:
    """Profile extra steps: the top operators by self time as a record, the trace beside the log."""
    activities = [torch.profiler.ProfilerActivity.CPU]
    if runtime.device.type == "cuda":
        activities.append(torch.profiler.ProfilerActivity.CUDA)
    with torch.profiler.profile(activities=activities) as prof:
        for _ in range(steps):
            trainer.step()
            runtime.sync()
    trace = log_dir / f"trace-rank{runtime.rank}.json"
    prof.export_chrome_trace(str(trace))

    def device_us(event: Any) -> float:
        return float(getattr(event, "self_device_time_total", 0) or getattr(event, "self_cuda_time_total", 0) or 0)

    key = device_us if runtime.device.type == "cuda" else (lambda e: float(e.self_cpu_time_total))
    top = sorted(prof.key_averages(), key=key, reverse=True)[:15]
    writer.write("profile", steps=steps, trace=trace.name,
                 sort_by="self device time" if runtime.device.type == "cuda" else "self CPU time",
                 top=[{"name": e.key, "calls": e.count, "self_cpu_us": float(e.self_cpu_time_total),
                       "self_device_us": device_us(e), "cpu_total_us": float(e.cpu_time_total)} for e in top])


def peak_memory(device: torch.device) -> dict[str, int]:
    """Peak device memory allocated (CUDA) or the process's peak resident set (CPU), in bytes."""
    if device.type == "cuda":
        return {"peak_device_bytes": int(torch.cuda.max_memory_allocated(device))}
    return {"peak_rss_bytes": harness.peak_rss_bytes()}


def numpy_generator(g: torch.Generator) -> np.random.Generator:
    """A NumPy generator drawn from a torch one, for batches made by ``synthetic.py``."""
    return np.random.default_rng(int(torch.randint(0, 2**62, (1,), generator=g)))


class TorchBackend:
    """PyTorch's part of the harness (see ``harness.Backend``)."""

    framework = "pytorch"
    choice: GpuChoice | None = None

    def init(self) -> Any:
        """Horovod, or under torchrun torch.distributed alone (suite/torchrun.py)."""
        if launched_by_torchrun():
            return TorchrunWorld().init()
        import horovod.torch as hvd

        gloo_on_loopback()
        hvd.init()
        return hvd

    def prepare(self, flags: argparse.Namespace, local_rank: int, local_size: int) -> tuple[torch.device, int | None]:
        device, self.choice = pick_device(flags.device, local_rank)
        return device, set_threads(flags, local_size) if device.type == "cpu" else None

    def runtime(self, hvd: Any, device: torch.device | None) -> TorchRuntime:
        return TorchRuntime(hvd, device or torch.device("cpu"))

    def on_gpu(self, device: torch.device) -> bool:
        return device.type == "cuda"

    def device_index(self, device: torch.device) -> int:
        return device.index or 0

    def device_info(self, device: torch.device) -> dict[str, Any]:
        return device_info(device)

    def configure(self, flags: argparse.Namespace, device: torch.device) -> dict[str, Any]:
        check_precision(flags, device)
        torch.manual_seed(flags.seed)
        return {"math": math_settings(flags, device)}

    def trainer(self, build: Build, session: harness.Session) -> Trainer:
        runtime, flags = session.runtime, session.flags
        ctx = BuildContext(flags, session.device, runtime.rank, runtime.size, runtime.broadcast_object)
        compression = lambda: GradientCompression(  # noqa: E731
            session.hvd.Compression.fp16 if flags.fp16_allreduce else session.hvd.Compression.none)
        exchange = make_exchange(flags, session.hvd, runtime, session.device, compression)  # type: ignore[arg-type]
        return Trainer(exchange, build(ctx), flags, session.device, ctx.data_generator(), flags.seed + 1 + runtime.rank,
                       runtime.rank, runtime.size)

    def loss_value(self, loss: torch.Tensor) -> float:
        return float(loss.float().item())

    def profile(self, trainer: Trainer, session: harness.Session, steps: int) -> None:
        profile(trainer, session.runtime, session.writer, steps, session.log_dir)  # type: ignore[arg-type]

    def peak_memory(self, device: torch.device) -> dict[str, int]:
        return peak_memory(device)


def main(name: str, build: Build, argv: Sequence[str] | None = None) -> int:
    """Run one PyTorch benchmark on this rank (the harness's sequence). Returns the exit status."""
    return harness.main(name, TorchBackend(), build, argv)
