"""Intervals with the run level in them: a configuration's throughput and every ratio of two (speedup, efficiency,
communication cost, system against system, a knob, new against old) from a hierarchical resample. A configuration's
runs are resampled with replacement, each resampled run contributing a resample of its own steps in blocks as long as
its autocorrelation asks (stats.run_stats); its figure is the geometric mean of its runs' throughputs. A ratio divides
two configurations' resamples, drawn independently (seeded by their run ids), so its interval carries both sides'
noise, between runs and within them.

With k runs the interval is Student's: the figure's log ± t(0.975, df) × the standard error the hierarchical resample
gives (its variance times k/(k-1), the plug-in bootstrap's bias undone), df = k - 1, and Welch and Satterthwaite's df
for a ratio. A percentile interval over a handful of runs is too narrow, and the median of 3 to 8 runs has no small-
sample interval that narrows as runs are added (benchmarks/calibration.py measured both). One run gives a within-run
interval only (the percentile of its own resamples): it says how steady that run was, not where another run would land,
and a verdict on it is "not judged" (``too_few_runs``) unless the user borrows the spread between runs measured on
other configurations of the same system (``Spread``, ``--borrow-spread``), which every line that used it names.

References: Hoefler and Belli, "Scientific benchmarking of parallel computing systems" (SC'15); Kalibera and
Jones, "Rigorous benchmarking in reasonable time" (ISMM'13); Politis and Romano (1992) and Politis and White (2004)
for the blocks; Welch (1947) and Satterthwaite (1946) for the degrees of freedom of a sum of variances."""

from __future__ import annotations

import math
from dataclasses import dataclass
from statistics import NormalDist
from typing import Mapping, Sequence

import numpy as np
import pandas as pd

from hvdbench.core.metrics import CONFIDENCE, MIN_RUNS, percentile_interval

from .stats import run_seed

__all__ = ["MIN_RUNS", "Resampled", "Spread", "combined", "config_draws", "direction", "ratio_draws",
           "ratio_interval", "too_few_runs", "pooled_spread", "t_quantile", "t_quantiles"]


def t_quantile(p: float, df: float) -> float:
    """Student's t quantile: exact for 1 and 2 degrees of freedom, Abramowitz and Stegun's 26.7.5 expansion
    above (within 0.3% at 3, closer beyond), the normal's for infinite ``df``; fractional ``df`` (Welch's) allowed."""
    if df <= 1:
        return math.tan(math.pi * (p - 0.5))
    if df == 2:
        return (2 * p - 1) / math.sqrt(2 * p * (1 - p))
    x = NormalDist().inv_cdf(p)
    if not math.isfinite(df):
        return x
    if df < 3:  # between 1 and 3: between the exact values either side, on 1/df (close enough for an interval)
        low, high = (1.0, 2.0) if df < 2 else (2.0, 3.0)
        weight = (1 / df - 1 / high) / (1 / low - 1 / high)
        return weight * t_quantile(p, low) + (1 - weight) * t_quantile(p, high)
    terms = ((x ** 3 + x) / 4, (5 * x ** 5 + 16 * x ** 3 + 3 * x) / 96,
             (3 * x ** 7 + 19 * x ** 5 + 17 * x ** 3 - 15 * x) / 384,
             (79 * x ** 9 + 776 * x ** 7 + 1482 * x ** 5 - 1920 * x ** 3 - 945 * x) / 92160)
    return x + sum(g / df ** (i + 1) for i, g in enumerate(terms))


def t_quantiles(p: float, df: np.ndarray) -> np.ndarray:
    """``t_quantile(p, d)`` for every ``d`` of an array of degrees of freedom (the same rules, at NumPy's pace: what
    a sequential design's simulation asks of thousands of paths)."""
    df = np.asarray(df, dtype=float)
    x = NormalDist().inv_cdf(p)
    one, two, three = (t_quantile(p, d) for d in (1.0, 2.0, 3.0))
    terms = ((x ** 3 + x) / 4, (5 * x ** 5 + 16 * x ** 3 + 3 * x) / 96,
             (3 * x ** 7 + 19 * x ** 5 + 17 * x ** 3 - 15 * x) / 384,
             (79 * x ** 9 + 776 * x ** 7 + 1482 * x ** 5 - 1920 * x ** 3 - 945 * x) / 92160)
    with np.errstate(divide="ignore", invalid="ignore"):
        wide = np.maximum(df, 3.0)
        out = x + sum(g / wide ** (i + 1) for i, g in enumerate(terms))
        low = (1 / np.maximum(df, 1.0) - 0.5) / 0.5  # between 1 and 2, on 1/df
        mid = (1 / np.clip(df, 2.0, 3.0) - 1 / 3) / (1 / 2 - 1 / 3)  # between 2 and 3
    out = np.where(df < 3, mid * two + (1 - mid) * three, out)
    out = np.where(df < 2, low * one + (1 - low) * two, out)
    return np.where(df <= 1, one, out)


