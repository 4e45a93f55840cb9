"""Time to a quality target: how long training took to reach its accuracy, evaluation on the clock, per system,
workload and size. Beside MLPerf's score (the olympic mean: the fastest and the slowest run dropped, the others
averaged; a run that did not converge counts as the slowest, two make no score: core/mlperf.py), the time to train as
every figure here is given: the geometric mean of the runs that converged with Student's 95% interval over them (the
run level), and each system's time against the first system's on the same workload and size, judged in the findings
every verdict speaks (analysis/findings.py; less time is faster)."""

from __future__ import annotations

import math
from typing import Any

import numpy as np
import pandas as pd

from hvdbench.core.mlperf import olympic

from ..findings import judge
from ..formatting import Rows, fmt, missing
from ..keys import measured_args
from ..ratios import Resampled, config_draws, ratio_draws, too_few_runs
from ..stats import BOOTSTRAP_SAMPLES
from ..sections import Inputs, TableSection

KEY = ["system", "framework", "benchmark", "model", "work", "np", "nodes"]
QUALITY_SCHEMA: dict[str, str] = {
    "system": "string", "framework": "string", "benchmark": "string", "model": "string", "args": "string",
    "np": "int64", "nodes": "int64", "metric": "string", "target": "float64", "runs": "int64", "converged": "int64",
    "olympic_s": "float64", "olympic_why": "string", "seconds": "float64", "low": "float64", "high": "float64",
    "spread": "float64", "epochs": "float64", "global_batch": "Int64", "source": "string", "against": "string",
    "ratio": "float64", "ratio_low": "float64", "ratio_high": "float64", "finding": "string", "verdict": "string",
    "run_ids": "string",
}
WORDS = ("slower", "faster")  # a time ratio above 1 took longer


def _times(runs: pd.DataFrame) -> Resampled | None:
    """The converged runs' times to train as a configuration's figure: their geometric mean, Student's interval over
    the runs (each run one value: the spread between runs is all there is)."""
    ids = list(runs["run_id"])
    times = runs["time_to_target_s"].astype(float).to_numpy()
    if not len(ids):
        return None
    draws = {run_id: np.full(BOOTSTRAP_SAMPLES, seconds) for run_id, seconds in zip(ids, times)}
    return config_draws(ids, draws, points=dict(zip(ids, times)))


def _row(group: pd.DataFrame) -> dict[str, Any]:
    """One configuration's runs to their target."""
    first = group.iloc[0]
    ok = group["converged"].fillna(False).astype(bool).to_numpy()
    scored = olympic(list(group["time_to_target_s"].astype(float)), list(ok))
    figure = _times(group[ok])
    low, high = figure.interval if figure is not None and figure.runs > 1 else (math.nan, math.nan)
    batch = group["global_batch"].dropna()
    return {"system": first["system"], "framework": first["framework"], "benchmark": first["benchmark"],
            "model": first["model"], "args": first["work"], "np": int(first["np"]), "nodes": int(first["nodes"]),
            "metric": first["quality_metric"], "target": first["quality_target"], "runs": len(group),
            "converged": int(ok.sum()), "olympic_s": scored.score_s if scored.score_s is not None else math.nan,
            "olympic_why": scored.why, "seconds": figure.value if figure is not None else math.nan, "low": low,
            "high": high, "spread": figure.spread if figure is not None else math.nan,
            "epochs": float(group["epochs_to_target"].astype(float).median()),
            "global_batch": int(batch.iloc[0]) if len(batch) else pd.NA,
            "source": "MLPerf result files" if str(first["quality_source"] or "").startswith("MLPerf") else "hvdbench",
            "run_ids": ",".join(group["run_id"]), "_figure": figure}


