"""Statistics of one run: throughput from every rank's own step times, with a bootstrap interval."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pandas as pd

CONFIDENCE = 0.95
BOOTSTRAP_SAMPLES = 2000


@dataclass(frozen=True)
class RunStats:
    """Throughput of one run over its timed (non-warm-up) steps."""

    throughput: float          # sum over ranks of that rank's median per-step rate (samples / duration)
    ci_low: float              # 95% percentile-bootstrap interval of throughput (steps resampled)
    ci_high: float
    mean_throughput: float     # sum over ranks of samples / that rank's summed step time
    median_step_s: float       # the slowest rank's median step time
    cv: float                  # mean over ranks of step-time standard deviation / mean
    steps: int                 # timed steps used (common to every rank)


def step_matrix(steps: pd.DataFrame) -> tuple[np.ndarray, np.ndarray]:
    """Timed step durations and samples as (steps x ranks) matrices aligned by step index.

    Steps that some rank lacks are dropped, so every row is one synchronous step of all ranks.
    """
    timed = steps[~steps["warmup"]]
    wide = timed.pivot_table(index="step", columns="rank", values=["duration", "samples"], aggfunc="first").dropna()
    return wide["duration"].to_numpy(dtype=float), wide["samples"].to_numpy(dtype=float)


def median_throughput(durations: np.ndarray, samples: np.ndarray) -> np.ndarray:
    """Sum over ranks of the median per-step rate (samples / duration); leading batch axes allowed."""
    return np.median(samples / durations, axis=-2).sum(axis=-1)


def bootstrap_interval(durations: np.ndarray, samples: np.ndarray, *, n: int = BOOTSTRAP_SAMPLES,
                       confidence: float = CONFIDENCE, seed: int = 0) -> tuple[float, float]:
    """Percentile bootstrap of median throughput, resampling whole steps (all ranks together)."""
    rng = np.random.default_rng(seed)
    rows = durations.shape[0]
    samples = np.broadcast_to(samples, durations.shape)
    idx = rng.integers(0, rows, size=(n, rows))
    values = median_throughput(durations[idx], samples[idx])
    tail = (1.0 - confidence) / 2.0
    low, high = np.quantile(values, [tail, 1.0 - tail])
    return float(low), float(high)


def run_stats(steps: pd.DataFrame) -> RunStats | None:
    """Statistics of one run's step records, or None when it has no complete timed step."""
    durations, samples = step_matrix(steps)
    if durations.size == 0:
        return None
    low, high = bootstrap_interval(durations, samples)
    means = durations.mean(axis=0)
    return RunStats(
        throughput=float(median_throughput(durations, samples)),
        ci_low=low,
        ci_high=high,
        mean_throughput=float((samples.sum(axis=0) / durations.sum(axis=0)).sum()),
        median_step_s=float(np.median(durations, axis=0).max()),
        cv=float((durations.std(axis=0, ddof=1) / means).mean()) if durations.shape[0] > 1 else 0.0,
        steps=int(durations.shape[0]),
    )


def median_interval(values: np.ndarray, *, n: int = BOOTSTRAP_SAMPLES, confidence: float = CONFIDENCE,
                    seed: int = 0) -> tuple[float, float]:
    """Percentile bootstrap interval of the median of independent values (repeats of one configuration)."""
    rng = np.random.default_rng(seed)
    draws = np.median(values[rng.integers(0, len(values), size=(n, len(values)))], axis=1)
    tail = (1.0 - confidence) / 2.0
    low, high = np.quantile(draws, [tail, 1.0 - tail])
    return float(low), float(high)
