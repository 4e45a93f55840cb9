"""The PyTorch side of the harness: Horovod init, device pinning, gradient exchange, the benchmark's main.

A benchmark script supplies a ``build(BuildContext) -> TorchWorkload`` and calls ``main``.
"""

from __future__ import annotations

import argparse
import os
import sys
import traceback
from dataclasses import dataclass
from typing import Any, Callable, Sequence

import torch
from torch import nn

from . import harness
from .catalog import get_benchmark
from .environment import base_environment, horovod_info
from .errors import UsageError
from .flags import parse_or_exit
from .spec import RunSpec


@dataclass
class TorchWorkload:
    """What a benchmark supplies: a model, a synthetic batch, a loss and the samples in one step."""

    model: nn.Module
    batch: Callable[[], Sequence[torch.Tensor]]
    loss: Callable[[nn.Module, Sequence[torch.Tensor]], torch.Tensor]
    samples_per_step: int


@dataclass(frozen=True)
class BuildContext:
    """What a benchmark's build function is given: the parsed flags, this rank and its device."""

    flags: argparse.Namespace
    device: torch.device
    rank: int
    size: int

    def data_generator(self) -> torch.Generator:
        """A CPU generator for synthetic data, seeded per rank so replicas see different batches."""
        return torch.Generator().manual_seed(self.flags.seed + 1 + self.rank)


Build = Callable[[BuildContext], TorchWorkload]


class TorchRuntime:
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

    def allgather_object(self, obj: Any) -> list[Any]:
        return self.hvd.allgather_object(obj)

    def broadcast_object(self, obj: Any) -> Any:
        return self.hvd.broadcast_object(obj, root_rank=0)


def pick_device(choice: str, local_rank: int) -> torch.device:
    """Pin this rank to the GPU of its local rank (within CUDA_VISIBLE_DEVICES), or the CPU."""
    if choice == "cpu" or (choice == "auto" and not torch.cuda.is_available()):
        return torch.device("cpu")
    if not torch.cuda.is_available():
        raise UsageError("--device cuda: no CUDA device is visible to this process")
    count = torch.cuda.device_count()
    if local_rank >= count:
        visible = os.environ.get("CUDA_VISIBLE_DEVICES", "unset")
        raise UsageError(f"local rank {local_rank} has no GPU: {count} visible (CUDA_VISIBLE_DEVICES={visible})")
    torch.cuda.set_device(local_rank)
    return torch.device("cuda", local_rank)


def set_threads(flags: argparse.Namespace, local_size: int) -> int:
    """CPU threads for this rank: --threads, or the node's cores shared among its ranks."""
    threads = flags.threads or max(1, (os.cpu_count() or 1) // local_size)
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
            pci_bus_id=_pci_bus_id(props), cuda=torch.version.cuda,
            cudnn=torch.backends.cudnn.version(), nccl=".".join(map(str, torch.cuda.nccl.version())),
        )
    return info


def _pci_bus_id(props: Any) -> str | None:
    if not hasattr(props, "pci_bus_id"):
        return None
    return f"{getattr(props, 'pci_domain_id', 0):08X}:{props.pci_bus_id:02X}:{getattr(props, 'pci_device_id', 0):02X}.0"


def main(name: str, build: Build, argv: Sequence[str] | None = None) -> int:
    """Run one benchmark on this rank: parse flags, init Horovod, train, record. Returns the exit status."""
    info = get_benchmark(name)
    argv = list(sys.argv[1:] if argv is None else argv)
    flags = parse_or_exit(info.parser(), argv)
    import horovod.torch as hvd

    hvd.init()
    writer = None
    try:
        runtime = TorchRuntime(hvd, torch.device("cpu"))
        label = f"{name}-{flags.model}"
        log_dir = harness.resolve_log_dir(runtime, flags, label)
        hosts = runtime.allgather_object(os.uname().nodename)
        harness.ensure_run_file(runtime, log_dir, RunSpec(
            benchmark=name, framework=info.framework, args=harness.benchmark_args(argv), np=runtime.size,
            nodes=len(set(hosts)) if runtime.size % len(set(hosts)) == 0 else 1, launcher="external",
            controller="mpi" if hvd.mpi_enabled() else "gloo"))
        writer = harness.open_writer(runtime, log_dir, flags.echo_records)
        device = runtime.device = pick_device(flags.device, runtime.local_rank)
        threads = set_threads(flags, runtime.local_size) if device.type == "cpu" else None

        torch.manual_seed(flags.seed)
        workload = build(BuildContext(flags, device, runtime.rank, runtime.size))
        model = workload.model.to(device)
        optimizer: torch.optim.Optimizer = torch.optim.SGD(model.parameters(), lr=flags.lr, momentum=0.9)
        if not flags.independent:
            hvd.broadcast_parameters(model.state_dict(), root_rank=0)
            hvd.broadcast_optimizer_state(optimizer, root_rank=0)
            optimizer = hvd.DistributedOptimizer(optimizer, named_parameters=model.named_parameters(),
                                                 op=hvd.Average)
        writer.write("env", benchmark=name, framework=info.framework, model=flags.model,
                     flags=vars(flags), unit=info.unit, threads=threads,
                     parameters=sum(p.numel() for p in model.parameters()),
                     device=device_info(device), horovod=horovod_info(hvd), **base_environment())

        def step() -> torch.Tensor:
            optimizer.zero_grad()
            loss = workload.loss(model, workload.batch())
            loss.backward()
            optimizer.step()
            return loss.detach()

        model.train()
        summary = harness.timed_loop(
            runtime, writer, step, lambda loss: float(loss.item()),
            samples_per_step=workload.samples_per_step, warmup_steps=flags.warmup_steps, steps=flags.steps)
        with torch.no_grad():  # equal on every rank when gradients are exchanged, not under --independent
            summary["param_checksum"] = float(sum(p.double().sum().item() for p in model.parameters()))
        writer.write("summary", unit=info.unit, **summary)
        per_rank = runtime.allgather_object(summary)
        if runtime.rank == 0:
            print(harness.summary_line(f"{label} ({log_dir})", info.unit, per_rank), flush=True)
        return 0 if summary["loss_finite"] else 1
    except Exception as exc:  # every failure becomes an error record and one line, then exit 1
        message = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
        if writer is not None:
            writer.write("error", error=type(exc).__name__, message=message,
                         traceback=traceback.format_exc(limit=8))
        print(f"error: rank {hvd.rank()}: {message}", file=sys.stderr, flush=True)
        return 1
    finally:
        if writer is not None:
            writer.close()
