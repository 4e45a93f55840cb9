"""What each run recorded beyond its throughput: parameters, peak memory, wall time and its set-up part,
the steady-state (timed window) means of GPU utilisation, power and clocks, and energy per sample."""

from __future__ import annotations

from typing import Any

import numpy as np
import pandas as pd

from hvdbench.core.columns import PHASES, SHOWN_PHASES
from hvdbench.core.loaders import IN_MEMORY
from hvdbench.core.run_table import carried

from ..collect import Collection, step_rows
from ..formatting import Rows, fmt, missing
from ..sections import TableSection

WINDOW_MEANS = ("gpu_util_pct", "power_w", "sm_clock_mhz", "memory_clock_mhz")
DETAILS_SCHEMA: dict[str, str] = {
    "run_id": "string", "system": "string", "benchmark": "string", "model": "string", "np": "int64",
    "parameters": "Int64", "peak_memory_gb": "float64", "memory": "string", "wall_s": "float64", "setup_s": "float64",
    **{name: "float64" for name in WINDOW_MEANS}, "energy_j_per_sample": "float64", "energy_from": "string",
    **carried("details"), "nvlink_gbs": "float64", "batches": "string",
}
RUN_FACTS = tuple(carried("details"))  # the run table's columns the details table carries (core/run_table.py)


def window_telemetry(collection: Collection) -> pd.DataFrame:
    """Telemetry samples taken inside each rank's timed window (warm-up and set-up left out)."""
    tele, windows = collection.telemetry, collection.windows
    if tele.empty or windows.empty:
        return tele.iloc[0:0]
    merged = tele.merge(windows, on=["run_id", "rank"])
    return merged[(merged["t_s"] >= merged["start_s"]) & (merged["t_s"] <= merged["end_s"])]


def mean_power(collection: Collection, column: str = "power_w") -> dict[str, float]:
    """Per run, the sum over ranks of each rank's mean power in its timed window: the GPUs' (``power_w``), or what
    each node's local rank 0 reads of its node (``cpu_power_w``: RAPL's CPU packages and DRAM; ``node_power_w``:
    the BMC's whole node)."""
    sampled = window_telemetry(collection)
    sampled = sampled.dropna(subset=[column]) if column in sampled else sampled.iloc[0:0]
    if sampled.empty:
        return {}
    return sampled.groupby(["run_id", "rank"])[column].mean().groupby(level=0).sum().to_dict()


def _energy(samples: pd.DataFrame, seconds: float) -> tuple[float, str]:
    """One rank's energy over its window (J): NVML's energy counter where it moved, else mean power x time."""
    counter = samples.dropna(subset=["energy_mj"]).sort_values("t_s")
    if len(counter) >= 2 and counter["t_s"].iloc[-1] > counter["t_s"].iloc[0]:
        rate = (counter["energy_mj"].iloc[-1] - counter["energy_mj"].iloc[0]) / 1000.0 / \
            (counter["t_s"].iloc[-1] - counter["t_s"].iloc[0])
        return float(rate * seconds), "NVML energy counter"
    power = samples["power_w"].dropna()
    if len(power):
        return float(power.mean() * seconds), "power × time"
    return float("nan"), "no power telemetry in the timed window"


def _counter_rate(samples: pd.DataFrame, columns: tuple[str, ...], scale: float) -> float:
    """Per rank, the rate of counters that only grow (their sum's last minus first sample over the time between,
    times ``scale``), averaged over ranks; NaN where no rank has two samples of them."""
    rates = []
    for _, mine in samples.dropna(subset=list(columns)).sort_values("t_s").groupby("rank"):
        seconds = mine["t_s"].iloc[-1] - mine["t_s"].iloc[0] if len(mine) >= 2 else 0.0
        if seconds > 0:
            total = mine[list(columns)].sum(axis=1)
            rates.append(float(total.iloc[-1] - total.iloc[0]) * scale / seconds)
    return float(np.mean(rates)) if rates else float("nan")


