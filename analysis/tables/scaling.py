"""Scaling: one row per configuration and rank count, with speedup and efficiency against 1 rank."""

from __future__ import annotations

import math
from typing import Any

import numpy as np
import pandas as pd

from ..collect import Collection, step_rows
from .details import mean_power
from ..keys import BASELINE, CONFIG, SHARED, SIZE, TWIN, identity
from .efficiency import ranks_title
from .evidence import evidence, rank_telemetry
from ..ratios import Resampled, config_draws, ratio_interval
from ..stats import STRAGGLER_THRESHOLD, StepMatrix, run_stats, step_matrices, stragglers
from ..formatting import Rows, fmt, pct, text

RUN_STATS_SCHEMA: dict[str, str] = {
    "run_id": "string", "throughput": "float64", "ci_low": "float64", "ci_high": "float64",
    "median_rate": "float64", "median_step_s": "float64", "cv": "float64", "steps": "int64",
    "warmup_asked": "int64", "warmup_used": "int64", "warmup_detected": "int64", "mean_power_w": "float64",
    "cpu_power_w": "float64", "node_power_w": "float64", "block_steps": "int64",
}
SCALING_SCHEMA: dict[str, str] = {
    **{name: "string" for name in CONFIG if name != "inputs"}, "batch_size": "Int64", "precision": "string",
    "independent": "bool",
    "base_args": "string", "nodes": "int64", "np": "int64", "unit": "string",
    "repeats": "int64", "throughput": "float64", "ci_low": "float64", "ci_high": "float64",
    "ci_method": "string", "repeat_min": "float64", "repeat_max": "float64", "median_rate": "float64",
    "per_rank": "float64", "median_step_ms": "float64", "cv": "float64", "warmup_used": "float64",
    "mean_power_w": "float64", "speedup": "float64", "efficiency": "float64",
    "node_speedup": "float64", "node_efficiency": "float64", "comm_cost": "float64",
    **{f"{name}_{end}": "float64" for name in ("speedup", "efficiency", "node_speedup", "node_efficiency", "comm_cost")
       for end in ("low", "high")},
    "baseline": "string", "channels_last": "bool", "compile": "bool", "data": "string", "fp16_allreduce": "bool",
    "exchange": "string",
    "threads": "Int64", "runs": "string", "device_name": "string", "tf32": "boolean", "flops_per_sample": "float64",
    "tflops_per_gpu": "float64", "peak_tflops": "float64", "pct_of_peak": "float64", "peak": "string",
    "cpu_power_w": "float64", "node_power_w": "float64",  # what each node's first rank read of its node
    "first_started": "float64", "span_s": "float64",  # when its first run started, and how long until its last did
    "inputs": "string", "parameters": "Int64",  # the files its arguments name, hashed; the model's parameters
    "loader": "string", "loader_workers": "Int64", "data_dir": "string", "data_only": "bool",
    "data_cache": "string",  # --data files' axes
    "run_spread": "float64",  # the spread between its runs: the standard deviation of their log throughputs
    "args_key": "string", "work_key": "string",  # what its runs are grouped by (keys.identity), and paired by
}
STRAGGLER_SCHEMA: dict[str, str] = {
    "run_id": "string", "system": "string", "benchmark": "string", "model": "string", "np": "int64",
    "rank": "int64", "host": "string", "gpu": "string", "median_work_ms": "float64", "run_median_ms": "float64",
    "excess": "float64", "sm_clock_mhz": "float64", "memory_clock_mhz": "float64", "temperature_c": "float64",
    "power_w": "float64", "clock_events": "string", "evidence": "string",
}


def matrices(collection: Collection) -> dict[str, StepMatrix]:
    """The step matrices of every complete run (status ok), made once per collection."""
    if "matrices" not in collection.cache:
        ok = collection.runs.loc[collection.runs["status"] == "ok", "run_id"]
        collection.cache["matrices"] = step_matrices(collection.steps, ok, step_rows(collection))
    return collection.cache["matrices"]


