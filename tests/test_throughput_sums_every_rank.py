"""Throughput comes from every rank's own timings, never rank 0 x N; warm-up is found in the step times;
intervals are real bootstraps that cover the truth at their stated rate; stragglers are named."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from hvdbench.analysis.stats import bootstrap_interval, detect_warmup, median_interval, run_stats, stragglers


def _steps(durations: dict[int, list[float]], samples: int = 32, warmup: int = 2,
           exchange: dict[int, list[float]] | None = None) -> pd.DataFrame:
    rows = []
    for rank, values in durations.items():
        rows += [{"rank": rank, "step": i, "warmup": True, "duration": 9.0, "samples": samples, "exchange": None}
                 for i in range(warmup)]
        rows += [{"rank": rank, "step": i + warmup, "warmup": False, "duration": d, "samples": samples,
                  "exchange": None if exchange is None else exchange[rank][i]} for i, d in enumerate(values)]
    return pd.DataFrame(rows)


def test_total_is_the_sum_of_each_ranks_rate_not_rank0_times_n() -> None:
    # rank 0 steps take 0.1 s (320 img/s), rank 1 takes 0.2 s (160 img/s): total 480, not 2 x 320.
    stats = run_stats(_steps({0: [0.1] * 10, 1: [0.2] * 10}))
    assert stats is not None
    assert np.isclose(stats.throughput, 480.0) and np.isclose(stats.median_rate, 480.0)
    assert np.isclose(stats.median_step_s, 0.2)  # the slowest rank's
    assert stats.steps == 10


def test_ranks_of_different_speeds_sum_their_own_rates() -> None:
    rng = np.random.default_rng(5)
    speeds = {0: 0.10, 1: 0.12, 2: 0.15, 3: 0.30}
    steps = _steps({r: list(rng.normal(d, d * 0.02, 40)) for r, d in speeds.items()}, samples=64)
    stats = run_stats(steps)
    truth = sum(64 / d for d in speeds.values())
    assert stats is not None and abs(stats.throughput / truth - 1) < 0.01
    assert stats.ci_low < stats.throughput < stats.ci_high


def test_warmup_steps_are_excluded_and_the_total_is_samples_over_time() -> None:
    stats = run_stats(_steps({0: [0.5] * 8}, warmup=5))
    assert stats is not None and np.isclose(stats.throughput, 64.0) and stats.steps == 8
    stats = run_stats(_steps({0: [0.1] * 9 + [1.0]}))  # one slow step weighs by its time, as in wall clock
    assert stats is not None and np.isclose(stats.throughput, 32 * 10 / 1.9) and np.isclose(stats.median_rate, 320.0)


@pytest.mark.parametrize("k", [0, 1, 3, 7, 12, 25, 40])
def test_planted_warmup_of_k_slow_steps_is_found_within_two(k: int) -> None:
    rng = np.random.default_rng(k)
    for draw in range(20):
        series = rng.lognormal(np.log(0.1), 0.08, 200)
        series[:k] = rng.uniform(0.2, 0.5, k)  # allocation and autotuning: 2-5x slower
        if draw % 2:
            series[130] = 0.6  # a lone pause in steady state is not warm-up
        assert abs(detect_warmup(series) - k) <= 2, (k, draw)
    assert detect_warmup(np.full(19, 0.1)) == -1  # too short to tell


@pytest.mark.parametrize("k", [0, 3, 12])
def test_a_steady_series_alternating_between_two_close_values_is_not_warm_up(k: int) -> None:
    rng = np.random.default_rng(100 + k)
    for draw in range(20):
        # two close step times (e.g. a buffer flipping every other step), more of one than the other: MAD is 0
        series = np.where(rng.random(200) < 0.6, 0.1000, 0.1012)
        assert detect_warmup(series) == 0, draw  # keeps every step of the other value
        series[:k] = rng.uniform(0.2, 0.5, k)
        assert abs(detect_warmup(series) - k) <= 2, (k, draw)


def test_detected_warmup_extends_the_asked_one_and_an_explicit_one_overrides() -> None:
    timed = [0.4] * 6 + [0.1] * 60  # the benchmark asked for 2 warm-up steps; 6 more were still slow
    stats = run_stats(_steps({0: timed, 1: timed}))
    assert stats is not None and stats.warmup_asked == 2 and stats.warmup_detected == 8 and stats.warmup_used == 8
    assert np.isclose(stats.throughput, 2 * 320.0)
    forced = run_stats(_steps({0: timed, 1: timed}), warmup=2)
    assert forced is not None and forced.warmup_used == 2 and forced.throughput < 2 * 320.0


def test_interval_covers_the_true_throughput_at_its_stated_rate() -> None:
    rng = np.random.default_rng(7)
    mean_step, samples, trials = 0.1, np.array([32.0, 32.0]), 400
    truth = 2 * 32 / mean_step  # lognormal steps with this mean on each rank
    sigma = 0.2
    mu = np.log(mean_step) - sigma ** 2 / 2
    covered = 0
    for trial in range(trials):
        durations = rng.lognormal(mu, sigma, size=(60, 2))
        low, high = bootstrap_interval(durations, samples, n=1000, seed=trial)
        covered += low <= truth <= high
    assert 0.91 <= covered / trials <= 0.98, covered / trials


def test_interval_is_a_point_for_constant_steps_and_narrows_with_more_steps() -> None:
    samples = np.array([32.0, 32.0])
    assert bootstrap_interval(np.full((20, 2), 0.25), samples) == pytest.approx((256.0, 256.0))
    rng = np.random.default_rng(2)
    short = bootstrap_interval(rng.normal(0.1, 0.02, size=(20, 1)).clip(0.01), np.array([32.0]))
    long = bootstrap_interval(rng.normal(0.1, 0.02, size=(2000, 1)).clip(0.01), np.array([32.0]))
    assert (long[1] - long[0]) < (short[1] - short[0])


def test_steps_missing_on_one_rank_are_dropped_for_all() -> None:
    frame = _steps({0: [0.1] * 10, 1: [0.1] * 10})
    frame = frame[~((frame["rank"] == 1) & (frame["step"] == 11))]
    stats = run_stats(frame)
    assert stats is not None and stats.steps == 9


def test_planted_straggler_is_named_by_its_own_work_not_the_shared_step() -> None:
    # A synchronous step lasts as long as the slowest rank on every rank; only the exchange wait differs.
    step = [0.2] * 30
    work = {0: 0.15, 1: 0.15, 2: 0.19, 3: 0.15}
    steps = _steps({r: step for r in work}, exchange={r: [0.2 - w] * 30 for r, w in work.items()})
    slow = stragglers(steps, warmup_used=2)
    assert list(slow["rank"]) == [2] and slow["excess"].iloc[0] == pytest.approx(0.19 / 0.15 - 1)
    independent = _steps({0: [0.1] * 30, 1: [0.1] * 30, 2: [0.104] * 30, 3: [0.2] * 30})
    assert list(stragglers(independent, 2)["rank"]) == [3]  # 4% is under the 5% threshold


def test_repeat_interval_is_of_the_median() -> None:
    low, high = median_interval(np.array([100.0, 101.0, 99.0, 100.5, 250.0]))
    assert 99.0 <= low <= 100.5 <= high <= 250.0
