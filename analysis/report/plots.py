"""Plots of the report as SVG text (matplotlib, no display): scaling with the ideal line, efficiency,
placements, batch sizes, per-rank step-time spread, telemetry over time. Each returns None when the
results hold nothing to plot."""

from __future__ import annotations

from typing import Any, Callable, Mapping

import numpy as np
import pandas as pd

from hvdbench.core.columns import SHOWN_PHASES

from ..drawing import figure, integer_log_axis, plain, svg_text
from ..keys import BATCH_LINES, PLACEMENTS, SERIES, WORKLOAD
from ..tables.efficiency import ranks_title
from ..stats import StepMatrix, column_quantiles

MAX_LINES = 12
# a line's colour and marker together, distinct for every one of MAX_LINES lines (matplotlib's own cycle repeats after
# ten colours and has a grey that a grid hides); no grey, the ideal's dashes kept for the ideal alone
PALETTE = ("#1f77b4", "#ff7f0e", "#2ca02c", "#d62728", "#9467bd", "#8c564b", "#e377c2", "#bcbd22", "#17becf",
           "#000000", "#393b79", "#637939")
MARKERS = ("o", "s", "^", "D", "v", "P", "X", "*", "<", ">", "h", "p")
HEADROOM = 1.15  # the y axis ends this far above the highest point or ideal: a wide interval runs off it


def _styled(ax: Any) -> None:
    """Each line its own colour and marker, in order."""
    from cycler import cycler

    ax.set_prop_cycle(cycler(color=list(PALETTE)) + cycler(marker=list(MARKERS)))


def series(table: pd.DataFrame) -> list[tuple[tuple[Any, ...], pd.DataFrame]]:
    """The lines of a plot against GPU count: one per configuration (every key of a scaling row but its
    size) and layout, so no line holds one GPU count twice. Layout: ``1 node`` for single-node rows (1, 2,
    4, 8 GPUs in a box form one line), ``G GPUs/node`` for multi-node rows (one line per GPUs per node)."""
    layout = ["1 node" if nodes == 1 else f"{n // nodes} GPUs/node" for n, nodes in zip(table["np"], table["nodes"])]
    return list(table.assign(layout=layout).groupby(SERIES, sort=True, dropna=False))


def _label(row: pd.Series, varying: list[str]) -> str:
    return plain(" · ".join(str(row[k]) for k in varying if str(row[k])) or str(row["benchmark"]))


def _varying(table: pd.DataFrame, keys: list[str]) -> list[str]:
    """The keys that differ between lines; a short label needs only those."""
    return [k for k in keys if table[k].nunique(dropna=False) > 1] or ["model"]


def _lines(table: pd.DataFrame, draw: Callable[[Any, pd.DataFrame, str], None], ylabel: str,
           ideal: bool = False) -> str | None:
    table = table[~table["independent"]] if "independent" in table else table
    groups = series(table)
    if not any(len(g) > 1 for _, g in groups):
        return None
    fig, ax = figure()
    _styled(ax)
    varying = _varying(pd.concat([g for _, g in groups]), SERIES)
    for _, group in [g for g in groups if len(g[1]) > 1][:MAX_LINES]:
        draw(ax, group.sort_values("np"), _label(group.iloc[0], varying))
    integer_log_axis(ax, sorted(set(table["np"])))
    ax.set_xlabel(ranks_title(table.get("device_name", [])))
    ax.set_ylabel(ylabel)
    ax.grid(True, alpha=0.3)
    ax.legend(fontsize=7, loc="upper left", bbox_to_anchor=(1.01, 1.0), borderaxespad=0.0)  # beside the data
    return svg_text(fig)


