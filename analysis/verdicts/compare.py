"""Systems side by side on the same workloads: throughput, per GPU, per watt and per dollar."""

from __future__ import annotations

import math

import numpy as np
import pandas as pd

from hvdbench.core.errors import UsageError

from ..tables.efficiency import on_gpu_name
from ..keys import ACROSS_SYSTEMS, identity, measured_args
from ..ratios import Resampled, Spread, config_draws, ratio_draws

WORKLOAD = ACROSS_SYSTEMS
PAIRED = identity(list(WORKLOAD), measured_only=True)  # what pairs two systems' rows: the work, however spelled
COMPARE_SCHEMA: dict[str, str] = {
    "framework": "string", "benchmark": "string", "model": "string", "args": "string", "np": "int64",
    "system": "string", "throughput": "float64", "per_gpu": "float64", "per_watt": "float64",
    "per_dollar": "float64", "relative": "float64", "relative_low": "float64", "relative_high": "float64",
    "runs": "string", "on_gpu": "bool", "repeats": "int64", "baseline_repeats": "Int64", "spread": "string",
    "batch_size": "Int64", "precision": "string",
}


def parse_prices(items: list[str]) -> dict[str, float]:
    """``SYSTEM=USD`` per GPU-hour, as given on the command line."""
    prices = {}
    for item in items:
        system, sep, value = item.rpartition("=")
        try:
            price = float(value)
        except ValueError:
            price = -1.0
        if not sep or not system or not math.isfinite(price) or price <= 0:
            raise UsageError(f"--price {item!r}: expected SYSTEM=USD_PER_GPU_HOUR with a positive price")
        prices[system] = price
    return prices


def measured_best(scaling: pd.DataFrame) -> pd.DataFrame:
    """Each system's best launcher/placement of each workload, its arguments without run-length flags (runs
    that differ only in how long they measured are the same measurement; keys.measured_args)."""
    best = scaling[~scaling["independent"]].sort_values("throughput", ascending=False).copy()
    best["args"] = best["args"].map(measured_args)
    return best.drop_duplicates(PAIRED + ["system"])


def _systems(scaling: pd.DataFrame, prices: dict[str, float], baseline: str | None) -> list[str]:
    """The systems the results hold, sorted, after refusing a --price or --baseline naming none of them."""
    systems = sorted(set(scaling["system"]))
    unknown = sorted(set(prices) - set(systems))
    if unknown:
        raise UsageError(f"--price names system(s) {', '.join(unknown)} that no result has; "
                         f"systems: {', '.join(systems)}")
    if baseline is not None and baseline not in systems:
        raise UsageError(f"--baseline {baseline!r}: no result has that system; systems: {', '.join(systems)}")
    return systems


def compare_table(scaling: pd.DataFrame, prices: dict[str, float], draws: dict[str, np.ndarray] | None = None,
                  baseline: str | None = None, spreads: dict[str, Spread] | None = None,
                  min_runs: int = 1, points: dict[str, float] | None = None,
                  executions: dict[str, str] | None = None) -> pd.DataFrame:
    """Rows of workloads (same framework, benchmark, model, arguments but run length, GPUs) measured on two or
    more systems; ``relative`` is throughput over the baseline system's (given, else the first by name), with its
    95% interval from both systems' hierarchically resampled runs (``draws``: each run's block-bootstrap resamples;
    ratios.py). ``spreads`` (--borrow-spread): a system's spread between runs, lent to its configurations of fewer
    than ``min_runs`` runs. ``repeats`` and ``baseline_repeats`` count the runs each side rests on. ``executions``:
    each run row's execution key, by which ``draws`` and ``points`` are kept (analysis/verdicts/versus.py: every B
    against A judged alike)."""
    systems = _systems(scaling, prices, baseline)
    best = measured_best(scaling)
    shared = best.groupby(PAIRED).filter(lambda g: g["system"].nunique() > 1)
    if shared.empty:
        return pd.DataFrame(columns=list(COMPARE_SCHEMA)).astype(COMPARE_SCHEMA)
    base = baseline or systems[0]
    out = shared[WORKLOAD + ["work_key", "system", "throughput", "runs", "repeats", "batch_size", "precision"]].copy()
    # the rows of one work read alike on every system (its arguments as its first row spelled them)
    out["args"] = out.groupby(PAIRED, sort=False, dropna=False)["args"].transform("first")
    # CPU ranks only where the runs recorded a device that is not a GPU (older runs without one read as GPUs)
    out["on_gpu"] = (shared["device_name"].map(lambda d: not isinstance(d, str) or not d or on_gpu_name(d)).astype(bool)
                     if "device_name" in shared else True)
    out["per_gpu"] = out["throughput"] / out["np"]
    out["per_watt"] = out["throughput"] / shared["mean_power_w"]
    price = out["system"].map(prices).astype("float64")
    out["per_dollar"] = out["throughput"] * 3600.0 / (price * out["np"])
    out = out.sort_values(WORKLOAD + ["system"], ignore_index=True)
    mine = out[out["system"] == base].set_index(WORKLOAD)
    keys = list(out[WORKLOAD].itertuples(index=False, name=None))
    base_thr = [mine["throughput"].get(k, float("nan")) for k in keys]
    base_runs = [mine["runs"].get(k) for k in keys]
    out["relative"] = out["throughput"] / pd.Series(base_thr, dtype="float64")
    out["baseline_repeats"] = pd.array([None if r is None else len(str(r).split(",")) for r in base_runs],
                                       dtype="Int64")
    resampled: dict[int, Resampled] = {}  # row -> the ratio's resamples (this row's draws over the baseline's)

    def side(runs: str, system: str) -> Resampled | None:
        lent = (spreads or {}).get(system) if len(runs.split(",")) < min_runs else None
        return config_draws([(executions or {}).get(r, r) for r in runs.split(",")], draws or {}, lent, points)

    spread: list[str] = []
    out["relative_low"], out["relative_high"] = math.nan, math.nan
    for i, (runs, theirs, system) in enumerate(zip(out["runs"], base_runs, out["system"])):
        ratio = None if theirs is None or runs == theirs else ratio_draws(side(runs, system), side(theirs, base))
        if ratio is not None:
            resampled[i] = ratio
        spread.append(ratio.borrowed if ratio is not None else "")
        interval = (1.0, 1.0) if runs == theirs else ratio.interval if ratio is not None else (math.nan, math.nan)
        out.loc[i, ["relative_low", "relative_high"]] = interval
    out["spread"] = spread
    typed = out[list(COMPARE_SCHEMA)].astype(COMPARE_SCHEMA)
    typed.attrs["baseline"] = base  # the system every relative is against
    typed.attrs["ratio_draws"] = resampled
    return typed
