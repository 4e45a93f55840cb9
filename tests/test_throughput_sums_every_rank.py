"""Throughput comes from every rank's own timings, never rank 0 x N; intervals are real bootstraps."""

from __future__ import annotations

import numpy as np
import pandas as pd

from hvdbench.analysis.stats import bootstrap_interval, median_interval, run_stats


def _steps(durations: dict[int, list[float]], samples: int = 32, warmup: int = 2) -> pd.DataFrame:
    rows = []
    for rank, values in durations.items():
        rows += [{"rank": rank, "step": i, "warmup": True, "duration": 9.0, "samples": samples}
                 for i in range(warmup)]
        rows += [{"rank": rank, "step": i + warmup, "warmup": False, "duration": d, "samples": samples}
                 for i, d in enumerate(values)]
    return pd.DataFrame(rows)


def test_total_is_the_sum_of_each_ranks_rate_not_rank0_times_n() -> None:
    # rank 0 steps take 0.1 s (320 img/s), rank 1 takes 0.2 s (160 img/s): total 480, not 2 x 320.
    stats = run_stats(_steps({0: [0.1] * 10, 1: [0.2] * 10}))
    assert stats is not None
    assert np.isclose(stats.throughput, 480.0)
    assert np.isclose(stats.mean_throughput, 480.0)
    assert np.isclose(stats.median_step_s, 0.2)  # the slowest rank's
    assert stats.steps == 10


def test_warmup_steps_are_excluded() -> None:
    stats = run_stats(_steps({0: [0.5] * 8}, warmup=5))
    assert stats is not None and np.isclose(stats.throughput, 64.0) and stats.steps == 8


def test_median_resists_an_outlier_step_but_the_mean_rate_does_not() -> None:
    stats = run_stats(_steps({0: [0.1] * 9 + [1.0]}))
    assert stats is not None
    assert np.isclose(stats.throughput, 320.0)
    assert np.isclose(stats.mean_throughput, 32 * 10 / 1.9)


def test_interval_brackets_the_estimate_and_is_a_point_for_constant_steps() -> None:
    rng = np.random.default_rng(1)
    durations = rng.normal(0.1, 0.01, size=(200, 2)).clip(0.05)
    samples = np.array([32.0, 32.0])
    low, high = bootstrap_interval(durations, samples)
    point = (samples / np.median(durations, axis=0)).sum()
    assert low < point < high
    assert (high - low) / point < 0.1
    const = np.full((20, 2), 0.25)
    assert bootstrap_interval(const, samples) == (256.0, 256.0)


def test_interval_narrows_with_more_steps() -> None:
    rng = np.random.default_rng(2)
    samples = np.array([32.0])
    short = bootstrap_interval(rng.normal(0.1, 0.02, size=(20, 1)).clip(0.01), samples)
    long = bootstrap_interval(rng.normal(0.1, 0.02, size=(2000, 1)).clip(0.01), samples)
    assert (long[1] - long[0]) < (short[1] - short[0])


def test_steps_missing_on_one_rank_are_dropped_for_all() -> None:
    frame = _steps({0: [0.1] * 10, 1: [0.1] * 10})
    frame = frame[~((frame["rank"] == 1) & (frame["step"] == 11))]
    stats = run_stats(frame)
    assert stats is not None and stats.steps == 9


def test_repeat_interval_is_of_the_median() -> None:
    low, high = median_interval(np.array([100.0, 101.0, 99.0, 100.5, 250.0]))
    assert 99.0 <= low <= 100.5 <= high <= 250.0
