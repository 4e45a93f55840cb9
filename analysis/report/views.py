"""The report's own views, from the scaling table: the headline (each configuration's figures, with what is the
same on every row said once) and the swept axes (placement, nodes, batch size, precision, the cost of
communication); what was left out. Every other section's text and rows stand beside its builder."""

from __future__ import annotations

from typing import Any

import numpy as np
import pandas as pd

from hvdbench.core.exchanges import DEFAULT as DEFAULT_EXCHANGE

from ..findings import spread_text
from ..keys import ARGS, AXIS_VIEW, PLACEMENTS
from ..collect import Collection
from ..tables.efficiency import MARK_MEANING, disturbed_baselines, efficiency_cell, on_cpu_ranks
from ..formatting import Rows, fmt, interval, missing, pct, ratio, tflops


def _unit(table: pd.DataFrame) -> str:
    units = sorted(set(table["unit"])) if len(table) else ["samples"]
    return units[0] if len(units) == 1 else "samples"


def headline_titles(table: pd.DataFrame) -> list[str]:
    """Headline column titles, with the unit of the rows: the size, then the figures the report is named after
    (throughput, speedup, efficiency with their intervals), then what describes the configuration. Rows whose ranks
    all trained on CPUs count ranks, never GPUs."""
    cpu = on_cpu_ranks(table["device_name"] if "device_name" in table else [])
    each = "rank" if cpu else "GPU"
    return ["nodes", "CPU ranks" if cpu else "GPUs", f"{_unit(table)}/s", "95% CI", "speedup [95% CI]",
            "efficiency [95% CI]", f"per {each}", f"TFLOP/s per {each}", "% of peak", *DESCRIBING, "median step (ms)",
            "step CV", "warm-up", "repeats"]


DESCRIBING = ["framework", "benchmark", "model", "launcher", "controller", "placement", "knobs", "exchange"]
# headline columns folded on a narrow page (HTML), by title (the step CV stays: how steady the steps were is read
# beside the interval it widens)
HEADLINE_FOLDED = ("controller", "median step (ms)", "warm-up")


def headline_section(table: pd.DataFrame) -> tuple[str, list[str], list[list[str]], tuple[int, ...]]:
    """The headline table of one group of rows: its text, titles, rows and folded columns. A describing column
    that is the same on every row leaves the table for the text ("Same on every row: ..."), so the headline figures
    fit a narrow screen."""
    titles, rows = headline_titles(table), headline_rows(table)
    constant = [i for i, title in enumerate(titles) if title in DESCRIBING and len({row[i] for row in rows}) == 1]
    said = [f"{titles[i]} {rows[0][i]}" for i in constant if rows[0][i] != "-"]
    keep = [i for i in range(len(titles)) if i not in constant]
    text = " ".join(filter(None, [f"Same on every row: {', '.join(said)}." if said else "", headline_text(table)]))
    titles = [titles[i] for i in keep]
    return (text, titles, [[row[i] for i in keep] for row in rows],
            tuple(i for i, title in enumerate(titles) if title in HEADLINE_FOLDED))


def peak_share(r: Any) -> str:
    """``41%`` of the device's peak, or why there is none ("unknown peak", "no peak", "n/a": not counted)."""
    if missing(r.tflops_per_gpu):
        return "n/a"
    if missing(r.pct_of_peak):
        return str(r.peak).split(" (")[0] if isinstance(r.peak, str) else "unknown peak"
    return f"{r.pct_of_peak:.0f}%"