def run_stats_table(collection: Collection, warmup: int | None = None, salt: str = "") -> pd.DataFrame:
    """Statistics of every complete run (status ok), one row each; ``warmup`` overrides the detected
    warm-up of every run; ``salt`` makes this collection's resamples independent of another's that holds the
    same run ids (stats.run_stats)."""
    power = {column: mean_power(collection, column) for column in ("power_w", "cpu_power_w", "node_power_w")}
    rows = []
    draws: dict[str, np.ndarray] = {}
    for run_id, matrix in matrices(collection).items():
        stats = run_stats(matrix, warmup, draws, run_id, salt)
        if stats is not None:
            rows.append({"run_id": run_id, **stats.__dict__, "mean_power_w": power["power_w"].get(run_id, math.nan),
                         **{column: power[column].get(run_id, math.nan) for column in ("cpu_power_w", "node_power_w")}})
    table = pd.DataFrame(rows, columns=list(RUN_STATS_SCHEMA)).astype(RUN_STATS_SCHEMA)
    table.attrs["draws"] = draws  # each run's bootstrap resamples, for intervals on ratios (scaling_table)
    table.attrs["points"] = dict(zip(table["run_id"], table["throughput"]))  # each run's own throughput
    return table


def straggler_table(collection: Collection, stats: pd.DataFrame,
                    threshold: float = STRAGGLER_THRESHOLD) -> pd.DataFrame:
    """Every straggling rank of every complete run, with its host, GPU, mean clocks, power and temperature,
    and the evidence: where its telemetry differs from the other ranks' and from its GPU's own limits."""
    runs = collection.runs.set_index("run_id")
    used = stats.set_index("run_id")["warmup_used"]
    env = collection.env.drop_duplicates(["run_id", "rank"]).set_index(["run_id", "rank"])
    tele = rank_telemetry(collection.telemetry).set_index(["run_id", "rank"])
    rows = []
    for run_id, matrix in matrices(collection).items():
        if run_id not in used.index:
            continue
        for slow in stragglers(matrix, int(used[run_id]), threshold).itertuples():
            key = (run_id, int(slow.rank))
            facts = env.loc[key] if key in env.index else None
            clocks = tele.loc[key] if key in tele.index else None
            peers = tele.xs(run_id, level="run_id").drop(index=int(slow.rank), errors="ignore") \
                if run_id in tele.index.get_level_values(0) else tele.iloc[0:0]
            run = runs.loc[run_id]
            rows.append({"run_id": run_id, "system": run["system"], "benchmark": run["benchmark"],
                         "model": run["model"],
                         "np": run["np"], "rank": int(slow.rank),
                         "host": None if facts is None else facts["host"],
                         "gpu": None if facts is None else " ".join(str(x) for x in
                                                                    (facts["gpu_name"], facts["gpu_bus_id"])
                                                                    if isinstance(x, str)) or None,
                         "median_work_ms": slow.median_work_s * 1e3, "run_median_ms": slow.run_median_s * 1e3,
                         "excess": slow.excess,
                         **{k: (None if clocks is None else clocks[k])
                            for k in ("sm_clock_mhz", "memory_clock_mhz", "temperature_c", "power_w", "clock_events")},
                         "evidence": evidence(clocks, peers, facts)})
    return pd.DataFrame(rows, columns=list(STRAGGLER_SCHEMA)).astype(STRAGGLER_SCHEMA)


def _combine(group: pd.DataFrame, resampled: Resampled | None) -> dict[str, Any]:
    """Runs of one configuration: the geometric mean of their throughputs, and its interval from the hierarchical
    resample (its runs resampled, blocks of steps within each; Student's t over the runs: ratios.config_draws); one
    run's is within-run only."""
    low, high = resampled.interval if resampled is not None else (np.nan, np.nan)
    method = ("steps of one run (within-run only: the spread between runs unknown)" if len(group) == 1 else
              f"{len(group)} runs resampled, blocks of steps within each (Student's t over runs)")
    np_ = int(group["np"].iloc[0])
    throughput = resampled.value if resampled is not None else float(np.exp(np.log(group["throughput"]).mean()))
    first = group.iloc[0]
    started = group["started"].dropna() if "started" in group else pd.Series(dtype=float)
    return {
        **{axis: first[axis] for axis in SHARED}, "runs": ",".join(group["run_id"]),
        "unit": first["unit"], "repeats": len(group), "throughput": throughput,
        "ci_low": float(low), "ci_high": float(high), "ci_method": method,
        "repeat_min": float(group["throughput"].min()), "repeat_max": float(group["throughput"].max()),
        "run_spread": resampled.spread if resampled is not None else np.nan,
        "median_rate": float(group["median_rate"].median()), "per_rank": throughput / np_,
        "median_step_ms": float(group["median_step_s"].median() * 1e3), "cv": float(group["cv"].median()),
        "warmup_used": float(group["warmup_used"].median()),
        **{column: float(group[column].median()) for column in ("mean_power_w", "cpu_power_w", "node_power_w")},
        **_achieved(group, throughput / np_),
        "parameters": _parameters(group),
        "first_started": float(started.min()) if len(started) else np.nan,
        "span_s": float(started.max() - started.min()) if len(started) else np.nan,
    }


