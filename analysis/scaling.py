"""Scaling: one row per configuration and rank count, with speedup and efficiency against 1 rank."""

from __future__ import annotations

from typing import Any

import numpy as np
import pandas as pd

from .collect import Collection
from .evidence import evidence, rank_telemetry
from .stats import STRAGGLER_THRESHOLD, median_interval, run_stats, stragglers

CONFIG = ["system", "framework", "benchmark", "model", "args", "launcher", "controller", "placement", "knobs"]
AXES = ["batch_size", "precision", "independent", "base_args"]
BASELINE_KEY = ["system", "framework", "benchmark", "base_args"]  # an --independent twin shares its baseline
RUN_STATS_SCHEMA: dict[str, str] = {
    "run_id": "string", "throughput": "float64", "ci_low": "float64", "ci_high": "float64",
    "median_rate": "float64", "median_step_s": "float64", "cv": "float64", "steps": "int64",
    "warmup_asked": "int64", "warmup_used": "int64", "warmup_detected": "int64", "mean_power_w": "float64",
}
SCALING_SCHEMA: dict[str, str] = {
    **{name: "string" for name in CONFIG}, "batch_size": "Int64", "precision": "string", "independent": "bool",
    "base_args": "string", "nodes": "int64", "np": "int64", "unit": "string",
    "repeats": "int64", "throughput": "float64", "ci_low": "float64", "ci_high": "float64",
    "ci_method": "string", "repeat_min": "float64", "repeat_max": "float64", "median_rate": "float64",
    "per_rank": "float64", "median_step_ms": "float64", "cv": "float64", "warmup_used": "float64",
    "mean_power_w": "float64", "speedup": "float64", "efficiency": "float64",
    "node_speedup": "float64", "node_efficiency": "float64", "comm_cost": "float64",
}
STRAGGLER_SCHEMA: dict[str, str] = {
    "run_id": "string", "system": "string", "benchmark": "string", "model": "string", "np": "int64",
    "rank": "int64", "host": "string", "gpu": "string", "median_work_ms": "float64", "run_median_ms": "float64",
    "excess": "float64", "sm_clock_mhz": "float64", "memory_clock_mhz": "float64", "temperature_c": "float64",
    "power_w": "float64", "clock_events": "string", "evidence": "string",
}


def run_stats_table(collection: Collection, warmup: int | None = None) -> pd.DataFrame:
    """Statistics of every complete run (status ok), one row each; ``warmup`` overrides the detected
    warm-up of every run."""
    ok = collection.runs[collection.runs["status"] == "ok"]["run_id"]
    power = _mean_power(collection.telemetry)
    rows = []
    for run_id, steps in collection.steps[collection.steps["run_id"].isin(ok)].groupby("run_id", sort=False):
        stats = run_stats(steps, warmup)
        if stats is not None:
            rows.append({"run_id": run_id, **stats.__dict__, "mean_power_w": power.get(run_id, float("nan"))})
    return pd.DataFrame(rows, columns=list(RUN_STATS_SCHEMA)).astype(RUN_STATS_SCHEMA)


def _mean_power(telemetry: pd.DataFrame) -> dict[str, float]:
    """Per run, the sum over ranks of each rank's mean GPU power (NaN where nothing was sampled)."""
    sampled = telemetry.dropna(subset=["power_w"])
    if sampled.empty:
        return {}
    return sampled.groupby(["run_id", "rank"])["power_w"].mean().groupby(level=0).sum().to_dict()


