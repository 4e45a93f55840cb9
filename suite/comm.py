"""Collective bandwidth in the field's terms (nccl-tests' algbw and busbw), through Horovod and raw MPI.

For each operation, backend, dtype and message size: warm-up calls, then the timed ones. Batch timing
(nccl-tests' and IMB's way): after a barrier and a device sync, calls back to back, one sync, time / calls,
several such batches; each timing: every call bounded by a barrier and a device sync. Every rank records its
own times, and results are checked against values known in advance (each batch's last, every timed call).
The training pattern instead times a training step's allreduces (its gradient tensors, back to back) several
steps in a row. What a call of each path costs before any byte moves is measured beside (``path_cost``).
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Any, Callable

import torch

from hvdbench.core.collective_ops import OPS
from hvdbench.core.errors import HvdbenchError

DTYPES = {"fp32": torch.float32, "fp16": torch.float16, "bf16": torch.bfloat16}


class WrongResult(HvdbenchError):
    """A collective returned values other than the ones known in advance."""


@dataclass
class Case:
    """One measurement: an operation of one backend on one dtype at one size."""

    op: str
    backend: str
    dtype: str
    nbytes: int


class Buffers:
    """One case's input, filled with the values its descriptor gives this rank, and the result expected."""

    def __init__(self, case: Case, rank: int, size: int, device: torch.device, corrupt: bool) -> None:
        op, dtype = OPS[case.op], DTYPES[case.dtype]
        self.count = op.count(case.nbytes, size, case.dtype)
        self.input = torch.full((self.count,), op.fill(rank, size), dtype=dtype, device=device)
        values = op.expected(rank, size)
        share = op.output_count(self.count, size) // len(values)
        self.expected = torch.cat([torch.full((share,), v, dtype=dtype, device=device) for v in values])
        if corrupt:
            self.input[0] += 1
        self.bytes = op.recorded_bytes(self.count, size, case.dtype)

    def check(self, output: torch.Tensor, case: Case, rank: int) -> None:
        """Raise WrongResult naming the first wrong element."""
        if output.shape != self.expected.shape or not torch.equal(output.to(self.expected.device), self.expected):
            flat_out, flat_exp = output.flatten().float().cpu(), self.expected.flatten().float().cpu()
            where = int((flat_out[: len(flat_exp)] != flat_exp[: len(flat_out)]).nonzero()[0]) \
                if output.shape == self.expected.shape else 0
            raise WrongResult(f"{case.op} via {case.backend}, {case.dtype}, {case.nbytes} B: wrong result on rank "
                              f"{rank} at element {where} (expected {flat_exp[where].item():g}, "
                              f"got {flat_out[where].item():g})" if len(flat_out) > where else "got nothing)")


def horovod_op(hvd: Any, op: str) -> Callable[[torch.Tensor], torch.Tensor]:
    """One Horovod collective on a tensor, returning its result (the descriptor's call)."""
    call = OPS[op].horovod
    return lambda t: call(hvd, t)


def mpi_op(comm: Any, op: str, size: int, cuda_aware: bool) -> Callable[[torch.Tensor], torch.Tensor]:
    """One mpi4py collective (the descriptor's call) on the tensor's buffer: host memory unless MPI is
    CUDA-aware; typed where MPI reduces, else bytes. Output buffers are allocated once per shape, outside the
    timed calls, as nccl-tests does."""
    from mpi4py import MPI

    descriptor = OPS[op]
    outputs: dict[tuple[Any, ...], torch.Tensor] = {}

    def output(src: torch.Tensor) -> torch.Tensor:
        key = (src.numel(), src.dtype, src.device)
        if key not in outputs:
            outputs.clear()
            outputs[key] = torch.empty(descriptor.output_count(src.numel(), size), dtype=src.dtype, device=src.device)
        return outputs[key]

    def buffer(t: torch.Tensor) -> Any:
        return _typed(t) if descriptor.reduces else [_raw(t), MPI.BYTE]

    def run(t: torch.Tensor) -> torch.Tensor:
        src = t if (cuda_aware or t.device.type == "cpu") else t.cpu()
        out = src if descriptor.in_place else output(src)
        descriptor.mpi(comm, MPI, buffer(src), None if descriptor.in_place else buffer(out))
        return out.to(t.device)

    return run


def mpi_call(comm: Any, op: str, size: int, cuda_aware: bool, tensor: torch.Tensor) -> Callable[[], torch.Tensor]:
    """One mpi4py collective on ``tensor``, prepared (its output and MPI's buffer specifications made once,
    outside the timing, as nccl-tests and IMB prepare theirs), so that a call is the loop's only work; a GPU
    tensor handed to an MPI that is not CUDA-aware is staged through host memory on every call."""
    from mpi4py import MPI

    descriptor = OPS[op]
    staged = not cuda_aware and tensor.device.type != "cpu"
    src = tensor.cpu() if staged else tensor
    out = src if descriptor.in_place else torch.empty(descriptor.output_count(src.numel(), size), dtype=src.dtype,
                                                      device=src.device)

    def spec(t: torch.Tensor) -> Any:
        return _typed(t) if descriptor.reduces else [_raw(t), MPI.BYTE]

    send, recv, mpi = spec(src), None if descriptor.in_place else spec(out), descriptor.mpi
    if not staged:
        def call() -> torch.Tensor:
            mpi(comm, MPI, send, recv)
            return out
        return call

    def staged_call() -> torch.Tensor:
        src.copy_(tensor)
        mpi(comm, MPI, send, recv)
        return out.to(tensor.device)
    return staged_call