def details_table(collection: Collection) -> pd.DataFrame:
    """One row per complete run."""
    runs = collection.runs[(collection.runs["status"] == "ok") & collection.runs["imported_from"].isna()]
    inside = window_telemetry(collection)
    by_run = {run_id: group for run_id, group in inside.groupby("run_id")}
    windows = {run_id: group for run_id, group in collection.windows.groupby("run_id")}
    rows = []
    for run in runs.itertuples():
        samples = by_run.get(run.run_id, inside.iloc[0:0])
        means = {name: float(samples.groupby("rank")[name].mean().sum() if name == "power_w" else samples[name].mean())
                 if samples[name].notna().any() else float("nan") for name in WINDOW_MEANS}
        energy, source, done = 0.0, "no timed window recorded", 0.0
        for window in windows.get(run.run_id, pd.DataFrame()).itertuples():
            joules, source = _energy(samples[samples["rank"] == window.rank], window.end_s - window.start_s)
            energy += joules
            done += window.samples if isinstance(window.samples, float) else 0.0
        device = run.peak_device_bytes if not pd.isna(run.peak_device_bytes) else None
        peak = device if device is not None else run.peak_rss_bytes
        rows.append({"run_id": run.run_id, "system": run.system, "benchmark": run.benchmark, "model": run.model,
                     "np": run.np, "parameters": run.parameters,
                     "peak_memory_gb": float(peak) / 1e9 if not pd.isna(peak) else np.nan,
                     "memory": "device" if device is not None else "host RSS", "wall_s": run.wall_s,
                     "setup_s": run.setup_s, **means,
                     "energy_j_per_sample": energy / done if done and not np.isnan(energy) else np.nan,
                     "energy_from": source, **{name: getattr(run, name) for name in RUN_FACTS},
                     "nvlink_gbs": _counter_rate(samples, ("nvlink_tx_kib", "nvlink_rx_kib"), 1024 / 1e9),
                     "batches": batches_said(run)})
    return pd.DataFrame(rows, columns=list(DETAILS_SCHEMA)).astype(DETAILS_SCHEMA)


def batches_said(run: Any) -> str:
    """Where a run's batches came from, in words: ``synthetic (device)``, ``files (folder, torch, 4 workers)``,
    ``pipeline alone: files (...), no model`` for --data-only, ``dataset in memory`` for one read into memory."""
    data = getattr(run, "data", None)
    data = None if data is None or pd.isna(data) else str(data)
    loader = getattr(run, "data_loader", None)
    if data != "files":
        held = isinstance(loader, str) and loader == IN_MEMORY
        return "dataset in memory" if held else f"synthetic ({data or 'device'})"
    workers = getattr(run, "loader_workers", None)
    parts = [str(v) for v in (getattr(run, "data_layout", None), loader) if isinstance(v, str) and v]
    if workers is not None and not pd.isna(workers):
        parts.append(f"{int(workers)} worker{'s' if int(workers) != 1 else ''}")
    said = f"files ({', '.join(parts)})" if parts else "files"
    return f"pipeline alone: {said}, no model" if getattr(run, "data_only", False) is True else said




def breakdown_table(collection: Collection, table: pd.DataFrame) -> pd.DataFrame:
    """Per configuration and GPU count that ran with --breakdown: the median of each phase over its timed
    steps (ms), and the rest of the step not inside a phase."""
    steps = collection.steps
    phases = [p for p in PHASES if p in steps and steps[p].notna().any()]
    if not phases:  # asked before any row is copied: 10M steps without --breakdown cost nothing here
        return pd.DataFrame()
    values = {name: steps[name].to_numpy(dtype=float, na_value=np.nan) for name in (*phases, "duration")}
    timed = ~steps["warmup"].to_numpy(dtype=bool) & ~np.isnan(np.column_stack([values[p] for p in phases])).all(axis=1)
    by_run = step_rows(collection)
    rows = []
    for row in table.itertuples():
        parts = [by_run[run_id] for run_id in str(row.runs).split(",") if run_id in by_run]
        mine = np.concatenate(parts) if parts else np.array([], dtype=np.int64)
        mine = mine[timed[mine]]
        if not len(mine):
            continue
        medians = {p: float(np.nanmedian(values[p][mine]) * 1e3) if (~np.isnan(values[p][mine])).any() else 0.0
                   for p in phases}
        rows.append({"system": row.system, "benchmark": row.benchmark, "model": row.model, "np": row.np,
                     "knobs": row.knobs, "args": row.args, **medians,
                     "step_ms": float(np.median(values["duration"][mine]) * 1e3)})
    return pd.DataFrame(rows)


