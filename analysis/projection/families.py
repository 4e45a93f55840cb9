"""The results a back-test reads: each workload on one system at several sizes (a family), from any results roots,
one's own runs or a vendor's taken in. A size's figure is the geometric mean of its runs' own throughputs, with its
standard error; a run whose throughput was left out when it was taken in (it does not fit its siblings'), and a run
that did not converge, are left out of it, each with a line (a run that never reached its target may have been
stopped, or run differently). The family's gradient bytes come from the model's size (its own runs count their
parameters), its links from its system's description (exchange_model.py)."""

from __future__ import annotations

import math
import re
from typing import Any

import numpy as np
import pandas as pd

from hvdbench.core.errors import ReportError
from ..collect import Collection
from ..tables.scaling import run_stats_table
from .backtest import Family, Point, family_links, gradient_bytes

_BATCH = re.compile(r"(?:^|\s)--batch-size(?:=|\s+)\S+")
MIN_SIZES = 3  # two to fit on and one to predict
SAME_COUNTING = 1.1  # samples a GPU over those its device step logs: sizes beyond this ratio apart count otherwise


def _first(group: pd.DataFrame, column: str) -> Any:
    given = group[column].dropna() if column in group else pd.Series(dtype=object)
    return given.iloc[0] if len(given) else None


def _left_out(runs: pd.DataFrame) -> tuple[pd.DataFrame, list[str]]:
    """The runs a size's figure rests on, and a line for each run left out and why."""
    lines = []
    misfit = runs["left_out"].notna() if "left_out" in runs else pd.Series(False, index=runs.index)
    unconverged = runs["converged"].eq(False).fillna(False) if "converged" in runs else \
        pd.Series(False, index=runs.index)
    for row in runs[misfit].itertuples():
        lines.append(f"{row.system} {row.model} at {row.np} GPUs: run {row.run_id} left out: {row.left_out}")
    for row in runs[unconverged & ~misfit].itertuples():
        lines.append(f"{row.system} {row.model} at {row.np} GPUs: run {row.run_id} left out: it did not converge "
                     "(a run that never reached its target may have been stopped or run differently)")
    return runs[~misfit & ~unconverged], lines


def _point(group: pd.DataFrame, rates: dict[str, float]) -> Point | None:
    figures = [rates[r] for r in group["run_id"] if r in rates and rates[r] > 0]
    if not figures:
        return None
    logs = np.log(figures)
    sigma = float(np.std(logs, ddof=1) / math.sqrt(len(logs))) if len(logs) > 1 else 0.0
    batch = _first(group, "batch_size")
    if batch is None or pd.isna(batch):
        return None
    servers = _first(group, "parameter_servers")
    return Point(int(group["nodes"].iloc[0]), int(group["np"].iloc[0]), int(batch), float(np.exp(logs.mean())),
                 sigma, int(servers) if servers is not None and not pd.isna(servers) else None)


def _counted(group: pd.DataFrame) -> str:
    """A line where the family's sizes count a device's samples differently: the samples a GPU a step (the global
    batch over the GPUs) over those its device step logs (``device_batch``: BERT's published results at 1, 64 and 96
    nodes log half the samples a GPU takes, at 8 nodes all of them), so the sizes ran different configurations and
    compute fitted across them mixes them; "" where every size logs the same or none logs it."""
    if "device_batch" not in group:
        return ""
    ratios = {}
    for (nodes, ranks), size in group.groupby(["nodes", "np"], sort=True):
        logged = size["device_batch"].dropna()
        batch = _first(size, "batch_size")
        if len(logged) and batch is not None and not pd.isna(batch) and float(logged.iloc[0]) > 0:
            ratios[(int(nodes), int(ranks))] = float(batch) / float(logged.iloc[0])
    if len(ratios) < 2 or max(ratios.values()) / min(ratios.values()) <= SAME_COUNTING:
        return ""
    said = ", ".join(f"{r:.3g} at {n} node(s)" for (n, _), r in sorted(ratios.items()))
    return (f"its sizes count a device's samples differently (samples a GPU a step over the device batch its log "
            f"says: {said}): they ran different configurations, and compute fitted across them mixes them")


def _family(key: tuple[Any, ...], group: pd.DataFrame, rates: dict[str, float]) -> Family | str:
    system, framework, benchmark, model, args = key
    workload = f"{framework} {benchmark} {model}".strip() if framework != benchmark else f"{benchmark} {model}"
    points = [pt for _, size in group.groupby(["nodes", "np", "batch_size"], sort=True, dropna=False)
              if (pt := _point(size, rates)) is not None]
    if len({(p.nodes, p.ranks) for p in points}) < MIN_SIZES:
        return ""
    parameters = _first(group, "parameters")
    precision = str(_first(group, "precision") or "") if framework != "mlperf" else ""
    grad = float(parameters) * (2 if precision in ("fp16", "bf16", "amp") else 4) if parameters else \
        gradient_bytes(str(model), str(framework), precision)
    if grad is None:
        return f"{system} {workload}: not back-tested: {model}'s size is not known here (its runs count none)"
    links, notes = family_links(str(_first(group, "host_network") or ""), str(_first(group, "device_name") or ""))
    notes = notes if any(p.nodes > 1 for p in points) else []
    notes += [line] if (line := _counted(group)) else []
    exchange = args.split("--variable-update", 1)[1].split()[0] if "--variable-update" in args else ""
    return Family(str(system), workload, str(model), tuple(points), grad, links, exchange, tuple(notes))


def families_of(collection: Collection) -> tuple[list[Family], list[str]]:
    """Every family of three sizes or more in the results, and the lines of what was left out."""
    runs = collection.runs[collection.runs["status"] == "ok"].copy()
    if runs.empty:
        raise ReportError("no complete run to back-test")
    kept, lines = _left_out(runs)
    stats = run_stats_table(collection)
    rates = dict(zip(stats["run_id"], stats["throughput"].astype(float)))
    kept = kept.assign(_args=kept["args"].fillna("").map(lambda a: _BATCH.sub("", str(a)).strip()))
    families = []
    for key, group in kept.groupby(["system", "framework", "benchmark", "model", "_args"], sort=True, dropna=False):
        found = _family(tuple(key), group, rates)
        if isinstance(found, Family):
            families.append(found)
        elif found:
            lines.append(found)
    return families, lines