def _parameters(group: pd.DataFrame) -> Any:
    """The model's parameters as the runs recorded them (pd.NA where none did)."""
    known = group["parameters"].dropna() if "parameters" in group else pd.Series(dtype="Int64")
    return int(known.iloc[0]) if len(known) else pd.NA


def _achieved(group: pd.DataFrame, per_gpu: float) -> dict[str, Any]:
    """Achieved TFLOP/s per GPU: throughput per GPU x the FLOPs per sample the runs counted (peaks are
    judged later, efficiency.with_peaks)."""
    flops = group["flops_per_sample"].dropna()
    names, tf32 = group["device_name"].dropna(), group["tf32"].dropna()
    value = float(flops.median()) if len(flops) else np.nan
    return {"device_name": names.iloc[0] if len(names) else None, "tf32": bool(tf32.any()) if len(tf32) else None,
            "flops_per_sample": value,
            "tflops_per_gpu": per_gpu * value / 1e12, "peak_tflops": np.nan, "pct_of_peak": np.nan, "peak": None}


def scaling_table(collection: Collection, stats: pd.DataFrame | None = None, pipelines: bool = False) -> pd.DataFrame:
    """Per configuration and size: throughput, interval, speedup = thr(N)/thr(1 rank) and efficiency =
    speedup/N; for multi-node rows the same against 1 node; the cost of communication against the
    --independent twin where both were run. Every ratio carries a 95% interval (``ratios.py``) and each
    row names the 1-GPU baseline it used. Runs that timed the input pipeline alone (--data-only) train nothing: they
    are left out, and are the table's rows where ``pipelines`` asks for them alone (the data path's)."""
    stats = run_stats_table(collection) if stats is None else stats
    runs = collection.runs.merge(stats, on="run_id", how="inner")
    alone = runs["data_only"].fillna(False).astype(bool) if "data_only" in runs else pd.Series(False, index=runs.index)
    runs = runs[alone if pipelines else ~alone]
    rows, draws = [], []
    for _, group in runs.groupby(identity(CONFIG) + SIZE, sort=True, dropna=False):
        draws.append(config_draws(list(group["run_id"]), stats.attrs.get("draws", {}),
                                  points=stats.attrs.get("points")))
        first = group.iloc[0]  # its arguments as its first run spelled them
        rows.append({**{name: first[name] for name in CONFIG + SIZE + ["args_key", "work_key"]},
                     **_combine(group, draws[-1])})
    table = pd.DataFrame(rows, columns=[c for c in SCALING_SCHEMA if c in BASE_COLUMNS])
    derived: dict[str, list[Any]] = {name: [] for name in SCALING_SCHEMA if name not in BASE_COLUMNS}
    for i in range(len(table)):
        base, label = _baseline(table, i)
        _ratio(derived, "speedup", table, draws, i, base)
        node_base = _node_baseline(table, i, base)
        _ratio(derived, "node_speedup", table, draws, i, node_base)
        twin, scale = _twin(table, i)
        _ratio(derived, "comm_cost", table, draws, i, twin, scale)
        derived["baseline"].append(label)
    for name in ("speedup", "node_speedup"):
        per = table["np"] if name == "speedup" else table["nodes"]
        efficiency = name.replace("speedup", "efficiency")
        for end in ("", "_low", "_high"):
            derived[f"{efficiency}{end}"] = list(np.asarray(derived[f"{name}{end}"], dtype=float) / per)
    ratio_of = {end: derived[f"comm_cost{end}"] for end in ("", "_low", "_high")}  # exchanged / independent
    for end, source in (("", ""), ("_low", "_high"), ("_high", "_low")):  # cost = 1 - ratio: the interval turns around
        derived[f"comm_cost{end}"] = [1.0 - v for v in ratio_of[source]]
    for name, values in derived.items():
        table[name] = values
    return table[list(SCALING_SCHEMA)].astype(SCALING_SCHEMA).sort_values(CONFIG + SIZE, ignore_index=True)


