"""What a buyer reads first: every knob side by side with its ratio and interval, the cross-model summary
per GPU count, the best configuration of each workload, and the executive summary of each system."""

from __future__ import annotations

from typing import Any

import numpy as np
import pandas as pd

from hvdbench.core.axes import AXES
from hvdbench.core.run_flags import flags_key

from .efficiency import MARK_MEANING, efficiency_cell, efficiency_mark, on_cpu_ranks, on_gpu_name, ranks_title
from ..keys import ONE_KNOB, WORKLOAD
from ..findings import MARGIN, SPEED, judge, spread_text
from ..ratios import MIN_RUNS, Resampled, config_draws, ratio_draws, too_few_runs
from ..formatting import Rows, fmt, pct, ratio
from ..sections import Inputs, TableSection

# What must match for two configurations to differ in one knob only (besides the knob's own flags).
MATCH = ONE_KNOB
KNOB_SCHEMA: dict[str, str] = {
    "system": "string", "framework": "string", "benchmark": "string", "model": "string", "np": "int64",
    "knob": "string", "base_value": "string", "value": "string", "base_throughput": "float64", "throughput": "float64",
    "ratio": "float64", "ratio_low": "float64", "ratio_high": "float64", "base_runs": "int64", "runs": "int64",
    "finding": "string", "verdict": "string", "why": "string", "detectable": "float64", "runs_to_decide": "Int64",
    "base_spread": "float64", "spread": "float64",
}


def _draws(row: pd.Series, draws: dict[str, np.ndarray], points: dict[str, float] | None) -> Resampled | None:
    return config_draws(str(row["runs"]).split(","), draws, points=points)


def knob_table(table: pd.DataFrame, draws: dict[str, np.ndarray], points: dict[str, float] | None = None,
               margin: float = MARGIN, min_runs: int = MIN_RUNS) -> pd.DataFrame:
    """For every knob (core/axes.py), configurations that differ in it alone, each against the one at the
    knob's default (or its first value): throughput ratio with a 95% interval from both runs' resamples, and its
    finding at ±``margin`` (analysis/findings.py; not judged where a side has fewer than ``min_runs`` runs)."""
    rows: list[dict[str, Any]] = []
    if table.empty:
        return pd.DataFrame(columns=list(KNOB_SCHEMA)).astype(KNOB_SCHEMA)
    for name, axis in ((n, a) for n, a in AXES.items() if a.compared):
        rest = table.apply(lambda row, f=axis.flags: flags_key(str(row["benchmark"]), str(row["args"]).split(), f),
                           axis=1)
        for _, group in table.assign(_rest=rest).groupby(MATCH + ["_rest"], sort=True, dropna=False):
            values = group[name].astype(object).where(group[name].notna(), None)
            if values.nunique(dropna=False) < 2 or len(group) != values.nunique(dropna=False):
                continue
            ordered = sorted(range(len(group)), key=lambda i: (values.iloc[i] != axis.default, str(values.iloc[i])))
            base = group.iloc[ordered[0]]
            for i in ordered[1:]:
                other = group.iloc[i]
                drawn = ratio_draws(_draws(other, draws, points), _draws(base, draws, points))
                low, high = drawn.interval if drawn is not None else (np.nan, np.nan)
                to, start = axis.label(values.iloc[i]), axis.label(values.iloc[ordered[0]])
                few = too_few_runs({to: int(other["repeats"]), start: int(base["repeats"])}, min_runs)
                found = judge(drawn, margin, SPEED, (to, start), few)
                spreads = found.spreads or (np.nan, np.nan)
                rows.append({**{k: base[k] for k in (*WORKLOAD, "np")},
                             "knob": name, "base_value": axis.label(values.iloc[ordered[0]]),
                             "value": axis.label(values.iloc[i]),
                             "base_throughput": base["throughput"], "throughput": other["throughput"],
                             "ratio": other["throughput"] / base["throughput"], "ratio_low": low, "ratio_high": high,
                             "base_runs": int(base["repeats"]), "runs": int(other["repeats"]),
                             "finding": found.finding, "verdict": found.verdict, "why": found.why,
                             "detectable": found.detectable, "runs_to_decide": found.runs_to_decide,
                             "spread": spreads[0], "base_spread": spreads[1]})
    return _with_devices(pd.DataFrame(rows, columns=list(KNOB_SCHEMA)).astype(KNOB_SCHEMA), table)