def quality_table(runs: pd.DataFrame, margin: float = 0.02, min_runs: int = 3,
                  baseline: str | None = None) -> pd.DataFrame:
    """One row per system, workload and size of the complete runs that went to a quality target; each other system
    set against ``baseline``'s time on the same workload and size (where it has no such runs: the first by name)."""
    if "time_to_target_s" not in runs:
        return pd.DataFrame(columns=list(QUALITY_SCHEMA)).astype(QUALITY_SCHEMA)
    to_target = runs[(runs["status"] == "ok") & runs["time_to_target_s"].notna()]
    if to_target.empty:
        return pd.DataFrame(columns=list(QUALITY_SCHEMA)).astype(QUALITY_SCHEMA)
    keyed = to_target.assign(work=to_target["args"].map(lambda a: measured_args(str(a))))
    rows = [_row(group) for _, group in keyed.groupby(KEY, sort=True, dropna=False)]
    systems = {r["system"] for r in rows}
    first = baseline if baseline in systems else min(systems)
    for row in rows:
        _against(row, next((r for r in rows if r["system"] == first and all(r[k] == row[k] for k in (
            "framework", "benchmark", "model", "args", "np"))), None), margin, min_runs)
    table = pd.DataFrame([{k: v for k, v in r.items() if k in QUALITY_SCHEMA} for r in rows],
                         columns=list(QUALITY_SCHEMA))
    return table.astype(QUALITY_SCHEMA)


def _against(row: dict[str, Any], base: dict[str, Any] | None, margin: float, min_runs: int) -> None:
    """The row's time against the first system's on the same workload and size, with its finding."""
    row.update(against="", ratio=math.nan, ratio_low=math.nan, ratio_high=math.nan, finding="", verdict="")
    if base is None or base is row:
        return
    mine, theirs = row["_figure"], base["_figure"]
    ratio = ratio_draws(mine, theirs) if mine is not None and theirs is not None else None
    few = too_few_runs({row["system"]: row["converged"], base["system"]: base["converged"]}, min_runs)
    found = judge(ratio, margin, WORDS, (row["system"], base["system"]), few)
    low, high = ratio.interval if ratio is not None else (math.nan, math.nan)
    row.update(against=base["system"], ratio=math.exp(ratio.center) if ratio is not None else math.nan,
               ratio_low=low, ratio_high=high, finding=found.finding, verdict=found.sentence())


def _seconds(value: Any) -> str:
    return "n/a" if missing(value) else f"{value:,.1f} s ({value / 60:,.2f} min)"


QUALITY_TEXT = ("Runs to a quality target (evaluation on the clock, from the run's start): MLPerf's score, the olympic "
                "mean (the fastest and slowest runs dropped, the rest averaged; a run that did not converge counts as "
                "the slowest, two make no score); the time to train as every figure here is given, the geometric "
                "mean of the runs that converged with Student's 95% interval over them; each system against the "
                "baseline (--baseline, else the first results root's system) on the same workload and size (a "
                "ratio of times: below 1 is faster).")


def quality_rows(table: pd.DataFrame) -> Rows:
    return (["system", "workload", "GPUs", "target", "runs (converged)", "olympic mean (MLPerf)",
             "time to train [95% CI]", "epochs", "global batch", "against the baseline", "source"],
            [[r.system, f"{r.benchmark} {r.model}", str(r.np),
              "-" if missing(r.target) else f"{r.metric} {r.target:g}", f"{r.runs} ({r.converged})",
              _seconds(r.olympic_s) if not missing(r.olympic_s) else f"none: {r.olympic_why}",
              _seconds(r.seconds) + (f" [{fmt(r.low / 60, 2)}–{fmt(r.high / 60, 2)} min]" if not missing(r.low)
                                     else ""),
              fmt(r.epochs, 1), "-" if missing(r.global_batch) else f"{int(r.global_batch):,}",
              f"{r.ratio:.2f}× [{r.ratio_low:.2f}–{r.ratio_high:.2f}] {r.against}: {r.verdict}"
              if not missing(r.ratio) and not missing(r.ratio_low) else (r.verdict or "-"), r.source]
             for r in table.itertuples()])


def _quality(inputs: Inputs) -> pd.DataFrame:
    return quality_table(inputs.collection.runs, inputs.margin, inputs.min_runs, inputs.baseline)


QUALITY_SECTION = TableSection("quality", "Time to a quality target", QUALITY_TEXT, quality_rows, _quality)
