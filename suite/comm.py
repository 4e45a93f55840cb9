"""Collective bandwidth in the field's terms (nccl-tests' algbw and busbw), through Horovod and raw MPI.

For each operation, backend, dtype and message size: warm-up iterations, then timed iterations, each
bounded by a barrier and a device sync; every rank records its own per-iteration times, and the
result of every iteration is checked against values known in advance.
"""

from __future__ import annotations

import argparse
import time
from dataclasses import dataclass
from typing import Any, Callable, Sequence

import torch

from .collective_ops import OPS as COLLECTIVE_OPS
from .errors import HvdbenchError
from .flags import Parser, byte_size, non_negative_int, positive_int

OPS = tuple(COLLECTIVE_OPS)
BACKENDS = ("horovod", "mpi")
DTYPES = {"fp32": torch.float32, "fp16": torch.float16, "bf16": torch.bfloat16}


class WrongResult(HvdbenchError):
    """A collective returned values other than the ones known in advance."""


def comm_parser() -> Parser:
    """The collective benchmark's flags (the harness's device and logging flags included)."""
    parser = Parser(prog="comm", description="Collective bandwidth (algbw, busbw) through Horovod and MPI.")
    parser.add_argument("--ops", type=_choices("ops", OPS), default=list(OPS), help=f"of {', '.join(OPS)}")
    parser.add_argument("--backends", type=_choices("backends", BACKENDS), default=list(BACKENDS),
                        help="horovod (hvd ops on torch tensors), mpi (mpi4py on buffers; needs mpirun)")
    parser.add_argument("--dtypes", type=_choices("dtypes", tuple(DTYPES)), default=["fp32"])
    parser.add_argument("--min-bytes", type=byte_size, default=8)
    parser.add_argument("--max-bytes", type=byte_size, default=2**30)
    parser.add_argument("--factor", type=positive_int, default=2)
    parser.add_argument("--iters", type=positive_int, default=20, help="timed iterations per size")
    parser.add_argument("--warmup-iters", type=non_negative_int, default=5)
    parser.add_argument("--device", choices=["auto", "cpu", "cuda"], default="auto")
    parser.add_argument("--cuda-aware-mpi", action="store_true",
                        help="hand GPU buffers to MPI directly (else MPI gets host buffers)")
    parser.add_argument("--corrupt-rank", type=int, default=None, help=argparse.SUPPRESS)  # self-test of the check
    parser.add_argument("--log-dir", default=None)
    parser.add_argument("--echo-records", action="store_true")
    return parser


def check_comm_flags(flags: argparse.Namespace) -> None:
    """Sizes that make sense together."""
    from .errors import UsageError

    if "bf16" in flags.dtypes and "horovod" in flags.backends:
        raise UsageError("--dtypes bf16: Horovod 0.28 has no bfloat16 collectives on any device; measure bf16 "
                         "with --backends mpi (allgather, broadcast, alltoall) or use fp16")
    if flags.min_bytes > flags.max_bytes:
        raise UsageError(f"--min-bytes {flags.min_bytes} is above --max-bytes {flags.max_bytes}")
    if flags.factor < 2:
        raise UsageError("--factor must be 2 or more")


def _choices(what: str, valid: Sequence[str]) -> Callable[[str], list[str]]:
    def parse(text: str) -> list[str]:
        values = [v.strip() for v in text.split(",") if v.strip()]
        bad = [v for v in values if v not in valid]
        if bad or not values:
            raise argparse.ArgumentTypeError(f"unknown {what} {bad or text!r}; valid: {', '.join(valid)}")
        return values
    return parse


@dataclass
class Case:
    """One measurement: an operation of one backend on one dtype at one size."""

    op: str
    backend: str
    dtype: str
    nbytes: int