def _with_devices(out: pd.DataFrame, table: pd.DataFrame) -> pd.DataFrame:
    """``out`` with the devices its rows trained on kept beside it (attrs, not a column: its rows' size column reads
    CPU ranks where every one was a CPU)."""
    out.attrs["devices"] = list(table["device_name"]) if "device_name" in table else []
    return out


def cross_model(table: pd.DataFrame) -> pd.DataFrame:
    """Per system and GPU count: over workloads (exchanging runs), the median speedup and efficiency and the
    range of efficiencies, as published multi-GPU studies tabulate."""
    exchanged = table[~table["independent"] & table["efficiency"].notna() & (table["np"] > 1)]
    if exchanged.empty:
        return pd.DataFrame(columns=["system", "np", "workloads", "median_speedup", "median_efficiency",
                                     "min_efficiency", "max_efficiency"])
    grouped = exchanged.groupby(["system", "np"], sort=True)
    return _with_devices(grouped.agg(workloads=("model", "size"), median_speedup=("speedup", "median"),
                                     median_efficiency=("efficiency", "median"), min_efficiency=("efficiency", "min"),
                                     max_efficiency=("efficiency", "max")).reset_index(), exchanged)


def best_configurations(table: pd.DataFrame) -> pd.DataFrame:
    """Per system and workload: at the largest GPU count measured, the exchanging configuration with the
    highest throughput (launcher, controller, placement, knobs and every swept knob). Reading files is other work
    than training on synthetic batches, not a setting to tune: where a workload has both, the synthetic runs are
    set against each other (the data path section sets files against them), and the pipeline alone never counts."""
    exchanged = table[~table["independent"]]
    if "data_only" in exchanged:
        exchanged = exchanged[~exchanged["data_only"].fillna(False).astype(bool)]
    if "data" in exchanged:
        files = (exchanged["data"] == "files").fillna(False).to_numpy(dtype=bool)
        synthetic = exchanged[~files].set_index(WORKLOAD).index
        exchanged = exchanged[~(files & exchanged.set_index(WORKLOAD).index.isin(synthetic))]
    if exchanged.empty:
        return exchanged
    largest = exchanged.groupby(WORKLOAD)["np"].transform("max")
    top = exchanged[exchanged["np"] == largest].sort_values("throughput", ascending=False)
    return top.drop_duplicates(WORKLOAD).sort_values(WORKLOAD, ignore_index=True)


def _tie(best: pd.Series, table: pd.DataFrame) -> str:
    """Where the best configuration's interval overlaps the next best's at the same GPU count, say so: the
    measurements do not tell the two apart."""
    same = table[~table["independent"] & (table["np"] == best["np"])
                 & np.logical_and.reduce([table[k] == best[k] for k in WORKLOAD])]
    others = same[same["runs"] != best["runs"]].sort_values("throughput", ascending=False)
    if others.empty or pd.isna(best["ci_low"]) or pd.isna(others.iloc[0]["ci_high"]):
        return ""
    runner = others.iloc[0]
    if runner["ci_high"] < best["ci_low"]:
        if min(int(best.get("repeats", 1)), int(runner.get("repeats", 1))) < 2:
            return (f" (ahead of {describe(runner)} on within-run intervals only: one run of one of them, the spread "
                    "between runs unknown)")
        return ""
    return f" (not told apart from {describe(runner)}: their 95% intervals overlap)"


def describe(row: pd.Series) -> str:
    """A configuration in a few words: launcher/controller, placement, knobs and the knobs not at default."""
    parts = [f"{row['launcher']}/{row['controller']}"]
    if row.get("placement"):
        parts.append(str(row["placement"]))
    for name, axis in AXES.items():
        value = row.get(name)
        if name == "data" and value == "files":
            parts.append("reading files")  # other work than synthetic batches, said as such, not a knob's value
        elif axis.files_only or name == "data_only":
            continue  # the files' own options belong to the data path section
        elif value is not None and not (isinstance(value, float) and np.isnan(value)) and value is not pd.NA \
                and value != axis.default:
            parts.append(f"{name.replace('_', ' ')} {axis.label(value)}")
    if row.get("knobs"):
        parts.append(str(row["knobs"]))
    return ", ".join(parts)


