"""Full-node screening: every GPU (or CPU slot) of a node training alone at the same time, under the node's
whole power and heat, against the node's other GPUs, against itself alone, and the node's ranks together.

A full-node run is a complete ``--independent`` run on one node over all of its GPUs (placement ``all``, or
``cpu:all`` for CPU slots: ``hvdbench screen --mode node``, or a sweep that asks for them), the largest of its
work on its host. Each rank's throughput is its own
(samples over its median steady step). A GPU is flagged when it runs more than ``threshold`` below the node's
median, when it falls more than ``threshold`` further behind its own 1-GPU run than the node's median GPU
does (it keeps up alone but not under full load), or when its clocks were slowed for heat or by the board
(thermal, hardware or power-brake slowdown; a power cap alone is the normal state of a GPU at full load and is
named only where the others show none). A node row sets its ranks together (the synchronous run of as many
ranks, where there is one) against their sum alone at once.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pandas as pd

from ..collect import Collection
from ..keys import WORKLOAD, measured_args
from .evidence import NO_DIFFERENCE, evidence, rank_telemetry
from .scaling import matrices
from ..formatting import Rows, fmt, pct, text

THRESHOLD = 0.05
WHOLE_NODE = ("all", "cpu:all")  # the placements of every GPU (CPU slot) of a node
SLOWDOWN = ("sw_thermal_slowdown", "hw_thermal_slowdown", "hw_slowdown", "hw_power_brake_slowdown")
FULL_NODE_SCHEMA: dict[str, str] = {
    **{k: "string" for k in WORKLOAD}, "work": "string", "level": "string", "host": "string", "unit": "string",
    "gpu": "string", "throughput": "float64", "node_median": "float64", "vs_node": "float64", "alone": "float64",
    "under_load": "float64", "sm_clock_mhz": "float64", "temperature_max_c": "float64", "power_max_w": "float64",
    "clock_events": "string", "together": "float64", "flagged": "bool", "evidence": "string",
}


def _work(args: str) -> str:
    """What a run measures, whether its ranks exchange or not: its arguments without run length or
    ``--independent``."""
    return " ".join(t for t in measured_args(args).split() if t != "--independent")  # a switch: no value to drop


def _units(collection: Collection, stats: pd.DataFrame) -> pd.DataFrame:
    """Complete one-node runs with their host (rank 0's), work and throughput."""
    runs = collection.runs[(collection.runs["status"] == "ok") & (collection.runs["nodes"] == 1)]
    runs = runs.merge(stats[["run_id", "throughput", "warmup_used"]], on="run_id")
    env = collection.env[collection.env["rank"] == 0].drop_duplicates("run_id").set_index("run_id")
    return runs.assign(host=[env.loc[r, "host"] if r in env.index else "?" for r in runs["run_id"]],
                       work=runs["args"].map(_work))


def _rank_throughput(matrix: Any, warmup_used: int) -> pd.Series:
    """Each rank's own throughput: its median samples over its median steady step."""
    durations, samples = matrix.durations[warmup_used:], np.broadcast_to(matrix.samples, matrix.durations.shape)
    samples = samples[warmup_used:]
    if not len(durations):
        return pd.Series(dtype=float)
    return pd.Series(np.median(samples, axis=0) / np.median(durations, axis=0), index=matrix.ranks)


def _alone(units: pd.DataFrame, env: pd.DataFrame, run: Any, unit: str) -> float | None:
    """The unit's throughput training alone (1-rank runs of the same work on the same host; their median)."""
    solo = units[(units["np"] == 1) & (units["work"] == run.work) & (units["host"] == run.host)
                 & (units["system"] == run.system) & (units["benchmark"] == run.benchmark)]
    values = [r.throughput for r in solo.itertuples() if _unit(env, r.run_id, 0, r.placement) == unit]
    return float(np.median(values)) if values else None


def _unit(env: pd.DataFrame, run_id: str, rank: int, placement: Any) -> str:
    """A GPU by its bus id; a CPU slot as ``cpu:<n>`` (a full-node run's rank n is bound to slot n)."""
    key = (run_id, rank)
    bus = env.loc[key, "gpu_bus_id"] if key in env.index else None
    if isinstance(bus, str) and bus:
        return bus
    if isinstance(placement, str) and placement.startswith("cpu:") and placement != "cpu:all":
        return placement
    return f"cpu:{rank}"


def _gpu_text(env: pd.DataFrame, key: tuple[str, int]) -> str | None:
    if key not in env.index:
        return None
    facts = (env.loc[key, "gpu_name"], env.loc[key, "gpu_bus_id"])
    return " ".join(str(x) for x in facts if isinstance(x, str)) or None


def _judge(row: dict[str, Any], median_load: float | None, threshold: float) -> tuple[bool, list[str]]:
    """Whether a rank of a full-node run is flagged, and why."""
    why = []
    if row["vs_node"] < 1.0 - threshold:
        why.append(f"{1 - row['vs_node']:.1%} below the node's median under full load")
    if row["alone"] and median_load and row["under_load"] < median_load * (1.0 - threshold):
        why.append(f"alone {row['alone']:,.1f}/s, under full load {row['throughput']:,.1f}/s "
                   f"({row['under_load'] - 1:+.1%}; the node's median GPU {median_load - 1:+.1%})")
    slowed = sorted(set(row["clock_events"].split(",")) & set(SLOWDOWN)) if row["clock_events"] else []
    if slowed:
        why.append("clocks slowed: " + ", ".join(slowed))
    return bool(why), why


def _rows_of_run(run: Any, matrix: Any, units: pd.DataFrame, env: pd.DataFrame, tele: pd.DataFrame,
                 peaks: pd.DataFrame, threshold: float) -> list[dict[str, Any]]:
    per_rank = _rank_throughput(matrix, int(run.warmup_used))
    if per_rank.empty:
        return []
    median = float(per_rank.median())
    base = {**{k: getattr(run, k) for k in WORKLOAD}, "work": run.work, "host": run.host}
    rows = []
    for rank, value in per_rank.items():
        key = (run.run_id, int(rank))
        unit = _unit(env, run.run_id, int(rank), run.placement)
        alone = _alone(units, env, run, unit)
        mine = tele.loc[key] if key in tele.index else None
        peak = peaks.loc[key] if key in peaks.index else None
        rows.append({**base, "level": "gpu", "unit": unit, "gpu": _gpu_text(env, key), "throughput": value,
                     "node_median": median, "vs_node": value / median, "alone": alone,
                     "under_load": value / alone if alone else None,
                     "sm_clock_mhz": None if mine is None else mine["sm_clock_mhz"],
                     "temperature_max_c": None if peak is None else peak["temperature_c"],
                     "power_max_w": None if peak is None else peak["power_w"],
                     "clock_events": "" if mine is None else str(mine["clock_events"] or ""), "_key": key,
                     "_mine": mine})
    loads = [r["under_load"] for r in rows if r["under_load"]]
    median_load = float(np.median(loads)) if loads else None
    ranks = tele.xs(run.run_id, level="run_id") if run.run_id in tele.index.get_level_values(0) else tele.iloc[0:0]
    for row in rows:
        key, mine = row.pop("_key"), row.pop("_mine")
        flagged, why = _judge(row, median_load, threshold)
        peers, facts = ranks.drop(index=key[1], errors="ignore"), env.loc[key] if key in env.index else None
        seen = evidence(mine, peers, facts)  # the telemetry's word, as the screening and straggler tables give it
        row.update(flagged=flagged, evidence="; ".join(why + ([seen] if mine is not None and seen != NO_DIFFERENCE
                                                               or not why else [])))
    return rows


def _node_row(run: Any, rows: list[dict[str, Any]], units: pd.DataFrame) -> dict[str, Any]:
    """The node: its ranks' sum alone at once, and together (the synchronous run of as many ranks)."""
    together = units[(units["np"] == run.np) & (units["work"] == run.work) & (units["host"] == run.host)
                     & (units["system"] == run.system) & ~units["args"].str.split().map(lambda a: "--independent" in a)]
    total = float(sum(r["throughput"] for r in rows))
    value = float(together["throughput"].median()) if len(together) else None
    flagged = [r["unit"] for r in rows if r["flagged"]]
    return {**{k: getattr(run, k) for k in WORKLOAD}, "work": run.work, "host": run.host, "level": "node",
            "unit": f"{run.np} ranks", "gpu": None, "throughput": total, "node_median": None, "vs_node": None,
            "alone": None, "under_load": None, "sm_clock_mhz": None, "temperature_max_c": None, "power_max_w": None,
            "clock_events": "", "together": value, "flagged": bool(flagged),
            "evidence": ("flagged: " + ", ".join(flagged) + "; " if flagged else "")
            + (f"together {value / total:.0%} of the ranks alone at once" if value else "no synchronous run")}


def full_node_table(collection: Collection, stats: pd.DataFrame, threshold: float = THRESHOLD) -> pd.DataFrame:
    """One row per rank of each full-node run and one per node."""
    units = _units(collection, stats)
    independent = units["args"].str.split().map(lambda a: "--independent" in a)
    full = units[independent & (units["np"] > 1) & units["placement"].isin(WHOLE_NODE)]
    full = full.sort_values("np").drop_duplicates([*WORKLOAD, "work", "host"], keep="last")
    if full.empty:
        return pd.DataFrame(columns=list(FULL_NODE_SCHEMA)).astype(FULL_NODE_SCHEMA)
    env = collection.env.drop_duplicates(["run_id", "rank"]).set_index(["run_id", "rank"])
    tele = rank_telemetry(collection.telemetry).set_index(["run_id", "rank"])
    peaks = collection.telemetry.groupby(["run_id", "rank"])[["temperature_c", "power_w"]].max() \
        if len(collection.telemetry) else pd.DataFrame(columns=["temperature_c", "power_w"])
    found = matrices(collection)
    rows: list[dict[str, Any]] = []
    for run in full.sort_values([*WORKLOAD, "host"]).itertuples():
        if run.run_id not in found:
            continue
        ranks = _rows_of_run(run, found[run.run_id], units, env, tele, peaks, threshold)
        rows += ranks + ([_node_row(run, ranks, units)] if ranks else [])
    return pd.DataFrame(rows, columns=list(FULL_NODE_SCHEMA)).astype(FULL_NODE_SCHEMA)


def full_node_text(threshold: float) -> str:
    return ("Every GPU (or CPU slot) of a node training alone at the same time (--independent over the whole node: "
            "its full power and heat), each rank's own throughput against the node's median rank and against the "
            "same GPU alone (its 1-GPU screening run, where there is one); then the node's ranks together (the "
            f"synchronous run) against their sum alone at once. Flagged: more than {threshold:.0%} below the node's "
            f"median, more than {threshold:.0%} further behind its own 1-GPU figure than the node's median GPU, or "
            "clocks slowed for heat or by the board (a power cap alone is a GPU at full load, named only where "
            "the others show none). Temperature and power: the highest sampled.")


def full_node_rows(full: pd.DataFrame) -> Rows:
    return (["workload", "host", "level", "unit", "GPU", "throughput", "vs node", "alone", "under load / alone",
             "SM clock (MHz)", "max °C", "max W", "clock events", "together", "flagged", "evidence"],
            [[f"{r.system} {r.benchmark} {r.model}", text(r.host), r.level, text(r.unit), text(r.gpu),
              fmt(r.throughput), pct(r.vs_node), fmt(r.alone), pct(r.under_load), fmt(r.sm_clock_mhz, 0),
              fmt(r.temperature_max_c, 0), fmt(r.power_max_w, 0), text(r.clock_events) if r.clock_events else "",
              fmt(r.together), "FLAGGED" if r.flagged else "", text(r.evidence)] for r in full.itertuples()])