BASE_COLUMNS = [c for c in SCALING_SCHEMA if not c.startswith(("speedup", "efficiency", "node_speedup",
                                                                  "node_efficiency", "comm_cost"))
                and c != "baseline"]


def _ratio(out: dict[str, list[Any]], name: str, table: pd.DataFrame, draws: list[Resampled | None], i: int,
           base: int | None, scale: float = 1.0) -> None:
    """Row i's throughput over ``scale`` x row base's, with its interval, appended to out[name],
    out[name_low/_high]."""
    if base is None or not table.at[base, "throughput"] > 0:
        value, (low, high) = float("nan"), (float("nan"), float("nan"))
    else:
        value = float(table.at[i, "throughput"] / table.at[base, "throughput"]) / scale
        low, high = (1.0, 1.0) if base == i else ratio_interval(draws[i], draws[base])
        low, high = low / scale, high / scale
    out[name].append(value)
    out[f"{name}_low"].append(low)
    out[f"{name}_high"].append(high)


def _same(table: pd.DataFrame, row: pd.Series, keys: list[str]) -> np.ndarray:
    return np.logical_and.reduce([table[k] == row[k] for k in keys])


def _baseline(table: pd.DataFrame, i: int) -> tuple[int | None, str]:
    """The 1-rank configuration row i's speedup is against, and what it is: the same workload, system and
    arguments (an --independent row: its own independent 1-GPU run), else the exchanging 1-GPU run of the
    same arguments; among several, the same launcher, controller and knobs."""
    row = table.iloc[i]
    candidates = table[_same(table, row, BASELINE) & (table["np"] == 1)].sort_values("independent", kind="stable")
    if pd.notna(row["parameters"]):  # a model of another size is never the baseline (an edited model file)
        candidates = candidates[candidates["parameters"].isna() | (candidates["parameters"] == row["parameters"])]
    if candidates.empty:
        return None, "no 1-GPU run"
    own = candidates[candidates["args"] == row["args"]]
    pool = own if len(own) else candidates
    launch = pool[(pool["launcher"] == row["launcher"]) & (pool["controller"] == row["controller"])]
    exact = launch[launch["knobs"] == row["knobs"]]
    chosen = next(c for c in (exact, launch, pool) if not c.empty)
    base = chosen.iloc[0]
    label = f"{base['launcher']}/{base['controller']}" + (f" {base['knobs']}" if base["knobs"] else "") + \
        (" --independent" if base["independent"] else "")
    if not len(own):
        label += (" (exchanging: no --independent 1-GPU run)" if row["independent"]
                  else f" (exchange {base['exchange']}: one 1-GPU run serves every exchange)"
                  if base["exchange"] != row["exchange"] else " (other arguments)")
    if len(chosen) > 1:
        label += f" (first of {len(chosen)} matching)"
    return int(chosen.index[0]), label