def throughput_plot(table: pd.DataFrame) -> str | None:
    """Throughput against ranks, with its interval, and each series' ideal line (N x 1 rank)."""
    top = [0.0]

    def draw(ax: Any, g: pd.DataFrame, label: str) -> None:
        yerr = np.clip([g["throughput"] - g["ci_low"], g["ci_high"] - g["throughput"]], 0, None)
        line = ax.errorbar(g["np"], g["throughput"], yerr=yerr, capsize=3, label=label)
        top[0] = max(top[0], float(g["throughput"].max()))
        base = g[g["np"] == 1]["throughput"]
        if len(base):
            ideal = g["np"] * float(base.iloc[0])
            ax.plot(g["np"], ideal, linestyle="--", marker="", color=line[0].get_color(), alpha=0.5)
            top[0] = max(top[0], float(ideal.max()))
        ax.set_ylim(0, HEADROOM * top[0])  # the points and ideals set the scale; a wide interval runs off the top
    units = sorted(set(table["unit"]))
    return _lines(table, draw, f"{units[0] if len(units) == 1 else 'samples'}/s (dashed: ideal)")


def efficiency_plot(table: pd.DataFrame) -> str | None:
    """Scaling efficiency against ranks."""
    def draw(ax: Any, g: pd.DataFrame, label: str) -> None:
        ax.plot(g["np"], 100 * g["efficiency"], label=label)
    svg = _lines(table.dropna(subset=["efficiency"]), draw, "efficiency (%)")
    return svg


def placement_plot(table: pd.DataFrame) -> str | None:
    """Throughput per placement at equal rank counts: bars for each workload and size with 2+ placements."""
    groups = [(k, g) for k, g in table.groupby(PLACEMENTS, sort=True) if g["placement"].nunique() > 1]
    if not groups:
        return None
    fig, ax = figure(6.4, 0.6 + 0.45 * sum(len(g) for _, g in groups[:MAX_LINES]))
    labels, values, errors = [], [], []
    for key, group in groups[:MAX_LINES]:
        for row in group.sort_values("throughput", ascending=False).itertuples():
            labels.append(plain(f"{key[3]} ×{key[5]} {row.placement or 'any'}"))
            values.append(row.throughput)
            errors.append([max(0.0, row.throughput - row.ci_low), max(0.0, row.ci_high - row.throughput)])
    y = np.arange(len(labels))
    ax.barh(y, values, xerr=np.array(errors).T, capsize=3)
    ax.set_yticks(y, labels, fontsize=7)
    ax.invert_yaxis()
    ax.set_xlabel("throughput")
    return svg_text(fig)


def batch_plot(table: pd.DataFrame) -> str | None:
    """Throughput against batch size per rank, one line per workload and rank count."""
    sized = table.dropna(subset=["batch_size"])
    groups = [(k, g) for k, g in sized.groupby(BATCH_LINES, sort=True) if g["batch_size"].nunique() > 1]
    if not groups:
        return None
    fig, ax = figure()
    _styled(ax)
    varying = _varying(sized, BATCH_LINES)
    for _, group in groups[:MAX_LINES]:
        g = group.sort_values("batch_size")
        ax.plot(g["batch_size"].astype(float), g["throughput"], label=_label(g.iloc[0], varying))
    integer_log_axis(ax, sorted({int(b) for _, g in groups[:MAX_LINES] for b in g["batch_size"]}))
    ax.set_xlabel("batch size per rank")
    ax.set_ylabel("throughput")
    ax.grid(True, alpha=0.3)
    ax.legend(fontsize=7, loc="upper left", bbox_to_anchor=(1.01, 1.0), borderaxespad=0.0)  # beside the data
    return svg_text(fig)


def rank_spread_plot(matrices: Mapping[str, StepMatrix], runs: pd.DataFrame, stats: pd.DataFrame) -> str | None:
    """Per-rank steady-state step times (median, 5th-95th percentile) for the largest run of each workload."""
    if stats.empty:
        return None
    merged = runs.merge(stats[["run_id", "warmup_used"]], on="run_id")
    chosen = merged.sort_values("np").groupby(WORKLOAD, sort=True).tail(1)
    chosen = chosen[chosen["np"] > 1].head(4)
    if chosen.empty:
        return None
    from matplotlib.ticker import MaxNLocator

    fig, axes = figure(6.4, 2.2 * len(chosen), rows=len(chosen))
    axes = np.atleast_1d(axes)
    for ax, run in zip(axes, chosen.itertuples()):
        matrix = matrices[run.run_id]
        low, median, high = column_quantiles(matrix.durations[int(run.warmup_used):], (0.05, 0.5, 0.95)) * 1e3
        ax.fill_between(matrix.ranks, low, high, alpha=0.3, step="mid", label="5th–95th percentile")
        ax.plot(matrix.ranks, median, marker="." if len(matrix.ranks) <= 64 else None, linewidth=1, label="median")
        ax.set_title(plain(f"{run.system} {run.benchmark} {run.model}, {run.np} ranks"), fontsize=8)
        ax.set_ylabel("step (ms)")
        ax.set_xlabel("rank")
        ax.xaxis.set_major_locator(MaxNLocator(integer=True))
        ax.legend(fontsize=7)
    return svg_text(fig)


