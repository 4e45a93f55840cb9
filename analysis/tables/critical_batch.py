"""Steps to a quality target against the global batch: McCandlish et al.'s empirical model of large-batch training
(2018, "An Empirical Model of Large-Batch Training"), S = S_min (1 + B_noise / B), fitted to the runs that converged.
S_min is the fewest steps any batch can reach the target in; B_noise, the gradient noise scale, is the critical
batch: below it a doubled batch nearly halves the steps (throughput bought is time saved), above it the steps hardly
fall (more GPUs buy little). Equivalently, samples to target E = E_min (1 + B / B_noise) with E_min = S_min B_noise.

The fit is linear least squares of S on 1/B over every converged run (S = a + b/B: S_min = a, B_noise = b/a), with
a 95% interval from resampling the runs within each batch (2,000 draws, percentiles); it needs two global batches or
more, and is said not to hold where the steps rise with the batch (a schedule that does not scale, or noise)."""

from __future__ import annotations

import math
import shlex
from dataclasses import dataclass
from typing import Any

import numpy as np
import pandas as pd

from hvdbench.core.run_flags import without

from ..formatting import Rows, fmt, missing
from ..sections import Inputs, TableSection
from ..stats import BOOTSTRAP_SAMPLES, run_seed

KEY = ["system", "framework", "benchmark", "model", "quality_metric", "quality_target", "work"]
BATCH_FLAGS = {"--batch-size": 1, "--base-batch": 1}  # what changes the global batch, and --lr's reference to it
FIT_SCHEMA: dict[str, str] = {
    "system": "string", "benchmark": "string", "model": "string", "args": "string", "metric": "string",
    "target": "float64", "global_batch": "int64", "runs": "int64", "steps": "float64", "fitted_steps": "float64",
    "s_min": "float64", "s_min_low": "float64", "s_min_high": "float64", "b_noise": "float64",
    "b_noise_low": "float64", "b_noise_high": "float64", "beyond": "float64", "note": "string",
}


def _work(args: str) -> str:
    """A run's arguments without its batch flags: the runs one curve is fitted to."""
    try:
        return shlex.join(without(shlex.split(args), BATCH_FLAGS))
    except ValueError:
        return args


def fit(batches: np.ndarray, steps: np.ndarray) -> tuple[float, float]:
    """S_min and B_noise of S = S_min (1 + B_noise / B) by least squares in 1/B; NaN where it does not hold."""
    if len(set(batches.tolist())) < 2:
        return math.nan, math.nan
    slope, intercept = np.polyfit(1.0 / batches, steps, 1)
    if intercept <= 0 or slope < 0:
        return math.nan, math.nan
    return float(intercept), float(slope / intercept)


def fit_draws(batches: np.ndarray, steps: np.ndarray, seed: str) -> np.ndarray:
    """(S_min, B_noise) of each resample of the runs within each batch (BOOTSTRAP_SAMPLES x 2; NaN where the curve
    fails on a resample)."""
    rng = np.random.default_rng(run_seed(seed))
    groups = [np.flatnonzero(batches == b) for b in np.unique(batches)]
    draws = []
    for _ in range(BOOTSTRAP_SAMPLES):
        picked = np.concatenate([rng.choice(g, size=len(g)) for g in groups])
        draws.append(fit(batches[picked], steps[picked]))
    return np.array(draws)


def bounded(draws: np.ndarray) -> bool:
    """Whether resamples bound the curve: it fails on at most the interval's tail (2.5%) of them."""
    return float(np.isnan(draws[:, 0]).mean()) <= 0.025


def _interval(batches: np.ndarray, steps: np.ndarray, seed: str) -> tuple[tuple[float, float], tuple[float, float],
                                                                        float]:
    """95% intervals of S_min and B_noise from resampling the runs within each batch, and the share of resamples
    the curve fails on (above 2.5%: no interval, the runs cannot bound it)."""
    values = fit_draws(batches, steps, seed)
    failed = float(np.isnan(values[:, 0]).mean())
    if not bounded(values):
        return (math.nan, math.nan), (math.nan, math.nan), failed
    low, high = np.nanpercentile(values, [2.5, 97.5], axis=0)
    return (float(low[0]), float(high[0])), (float(low[1]), float(high[1])), failed


def _rows(group: pd.DataFrame) -> list[dict[str, Any]]:
    """One row per global batch of one workload and target, each with the curve's fit."""
    done = group[group["converged"].fillna(False).astype(bool) & group["steps_to_target"].notna()
                 & group["global_batch"].notna()]
    first = group.iloc[0]
    batches = done["global_batch"].astype(float).to_numpy()
    steps = done["steps_to_target"].astype(float).to_numpy()
    s_min, b_noise = fit(batches, steps) if len(done) else (math.nan, math.nan)
    (s_low, s_high), (b_low, b_high), failed = _interval(batches, steps, ",".join(sorted(done["run_id"]))) \
        if not math.isnan(s_min) else ((math.nan, math.nan), (math.nan, math.nan), 1.0)
    distinct = len(set(batches.tolist()))
    note = ("one global batch: a curve needs two or more" if distinct < 2 else
            "no fit: the steps do not fall as the batch grows (the model does not hold)" if math.isnan(s_min) else
            f"no interval: the curve fails on {failed:.0%} of the runs' resamples (more runs, or batches further "
            "apart)" if failed > 0.025 else "")
    out = []
    for batch, runs in done.groupby("global_batch"):
        beyond = float(batch) / b_noise if not math.isnan(b_noise) else math.nan
        out.append({
            "system": first["system"], "benchmark": first["benchmark"], "model": first["model"], "args": first["work"],
            "metric": first["quality_metric"], "target": first["quality_target"], "global_batch": int(batch),
            "runs": len(runs), "steps": float(runs["steps_to_target"].astype(float).median()),
            "fitted_steps": s_min * (1 + b_noise / float(batch)) if not math.isnan(s_min) else math.nan,
            "s_min": s_min, "s_min_low": s_low, "s_min_high": s_high, "b_noise": b_noise, "b_noise_low": b_low,
            "b_noise_high": b_high, "beyond": beyond,
            "note": "; ".join(filter(None, (note, "past the critical batch: more GPUs buy little" if beyond > 1
                                            else "")))})
    return out