@dataclass(frozen=True)
class Spread:
    """The spread between runs borrowed from other configurations of a system (``--borrow-spread``): the pooled
    standard deviation of log throughput between runs of each configuration measured ``MIN_RUNS`` times or more,
    with its degrees of freedom and where it came from, in words."""

    sigma: float
    df: int
    source: str


@dataclass(frozen=True)
class Resampled:
    """A configuration's hierarchical throughput resamples and what an interval on them rests on: the complete runs,
    the figure's log (``center``), the variance of that log, its degrees of freedom (infinite: one run, within-run
    only), where a borrowed spread between runs came from ("" where none was borrowed), the spread between its runs
    (borrowed or its own), and for a ratio or a mix the weighted configurations it is made of."""

    draws: np.ndarray
    runs: int
    center: float
    var: float
    df: float
    borrowed: str = ""
    spread: float = math.nan  # a configuration's spread between runs (SD of its runs' log figures); NaN: one run
    parts: tuple[tuple[float, "Resampled"], ...] = ()  # a ratio's or mix's weighted configurations (combined)

    @property
    def value(self) -> float:
        """The configuration's figure (the geometric mean of its runs), or the ratio's."""
        return math.exp(self.center)

    @property
    def interval(self) -> tuple[float, float]:
        """The 95% interval: within-run only, the percentile of the resamples; else Student's on the log scale."""
        if not math.isfinite(self.var) or (not len(self.draws) or np.isnan(self.draws).any()):
            return float("nan"), float("nan")
        if not math.isfinite(self.df):
            return percentile_interval(self.draws)
        half = t_quantile(1.0 - (1.0 - CONFIDENCE) / 2.0, self.df) * math.sqrt(self.var)
        return math.exp(self.center - half), math.exp(self.center + half)


def config_draws(run_ids: Sequence[str], draws: Mapping[str, np.ndarray], spread: Spread | None = None,
                 points: Mapping[str, float] | None = None) -> Resampled | None:
    """A configuration's hierarchical resamples from its runs' own (None where no run has any): runs resampled with
    replacement, each contributing its own step resample, the geometric mean taken. ``points``: each run's own
    throughput (the figure's runs; else each run's resamples' median). ``spread`` (borrowed for a configuration of
    fewer than MIN_RUNS runs) adds the borrowed spread between runs to the variance, at its pooled degrees of
    freedom, and moves each resampled run by a draw of it."""
    ids = [r for r in run_ids if r in draws]
    if not ids:
        return None
    logs = np.log(np.stack([draws[r] for r in ids]))
    count, n = logs.shape
    centers = [math.log(points[r]) if points and r in points else float(np.median(logs[i])) for i, r in enumerate(ids)]
    rng = np.random.default_rng(run_seed("+".join(sorted(run_ids))))
    picked = logs[rng.integers(0, count, size=(count, n)), np.arange(n)] if count > 1 else logs
    within = float(np.mean(np.var(logs, axis=1))) / count  # the within-run part of the figure's variance
    if spread is not None:
        picked = picked + rng.normal(0.0, spread.sigma, size=picked.shape)
        return Resampled(np.exp(picked.mean(axis=0)), count, float(np.mean(centers)),
                         within + spread.sigma ** 2 / count, float(spread.df), spread.source, spread.sigma)
    mean = picked.mean(axis=0)
    var = float(np.var(mean)) * count / (count - 1) if count > 1 else float(np.var(mean))
    return Resampled(np.exp(mean), count, float(np.mean(centers)), var, count - 1.0 if count > 1 else math.inf,
                     spread=float(np.std(centers, ddof=1)) if count > 1 else math.nan)


def resampled(values: Resampled | np.ndarray | None) -> Resampled | None:
    """Resamples as a configuration's: plain resamples are one run's (within-run only)."""
    if values is None or isinstance(values, Resampled):
        return values
    logs = np.log(np.asarray(values, dtype=float))
    return Resampled(np.exp(logs), 1, float(np.median(logs)), float(np.var(logs)), math.inf)


