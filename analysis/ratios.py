"""Intervals on ratios of throughputs (speedup, efficiency, communication cost, system against system):
each configuration's bootstrap resamples (its run's steps resampled; with repeats, the median of the
repeats resampled, each repeat contributing its own resample), divided resample by resample. Runs are
resampled independently (seeded by their ids), so the ratio's interval carries both runs' noise: a
1-GPU baseline measured noisily cannot make a speedup look superlinear without the interval saying so."""

from __future__ import annotations

from typing import Sequence

import numpy as np

from .stats import percentile_interval, run_seed


def config_draws(run_ids: Sequence[str], draws: dict[str, np.ndarray]) -> np.ndarray | None:
    """Resamples of a configuration's throughput from its runs' own (None where no run has any)."""
    arrays = [draws[r] for r in run_ids if r in draws]
    if not arrays:
        return None
    if len(arrays) == 1:
        return arrays[0]
    stack = np.stack(arrays)
    n = stack.shape[1]
    rng = np.random.default_rng(run_seed("+".join(sorted(run_ids))))
    pick = rng.integers(0, len(arrays), size=(len(arrays), n))
    return np.median(stack[pick, np.arange(n)], axis=0)


def ratio_interval(top: np.ndarray | None, bottom: np.ndarray | None) -> tuple[float, float]:
    """95% interval of top / bottom from their resamples; NaN where either has none."""
    if top is None or bottom is None:
        return float("nan"), float("nan")
    return percentile_interval(top / bottom)
