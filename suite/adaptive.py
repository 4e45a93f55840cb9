"""Adaptive run length: timed steps run in chunks until the 95% interval of the run's throughput is within
plus or minus ``target`` percent of it (or ``max_steps`` is reached). Rank 0 decides from every rank's own
step times and tells the others (``timing.Adaptive``), so every rank stops after the same step. The interval
is the report's (``metrics.throughput_resamples``: a percentile bootstrap over blocks of whole steps as long as
the steps' autocorrelation asks, every rank's own rate summed), on fewer resamples; the report judges warm-up again,
so its interval can differ a little."""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from hvdbench.core.metrics import (block_length, percentile_interval, rank_throughput, throughput_resamples,
                                   total_throughput)

RESAMPLES = 500


def relative_half_width(durations: np.ndarray, samples: np.ndarray, *, n: int = RESAMPLES, seed: int = 0) -> float:
    """Half the width of the 95% bootstrap interval of total throughput, as a fraction of the throughput,
    for (steps x ranks) matrices of step durations and samples; infinite below two steps."""
    if durations.shape[0] < 2:
        return float("inf")
    block = block_length(durations.mean(axis=1))
    low, high = percentile_interval(throughput_resamples(durations, samples, n, seed, block))
    value = total_throughput(rank_throughput(samples.sum(axis=0), durations.sum(axis=0)))
    return float((high - low) / 2.0 / value)


@dataclass
class Stopper:
    """Rank 0's view of the timed steps so far (every rank's), and the decision to stop."""

    target: float      # percent
    max_steps: int
    durations: list[list[float]] = field(default_factory=list)  # one row per step, one value per rank
    samples: list[list[float]] = field(default_factory=list)
    width: float = float("inf")

    def add(self, per_rank: list[tuple[list[float], list[float]]]) -> None:
        """The steps since the last judgement: each rank's (durations, samples) of the same steps."""
        for step in range(len(per_rank[0][0])):
            self.durations.append([rank[0][step] for rank in per_rank])
            self.samples.append([rank[1][step] for rank in per_rank])
        self.width = relative_half_width(np.asarray(self.durations), np.asarray(self.samples))

    def reason(self) -> str:
        """Why to stop ("target": the interval is narrow enough; "max_steps": the budget is spent), or ""."""
        if self.width * 100.0 <= self.target:
            return "target"
        return "max_steps" if len(self.durations) >= self.max_steps else ""