MOST_WORKLOADS = 3  # per line of the executive summary; more are counted


def _some(items: list[str]) -> str:
    shown = "; ".join(items[:MOST_WORKLOADS])
    return shown + (f"; and {len(items) - MOST_WORKLOADS} more" if len(items) > MOST_WORKLOADS else "")


def _interval(row: pd.Series, name: str) -> str:
    low, high = row[f"{name}_low"], row[f"{name}_high"]
    return "" if pd.isna(low) or np.isclose(low, high) else f" [{low:.0%}–{high:.0%}]"


def runs_said(row: pd.Series) -> str:
    """How many runs a row rests on and over what span of time they were made: ``3 runs over 14 min``; ``1 run:
    within-run interval`` where one run leaves the spread between runs unknown."""
    count = int(row.get("repeats", 1) or 1)
    if count == 1:
        return "1 run: within-run interval"
    span = row.get("span_s")
    if span is None or pd.isna(span):
        return f"{count} runs"
    return f"{count} runs over {span / 60:.0f} min" if span >= 60 else f"{count} runs over {span:.0f} s"


def _ranks(row: pd.Series) -> str:
    """What a row's ranks trained on, in words: GPU(s), or CPU rank(s)."""
    return "GPU(s)" if on_gpu_name(row.get("device_name")) else "CPU rank(s)"


def executive_lines(table: pd.DataFrame, screen: pd.DataFrame | None, stragglers: pd.DataFrame,
                    full: pd.DataFrame | None = None) -> list[str]:
    """Per system, up to five lines a buyer can paste: each workload's throughput at its largest scale with
    its efficiency and interval, the interconnect's cost, the best configuration, and any flagged GPU or node
    (by screening alone, or under full load: ``full``)."""
    out: list[str] = []
    best = best_configurations(table)
    for system, rows in best.groupby("system", sort=True):
        head = [f"{r['model']} ({r['benchmark']}) on {r['np']} {_ranks(r)}, {r['nodes']} node(s): "
                f"{r['throughput']:,.1f} "
                + (f"{r['unit']}/s [{r['ci_low']:,.1f}–{r['ci_high']:,.1f}]" if not pd.isna(r["ci_low"])
                   else f"{r['unit']}/s [interval n/a: too few steps]") + f" ({runs_said(r)})"
                + (f", efficiency {r['efficiency']:.0%}{efficiency_mark(r['efficiency'], r['efficiency_low'])}"
                   f"{_interval(r, 'efficiency')}" if not pd.isna(r["efficiency"])
                   else ", no 1-GPU baseline") for _, r in rows.iterrows()]
        out.append(f"{system}: " + _some(head) + ".")
        out += [f"  {meaning}" for mark, meaning in MARK_MEANING.items() if any(mark in line for line in head)]
        costs = table[(table["system"] == system) & table["comm_cost"].notna()].sort_values("np")
        costs = costs.drop_duplicates(WORKLOAD[1:], keep="last")
        out.append("  Interconnect: " + (_some([f"exchanging gradients costs {r['comm_cost']:.0%}"
                                                f"{_interval(r, 'comm_cost')} of the no-exchange throughput for "
                                                f"{r['model']} at {r['np']} {_ranks(r)}" for _, r in costs.iterrows()])
                                         if len(costs) else "not measured (add `independent: [false, true]`)") + ".")
        out.append("  Best configuration: " + _some([f"{r['model']}: {describe(r)}{_tie(r, table)}"
                                                     for _, r in rows.iterrows()]) + ".")
        flagged = [] if screen is None or screen.empty else \
            [f"{r.host} {r.unit}" for r in screen[(screen["system"] == system) & screen["flagged"]].itertuples()]
        if full is not None and len(full):
            flagged += [f"{r.host} {r.unit} under full load" for r in
                        full[(full["system"] == system) & full["flagged"] & (full["level"] == "gpu")].itertuples()]
        slow = stragglers[stragglers["system"] == system]
        if flagged:
            out.append("  Flagged: " + ", ".join(flagged) + " (see Screening and Full-node screening).")
        elif len(slow):
            out.append(f"  Stragglers: {len(slow)} rank(s) slower than their run's median (see Stragglers).")
        else:
            what = "CPU rank" if on_cpu_ranks(rows.get("device_name", [])) else "GPU"
            out.append(f"  No {what} or node flagged" + (" by screening." if screen is not None and len(screen)
                                                         else "; no screening run (hvdbench screen)."))
    return out