def breakdown_plot(breakdown: pd.DataFrame) -> str | None:
    """Stacked bars of each --breakdown phase (median ms) per workload and GPU count."""
    phases = [c for c in SHOWN_PHASES if c in breakdown]
    if breakdown.empty or not phases:
        return None
    shown = breakdown.head(MAX_LINES * 2)
    fig, ax = figure(6.4, 0.8 + 0.35 * len(shown))
    labels = [plain(f"{r['model']} ×{r['np']}" + (f" {r['knobs']}" if r["knobs"] else "")) for _, r in shown.iterrows()]
    left = np.zeros(len(shown))
    for phase in phases:
        values = shown[phase].fillna(0.0).to_numpy()
        ax.barh(np.arange(len(shown)), values, left=left, label=phase)
        left += values
    ax.set_yticks(np.arange(len(shown)), labels, fontsize=7)
    ax.invert_yaxis()
    ax.set_xlabel("median time per step (ms)")
    ax.legend(fontsize=7)
    return svg_text(fig)


TELEMETRY_PANELS = [("power_w", "GPU power (W)"), ("sm_clock_mhz", "SM clock (MHz)"),
                    ("memory_clock_mhz", "memory clock (MHz)"), ("temperature_c", "GPU temperature (°C)"),
                    ("gpu_util_pct", "GPU utilisation (%)"), ("process_cpu_pct", "process CPU (%)"),
                    ("rss_bytes", "resident memory (bytes)")]


def telemetry_plot(telemetry: pd.DataFrame, runs: pd.DataFrame) -> str | None:
    """Telemetry over time of the largest run of each workload (mean over ranks), up to four panels."""
    present = [(c, t) for c, t in TELEMETRY_PANELS if telemetry[c].notna().any()][:4]
    if telemetry.empty or not present:
        return None
    chosen = runs[runs["run_id"].isin(set(telemetry["run_id"]))].sort_values("np")
    chosen = chosen.groupby(WORKLOAD, sort=True).tail(1).head(MAX_LINES)
    fig, axes = figure(6.4, 2.0 * len(present), rows=len(present))
    axes = np.atleast_1d(axes)
    for run in chosen.itertuples():
        g = telemetry[telemetry["run_id"] == run.run_id].dropna(subset=["t_s"])
        if g.empty:
            continue
        mean = g.groupby(g["t_s"].round(0))[[c for c, _ in present]].mean()
        for ax, (column, _) in zip(axes, present):
            ax.plot(mean.index, mean[column], label=plain(f"{run.system}: {run.benchmark} {run.model} ×{run.np}"))
    for ax, (_, title) in zip(axes, present):
        ax.set_ylabel(title, fontsize=7)
        ax.grid(True, alpha=0.3)
    axes[-1].set_xlabel("seconds since the rank's first record")
    axes[0].legend(fontsize=7)
    return svg_text(fig)


def all_plots(table: pd.DataFrame, matrices: Mapping[str, StepMatrix], runs: pd.DataFrame, stats: pd.DataFrame,
              telemetry: pd.DataFrame) -> dict[str, str]:
    """Every plot that has data, by title."""
    made = {
        f"Throughput against {ranks_title(table.get('device_name', []))} (dashed: ideal linear scaling)":
            throughput_plot(table),
        "Scaling efficiency": efficiency_plot(table),
        "Placements at equal GPU count": placement_plot(table),
        "Batch size": batch_plot(table),
        "Per-rank step times": rank_spread_plot(matrices, runs, stats),
        "Telemetry over time": telemetry_plot(telemetry, runs),
    }
    return {title: svg for title, svg in made.items() if svg is not None}
