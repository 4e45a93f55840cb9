"""What a PyTorch benchmark builds (its workload and the context it is built in), where its synthetic batches
live and in what precision: the data half of the PyTorch harness."""

from __future__ import annotations

import argparse
import contextlib
import itertools
from dataclasses import dataclass
from typing import Any, Callable, ContextManager, Iterator

import torch
from torch import nn
from torch.utils.data import DataLoader, IterableDataset

from hvdbench.core.errors import UsageError
from hvdbench.core.flags import check_device

Batch = tuple[torch.Tensor, ...]
MakeBatch = Callable[[torch.Generator], Batch]
Count = Callable[[Batch], dict[str, float]]


@dataclass
class Epochs:
    """A real dataset read in epochs and evaluated (a run to a quality target): the steps an epoch gives every rank,
    this rank's next batch (held in memory, already on the device where the dataset is: suite/fashion_mnist.py;
    None where the run's files are read as any ``--data files`` run's: suite/heldout.py), the sums of an evaluation
    of this rank's share of the held-out set (correct, seen, summed loss), and what the dataset is."""

    steps_per_epoch: int
    next_batch: Callable[[], Batch] | None
    evaluate: Callable[[nn.Module], tuple[float, float, float]]
    facts: Callable[[], dict[str, Any]]


@dataclass
class TorchWorkload:
    """What a benchmark supplies: a model, a maker of synthetic batches (on the host), a loss, and
    what a batch counts (``{"samples": n, ...}`` in the benchmark's unit; default: the batch's rows)."""

    model: nn.Module
    make_batch: MakeBatch
    loss: Callable[[nn.Module, Batch], torch.Tensor]
    count: Count | None = None
    distinct_batches: int = 1  # >1 where batches differ (lengths): the device pool keeps that many
    unit: str | None = None  # what a sample is where the workload says (a model file's UNIT), else the catalog's
    reads: str | None = None  # the dataset kind it reads with --data files (core/datasets.py KINDS), None: none
    epochs: Epochs | None = None  # a real dataset read in epochs and evaluated (runs to a target)


@dataclass(frozen=True)
class BuildContext:
    """What a benchmark's build function is given: the parsed flags, this rank and its device, and how rank 0's
    object reaches every rank (``share``: the runtime's broadcast; None on one process)."""

    flags: argparse.Namespace
    device: torch.device
    rank: int
    size: int
    share: Callable[[Any], Any] | None = None

    def data_generator(self) -> torch.Generator:
        """A CPU generator for synthetic data, seeded per rank so replicas see different batches."""
        return torch.Generator().manual_seed(self.flags.seed + 1 + self.rank)


Build = Callable[[BuildContext], TorchWorkload]


def check_precision(flags: argparse.Namespace, device: torch.device) -> None:
    """Refuse what this device cannot train in, with one line that says so (flags.check_device, and bf16 on a
    GPU without it)."""
    check_device(flags, on_gpu=device.type == "cuda")
    if flags.precision == "bf16" and device.type == "cuda" and not torch.cuda.is_bf16_supported():
        raise UsageError(f"--precision bf16: {torch.cuda.get_device_name(device)} has no bf16 support")


def weight_dtype(precision: str) -> torch.dtype:
    """The dtype of weights and activations (amp keeps fp32 weights)."""
    return {"fp16": torch.float16, "bf16": torch.bfloat16}.get(precision, torch.float32)


def autocast(precision: str, device: torch.device) -> ContextManager[Any]:
    """Autocast for amp (fp16 on CUDA, bf16 on CPU); nothing otherwise."""
    if precision != "amp":
        return contextlib.nullcontext()
    return torch.autocast(device.type, dtype=torch.float16 if device.type == "cuda" else torch.bfloat16)


class _Batches(IterableDataset):
    """An endless stream of synthetic batches for a DataLoader; each worker seeds its own generator."""

    def __init__(self, make: MakeBatch, seed: int) -> None:
        self.make, self.seed = make, seed

    def __iter__(self) -> Iterator[Batch]:
        info = torch.utils.data.get_worker_info()
        generator = torch.Generator().manual_seed(self.seed + 7919 * (info.id + 1 if info else 0))
        while True:
            yield self.make(generator)


class BatchSource:
    """Serves (batch on the device, counts) every step, by ``--data``:

    - ``device``: ``distinct`` batches made once and kept on the device, served in turn;
    - ``host``: the same batches kept on the host (pinned with CUDA) and copied every step;
    - ``loader``: a DataLoader whose workers make new batches, pinned, copied every step;
    - ``files``: a dataset on disk read, decoded and augmented by a DataLoader's workers (suite/filedata.py), each
      step's wait for its batch and the bytes it read counted beside its samples;
    - ``stream`` given: a real dataset in memory (``Epochs.next_batch``), the next batch every step, whatever
      ``mode`` (where the dataset is held is the workload's).
    """

    def __init__(self, mode: str, make: MakeBatch, count: Count, *, device: torch.device, generator: torch.Generator,
                 seed: int, distinct: int = 1, workers: int = 2, dtype: torch.dtype = torch.float32,
                 channels_last: bool = False, files: Any = None, stream: Callable[[], Batch] | None = None) -> None:
        self.mode, self.count, self.device = mode, count, device
        self.dtype, self.channels_last = dtype, channels_last
        self.pin = device.type == "cuda"
        self.files = files
        self.stream = stream
        if stream is not None:
            return
        if mode == "files":
            if files is None:
                raise UsageError("--data files: this workload reads no dataset")
            return
        if mode == "loader":
            loader = DataLoader(_Batches(make, seed), batch_size=None, num_workers=workers, pin_memory=self.pin,
                                persistent_workers=workers > 0)
            self._host: Iterator[Batch] = iter(loader)
            return
        batches = [make(generator) for _ in range(distinct)]
        if mode == "device":
            pool = [(self._to_device(b), self.count(b)) for b in batches]
            self._ready: Iterator[tuple[Batch, dict[str, float]]] = itertools.cycle(pool)
        elif mode == "host":
            pinned = [tuple(t.pin_memory() if self.pin else t for t in b) for b in batches]
            self._host = itertools.cycle(pinned)
        else:
            raise UsageError(f"unknown --data mode {mode!r}")

    def _to_device(self, batch: Batch) -> Batch:
        out = []
        for i, tensor in enumerate(batch):
            tensor = tensor.to(self.device, non_blocking=True)
            if tensor.is_floating_point() and self.dtype != torch.float32:
                tensor = tensor.to(self.dtype)
            if i == 0 and self.channels_last and tensor.dim() == 4:
                tensor = tensor.contiguous(memory_format=torch.channels_last)
            out.append(tensor)
        return tuple(out)

    def next(self) -> tuple[Batch, dict[str, float]]:
        """The next batch on the device and what it counts (computed on the host copy)."""
        if self.stream is not None:
            batch = self.stream()
            return self._to_device(batch), self.count(batch)
        if self.mode == "device":
            return next(self._ready)
        if self.mode == "files":
            host, read = self.files.next()
            return self._to_device(host), {**self.count(host), **read}
        host = next(self._host)
        return self._to_device(host), self.count(host)