def _node_baseline(table: pd.DataFrame, i: int, gpu_base: int | None) -> int | None:
    """1 node with as many ranks per node (None for single-node rows); with 1 GPU per node, the 1-GPU run."""
    row = table.iloc[i]
    if row["nodes"] <= 1 or row["np"] % row["nodes"]:
        return None
    base = table[_same(table, row, identity(CONFIG)) & (table["nodes"] == 1) &
                 (table["np"] == row["np"] // row["nodes"])]
    if len(base):
        return int(base.index[0])
    return gpu_base if row["np"] == row["nodes"] else None


def _twin(table: pd.DataFrame, i: int) -> tuple[int | None, float]:
    """The --independent twin of an exchanging row (same arguments otherwise, same size) and 1; else, for a
    multi-node row, the twin with as many ranks per node on the fewest nodes and how many times its throughput
    the row's size would reach (ranks that exchange nothing train on every node as on one: the plan runs one
    node count of them)."""
    row = table.iloc[i]
    if row["independent"]:
        return None, 1.0
    twin = table[_same(table, row, TWIN) & table["independent"]]
    if len(twin):
        return int(twin.index[0]), 1.0
    keys = [k for k in TWIN if k not in SIZE]
    same = table[_same(table, row, keys) & table["independent"]]
    per_node = same[(same["np"] == same["nodes"] * (row["np"] // row["nodes"])) & (same["nodes"] < row["nodes"])]
    if row["nodes"] <= 1 or row["np"] % row["nodes"] or per_node.empty:
        return None, 1.0
    first = per_node.sort_values("nodes").iloc[0]
    return int(per_node.sort_values("nodes").index[0]), float(row["nodes"] / first["nodes"])


def straggler_text(slow: pd.DataFrame, threshold: float) -> str:
    base = (f"Ranks whose median own-work time per step is more than {threshold:.0%} above their run's median "
            "(own work: the step minus its gradient exchange where --breakdown recorded it, since a synchronous "
            "step makes every rank wait for the slowest; else the whole step). Evidence: where the rank's "
            "telemetry differs from the other ranks' (clocks, power, temperature, PCIe link, clock-event reasons) "
            "and from its GPU's own limits (maximum clocks, power limit, PCIe generation and width, ECC errors, "
            "retired pages).")
    return base if len(slow) else base + " None found."


def straggler_rows(slow: pd.DataFrame) -> Rows:
    if slow.empty:
        return [], []
    return (["run", "GPUs", "rank", "host", "GPU", "median work (ms)", "run median (ms)", "slower by",
             "SM clock (MHz)", "memory clock (MHz)", "temperature (°C)", "power (W)", "evidence"],
            [[r.run_id, str(r.np), str(r.rank), text(r.host), text(r.gpu), fmt(r.median_work_ms, 2),
              fmt(r.run_median_ms, 2), pct(r.excess), fmt(r.sm_clock_mhz, 0), fmt(r.memory_clock_mhz, 0),
              fmt(r.temperature_c, 0), fmt(r.power_w, 0), text(r.evidence)] for r in slow.itertuples()])


WARMUP_TEXT = ("Steps left out of each run: at least those it ran as warm-up; more where its step times show a "
               "longer initial transient (the run of steps from the start, gaps of up to 3 allowed, further than 4 "
               "robust SDs from the second half's median); n/a where fewer than 20 steps leave nothing to detect. "
               "Block: the consecutive steps its interval resamples together, as long as the run's own "
               "autocorrelation asks (1: none found).")


def warmup_rows(runs: pd.DataFrame, stats: pd.DataFrame) -> Rows:
    merged = runs.merge(stats, on="run_id")
    return (["run", "system", ranks_title(merged.get("device_name", [])), "warm-up asked", "detected", "left out",
             "steady steps", "block (steps)"],
            [[r.run_id, r.system, str(r.np), str(r.warmup_asked),
              "n/a" if r.warmup_detected < 0 else str(r.warmup_detected), str(r.warmup_used), str(r.steps),
              str(r.block_steps)] for r in merged.itertuples()])


ADAPTIVE_TEXT = ("Runs with --target-ci ran their --steps, then chunks of steps until the 95% interval of throughput "
                 "was within ± the target (stopped by target) or --max-steps were timed (stopped by max_steps). "
                 "Reached: the half-width rank 0 judged when the run stopped; report: this report's own half-width, "
                 "after its warm-up detection and with more resamples.")


def adaptive_rows(runs: pd.DataFrame, stats: pd.DataFrame) -> Rows:
    merged = runs[runs["target_ci_pct"].notna()].merge(stats, on="run_id")
    return (["run", ranks_title(merged.get("device_name", [])), "steps timed", "target (±%)", "reached (±%)",
             "stopped by", "report (±%)"],
            [[r.run_id, str(r.np), str(r.timed_steps), fmt(r.target_ci_pct, 2),
              fmt(r.ci_reached_pct, 2), str(r.stopped_by), fmt((r.ci_high - r.ci_low) / 2 / r.throughput * 100, 2)]
             for r in merged.itertuples()])