def _typed(t: torch.Tensor) -> Any:
    """A buffer MPI reduces as its element type (fp32)."""
    return t if t.device.type == "cuda" else t.numpy()


def _raw(t: torch.Tensor) -> Any:
    """The tensor's bytes, for collectives that move data without reducing it (any dtype)."""
    return t.view(torch.uint8) if t.device.type == "cuda" else t.view(torch.uint8).numpy()


def measure_batches(call: Callable[[], torch.Tensor], buffers: Buffers, case: Case, *, rank: int, iters: int,
                    batches: int, warmup: int, barrier: Callable[[], None], sync: Callable[[], None]) -> list[float]:
    """Warm-up calls, then ``batches`` batches of ``iters`` calls each, as nccl-tests and IMB time: after a
    barrier and a device sync, the calls back to back, one sync, the batch's time / ``iters``; each batch's last
    result checked after its clock stops. Returns each batch's time per call on this rank."""
    out = None
    for _ in range(warmup):
        out = call()
    sync()
    if out is not None:
        buffers.check(out, case, rank)
    times: list[float] = []
    for _ in range(batches):
        barrier()
        sync()
        start = time.perf_counter()
        for _ in range(iters):
            out = call()
        sync()
        times.append((time.perf_counter() - start) / iters)
        buffers.check(out, case, rank)  # type: ignore[arg-type]
    return times


def path_cost(call: Callable[[], Any], *, calls: int, barrier: Callable[[], None], sync: Callable[[], None]) -> float:
    """Seconds one call of a path costs when it moves (almost) nothing: ``calls`` calls back to back after a
    barrier, divided; the floor every small message's time stands on."""
    for _ in range(max(1, calls // 10)):
        call()
    barrier()
    sync()
    start = time.perf_counter()
    for _ in range(calls):
        call()
    sync()
    return (time.perf_counter() - start) / calls


def measure(run: Callable[[torch.Tensor], torch.Tensor], buffers: Buffers, case: Case, *, rank: int, iters: int,
            warmup: int, barrier: Callable[[], None], sync: Callable[[], None]) -> list[float]:
    """Warm-up, then timed iterations each bounded by a barrier and a device sync; every result checked."""
    times: list[float] = []
    for index in range(warmup + iters):
        barrier()
        sync()
        start = time.perf_counter()
        out = run(buffers.input)
        sync()
        elapsed = time.perf_counter() - start
        buffers.check(out, case, rank)
        if index >= warmup:
            times.append(elapsed)
    return times



class PatternBuffers:
    """One training-pattern case: a tensor per gradient (``counts`` elements each, in backward order), each
    rank's filled with the allreduce descriptor's value; after a step each must hold the expected sum."""

    def __init__(self, counts: list[int], dtype: str, rank: int, size: int, device: torch.device,
                 corrupt: bool) -> None:
        op = OPS["allreduce"]
        self.fill, self.expected = op.fill(rank, size), op.expected(rank, size)[0]
        self.tensors = [torch.full((n,), self.fill, dtype=DTYPES[dtype], device=device) for n in counts]
        self.corrupt = corrupt
        self.count = sum(counts)
        self.bytes = self.count * self.tensors[0].element_size()

    def refill(self) -> None:
        """Every tensor back to this rank's input (outside the timed window)."""
        for t in self.tensors:
            t.fill_(self.fill)
        if self.corrupt:
            self.tensors[-1][0] += 1

    def check(self, case: Case, rank: int) -> None:
        """Raise WrongResult naming the first tensor that does not hold the expected sum."""
        for index, t in enumerate(self.tensors):
            if not bool((t == self.expected).all()):
                got = t.flatten().float().cpu()
                where = int((got != self.expected).nonzero()[0])
                raise WrongResult(f"training-pattern allreduce, {case.dtype}, {case.nbytes} B: wrong result on rank "
                                  f"{rank} in gradient {index} at element {where} (expected {self.expected:g}, got "
                                  f"{got[where].item():g})")


def measure_pattern(hvd: Any, buffers: PatternBuffers, case: Case, *, rank: int, iters: int, warmup: int,
                    barrier: Callable[[], None], sync: Callable[[], None]) -> list[float]:
    """Steps of a training run's exchange in a row: one barrier before them, then per step every gradient
    enqueued to Horovod in backward order (in place, summed: Horovod fuses what each cycle finds), all waited
    for, a device sync; each step's time on this rank. Results are checked and inputs refilled after each
    step's clock stops (training spends that time computing)."""
    times: list[float] = []
    buffers.refill()
    barrier()
    sync()
    for index in range(warmup + iters):
        start = time.perf_counter()
        handles = [hvd.allreduce_async_(t, name=f"hvdbench.pattern.{i}", op=hvd.Sum)
                   for i, t in enumerate(buffers.tensors)]
        for handle in handles:
            hvd.synchronize(handle)
        sync()
        elapsed = time.perf_counter() - start
        buffers.check(case, rank)
        buffers.refill()
        sync()
        if index >= warmup:
            times.append(elapsed)
    return times