def headline_text(table: pd.DataFrame) -> str:
    """What a reader needs beside the headline table: the marks used, and baselines that are not the rows' own."""
    notes = []
    marks = " ".join(efficiency_cell(r.efficiency, r.efficiency_low, r.efficiency_high) for r in table.itertuples())
    notes += [meaning for mark, meaning in MARK_MEANING.items() if mark in marks]
    odd = sorted({str(r.baseline) for r in table.itertuples() if "(" in str(r.baseline)})
    notes += [f"Speedup against {label}." for label in odd]
    notes += disturbed_baselines(table)
    if table["tflops_per_gpu"].notna().any():
        judged = sorted({str(r.peak) for r in table.itertuples() if not missing(r.pct_of_peak)})
        notes.append("TFLOP/s per GPU = throughput per GPU × the FLOPs of one sample's training step (forward + "
                     "backward, multiply-add = 2 FLOPs, counted once per model and size); "
                     + (f"% of peak against: {'; '.join(judged)}." if judged else
                        "no peak applies to these devices (the % of peak column says why for each)."))
    return " ".join(notes)


def headline_rows(table: pd.DataFrame) -> list[list[str]]:
    """The headline columns of each scaling row, formatted; speedup and efficiency with their 95% intervals."""
    return [[str(r.nodes), str(r.np), fmt(r.throughput), interval(r.ci_low, r.ci_high),
             ratio(r.speedup, r.speedup_low, r.speedup_high),
             efficiency_cell(r.efficiency, r.efficiency_low, r.efficiency_high),
             fmt(r.per_rank), tflops(r.tflops_per_gpu), peak_share(r),
             r.framework, r.benchmark, r.model, r.launcher, r.controller, r.placement or "-", r.knobs or "-",
             exchange if isinstance(exchange := getattr(r, "exchange", None), str) else DEFAULT_EXCHANGE,
             fmt(r.median_step_ms, 2), f"{r.cv:.1%}", fmt(r.warmup_used, 0),
             str(r.repeats) if r.repeats == 1 else
             f"{r.repeats} ({spread_text(r.run_spread) + '; ' if not missing(r.run_spread) else ''}"
             f"{fmt(r.repeat_min)}–{fmt(r.repeat_max)})"]
            for r in table.itertuples()]


def _workload(r: Any) -> str:
    return f"{r.system} {r.framework} {r.benchmark} {r.model}"


def axis_views(table: pd.DataFrame) -> list[tuple[str, str, Rows]]:
    """The tables by placement, node count, batch size and precision where the results vary them, and the
    cost of communication where --independent twins exist."""
    out: list[tuple[str, str, Rows]] = []
    keyed = PLACEMENTS
    by_place = table.groupby(keyed).filter(lambda g: g["placement"].nunique() > 1) if len(table) else table
    if len(by_place):
        by_place = by_place.assign(best=by_place.groupby(keyed)["throughput"].transform("max"))
        out.append(("By placement at equal GPU count", "The same workload and GPU count on differently linked GPUs.",
                    (["workload", "GPUs", "placement", "throughput", "95% CI", "relative to best"],
                     [[_workload(r), str(r.np), r.placement or "-", fmt(r.throughput),
                       interval(r.ci_low, r.ci_high), pct(r.throughput / r.best)]
                      for r in by_place.sort_values(keyed + ["throughput"],
                                                    ascending=[True] * len(keyed) + [False]).itertuples()])))
    workload = ARGS
    multi = table.groupby(workload).filter(lambda g: (g["nodes"] > 1).any()) if len(table) else table
    if len(multi):
        out.append(("By node count", "Speedup and efficiency against 1 GPU, and against 1 node with as many GPUs "
                    "per node.", (["workload", "knobs", "nodes", "GPUs", "throughput", "speedup vs 1 GPU", "efficiency",
                                   "speedup vs 1 node", "node efficiency"],
                                  [[_workload(r), r.knobs or "-", str(r.nodes), str(r.np), fmt(r.throughput),
                                    ratio(r.speedup, r.speedup_low, r.speedup_high),
                                    efficiency_cell(r.efficiency, r.efficiency_low, r.efficiency_high),
                                    ratio(r.node_speedup, r.node_speedup_low, r.node_speedup_high),
                                    efficiency_cell(r.node_efficiency, r.node_efficiency_low, r.node_efficiency_high)]
                                   for r in multi.sort_values(workload + ["knobs", "nodes", "np"]).itertuples()])))
    for axis, title in (("batch_size", "By batch size"), ("precision", "By precision")):
        others = AXIS_VIEW
        varied = (table.dropna(subset=[axis]).groupby(others).filter(lambda g, a=axis: g[a].nunique() > 1)
                  if len(table) else table)
        if len(varied):
            out.append((title, "", (["workload", "GPUs", axis.replace("_", " "), "throughput", "per GPU", "efficiency"],
                                    [[_workload(r), str(r.np), str(getattr(r, axis)), fmt(r.throughput),
                                      fmt(r.per_rank),
                                      pct(r.efficiency)] for r in varied.sort_values(others + [axis]).itertuples()])))
    cost = table.dropna(subset=["comm_cost"])
    if len(cost):
        out.append(("Cost of communication", "1 − throughput with gradients exchanged / throughput of the same "
                    "run with --independent (each rank alone: the ideal with no communication; a multi-node "
                    "row without a twin of its size: its fewest-node twin's throughput x the node ratio, as "
                    "ranks that exchange nothing train on every node alike).",
                    (["workload", "GPUs", "placement", "exchanged", "independent", "cost [95% CI]"],
                     [[_workload(r), str(r.np), r.placement or "-", fmt(r.throughput),
                       fmt(r.throughput / (1.0 - r.comm_cost)) if r.comm_cost < 1 else "n/a",
                       pct(r.comm_cost) + ("" if missing(r.comm_cost_low)
                                           or np.isclose(r.comm_cost_low, r.comm_cost_high)
                                           else f" [{r.comm_cost_low:.0%}–{r.comm_cost_high:.0%}]")]
                      for r in cost.itertuples()])))
    return out


