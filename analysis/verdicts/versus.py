"""Every "B against A" judged one way: ``compare`` (systems side by side and the decision page), ``compare
--regressions`` (new against old), ``history compare`` (two selections of the store) and ``history check`` (the latest
stretch of a configuration's runs against the one before) put each side's runs through the same figures, the same
interval and the same words, so the same runs give the same interval whichever command asks.

A run enters as its figure and its own 95% interval (the report's run statistics, or what the history store kept
of them): its draws are the figure times a log-normal of the spread that interval says, the normal deviates seeded
by the execution's identity (its store key: the run id and the digest of its measurements), so one run draws alike
in every command and two executions of one configuration independently. A side is then the hierarchical resample of
its runs (analysis/ratios.py: runs resampled, each contributing its draws; Student's t over the runs), the ratio its
draws over the other's, judged at ±margin in the findings every verdict speaks (analysis/findings.py). What differs
in the environment between the two sides is said by one function too."""

from __future__ import annotations

import math
from typing import Any, Iterable, Mapping, Sequence

import numpy as np

from ..findings import Finding, judge
from ..ratios import Resampled, Spread, config_draws, ratio_draws
from ..stats import BOOTSTRAP_SAMPLES, run_seed

Z95 = 1.959963984540054  # a 95% interval's half-width in standard deviations


def verdict_draws(figures: Mapping[str, tuple[float, float, float]],
                  keys: Mapping[str, str] | None = None) -> dict[str, np.ndarray]:
    """Each run's draws from its figure and 95% interval (``figures``: run id -> value, low, high): the value times
    exp(σ z), σ the log interval's half-width over 1.96, z standard normal deviates seeded by ``keys[run id]`` (its
    execution's identity; else its run id); NaN draws where a run has no interval (too few steps)."""
    out = {}
    for run_id, (value, low, high) in figures.items():
        if not (value > 0 and math.isfinite(value)):
            continue
        if not (math.isfinite(low) and math.isfinite(high) and 0 < low <= high):
            out[run_id] = np.full(BOOTSTRAP_SAMPLES, np.nan)
            continue
        sigma = math.log(high / low) / (2 * Z95)
        z = np.random.default_rng(run_seed(str((keys or {}).get(run_id, run_id)))).standard_normal(BOOTSTRAP_SAMPLES)
        out[run_id] = value * np.exp(sigma * z)
    return out


def side(run_ids: Sequence[str], draws: Mapping[str, np.ndarray], points: Mapping[str, float] | None = None,
         lent: Spread | None = None) -> Resampled | None:
    """One side's runs as the figure a verdict judges (ratios.config_draws: the hierarchical resample)."""
    return config_draws(list(run_ids), draws, lent, points)


def inflated(figure: Resampled | None, factor: float) -> Resampled | None:
    """A side whose runs resemble their neighbours (autocorrelation): its variance times ``factor`` and as many
    degrees of freedom as that many fewer independent runs (history check's wandering pace)."""
    if figure is None or factor <= 1.0:
        return figure
    from dataclasses import replace

    return replace(figure, var=figure.var * factor, df=max(1.0, (figure.df + 1.0) / factor - 1.0))


def versus(b: Resampled | None, a: Resampled | None, margin: float, words: tuple[str, str],
           names: tuple[str, str], few: str = "", advise: bool = True) -> tuple[Resampled | None, Finding]:
    """B over A: the ratio's resamples and its finding (``words`` for above and below 1; ``few`` why a side has too
    few runs, which makes it not judged)."""
    ratio = ratio_draws(b, a) if b is not None and a is not None else None
    return ratio, judge(ratio, margin, words, names, few, advise=advise)


def differences(before: Mapping[str, Iterable[Any]], after: Mapping[str, Iterable[Any]]) -> str:
    """What differs between two sides' runs: each fact whose values differ, ``name a -> b`` (a side's several values
    joined by /, a missing one as -), in the facts' order."""
    out = []
    for name in dict.fromkeys([*before, *after]):
        x = "/".join(sorted({str(v) for v in before.get(name, ()) if v is not None and str(v)}))
        y = "/".join(sorted({str(v) for v in after.get(name, ()) if v is not None and str(v)}))
        if x != y:
            out.append(f"{name} {x or '-'} -> {y or '-'}")
    return "; ".join(out)


def verdict_inputs(collection: Any, stats: Any) -> tuple[dict[str, str], dict[str, np.ndarray], dict[str, float]]:
    """What a report's verdicts judge its runs by: each run row's execution key, and by that key each run's verdict
    draws and figure (its run statistics' throughput and 95% interval)."""
    from ..copies import run_keys

    keys = run_keys(collection.runs, collection.cache.get("measured", {}))
    figures = {keys.get(str(r), str(r)): (float(t), float(lo), float(hi)) for r, t, lo, hi in
               zip(stats["run_id"], stats["throughput"], stats["ci_low"], stats["ci_high"])}
    return keys, verdict_draws(figures), {key: value for key, (value, _, _) in figures.items()}