KNOB_TEXT = ("Configurations that differ in one knob only ("
             + ", ".join(name.replace("_", " ") for name, axis in AXES.items() if axis.compared)
             + "; the input pipeline timed alone beside its like), each against the knob's default (the exchange: each "
             "against Horovod at the same rank count): the throughput ratio with a 95% interval from both "
             "configurations' resampled runs (blocks of steps within each) and its finding (faster or slower beyond "
             "the margin, equivalent within it, undecided with what the runs could have caught, not judged on too few "
             "runs); where a side has one run the interval is within-run only: how steady that run was, not where "
             "another would land. Beside the runs, each side's spread between them.")


def _runs(count: int, spread: float) -> str:
    said = spread_text(spread)
    return f"{count} ({said})" if said else str(count)


def knob_rows(knobs: pd.DataFrame) -> Rows:
    return (["workload", ranks_title(knobs.attrs.get("devices", [])), "knob", "from → to", "throughput",
             "ratio [95% CI]", "verdict", "could have caught", "runs"],
            [[f"{r.system} {r.framework} {r.benchmark} {r.model}", str(r.np), r.knob.replace("_", " "),
              f"{r.base_value} → {r.value}", f"{fmt(r.base_throughput)} → {fmt(r.throughput)}",
              "×" + ratio(r.ratio, r.ratio_low, r.ratio_high),
              r.verdict.split(":")[0] + (f" (~{int(r.runs_to_decide):,} runs a side would decide it)"
                                         if r.finding == "undecided" and not pd.isna(r.runs_to_decide) else ""),
              f"×{r.detectable:.2f}" if not pd.isna(r.detectable) else "-",
              f"{_runs(r.base_runs, r.base_spread)} / {_runs(r.runs, r.spread)}"
              + (" (within-run only)" if min(r.base_runs, r.runs) < 2 else "")]
             for r in knobs.itertuples()])


CROSS_TEXT = "Over workloads (runs with gradients exchanged), per system and size."


def cross_rows(cross: pd.DataFrame) -> Rows:
    return (["system", ranks_title(cross.attrs.get("devices", [])), "workloads", "median speedup", "median efficiency",
             "efficiency range"],
            [[r.system, str(r.np), str(r.workloads), fmt(r.median_speedup, 2), pct(r.median_efficiency),
              f"{pct(r.min_efficiency)} – {pct(r.max_efficiency)}"] for r in cross.itertuples()])


def best_rows(best: pd.DataFrame, describe: Any) -> Rows:
    return (["system", "workload", ranks_title(best.get("device_name", [])), "throughput", "efficiency [95% CI]",
             "configuration"],
            [[r["system"], f"{r['framework']} {r['benchmark']} {r['model']}", str(r["np"]), fmt(r["throughput"]),
              efficiency_cell(r["efficiency"], r["efficiency_low"], r["efficiency_high"]), describe(r)]
             for _, r in best.iterrows()])


def _knobs(inputs: Inputs) -> pd.DataFrame:
    """The knob table over training and the input pipelines timed alone."""
    both = pd.concat([inputs.table, inputs.pipelines], ignore_index=True) if len(inputs.pipelines) else inputs.table
    return knob_table(both, inputs.draws, inputs.points, inputs.margin, inputs.min_runs)


KNOBS_SECTION = TableSection("knobs", "Every knob side by side", KNOB_TEXT, knob_rows, _knobs)
CROSS_SECTION = TableSection("cross_model", "Across workloads", CROSS_TEXT, cross_rows,
                             lambda inputs: cross_model(inputs.table))