@dataclass(frozen=True)
class Curve:
    """One workload's fitted curve to one target: S_min, B_noise and their resamples (``draws``: n x 2)."""

    system: str
    benchmark: str
    model: str
    target: str  # ``accuracy 0.89``
    s_min: float
    b_noise: float
    draws: np.ndarray
    largest: float = math.nan  # the largest global batch its runs trained at

    def steps(self, batch: float) -> tuple[float, float, float]:
        """Steps to the target at a global batch, with the 95% interval of the resamples."""
        values = self.draws[:, 0] * (1 + self.draws[:, 1] / batch)
        low, high = np.nanpercentile(values, [2.5, 97.5])
        return self.s_min * (1 + self.b_noise / batch), float(low), float(high)


def curves(runs: pd.DataFrame) -> list[Curve]:
    """Every workload's curve the converged runs bound (two batches or more, the model holding on the resamples)."""
    table = critical_batch_table(runs)
    out = []
    for _, group in table[table["s_min_low"].notna()].groupby(["system", "benchmark", "model", "metric", "target",
                                                                "args"], sort=True):
        first = group.iloc[0]
        done = runs[(runs["status"] == "ok") & runs["converged"].fillna(False).astype(bool)
                    & (runs["system"] == first["system"]) & (runs["benchmark"] == first["benchmark"])
                    & (runs["model"] == first["model"]) & (runs["quality_target"] == first["target"])
                    & runs["steps_to_target"].notna()]
        done = done[done["args"].map(lambda a: _work(str(a))) == first["args"]]
        batches = done["global_batch"].astype(float).to_numpy()
        draws = fit_draws(batches, done["steps_to_target"].astype(float).to_numpy(), ",".join(sorted(done["run_id"])))
        out.append(Curve(str(first["system"]), str(first["benchmark"]), str(first["model"]),
                         f"{first['metric']} {first['target']:g}", float(first["s_min"]), float(first["b_noise"]),
                         draws, float(batches.max())))
    return out


def critical_batch_table(runs: pd.DataFrame) -> pd.DataFrame:
    """Per workload and target, one row per global batch its converged runs trained at, with the fitted curve."""
    if "steps_to_target" not in runs:
        return pd.DataFrame(columns=list(FIT_SCHEMA)).astype(FIT_SCHEMA)
    mine = runs[(runs["status"] == "ok") & runs["steps_to_target"].notna()]
    if mine.empty:
        return pd.DataFrame(columns=list(FIT_SCHEMA)).astype(FIT_SCHEMA)
    keyed = mine.assign(work=mine["args"].map(lambda a: _work(str(a))))
    rows = [row for _, group in keyed.groupby(KEY, sort=True, dropna=False) for row in _rows(group)]
    return pd.DataFrame(rows, columns=list(FIT_SCHEMA)).astype(FIT_SCHEMA)


CRITICAL_TEXT = ("Steps to the target against the global batch, over the runs that converged, with McCandlish et "
                 "al.'s curve S = S_min (1 + B_noise / B) fitted by least squares (95% intervals: the runs resampled "
                 "within each batch). B_noise is the critical batch: well below it a doubled batch nearly halves the "
                 "steps; beyond it (B / B_noise above 1) the steps hardly fall, and more GPUs buy little time. Steps "
                 "are counted to the evaluation that reached the target, so they are as coarse as --eval-every.")


def critical_rows(table: pd.DataFrame) -> Rows:
    return (["system", "workload", "target", "global batch", "runs", "steps (median)", "fitted", "S_min [95% CI]",
             "B_noise (critical batch) [95% CI]", "B / B_noise", "note"],
            [[r.system, f"{r.benchmark} {r.model}", f"{r.metric} {r.target:g}", f"{r.global_batch:,}", str(r.runs),
              fmt(r.steps, 0), fmt(r.fitted_steps, 0),
              "n/a" if missing(r.s_min) else f"{r.s_min:,.0f}" + ("" if missing(r.s_min_low) else
                                                                  f" [{r.s_min_low:,.0f}–{r.s_min_high:,.0f}]"),
              "n/a" if missing(r.b_noise) else f"{r.b_noise:,.0f}" + ("" if missing(r.b_noise_low) else
                                                                      f" [{r.b_noise_low:,.0f}–{r.b_noise_high:,.0f}]"),
              fmt(r.beyond, 2), r.note or "-"] for r in table.itertuples()])


def _critical(inputs: Inputs) -> pd.DataFrame:
    return critical_batch_table(inputs.collection.runs)


CRITICAL_SECTION = TableSection("critical_batch", "Steps to target against the global batch", CRITICAL_TEXT,
                                critical_rows, _critical)
