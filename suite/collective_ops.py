"""The collective operations the bandwidth benchmark measures, each with its descriptor and bus factor
(as nccl-tests defines them), and the summary of per-rank iteration times. Framework-free: the report
computes busbw with the same code the benchmark prints with, without importing torch."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable, Sequence

import numpy as np


@dataclass(frozen=True)
class CollectiveOp:
    """One operation: its name, what its byte count means, and busbw / algbw at n ranks."""

    name: str
    bytes_are: str
    bus_factor: Callable[[int], float]


OPS: dict[str, CollectiveOp] = {op.name: op for op in (
    CollectiveOp("allreduce", "one rank's buffer", lambda n: 2.0 * (n - 1) / n),
    CollectiveOp("allgather", "the gathered output", lambda n: (n - 1) / n),
    CollectiveOp("broadcast", "the root's buffer", lambda n: 1.0),
    CollectiveOp("alltoall", "one rank's buffer", lambda n: (n - 1) / n),
)}


def bus_factor(op: str, size: int) -> float:
    """busbw / algbw as nccl-tests defines it: allreduce 2(n-1)/n, allgather and alltoall (n-1)/n, broadcast 1."""
    return OPS[op].bus_factor(size)


def sizes(min_bytes: int, max_bytes: int, factor: int) -> list[int]:
    """Message sizes from min to max bytes, multiplying by factor."""
    out, value = [], min_bytes
    while value <= max_bytes:
        out.append(value)
        value *= factor
    return out


def summarize(op: str, nbytes: int, size: int, per_rank_times: Sequence[Sequence[float]]) -> dict[str, float]:
    """Per iteration the slowest rank's time; mean and min over iterations; algbw and busbw (GB/s)."""
    slowest = np.max(np.asarray(per_rank_times, dtype=float), axis=0)
    mean, best = float(slowest.mean()), float(slowest.min())
    algbw = nbytes / mean / 1e9
    factor = bus_factor(op, size)
    return {"time_mean_s": mean, "time_min_s": best, "algbw_gbs": algbw, "busbw_gbs": algbw * factor,
            "algbw_peak_gbs": nbytes / best / 1e9, "busbw_peak_gbs": nbytes / best / 1e9 * factor}
