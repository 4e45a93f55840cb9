"""Time to train at N nodes: each projected row's throughput joined with the steps to target its workload's runs
fitted against the global batch (McCandlish's curve, tables/critical_batch.py): at N ranks of the measured batch a
rank, the steps the curve gives at that global batch, and the time those steps take at the projected throughput;
both intervals carried (the curve's resamples, the projection's throughput interval), the batch said against the
critical batch, and a batch beyond the largest measured said so (the curve is then extrapolated: it assumes the
learning-rate scaling that held up to there goes on holding). Evaluation and start-up are not in it."""

from __future__ import annotations

import math
from typing import Any

import pandas as pd

from ..document import Section
from ..formatting import fmt
from ..tables.critical_batch import Curve, curves

TO_TARGET_SCHEMA: dict[str, str] = {
    "system": "string", "workload": "string", "target": "string", "link": "string", "algorithm": "string",
    "nodes": "int64", "np": "int64", "global_batch": "int64", "steps": "float64", "steps_low": "float64",
    "steps_high": "float64", "time_s": "float64", "time_low_s": "float64", "time_high_s": "float64",
    "beyond": "float64", "note": "string",
}
TO_TARGET_TEXT = ("Time to train at each projected size: the steps to the target McCandlish's curve gives at the "
                  "global batch (N ranks × the batch a rank has there; fitted to the runs that reached the target, "
                  "95% interval from their resamples) times the global batch over the projected throughput (its "
                  "interval joined with the curve's). Training steps only: evaluation and start-up are not in it. "
                  "A batch beyond the largest one measured extrapolates the curve (it assumes the learning-rate "
                  "scaling that held up to there goes on holding); past the critical batch, more GPUs buy little.")


def _note(curve: Curve, batch: float) -> str:
    notes = []
    if batch > curve.largest:
        notes.append(f"beyond the largest batch measured ({curve.largest:,.0f}): extrapolated")
    if batch > curve.b_noise:
        notes.append("past the critical batch: more GPUs buy little")
    return "; ".join(notes)


def time_to_target(projected: pd.DataFrame, workloads: list[Any], runs: pd.DataFrame) -> pd.DataFrame:
    """One row a projected row and target its workload has a curve for (``workloads``: the projection's fitted
    workloads, each with its key and label)."""
    found = curves(runs) if "steps_to_target" in runs else []
    rows = []
    for w in workloads:
        mine = [c for c in found if (c.system, c.benchmark, c.model) == (w.key.get("system"), w.key.get("benchmark"),
                                                                        w.key.get("model"))]
        for r in projected[(projected["workload"] == w.label) & (projected["system"] == w.key["system"])].itertuples():
            own = getattr(r, "batch_per_gpu", None)  # the row's own batch a GPU, where it says one
            batch = own if own is not None and pd.notna(own) else w.key.get("batch_size")
            if batch is None or pd.isna(batch) or not mine:
                continue
            global_batch = int(batch) * int(r.np)
            for curve in mine:
                steps, low, high = curve.steps(global_batch)
                rows.append({"system": r.system, "workload": r.workload, "target": curve.target, "link": r.link,
                             "algorithm": r.algorithm, "nodes": r.nodes, "np": r.np, "global_batch": global_batch,
                             "steps": steps, "steps_low": low, "steps_high": high,
                             "time_s": steps * global_batch / r.throughput,
                             "time_low_s": low * global_batch / r.throughput_high,
                             "time_high_s": high * global_batch / r.throughput_low,
                             "beyond": global_batch / curve.b_noise, "note": _note(curve, global_batch)})
    return pd.DataFrame(rows, columns=list(TO_TARGET_SCHEMA)).astype(TO_TARGET_SCHEMA)


def _time(seconds: float) -> str:
    if not math.isfinite(seconds):
        return "n/a"
    return f"{seconds:,.0f} s" if seconds < 120 else f"{seconds / 60:,.1f} min" if seconds < 7200 else \
        f"{seconds / 3600:,.1f} h"


def to_target_section(table: pd.DataFrame) -> Section:
    """The section ``project`` prints and writes after the projection."""
    header = ["system", "workload", "target", "link", "nodes", "GPUs", "global batch", "steps [95% CI]",
              "time to train [95% CI]", "B / B_noise", "note"]
    rows = [[r.system, r.workload, r.target, f"{r.link} {r.algorithm}", str(r.nodes), str(r.np), f"{r.global_batch:,}",
             f"{fmt(r.steps, 0)} [{fmt(r.steps_low, 0)}–{fmt(r.steps_high, 0)}]",
             f"{_time(r.time_s)} [{_time(r.time_low_s)}–{_time(r.time_high_s)}]", fmt(r.beyond, 2), r.note or "-"]
            for r in table.itertuples()]
    return Section("Time to train at N nodes", TO_TARGET_TEXT, header, rows)
