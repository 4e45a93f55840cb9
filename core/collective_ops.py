"""The collective operations the bandwidth benchmark measures, one descriptor each, as nccl-tests keeps all of
an op in one place: what its byte count means and its bus factor, the values every rank puts in and the
result every rank must get back, its Horovod call and its MPI call. A new collective is one descriptor here
and one row in tests/test_collectives_bandwidth.py.

Framework-free: the calls are handed the Horovod module, mpi4py's MPI and the buffers, so the report computes
busbw with the descriptor the benchmark ran with, without importing torch. Also the benchmark's flags (its
parser is checked before any rank starts) and the per-rank summary of iteration times.
"""

from __future__ import annotations

import argparse
from dataclasses import dataclass
from typing import Any, Callable, ClassVar, Sequence

import numpy as np

from .errors import UsageError
from .flags import Parser, byte_size, non_negative_int, positive_int
from .train_flags import declared_parser, flag
from .training_pattern import PATTERNS, check_pattern_flags

ITEM_BYTES = {"fp32": 4, "fp16": 2, "bf16": 2}  # the element types measured
BACKENDS = ("horovod", "mpi")
# How a case is timed: batch, nccl-tests' and IMB's way (after a barrier and a device sync, --iters calls back to
# back, one sync, time / --iters; --batches batches, their median the figure, the batches its interval), or each
# (every call bounded by a barrier and a device sync, the slowest rank per call, their mean: a call's own time).
TIMINGS = ("batch", "each")
DEFAULT_BATCHES = 5


