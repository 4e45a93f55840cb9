"""Systems side by side on the same workloads: throughput, per GPU, per watt and per dollar."""

from __future__ import annotations

import math

import numpy as np
import pandas as pd

from hvdbench.suite.core.errors import UsageError

from ..keys import ACROSS_SYSTEMS
from ..ratios import config_draws, ratio_interval

WORKLOAD = ACROSS_SYSTEMS
COMPARE_SCHEMA: dict[str, str] = {
    "framework": "string", "benchmark": "string", "model": "string", "args": "string", "np": "int64",
    "system": "string", "throughput": "float64", "per_gpu": "float64", "per_watt": "float64",
    "per_dollar": "float64", "relative": "float64", "relative_low": "float64", "relative_high": "float64",
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


def compare_table(scaling: pd.DataFrame, prices: dict[str, float],
                  draws: dict[str, np.ndarray] | None = None) -> pd.DataFrame:
    """Rows of workloads (same framework, benchmark, model, arguments, GPUs) measured on two or more
    systems; ``relative`` is throughput over the first system's (in name order), with its 95% interval
    from both systems' resampled runs (``draws``: each run's bootstrap resamples)."""
    unknown = sorted(set(prices) - set(scaling["system"]))
    if unknown:
        raise UsageError(f"--price names system(s) {', '.join(unknown)} that no result has; "
                         f"systems: {', '.join(sorted(set(scaling['system'])))}")
    best = scaling[~scaling["independent"]].sort_values("throughput", ascending=False)
    best = best.drop_duplicates(WORKLOAD + ["system"])  # the best launcher/placement of each system
    shared = best.groupby(WORKLOAD).filter(lambda g: g["system"].nunique() > 1)
    if shared.empty:
        return pd.DataFrame(columns=list(COMPARE_SCHEMA)).astype(COMPARE_SCHEMA)
    out = shared[WORKLOAD + ["system", "throughput", "runs"]].copy()
    out["per_gpu"] = out["throughput"] / out["np"]
    out["per_watt"] = out["throughput"] / shared["mean_power_w"]
    price = out["system"].map(prices).astype("float64")
    out["per_dollar"] = out["throughput"] * 3600.0 / (price * out["np"])
    out = out.sort_values(WORKLOAD + ["system"], ignore_index=True)
    first = out.groupby(WORKLOAD)["throughput"].transform("first")
    out["relative"] = out["throughput"] / first
    firsts = out.groupby(WORKLOAD)["runs"].transform("first")
    intervals = [(1.0, 1.0) if mine == base else ratio_interval(config_draws(mine.split(","), draws or {}),
                                                               config_draws(base.split(","), draws or {}))
                 for mine, base in zip(out["runs"], firsts)]
    out["relative_low"], out["relative_high"] = [i[0] for i in intervals], [i[1] for i in intervals]
    return out[list(COMPARE_SCHEMA)].astype(COMPARE_SCHEMA)