def straggler_table(collection: Collection, stats: pd.DataFrame, threshold: float = STRAGGLER_THRESHOLD) -> pd.DataFrame:
    """Every straggling rank of every complete run, with its host, GPU, mean clocks, power and temperature,
    and the evidence: where its telemetry differs from the other ranks' and from its GPU's own limits."""
    runs = collection.runs.set_index("run_id")
    used = stats.set_index("run_id")["warmup_used"]
    env = collection.env.drop_duplicates(["run_id", "rank"]).set_index(["run_id", "rank"])
    tele = rank_telemetry(collection.telemetry).set_index(["run_id", "rank"])
    rows = []
    for run_id, steps in collection.steps[collection.steps["run_id"].isin(used.index)].groupby("run_id", sort=False):
        for slow in stragglers(steps, int(used[run_id]), threshold).itertuples():
            key = (run_id, int(slow.rank))
            facts = env.loc[key] if key in env.index else None
            clocks = tele.loc[key] if key in tele.index else None
            peers = tele.xs(run_id, level="run_id").drop(index=int(slow.rank), errors="ignore") \
                if run_id in tele.index.get_level_values(0) else tele.iloc[0:0]
            run = runs.loc[run_id]
            rows.append({"run_id": run_id, "system": run["system"], "benchmark": run["benchmark"], "model": run["model"],
                         "np": run["np"], "rank": int(slow.rank),
                         "host": None if facts is None else facts["host"],
                         "gpu": None if facts is None else " ".join(str(x) for x in (facts["gpu_name"], facts["gpu_bus_id"])
                                                                    if isinstance(x, str)) or None,
                         "median_work_ms": slow.median_work_s * 1e3, "run_median_ms": slow.run_median_s * 1e3,
                         "excess": slow.excess,
                         **{k: (None if clocks is None else clocks[k])
                            for k in ("sm_clock_mhz", "memory_clock_mhz", "temperature_c", "power_w", "clock_events")},
                         "evidence": evidence(clocks, peers, facts)})
    return pd.DataFrame(rows, columns=list(STRAGGLER_SCHEMA)).astype(STRAGGLER_SCHEMA)


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
    first = group.iloc[0]
    return {
        **{axis: first[axis] for axis in AXES},
        "unit": first["unit"], "repeats": len(group), "throughput": throughput,
        "ci_low": float(low), "ci_high": float(high), "ci_method": method,
        "repeat_min": float(group["throughput"].min()), "repeat_max": float(group["throughput"].max()),
        "median_rate": float(group["median_rate"].median()), "per_rank": throughput / np_,
        "median_step_ms": float(group["median_step_s"].median() * 1e3), "cv": float(group["cv"].median()),
        "warmup_used": float(group["warmup_used"].median()), "mean_power_w": float(group["mean_power_w"].median()),
    }


def scaling_table(collection: Collection, stats: pd.DataFrame | None = None) -> pd.DataFrame:
    """Per configuration and size: throughput, interval, speedup = thr(N)/thr(1 rank) and efficiency =
    speedup/N; for multi-node rows the same against 1 node; the cost of communication against the
    --independent twin where both were run."""
    stats = run_stats_table(collection) if stats is None else stats
    runs = collection.runs.merge(stats, on="run_id", how="inner")
    rows = []
    for key, group in runs.groupby(CONFIG + ["nodes", "np"], sort=True, dropna=False):
        rows.append({**dict(zip(CONFIG + ["nodes", "np"], key)), **_combine(group)})
    derived = ("speedup", "efficiency", "node_speedup", "node_efficiency", "comm_cost")
    table = pd.DataFrame(rows, columns=[c for c in SCALING_SCHEMA if c not in derived])
    table["speedup"] = [_speedup(table, row) for _, row in table.iterrows()]
    table["efficiency"] = table["speedup"] / table["np"]
    table["node_speedup"] = [_node_speedup(table, row) for _, row in table.iterrows()]
    table["node_efficiency"] = table["node_speedup"] / table["nodes"]
    table["comm_cost"] = [_comm_cost(table, row) for _, row in table.iterrows()]
    return table.astype(SCALING_SCHEMA).sort_values(CONFIG + ["nodes", "np"], ignore_index=True)


def _same(table: pd.DataFrame, row: pd.Series, keys: list[str]) -> np.ndarray:
    return np.logical_and.reduce([table[k] == row[k] for k in keys])


def _node_speedup(table: pd.DataFrame, row: pd.Series) -> float:
    """Against 1 node with as many ranks per node; NaN for single-node rows."""
    if row["nodes"] <= 1 or row["np"] % row["nodes"]:
        return float("nan")
    base = table[_same(table, row, CONFIG) & (table["nodes"] == 1) & (table["np"] == row["np"] // row["nodes"])]
    if len(base):
        return float(row["throughput"] / base["throughput"].iloc[0])
    return _speedup(table, row) if row["np"] == row["nodes"] else float("nan")  # 1 GPU per node: the 1-GPU run


def _comm_cost(table: pd.DataFrame, row: pd.Series) -> float:
    """1 - throughput(gradients exchanged) / throughput(--independent) at the same size and arguments."""
    if row["independent"]:
        return float("nan")
    keys = ["system", "framework", "benchmark", "model", "base_args", "launcher", "controller", "placement", "knobs",
            "nodes", "np"]
    twin = table[_same(table, row, keys) & table["independent"]]
    return float(1.0 - row["throughput"] / twin["throughput"].iloc[0]) if len(twin) else float("nan")


def _speedup(table: pd.DataFrame, row: pd.Series) -> float:
    """Against the 1-rank run of the same workload and arguments; the same launcher (and knobs) when there is one."""
    same = _same(table, row, BASELINE_KEY) & (table["np"] == 1)
    candidates = table[same].sort_values("independent", kind="stable")  # an exchanging 1-rank run first
    if candidates.empty:
        return float("nan")
    launch = candidates[(candidates["launcher"] == row["launcher"]) & (candidates["controller"] == row["controller"])]
    exact = launch[launch["knobs"] == row["knobs"]]
    base = next(c for c in (exact, launch, candidates) if not c.empty)["throughput"].iloc[0]
    return float(row["throughput"] / base) if base > 0 else float("nan")