def combined(parts: Sequence[tuple[float, Resampled]]) -> Resampled:
    """A weighted sum of configurations' logs (a ratio: +1 and -1; a weighted mix: the shares): its resamples, its
    variance, and Welch and Satterthwaite's degrees of freedom; the fewest runs of its parts."""
    draws = np.exp(sum(w * np.log(part.draws) for w, part in parts))
    var = sum(w * w * part.var for w, part in parts)
    finite = [(w * w * part.var) ** 2 / part.df for w, part in parts if math.isfinite(part.df) and part.df > 0]
    df = var ** 2 / sum(finite) if finite and sum(finite) > 0 else math.inf
    borrowed = "; ".join(dict.fromkeys(part.borrowed for _, part in parts if part.borrowed))
    return Resampled(np.asarray(draws, dtype=float), min(part.runs for _, part in parts),
                     sum(w * part.center for w, part in parts), var, df, borrowed, parts=tuple(parts))


def ratio_draws(top: Resampled | np.ndarray | None, bottom: Resampled | np.ndarray | None) -> Resampled | None:
    """top / bottom (plain arrays: one run's resamples each)."""
    top, bottom = resampled(top), resampled(bottom)
    if top is None or bottom is None:
        return None
    return combined([(1.0, top), (-1.0, bottom)])


def ratio_interval(top: Resampled | np.ndarray | None, bottom: Resampled | np.ndarray | None) -> tuple[float, float]:
    """95% interval of top / bottom from their resamples; NaN where either has none."""
    ratio = ratio_draws(top, bottom)
    return (float("nan"), float("nan")) if ratio is None else ratio.interval


def too_few_runs(counts: Mapping[str, int], min_runs: int, command: str = "hvdbench run … --repeats") -> str:
    """Why a verdict between these sides cannot be reached (``counts``: complete runs per side, in order), or "":
    ``1 run of DGX and 1 of L40S; the spread between runs is unknown (hvdbench run … --repeats 3)``."""
    if all(n >= min_runs for n in counts.values()):
        return ""
    said = [f"{n} run{'s' if n != 1 else ''} of {side}" if i == 0 else f"{n} of {side}"
            for i, (side, n) in enumerate(counts.items())]
    fewest = min(counts.values())
    spread = "the spread between runs is unknown" if fewest < 2 else f"fewer than {min_runs} runs (--min-runs)"
    return f"{' and '.join(said)}; {spread} ({command} {min_runs})"


def pooled_spread(table: pd.DataFrame, run_throughput: Mapping[str, float],
                  min_runs: int = MIN_RUNS) -> dict[str, Spread]:
    """Per system: the spread between runs pooled over its configurations measured ``min_runs`` times or more (the
    standard deviation of log throughput around each configuration's own mean, degrees of freedom summed); a
    system without such a configuration has none. ``table``: scaling rows (system, runs); ``run_throughput``:
    each run's own throughput."""
    out: dict[str, Spread] = {}
    for system, rows in table.groupby("system", sort=True):
        squares, df, configs, runs = 0.0, 0, 0, 0
        for ids in rows["runs"]:
            values = np.log([run_throughput[r] for r in str(ids).split(",") if r in run_throughput])
            if len(values) >= max(min_runs, 2):
                squares += float(((values - values.mean()) ** 2).sum())
                df += len(values) - 1
                configs += 1
                runs += len(values)
        if df:
            sigma = math.sqrt(squares / df)
            plural = "s" if configs != 1 else ""
            out[str(system)] = Spread(sigma, df, f"run-to-run spread borrowed: {sigma:.1%} from {runs} runs of "
                                                 f"{configs} other configuration{plural} of {system}")
    return out


def direction(low: float, high: float, margin: float) -> str | None:
    """Where a ratio's interval lies, with one rule both ways: "above" where its low end clears 1 + ``margin``,
    "below" where its high end stays under 1 / (1 + ``margin``) (so A 0.80× B is "below" exactly when B 1.25× A is
    "above"), "within" otherwise; None where there is no interval."""
    if not (math.isfinite(low) and math.isfinite(high)):
        return None
    if low > 1.0 + margin:
        return "above"
    if high < 1.0 / (1.0 + margin):
        return "below"
    return "within"