class Buffers:
    """Inputs filled with values known in advance, and the expected results, for one case."""

    def __init__(self, case: Case, rank: int, size: int, device: torch.device, corrupt: bool) -> None:
        dtype = DTYPES[case.dtype]
        item = torch.tensor([], dtype=dtype).element_size()
        # nccl-tests' sizes: allgather counts the gathered output, the others one rank's buffer.
        per_rank = case.nbytes // size if case.op == "allgather" else case.nbytes
        self.count = max(size if case.op == "alltoall" else 1, per_rank // item)
        if case.op == "alltoall":
            self.count -= self.count % size
        chunk = self.count // size if case.op == "alltoall" else self.count
        # Small integers are exact in every dtype measured (bf16: up to 256).
        if case.op == "allreduce":
            self.input = torch.full((self.count,), float(rank % 4 + 1), dtype=dtype, device=device)
            self.expected: torch.Tensor = torch.full_like(self.input, float(sum(r % 4 + 1 for r in range(size))))
        elif case.op == "broadcast":
            self.input = torch.full((self.count,), 7.0 if rank == 0 else 0.0, dtype=dtype, device=device)
            self.expected = torch.full_like(self.input, 7.0)
        elif case.op == "allgather":
            self.input = torch.full((self.count,), float(rank % 200 + 1), dtype=dtype, device=device)
            self.expected = torch.cat([torch.full_like(self.input, float(r % 200 + 1)) for r in range(size)])
        else:  # alltoall: rank r sends (r + 1) to every peer; each chunk received says who sent it
            self.input = torch.full((self.count,), float(rank % 200 + 1), dtype=dtype, device=device)
            self.expected = torch.cat([torch.full((chunk,), float(r % 200 + 1), dtype=dtype, device=device)
                                       for r in range(size)])
        if corrupt:
            self.input[0] += 1
        self.bytes = self.count * item * (size if case.op == "allgather" else 1)

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
    """One Horovod collective on a tensor, returning its result."""
    if op == "allreduce":
        return lambda t: hvd.allreduce(t, op=hvd.Sum)
    if op == "allgather":
        return hvd.allgather
    if op == "broadcast":
        return lambda t: hvd.broadcast(t, root_rank=0)
    return lambda t: _first(hvd.alltoall(t))


def _first(value: Any) -> torch.Tensor:
    return value[0] if isinstance(value, (tuple, list)) else value


def mpi_op(comm: Any, op: str, size: int, cuda_aware: bool) -> Callable[[torch.Tensor], torch.Tensor]:
    """One mpi4py collective on the tensor's buffer (host memory unless MPI is CUDA-aware). Output
    buffers are allocated once per shape, outside the timed calls, as nccl-tests does."""
    from mpi4py import MPI

    outputs: dict[tuple[Any, ...], torch.Tensor] = {}

    def output(src: torch.Tensor, count: int) -> torch.Tensor:
        key = (count, src.dtype, src.device)
        if key not in outputs:
            outputs.clear()
            outputs[key] = torch.empty(count, dtype=src.dtype, device=src.device)
        return outputs[key]

    def run(t: torch.Tensor) -> torch.Tensor:
        src = t if (cuda_aware or t.device.type == "cpu") else t.cpu()
        if op == "broadcast":  # in place: the root's values land in every rank's buffer
            comm.Bcast([_raw(src), MPI.BYTE], root=0)
            return src.to(t.device)
        out = output(src, src.numel() * (size if op == "allgather" else 1))
        if op == "allreduce":
            comm.Allreduce(_typed(src), _typed(out), op=MPI.SUM)
        elif op == "allgather":
            comm.Allgather([_raw(src), MPI.BYTE], [_raw(out), MPI.BYTE])
        else:
            comm.Alltoall([_raw(src), MPI.BYTE], [_raw(out), MPI.BYTE])
        return out.to(t.device)

    return run


def _typed(t: torch.Tensor) -> Any:
    """A buffer MPI reduces as its element type (fp32)."""
    return t if t.device.type == "cuda" else t.numpy()


def _raw(t: torch.Tensor) -> Any:
    """The tensor's bytes, for collectives that move data without reducing it (any dtype)."""
    return t.view(torch.uint8) if t.device.type == "cuda" else t.view(torch.uint8).numpy()


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

