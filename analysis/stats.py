"""Statistics of one run: where steady state starts, throughput from every rank's own step times with a
block-bootstrap interval (blocks as long as the run's own autocorrelation asks), variation, and stragglers."""

from __future__ import annotations

import hashlib
from dataclasses import dataclass
from typing import Iterable, Mapping

import numpy as np
import pandas as pd

from hvdbench.core.metrics import (CONFIDENCE, block_length, percentile_interval, rank_throughput,
                                         throughput_resamples)
from hvdbench.core.metrics import total_throughput as total_throughput_of

MIN_INTERVAL_STEPS = 5  # steady steps a 95% interval needs; below it the report says "n/a (too few steps)"
BOOTSTRAP_SAMPLES = 2000
MIN_STEPS_TO_DETECT = 20
OUTLIER_SPREADS = 4.0
MAX_GAP = 3
STRAGGLER_THRESHOLD = 0.05


@dataclass(frozen=True)
class RunStats:
    """Throughput of one run over its steady-state steps."""

    throughput: float      # sum over ranks of that rank's samples / its own summed step time
    ci_low: float          # 95% percentile bootstrap of throughput, blocks of whole steps (all ranks) resampled
    ci_high: float
    median_rate: float     # sum over ranks of the median per-step rate (samples / duration)
    median_step_s: float   # the slowest rank's median step time
    cv: float              # mean over ranks of step-time standard deviation / mean
    steps: int             # steady-state steps used (every rank has each)
    warmup_asked: int      # steps the benchmark ran as warm-up
    warmup_used: int       # steps left out: max(asked, detected), or the explicit override
    warmup_detected: int   # end of the initial transient found in the step times (-1: too few steps)
    block_steps: int = 1   # consecutive steps per resampled block (metrics.block_length; 1: no autocorrelation)