def problems(collection: Collection) -> list[tuple[str, str, list[str], list[list[str]]]]:
    """Runs left out with their reasons, unreadable run descriptions, malformed log lines."""
    out = []
    runs = collection.runs
    excluded = runs[runs["status"] != "ok"]
    throughput = runs[(runs["status"] == "ok") & runs["left_out"].notna()] if "left_out" in runs else runs.iloc[0:0]
    if len(excluded) or len(throughput) or collection.spec_errors:
        rows = [[r.run_id, r.status, r.reason] for r in excluded.itertuples()]
        rows += [[r.run_id, "throughput left out", r.left_out] for r in throughput.itertuples()]
        rows += [["-", "unreadable", error] for error in collection.spec_errors]
        text = "Failed, timed-out, cancelled or incomplete runs are listed, not counted."
        if excluded["quality_target"].notna().any():
            text += (" A run to a quality target among them counts in its time-to-target row as a run that did not "
                     "converge (MLPerf's rule).")
        if len(throughput):
            text += " A run taken in whose throughput does not fit its siblings' counts for its time to train alone."
        out.append(("Runs left out", text, ["run", "status", "reason"], rows))
    retried = collection.runs[collection.runs["attempts"] > 1]
    if len(retried):
        out.append(("Retried runs", "Runs started more than once (retries, resubmissions, requeues): each earlier "
                    "attempt's logs are kept in attempt-N/ beside the run and are not counted; the last attempt is.",
                    ["run", "status", "attempts", "earlier attempts"],
                    [[r.run_id, r.status, str(r.attempts), r.earlier_attempts] for r in retried.itertuples()]))
    if collection.file_issues:
        out.append(("Malformed log lines", "Lines that started a record but did not hold a whole valid one; "
                    "the rest of each file was read.", ["file", "lines", "first problem"],
                    [[i.path, str(i.malformed), i.examples[0] if i.examples else ""] for i in collection.file_issues]))
    if collection.comm_skipped:
        out.append(("Collective cases not run", "; ".join(collection.comm_skipped), [], []))
    return out


