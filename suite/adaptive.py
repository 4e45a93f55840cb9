"""Adaptive run length: timed steps run in chunks until the 95% interval of the run's throughput is within
plus or minus ``target`` percent of it (or ``max_steps`` is reached). Rank 0 decides from every rank's own
step times and tells the others, so every rank stops after the same step. The interval is the report's
(a percentile bootstrap over whole steps, every rank's own rate summed), on fewer resamples."""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

RESAMPLES = 500


def relative_half_width(durations: np.ndarray, samples: np.ndarray, *, n: int = RESAMPLES, seed: int = 0) -> float:
    """Half the width of the 95% bootstrap interval of total throughput, as a fraction of the throughput,
    for (steps x ranks) matrices of step durations and samples; infinite below two steps."""
    steps = durations.shape[0]
    if steps < 2:
        return float("inf")
    rng = np.random.default_rng(seed)
    idx = rng.integers(0, steps, size=(n, steps)) + (np.arange(n) * steps)[:, None]
    counts = np.bincount(idx.ravel(), minlength=n * steps).reshape(n, steps).astype(float)
    draws = ((counts @ samples) / (counts @ durations)).sum(axis=1)
    low, high = np.quantile(draws, [0.025, 0.975])
    value = float((samples.sum(axis=0) / durations.sum(axis=0)).sum())
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
        """One chunk: each rank's (durations, samples) of the same steps."""
        for step in range(len(per_rank[0][0])):
            self.durations.append([rank[0][step] for rank in per_rank])
            self.samples.append([rank[1][step] for rank in per_rank])
        self.width = relative_half_width(np.asarray(self.durations), np.asarray(self.samples))

    def done(self) -> bool:
        """Whether the interval is narrow enough, or the step budget spent."""
        return self.width * 100.0 <= self.target or len(self.durations) >= self.max_steps