DETAILS_FOLDED = (7, 8, 11, 13, 14)  # set-up, GPU util, memory clock, cuDNN autotune, NVLink: behind "every column"


DETAILS_TEXT = ("Per run: trainable parameters, peak device memory (GPU) or peak resident set (CPU), wall time and "
                "its set-up part (start to the first timed step: imports, model build, compile, warm-up), and the "
                "timed window's means of GPU utilisation, power (summed over ranks) and clocks; energy per sample "
                "from NVML's energy counter where it exists, else power × time, timed window only; where GPUs have "
                "NVLink, its payload sent and received per GPU (NVML's counters over the timed window).")


def details_rows(details: pd.DataFrame) -> Rows:
    nvlink = bool(details["nvlink_gbs"].notna().any()) if "nvlink_gbs" in details else False  # where a GPU has it
    return (["run", "system", "ranks", "batches", "parameters", "peak memory (GB)", "wall (s)", "set-up (s)",
             "GPU util (%)", "power (W)", "SM clock (MHz)", "memory clock (MHz)", "energy per sample (J)",
             "cuDNN autotune", *(["NVLink per GPU (GB/s, sent + received)"] if nvlink else [])],
            [[r.run_id, r.system, str(r.np), r.batches, fmt(r.parameters, 0),
              f"{fmt(r.peak_memory_gb, 2)} {r.memory}",
              fmt(r.wall_s),
              fmt(r.setup_s), fmt(r.gpu_util_pct, 0), fmt(r.power_w, 0), fmt(r.sm_clock_mhz, 0),
              fmt(r.memory_clock_mhz, 0),
              fmt(r.energy_j_per_sample, 4) if not missing(r.energy_j_per_sample) else f"n/a ({r.energy_from})",
              "-" if missing(r.cudnn_autotune) else "on" if r.cudnn_autotune else "off",
              *([fmt(r.nvlink_gbs, 2)] if nvlink else [])]
             for r in details.itertuples()])


BREAKDOWN_TEXT = ("Runs with --breakdown: the median of each part of a step over its timed steps (each part bounded "
                  "by a device sync, which stops the exchange overlapping backward; the plain run is faster).")


def breakdown_rows(breakdown: pd.DataFrame) -> Rows:
    phases = [c for c in SHOWN_PHASES if c in breakdown]
    return (["workload", "knobs", "GPUs", *[f"{p} (ms)" for p in phases], "step (ms)"],
            [[f"{r['system']} {r['benchmark']} {r['model']}", r["knobs"] or "-", str(r["np"]),
              *[fmt(r[p], 2) for p in phases], fmt(r["step_ms"], 2)] for _, r in breakdown.iterrows()])


def profile_rows(profile: pd.DataFrame, top: int = 5) -> Rows:
    """Each profiled run's top operators (rank 0), by the time the profiler sorted on."""
    rank0 = profile[profile["rank"] == 0]
    rows = []
    for run_id, ops in rank0.groupby("run_id", sort=True):
        for op in ops.head(top).itertuples():
            rows.append([run_id, op.operator, fmt(op.calls, 0), fmt(op.self_device_us / 1e3, 2),
                         fmt(op.self_cpu_us / 1e3, 2)])
    return (["run", "operator", "calls", "self device (ms)", "self CPU (ms)"], rows)


BREAKDOWN_SECTION = TableSection("breakdown", "Step breakdown", BREAKDOWN_TEXT, breakdown_rows,
                                 lambda inputs: breakdown_table(inputs.collection, inputs.table))
DETAILS_SECTION = TableSection("details", "Run details", DETAILS_TEXT, details_rows,
                               lambda inputs: details_table(inputs.collection), folded=DETAILS_FOLDED)