@dataclass(frozen=True)
class CollectiveOp:
    """One operation. ``per_rank(nbytes, n)``: the bytes of one rank's input for a case of nccl-tests' size
    ``nbytes``; ``chunks``: the input is split into one chunk per rank; ``gathers``: the output holds every
    rank's input. ``fill(rank, n)`` is the value of every element a rank puts in; ``expected(rank, n)`` the
    values of the output, each filling an equal share of it, in order (small integers: exact in every dtype).
    ``horovod(hvd, tensor)`` returns the result; ``mpi(comm, MPI, send, recv)`` fills ``recv`` (in place:
    ``send`` is the result); ``reduces``: MPI needs typed buffers, not bytes."""

    name: str
    bytes_are: str
    bus_factor: Callable[[int], float]
    per_rank: Callable[[int, int], int]
    fill: Callable[[int, int], float]
    expected: Callable[[int, int], list[float]]
    horovod: Callable[[Any, Any], Any]
    mpi: Callable[[Any, Any, Any, Any], None]
    chunks: bool = False
    gathers: bool = False
    in_place: bool = False
    reduces: bool = False

    def count(self, nbytes: int, size: int, dtype: str) -> int:
        """Elements of one rank's input for a case of ``nbytes`` at ``size`` ranks (at least one per chunk)."""
        count = max(size if self.chunks else 1, self.per_rank(nbytes, size) // ITEM_BYTES[dtype])
        return count - count % size if self.chunks else count

    def output_count(self, count: int, size: int) -> int:
        """Elements of the result of an input of ``count`` elements."""
        return count * size if self.gathers else count

    def recorded_bytes(self, count: int, size: int, dtype: str) -> int:
        """The case's bytes as nccl-tests counts them (what ``bytes_are`` says)."""
        return self.output_count(count, size) * ITEM_BYTES[dtype] if self.gathers else count * ITEM_BYTES[dtype]


def _first(value: Any) -> Any:
    return value[0] if isinstance(value, (tuple, list)) else value


def _sender(rank: int, size: int) -> float:
    return float(rank % 200 + 1)


OPS: dict[str, CollectiveOp] = {op.name: op for op in (
    CollectiveOp("allreduce", "one rank's buffer", lambda n: 2.0 * (n - 1) / n, per_rank=lambda b, n: b,
                 fill=lambda r, n: float(r % 4 + 1), expected=lambda r, n: [float(sum(k % 4 + 1 for k in range(n)))],
                 horovod=lambda hvd, t: hvd.allreduce(t, op=hvd.Sum),
                 mpi=lambda comm, MPI, send, recv: comm.Allreduce(send, recv, op=MPI.SUM), reduces=True),
    CollectiveOp("allgather", "the gathered output", lambda n: (n - 1) / n, per_rank=lambda b, n: b // n,
                 fill=_sender, expected=lambda r, n: [_sender(k, n) for k in range(n)],
                 horovod=lambda hvd, t: hvd.allgather(t), mpi=lambda comm, MPI, send, recv: comm.Allgather(send, recv),
                 gathers=True),
    CollectiveOp("broadcast", "the root's buffer", lambda n: 1.0, per_rank=lambda b, n: b,
                 fill=lambda r, n: 7.0 if r == 0 else 0.0, expected=lambda r, n: [7.0],
                 horovod=lambda hvd, t: hvd.broadcast(t, root_rank=0),
                 mpi=lambda comm, MPI, send, recv: comm.Bcast(send, root=0), in_place=True),
    CollectiveOp("alltoall", "one rank's buffer", lambda n: (n - 1) / n, per_rank=lambda b, n: b,
                 fill=_sender, expected=lambda r, n: [_sender(k, n) for k in range(n)],  # each chunk names its sender
                 horovod=lambda hvd, t: _first(hvd.alltoall(t)),
                 mpi=lambda comm, MPI, send, recv: comm.Alltoall(send, recv), chunks=True),
)}


def bus_factor(op: str, size: int) -> float:
    """busbw / algbw as nccl-tests defines it: allreduce 2(n-1)/n, allgather and alltoall (n-1)/n, broadcast 1."""
    return OPS[op].bus_factor(size)


def skip_reason(op: str, backend: str, dtype: str) -> str | None:
    """Why a case cannot run whatever the launch (the same answer on every rank): MPI reduces no 16-bit float."""
    if backend == "mpi" and OPS[op].reduces and dtype != "fp32":
        return "MPI has no standard 16-bit float type to reduce"
    return None


def _choices(what: str, valid: Sequence[str]) -> Callable[[str], list[str]]:
    def parse(text: str) -> list[str]:
        values = [v.strip() for v in text.split(",") if v.strip()]
        bad = [v for v in values if v not in valid]
        if bad or not values:
            raise argparse.ArgumentTypeError(f"unknown {what} {bad or text!r}; valid: {', '.join(valid)}")
        return values
    return parse


@dataclass(frozen=True)
class CommFlags:
    """The collective benchmark's flags (the harness's device and logging flags included), declared once."""

    PROG: ClassVar[str] = "comm"
    ABOUT: ClassVar[str] = "Collective bandwidth (algbw, busbw) through Horovod and MPI."

    ops: list[str] | None = flag(None, "--ops", f"of {', '.join(OPS)} (default: all)",
                                 parse=_choices("ops", tuple(OPS)))
    backends: list[str] | None = flag(None, "--backends", "horovod (hvd ops on torch tensors), mpi (mpi4py on "
                                      "buffers; needs mpirun); default both", parse=_choices("backends", BACKENDS))
    pattern: str = flag("isolated", "--pattern", "isolated: each call alone after a barrier (nccl-tests' way); "
                        "training: a training run's gradient tensors (--like) allreduced as its steps do, back to back "
                        "through Horovod's fusion and cycle, at each size", choices=PATTERNS)
    like: str | None = flag(None, "--like", "with --pattern training: the training run (its folder or a rank log) "
                            "whose gradient tensors to issue", metavar="RUN", path=True)
    dtypes: list[str] = flag(("fp32",), "--dtypes", None, parse=_choices("dtypes", tuple(ITEM_BYTES)),
                             default_of=lambda _: ["fp32"])
    min_bytes: int = flag(8, "--min-bytes", None, parse=byte_size)
    max_bytes: int = flag(2**30, "--max-bytes", None, parse=byte_size)
    factor: int = flag(2, "--factor", None, parse=positive_int)
    timing: str = flag("batch", "--timing", "batch (default, nccl-tests' way): --iters calls back to back after a "
                       "barrier and a device sync, one sync at the end, time / --iters, in --batches batches; each: "
                       "every call bounded by a barrier and a device sync (a call's own time, with the cost of getting "
                       "there)", choices=TIMINGS)
    iters: int = flag(20, "--iters", "timed calls per batch (--timing batch) or per size (--timing each)",
                      parse=positive_int)
    batches: int | None = flag(None, "--batches", f"with --timing batch: batches per size (default {DEFAULT_BATCHES}); "
                               "their median per-call time is the figure and they give its interval",
                               parse=positive_int)
    warmup_iters: int = flag(5, "--warmup-iters", None, parse=non_negative_int)
    device: str = flag("auto", "--device", None, choices=("auto", "cpu", "cuda"))
    cuda_aware_mpi: bool = flag(False, "--cuda-aware-mpi", "hand GPU buffers to MPI directly (else MPI gets host "
                                "buffers)", switch=True)
    corrupt_rank: int | None = flag(None, "--corrupt-rank", argparse.SUPPRESS, parse=int)  # self-test of the check
    log_dir: str | None = flag(None, "--log-dir", None)
    echo_records: bool = flag(False, "--echo-records", None, switch=True)


def comm_parser() -> Parser:
    """The collective benchmark's parser, from its declaration."""
    return declared_parser(CommFlags)


def check_comm_flags(flags: argparse.Namespace) -> None:
    """Cases that can run, and sizes that make sense together; fills in the default ops, backends and batches."""
    if flags.batches is not None and flags.timing != "batch":
        raise UsageError("--batches applies to --timing batch (--timing each times --iters calls one by one)")
    if flags.pattern == "training" and flags.timing == "each":
        raise UsageError("--timing each: the training pattern times whole steps back to back, as training runs them")
    flags.batches = flags.batches or DEFAULT_BATCHES
    check_pattern_flags(flags, list(OPS), list(BACKENDS))
    if "bf16" in flags.dtypes and "horovod" in flags.backends:
        unreduced = ", ".join(name for name, op in OPS.items() if not op.reduces)
        raise UsageError("--dtypes bf16: Horovod 0.28 has no bfloat16 collectives on any device; measure bf16 "
                         f"with --backends mpi ({unreduced}) or use fp16")
    if flags.min_bytes > flags.max_bytes:
        raise UsageError(f"--min-bytes {flags.min_bytes} is above --max-bytes {flags.max_bytes}")
    if flags.factor < 2:
        raise UsageError("--factor must be 2 or more")


def sizes(min_bytes: int, max_bytes: int, factor: int) -> list[int]:
    """Message sizes from min to max bytes, multiplying by factor."""
    out, value = [], min_bytes
    while value <= max_bytes:
        out.append(value)
        value *= factor
    return out


def slowest_per_iteration(per_rank_times: Sequence[Sequence[float]] | np.ndarray) -> np.ndarray:
    """Per iteration, the slowest rank's time (ranks x iterations in): a collective ends when its last rank does."""
    return np.max(np.asarray(per_rank_times, dtype=float), axis=0)


def figure(slowest: np.ndarray, timing: str = "each") -> float:
    """A case's time per call from its slowest-rank times: the median of its batches' per-call times (batch:
    a stray slow call moves one batch, not the figure), or the mean of its calls' own times (each)."""
    return float(np.median(slowest) if timing == "batch" else slowest.mean())


def summarize(op: str, nbytes: int, size: int, per_rank_times: Sequence[Sequence[float]] | np.ndarray,
              timing: str = "each") -> dict[str, float]:
    """Per iteration (or batch) the slowest rank's time; the figure (``figure``), mean and min over them; algbw
    and busbw (GB/s) from the figure."""
    slowest = slowest_per_iteration(per_rank_times)
    time_s, mean, best = figure(slowest, timing), float(slowest.mean()), float(slowest.min())
    algbw = nbytes / time_s / 1e9
    factor = bus_factor(op, size)
    return {"time_s": time_s, "time_mean_s": mean, "time_min_s": best, "algbw_gbs": algbw, "busbw_gbs": algbw * factor,
            "algbw_peak_gbs": nbytes / best / 1e9, "busbw_peak_gbs": nbytes / best / 1e9 * factor}