def detect_warmup(series: np.ndarray) -> int:
    """Steps of initial transient in a step-time series; -1 when under 20 steps leave nothing to tell.

    Steady state is described by the second half: its median and robust spread (``robust_spread``). A step
    further than 4 spreads from that median is out of steady state; the warm-up is the run of such
    steps from the start, gaps of up to 3 steady-looking steps allowed, within the first half. A lone
    slow step later (a pause, a checkpoint) is not warm-up. MSER-5 was tried first and cut 30-40% of
    planted runs several steps too late, as it is known to on short noisy series."""
    n = len(series)
    if n < MIN_STEPS_TO_DETECT:
        return -1
    ref = series[n // 2:]
    center = float(np.median(ref))
    spread = robust_spread(ref, center)
    outliers = np.flatnonzero(np.abs(series[: n // 2] - center) > OUTLIER_SPREADS * spread)
    if not len(outliers) or outliers[0] > MAX_GAP:
        return 0
    end = int(outliers[0])
    for position in outliers[1:]:
        if position - end > MAX_GAP + 1:
            break
        end = int(position)
    return end + 1


def run_seed(run_id: str) -> int:
    """A stable seed of a run's own bootstrap resamples."""
    return int(hashlib.sha256(run_id.encode()).hexdigest()[:8], 16)


def robust_spread(values: np.ndarray, center: float) -> float:
    """A spread that outliers do not inflate: 1.4826 x MAD; where more than half the values equal the median
    (a steady series alternating between two close step times has MAD 0), 1.2533 x the mean absolute
    deviation (both estimate sigma for normal data); never below 1e-6 of the center."""
    deviation = np.abs(values - center)
    mad = 1.4826 * float(np.median(deviation))
    return max(mad if mad > 0 else 1.2533 * float(deviation.mean()), 1e-6 * abs(center), 1e-12)


@dataclass(frozen=True)
class StepMatrix:
    """One run's step records as (steps x ranks) matrices aligned by step index: only steps every rank has
    (a step some rank lacks is dropped for all), in step order, ranks in rank order."""

    durations: np.ndarray
    samples: np.ndarray
    exchange: np.ndarray   # --breakdown's gradient exchange (s), NaN where not recorded
    steps: np.ndarray      # step indices
    warm: np.ndarray       # whether any rank ran the step as warm-up
    ranks: np.ndarray      # rank of each column


def _column(steps: pd.DataFrame, name: str) -> np.ndarray:
    if name not in steps:
        return np.full(len(steps), np.nan)
    return steps[name].to_numpy(dtype=float, na_value=np.nan)


def step_matrix(steps: pd.DataFrame) -> StepMatrix:
    """The matrices of one run's step records (the first record of a (step, rank) pair where there are more).
    Rank logs as collected (each rank's steps in order, every rank the same steps) are reshaped in place;
    anything else goes through a NumPy pivot. No pandas reshaping: that is what costs at 10M records."""
    rank = steps["rank"].to_numpy(dtype=np.int64)
    step = steps["step"].to_numpy(dtype=np.int64)
    columns = {name: _column(steps, name) for name in ("duration", "samples", "exchange")}
    columns["warmup"] = steps["warmup"].to_numpy(dtype=float)
    laid_out = _rank_blocks(rank, step)
    if laid_out is not None:
        order, count = laid_out
        ranks = rank[::count][order]
        full = {name: values.reshape(-1, count)[order].T for name, values in columns.items()}  # a rank a column
        indices = step[:count]
    else:
        ranks, rank_code = np.unique(rank, return_inverse=True)
        indices, step_code = np.unique(step, return_inverse=True)
        cell = step_code * len(ranks) + rank_code
        order = np.argsort(cell, kind="stable")
        cells = cell[order]
        first = order[np.r_[True, cells[1:] != cells[:-1]]] if len(cells) else order
        full = {}
        for name, values in columns.items():
            flat = np.full(len(indices) * len(ranks), np.nan)
            flat[cell[first]] = values[first]
            full[name] = flat.reshape(len(indices), len(ranks))
    complete = ~(np.isnan(full["duration"]).any(axis=1) | np.isnan(full["samples"]).any(axis=1))
    if not complete.all():
        full = {name: values[complete] for name, values in full.items()}
        indices = indices[complete]
    return StepMatrix(full["duration"], full["samples"], full["exchange"], indices,
                      np.asarray((full["warmup"] > 0).any(axis=1)), ranks)


def _rank_blocks(rank: np.ndarray, step: np.ndarray) -> tuple[np.ndarray, int] | None:
    """Where the records are one block per rank (as read from one log per rank), each block the same
    increasing step indices: the order of the blocks by rank and the steps per block; else None."""
    if not len(rank):
        return None
    count = int(np.argmax(rank != rank[0])) or len(rank)
    if len(rank) % count:
        return None
    ranks, steps = rank.reshape(-1, count), step.reshape(-1, count)
    heads = ranks[:, 0]
    if not ((ranks == heads[:, None]).all() and (steps == steps[0]).all() and (np.diff(steps[0]) > 0).all()
            and len(np.unique(heads)) == len(heads)):
        return None
    return np.argsort(heads), count


def column_quantiles(matrix: np.ndarray, quantiles: Iterable[float]) -> np.ndarray:
    """np.quantile(matrix, quantiles, axis=0) (linear interpolation, NaN where a column holds one): each column sorted
    along its own memory, which NumPy's sort does several times faster than the selection np.quantile runs (a 10M-step
    run's matrices are thousands of ranks wide)."""
    qs = np.asarray(list(quantiles), dtype=float)
    rows = matrix.shape[0]
    if rows == 0:
        return np.full((len(qs), matrix.shape[1]), np.nan)
    ordered = np.sort(np.asfortranarray(matrix), axis=0)  # NaN sorts last: its column's quantiles are NaN below
    position = qs * (rows - 1)
    low, high = np.floor(position).astype(int), np.ceil(position).astype(int)
    out = ordered[low] + (ordered[high] - ordered[low]) * (position - low)[:, None]
    out[:, np.isnan(ordered[-1])] = np.nan
    return out


def column_medians(matrix: np.ndarray) -> np.ndarray:
    """np.median(matrix, axis=0), by column_quantiles."""
    return column_quantiles(matrix, (0.5,))[0]


def step_matrices(steps: pd.DataFrame, run_ids: Iterable[str],
                  rows: Mapping[str, np.ndarray] | None = None) -> dict[str, StepMatrix]:
    """The matrices of each of these runs (those with steps), from one grouping of the steps (``rows``: each
    run's positions in ``steps``, where the caller has them)."""
    wanted = set(run_ids)
    if rows is None:
        rows = steps.groupby("run_id", sort=False).indices if len(steps) else {}
    return {str(run_id): step_matrix(steps.iloc[index]) for run_id, index in rows.items() if run_id in wanted}


def total_throughput(durations: np.ndarray, samples: np.ndarray) -> float:
    """The run's throughput over these (steps x ranks) matrices, as ``metrics`` defines it."""
    return total_throughput_of(rank_throughput(samples.sum(axis=0), durations.sum(axis=0)))


def throughput_draws(durations: np.ndarray, samples: np.ndarray, *, n: int = BOOTSTRAP_SAMPLES,
                     seed: int = 0, block: int = 1) -> np.ndarray:
    """``n`` bootstrap resamples of total throughput, resampling whole steps (all ranks together) in circular
    blocks of ``block`` steps.

    A resample is a vector of step counts, so every resample's per-rank sums are one matrix product:
    cheap for 1,024 ranks x 1,000 steps."""
    samples = np.broadcast_to(samples, durations.shape)
    if durations.shape[0] < 2:
        return np.full(n, total_throughput(durations, samples))
    return throughput_resamples(durations, samples, n, seed, block)


def bootstrap_interval(durations: np.ndarray, samples: np.ndarray, *, n: int = BOOTSTRAP_SAMPLES,
                       confidence: float = CONFIDENCE, seed: int = 0, block: int | None = None) -> tuple[float, float]:
    """Percentile bootstrap of total throughput, resampling whole steps (all ranks together) in blocks of
    ``block`` steps (None: as long as the series' autocorrelation asks, ``block_length``)."""
    if durations.shape[0] < 2:
        value = total_throughput(durations, np.broadcast_to(samples, durations.shape))
        return value, value
    block = block_length(durations.mean(axis=1)) if block is None else block
    return percentile_interval(throughput_draws(durations, samples, n=n, seed=seed, block=block), confidence)


def run_stats(steps: pd.DataFrame | StepMatrix, warmup: int | None = None,
              draws: dict[str, np.ndarray] | None = None, run_id: str = "", salt: str = "") -> RunStats | None:
    """Statistics of one run's step records, or None when no steady-state step is left.

    ``warmup`` (the report's ``--warmup N``) overrides both the asked and the detected warm-up. Where
    ``draws`` is given, the run's bootstrap resamples of throughput are put there under ``run_id``, in an
    order seeded by ``salt`` and the run id, so two runs' resamples are independent: what intervals on their
    ratios need. Two result sets that hold the same run ids (last month's sweep and today's) are told apart
    by their ``salt``."""
    matrix = steps if isinstance(steps, StepMatrix) else step_matrix(steps)
    durations, samples, warm = matrix.durations, matrix.samples, matrix.warm
    if durations.size == 0:
        return None
    asked = int(warm.sum())
    detected = detect_warmup(durations.mean(axis=1))
    used = warmup if warmup is not None else max(asked, detected)
    durations, samples = durations[used:], samples[used:]
    if durations.size == 0:
        return None
    block = block_length(durations.mean(axis=1))
    resamples = throughput_draws(durations, samples, block=block)
    if durations.shape[0] < MIN_INTERVAL_STEPS:  # no interval from too few steps, nor from ratios built on them
        resamples = np.full(len(resamples), np.nan)
    low, high = percentile_interval(resamples) if durations.shape[0] >= MIN_INTERVAL_STEPS else (np.nan, np.nan)
    if draws is not None:  # the same resamples in an order of the run's own: independent of every other run's
        draws[run_id] = resamples[np.random.default_rng(run_seed(salt + run_id)).permutation(len(resamples))]
    means = durations.mean(axis=0)
    return RunStats(
        throughput=total_throughput(durations, samples), ci_low=low, ci_high=high,
        median_rate=float(column_medians(samples / durations).sum()),
        median_step_s=float(column_medians(durations).max()),
        cv=float((durations.std(axis=0, ddof=1) / means).mean()) if durations.shape[0] > 1 else 0.0,
        steps=int(durations.shape[0]), warmup_asked=asked, warmup_used=int(used), warmup_detected=detected,
        block_steps=block,
    )


def rank_work(steps: pd.DataFrame | StepMatrix, warmup_used: int) -> pd.Series:
    """Each rank's median own-work time per steady-state step: the step minus its gradient exchange where
    --breakdown recorded it (a synchronous step makes every rank wait for the slowest), else the step."""
    matrix = steps if isinstance(steps, StepMatrix) else step_matrix(steps)
    work = matrix.durations[warmup_used:] - np.nan_to_num(matrix.exchange[warmup_used:])
    if not len(work):
        return pd.Series([], dtype=float, index=pd.Index([], dtype=np.int64, name="rank"))
    return pd.Series(column_medians(work), index=pd.Index(matrix.ranks, name="rank"))


def stragglers(steps: pd.DataFrame | StepMatrix, warmup_used: int,
               threshold: float = STRAGGLER_THRESHOLD) -> pd.DataFrame:
    """Ranks whose median own-work time is more than ``threshold`` above the median over ranks."""
    per_rank = rank_work(steps, warmup_used)
    if per_rank.empty:
        return pd.DataFrame(columns=["rank", "median_work_s", "run_median_s", "excess"])
    center = float(per_rank.median())
    slow = per_rank[per_rank > center * (1.0 + threshold)]
    return pd.DataFrame({"rank": slow.index.astype(int), "median_work_s": slow.to_numpy(),
                         "run_median_s": center, "excess": slow.to_numpy() / center - 1.0})


def median_interval(values: np.ndarray, *, n: int = BOOTSTRAP_SAMPLES, confidence: float = CONFIDENCE,
                    seed: int = 0) -> tuple[float, float]:
    """Percentile bootstrap interval of the median of independent values (repeats of one configuration)."""
    rng = np.random.default_rng(seed)
    draws = np.median(values[rng.integers(0, len(values), size=(n, len(values)))], axis=1)
    return percentile_interval(draws, confidence)
