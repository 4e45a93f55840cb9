"""Screening: every GPU alone (and every node) against the fleet it belongs to.

A unit is a complete 1-rank run on one GPU (placement ``single:<id>``, from ``hvdbench screen`` or the
sweep axis ``placements: each``) or one CPU slot (``cpu:<n>``); its fleet is every unit of the same system,
benchmark and arguments. A node counts as its slowest unit (synchronous data-parallel training runs at the
slowest GPU's pace). A unit or a node is flagged when its throughput is
more than ``threshold`` (default 5%) below the fleet median, or when its own 95% interval lies wholly below
the fleet median's interval (a percentile bootstrap over units) while it is at least MIN_EFFECT below: a
real deficit smaller than the threshold. The evidence says what its telemetry and NVML facts show.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pandas as pd

from ..keys import ARGS
from ..collect import Collection
from .evidence import evidence, rank_telemetry
from ..stats import median_interval
from ..formatting import Rows, fmt, missing, pct, text

THRESHOLD = 0.05
MIN_EFFECT = 0.01
UNIT_PREFIXES = ("single:", "cpu:")
FLEET = ARGS
SCREENING_SCHEMA: dict[str, str] = {
    **{k: "string" for k in FLEET}, "level": "string", "host": "string", "unit": "string", "gpu": "string",
    "throughput": "float64", "ci_low": "float64", "ci_high": "float64", "fleet_median": "float64",
    "fleet_low": "float64", "fleet_high": "float64", "vs_fleet": "float64", "flagged": "bool", "evidence": "string",
}


def _units(collection: Collection, stats: pd.DataFrame) -> pd.DataFrame:
    """Complete 1-rank runs on one GPU or CPU slot, with their host (from the rank's own record)."""
    runs = collection.runs[(collection.runs["status"] == "ok") & (collection.runs["np"] == 1)]
    runs = runs[runs["placement"].str.startswith(UNIT_PREFIXES)].merge(stats, on="run_id")
    env = collection.env.drop_duplicates("run_id").set_index("run_id")
    runs = runs.assign(host=[env.loc[r, "host"] if r in env.index else "?" for r in runs["run_id"]])
    return runs


def _flag(value: float, low: float | None, high: float | None, median: float, fleet_low: float,
          threshold: float) -> bool:
    deficit = 1.0 - value / median
    wholly_below = high is not None and high < fleet_low
    return bool(deficit > threshold or (wholly_below and deficit >= MIN_EFFECT))


def _gpu(env: pd.DataFrame, run_id: str) -> str | None:
    if run_id not in env.index:
        return None
    facts = env.loc[run_id]
    return " ".join(str(x) for x in (facts["gpu_name"], facts["gpu_bus_id"]) if isinstance(x, str)) or None


def screening_table(collection: Collection, stats: pd.DataFrame, threshold: float = THRESHOLD) -> pd.DataFrame:
    """One row per unit and per node (where a fleet spans two or more nodes), against its fleet."""
    units = _units(collection, stats)
    env = collection.env.drop_duplicates("run_id").set_index("run_id")
    tele = rank_telemetry(collection.telemetry).set_index("run_id")
    rows: list[dict[str, Any]] = []
    for key, fleet in units.groupby(FLEET, sort=True):
        # repeats of a unit: its median throughput and the interval of its first run
        per_unit = fleet.sort_values("repeat").groupby(["host", "placement"], sort=True).agg(
            throughput=("throughput", "median"), ci_low=("ci_low", "first"), ci_high=("ci_high", "first"),
            run_id=("run_id", "first")).reset_index()
        if len(per_unit) < 2:
            continue
        values = per_unit["throughput"].to_numpy()
        median = float(np.median(values))
        low, high = median_interval(values)
        base = dict(zip(FLEET, key))
        for unit in per_unit.itertuples():
            peers = tele.drop(index=unit.run_id, errors="ignore")
            peers = peers[peers.index.isin(fleet["run_id"])]
            mine = tele.loc[unit.run_id] if unit.run_id in tele.index else None
            rows.append({**base, "level": "gpu", "host": unit.host, "unit": unit.placement,
                         "gpu": _gpu(env, unit.run_id), "throughput": unit.throughput, "ci_low": unit.ci_low,
                         "ci_high": unit.ci_high, "fleet_median": median, "fleet_low": low, "fleet_high": high,
                         "vs_fleet": unit.throughput / median,
                         "flagged": _flag(unit.throughput, unit.ci_low, unit.ci_high, median, low, threshold),
                         "evidence": evidence(mine if isinstance(mine, pd.Series) else None, peers,
                                              env.loc[unit.run_id] if unit.run_id in env.index else None)})
        nodes = per_unit.groupby("host")["throughput"].min()  # synchronous training runs at the slowest GPU's pace
        if len(nodes) >= 2:
            node_median = float(nodes.median())
            node_low, node_high = median_interval(nodes.to_numpy())
            for host, value in nodes.items():
                slow_units = [r["unit"] for r in rows if r["host"] == host and r["level"] == "gpu" and r["flagged"]
                              and all(r[k] == base[k] for k in FLEET)]
                rows.append({**base, "level": "node", "host": host,
                             "unit": f"{(per_unit['host'] == host).sum()} GPU(s)",
                             "gpu": None, "throughput": value, "ci_low": None, "ci_high": None,
                             "fleet_median": node_median, "fleet_low": node_low, "fleet_high": node_high,
                             "vs_fleet": value / node_median,
                             "flagged": _flag(value, None, None, node_median, node_low, threshold),
                             "evidence": ("flagged GPU(s): " + ", ".join(slow_units)) if slow_units else ""})
    return pd.DataFrame(rows, columns=list(SCREENING_SCHEMA)).astype(SCREENING_SCHEMA)


def screening_text(threshold: float) -> str:
    return (f"Each GPU alone (and each node, as fast as its slowest GPU in synchronous training) against its "
            "fleet: every unit of the same "
            f"system, benchmark and arguments. Flagged: more than {threshold:.0%} below the fleet median, or its "
            "own 95% interval wholly below the median's (a bootstrap over units) while at least 1% below. "
            "Evidence: telemetry against the other units' and the GPU's own limits.")


def screening_rows(screen: pd.DataFrame) -> Rows:
    return (["workload", "level", "host", "unit", "GPU", "throughput", "95% CI", "fleet median", "vs fleet",
             "flagged", "evidence"],
            [[f"{r.system} {r.benchmark} {r.model}", r.level, text(r.host), r.unit, text(r.gpu), fmt(r.throughput),
              f"{fmt(r.ci_low)} – {fmt(r.ci_high)}" if not missing(r.ci_low) else "-",
              f"{fmt(r.fleet_median)} [{fmt(r.fleet_low)} – {fmt(r.fleet_high)}]", pct(r.vs_fleet),
              "FLAGGED" if r.flagged else "", text(r.evidence) if r.evidence else ""]
             for r in screen.itertuples()])
