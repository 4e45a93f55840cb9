"""Scaling: one row per configuration and rank count, with speedup and efficiency against 1 rank."""

from __future__ import annotations

from typing import Any

import numpy as np
import pandas as pd

from .collect import Collection
from .stats import median_interval, run_stats

CONFIG = ["system", "framework", "benchmark", "model", "args", "launcher", "controller", "placement"]
BASELINE_KEY = ["system", "framework", "benchmark", "args"]
RUN_STATS_SCHEMA: dict[str, str] = {
    "run_id": "string", "throughput": "float64", "ci_low": "float64", "ci_high": "float64",
    "mean_throughput": "float64", "median_step_s": "float64", "cv": "float64", "steps": "int64",
}
SCALING_SCHEMA: dict[str, str] = {
    **{name: "string" for name in CONFIG}, "nodes": "int64", "np": "int64", "unit": "string",
    "repeats": "int64", "throughput": "float64", "ci_low": "float64", "ci_high": "float64",
    "ci_method": "string", "mean_throughput": "float64", "per_rank": "float64",
    "median_step_ms": "float64", "cv": "float64", "speedup": "float64", "efficiency": "float64",
}


def run_stats_table(collection: Collection) -> pd.DataFrame:
    """Statistics of every complete run (status ok), one row each."""
    ok = collection.runs[collection.runs["status"] == "ok"]["run_id"]
    rows = []
    for run_id, steps in collection.steps[collection.steps["run_id"].isin(ok)].groupby("run_id"):
        stats = run_stats(steps)
        if stats is not None:
            rows.append({"run_id": run_id, **stats.__dict__})
    return pd.DataFrame(rows, columns=list(RUN_STATS_SCHEMA)).astype(RUN_STATS_SCHEMA)


def _combine(group: pd.DataFrame) -> dict[str, Any]:
    """Repeats of one configuration: the median throughput; the interval over steps, or over repeats."""
    if len(group) == 1:
        row = group.iloc[0]
        low, high, method = row["ci_low"], row["ci_high"], "steps"
    else:
        low, high = median_interval(group["throughput"].to_numpy())
        method = "repeats"
    np_ = int(group["np"].iloc[0])
    throughput = float(group["throughput"].median())
    return {
        "unit": group["unit"].iloc[0], "repeats": len(group), "throughput": throughput,
        "ci_low": float(low), "ci_high": float(high), "ci_method": method,
        "mean_throughput": float(group["mean_throughput"].median()), "per_rank": throughput / np_,
        "median_step_ms": float(group["median_step_s"].median() * 1e3), "cv": float(group["cv"].median()),
    }


def scaling_table(collection: Collection) -> pd.DataFrame:
    """Throughput, interval, speedup = thr(N)/thr(1) and efficiency = speedup/N per configuration."""
    stats = run_stats_table(collection)
    runs = collection.runs.merge(stats, on="run_id", how="inner")
    rows = []
    for key, group in runs.groupby(CONFIG + ["nodes", "np"], sort=True, dropna=False):
        rows.append({**dict(zip(CONFIG + ["nodes", "np"], key)), **_combine(group)})
    table = pd.DataFrame(rows, columns=[c for c in SCALING_SCHEMA if c not in ("speedup", "efficiency")])
    table["speedup"] = [_speedup(table, row) for _, row in table.iterrows()]
    table["efficiency"] = table["speedup"] / table["np"]
    return table.astype(SCALING_SCHEMA).sort_values(CONFIG + ["nodes", "np"], ignore_index=True)


def _speedup(table: pd.DataFrame, row: pd.Series) -> float:
    """Against the 1-rank run of the same workload and arguments; the same launcher when there is one."""
    same = np.logical_and.reduce([table[k] == row[k] for k in BASELINE_KEY]) & (table["np"] == 1)
    candidates = table[same]
    if candidates.empty:
        return float("nan")
    exact = candidates[(candidates["launcher"] == row["launcher"]) & (candidates["controller"] == row["controller"])]
    base = (exact if not exact.empty else candidates)["throughput"].iloc[0]
    return float(row["throughput"] / base) if base > 0 else float("nan")
