"""The report's tables as header and formatted rows, from the DataFrames: headline, the swept axes
(placement, nodes, batch size, precision, communication cost), systems side by side, stragglers,
warm-up, problems, collectives."""

from __future__ import annotations

import math
from typing import Any

import numpy as np
import pandas as pd

from hvdbench.core.axes import AXES
from hvdbench.core.exchanges import DEFAULT as DEFAULT_EXCHANGE

from ..keys import ARGS, AXIS_VIEW, PLACEMENTS
from ..collect import Collection
from ..tables.efficiency import MARK_MEANING, efficiency_mark
from ..verdicts.decision import ranks_text

Rows = tuple[list[str], list[list[str]]]


def missing(value: Any) -> bool:
    """None, pandas' NA or NaN."""
    return value is None or value is pd.NA or (isinstance(value, float) and math.isnan(value))


def fmt(value: Any, digits: int = 1) -> str:
    """A number for a table; n/a where missing."""
    return "n/a" if missing(value) else f"{value:,.{digits}f}"


def interval(low: Any, high: Any) -> str:
    """A 95% interval's cell: n/a where it could not be computed (fewer steady steps than an interval needs)."""
    if missing(low) or missing(high):
        return "n/a (too few steps)"
    return f"{fmt(low)} – {fmt(high)}"


def text(value: Any) -> str:
    """A string cell; n/a where missing."""
    return "n/a" if missing(value) else str(value)


def pct(value: Any) -> str:
    """A fraction as a whole percentage; n/a where missing."""
    return "n/a" if missing(value) else f"{value:.0%}"


def _unit(table: pd.DataFrame) -> str:
    units = sorted(set(table["unit"])) if len(table) else ["samples"]
    return units[0] if len(units) == 1 else "samples"


def headline_titles(table: pd.DataFrame) -> list[str]:
    """Headline column titles, with the unit of the rows: the size, then the figures the report is named after
    (throughput, speedup, efficiency with their intervals), then what describes the configuration."""
    return ["nodes", "GPUs", f"{_unit(table)}/s", "95% CI", "speedup [95% CI]", "efficiency [95% CI]", "per GPU",
            "TFLOP/s per GPU", "% of peak", *DESCRIBING, "median step (ms)", "step CV", "warm-up", "repeats"]


DESCRIBING = ["framework", "benchmark", "model", "launcher", "controller", "placement", "knobs", "exchange"]
# headline columns folded on a narrow page (HTML), by title
HEADLINE_FOLDED = ("controller", "median step (ms)", "step CV", "warm-up")


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


def tflops(value: Any) -> str:
    """Achieved TFLOP/s with three significant digits (CPU runs are small: 0.0123)."""
    return "n/a" if missing(value) else f"{value:.3g}"


def ratio(value: Any, low: Any, high: Any, digits: int = 2) -> str:
    """``1.86 [1.80–1.92]``; the value alone where there is no interval (or it is a point)."""
    if missing(value):
        return "n/a"
    if missing(low) or missing(high) or np.isclose(low, high):
        return fmt(value, digits)
    return f"{fmt(value, digits)} [{fmt(low, digits)}–{fmt(high, digits)}]"


def efficiency_cell(value: Any, low: Any, high: Any) -> str:
    """``93% [90–96%]``, marked where above linear: † when its interval still covers linear (noise, often
    in the 1-GPU run, can do that), ‡ when it lies wholly above."""
    if missing(value):
        return "n/a"
    mark = efficiency_mark(value, low)
    if missing(low) or missing(high) or np.isclose(low, high):
        return f"{value:.0%}{mark}"
    return f"{value:.0%}{mark} [{low:.0%}–{high:.0%}]"


def headline_text(table: pd.DataFrame) -> str:
    """What a reader needs beside the headline table: the marks used, and baselines that are not the rows' own."""
    notes = []
    marks = " ".join(efficiency_cell(r.efficiency, r.efficiency_low, r.efficiency_high) for r in table.itertuples())
    notes += [meaning for mark, meaning in MARK_MEANING.items() if mark in marks]
    odd = sorted({str(r.baseline) for r in table.itertuples() if "(" in str(r.baseline)})
    notes += [f"Speedup against {label}." for label in odd]
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
             str(r.repeats) if r.repeats == 1 else f"{r.repeats} ({fmt(r.repeat_min)}–{fmt(r.repeat_max)})"]
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


COMPARE_TEXT = ("The same workloads on each system: throughput, per GPU, per watt (mean GPU power from telemetry) "
                "and per dollar where a price per GPU-hour was given (samples per dollar = throughput × 3600 / "
                "(price × GPUs)).")


SYSTEM_TEXT = ("Each system as its complete runs recorded it (also system.json beside this report): every distinct "
               "value, so a fleet that is not uniform shows it; '-' where no run recorded the fact.")
UNPAIRED_TEXT = ("Configurations only one system measured, beside the nearest one another system did and what "
                 "differs: they enter no verdict. Run lengths (--steps, --warmup-steps, --target-ci, --max-steps) do "
                 "not count as a difference.")


def decision_text(baseline: str, how: str, margin: float) -> str:
    """What the decision's sentences mean."""
    return (f"Each system against the baseline {baseline} ({how}): throughput on the same workload and GPU count, "
            "runs that differ only in run length paired. The ratio's 95% interval comes from both systems' own "
            f"resampled runs; faster or slower where the whole interval clears 1 by more than {margin:.0%} "
            "(compare --margin), else no measurable difference.")


def cost_lines(compared: pd.DataFrame) -> list[str]:
    """Per costed workload and size, every system's ``US$ 1.23 [1.20–1.26]`` per million samples on one line,
    with what the energy counted."""
    lines = []
    costed = compared[compared["usd_per_million"].notna()]
    for _, rows in costed.groupby(["framework", "benchmark", "model", "args", "np"], sort=False):
        first = rows.iloc[0]
        costs = "; ".join(
            f"{r.system} US$ {r.usd_per_million:.3g}"
            + (f" [{r.usd_per_million_low:.3g}–{r.usd_per_million_high:.3g}]" if pd.notna(r.usd_per_million_low)
               else "") + f" (energy: {r.energy_counted})" for r in rows.itertuples())
        lines.append(f"Cost per million samples, {first['framework']} {first['benchmark']} {first['model']} "
                     f"{first['args']} at {ranks_text(int(first['np']), bool(first.get('on_gpu', True)))}: {costs}")
    return lines


def unpaired_rows(alone: pd.DataFrame) -> Rows:
    """What one system measured alone."""
    return (["system", "workload", "GPUs", "nearest on another system", "what differs"],
            [[r.system, r.workload, str(r.np), r.nearest, r.differs or "-"] for r in alone.itertuples()])


def compare_rows(compared: pd.DataFrame, baseline: str) -> Rows:
    """Systems side by side."""
    return (["workload", "GPUs", "system", "throughput", "per GPU", "per watt", "per $", f"vs {baseline} [95% CI]"],
            [[f"{r.framework} {r.benchmark} {r.model} {r.args}".strip(), str(r.np), r.system, fmt(r.throughput),
              fmt(r.per_gpu), fmt(r.per_watt, 2), fmt(r.per_dollar, 0),
              ratio(r.relative, r.relative_low, r.relative_high)]
             for r in compared.itertuples()])


def straggler_text(slow: pd.DataFrame, threshold: float) -> str:
    base = (f"Ranks whose median own-work time per step is more than {threshold:.0%} above their run's median "
            "(own work: the step minus its gradient exchange where --breakdown recorded it, since a synchronous "
            "step makes every rank wait for the slowest; else the whole step). Evidence: where the rank's "
            "telemetry differs from the other ranks' (clocks, power, temperature, PCIe link, clock-event reasons) "
            "and from its GPU's own limits (maximum clocks, power limit, PCIe generation and width, ECC errors, "
            "retired pages).")
    return base if len(slow) else base + " None found."


def straggler_rows(slow: pd.DataFrame) -> Rows:
    if slow.empty:
        return [], []
    return (["run", "GPUs", "rank", "host", "GPU", "median work (ms)", "run median (ms)", "slower by",
             "SM clock (MHz)", "memory clock (MHz)", "temperature (°C)", "power (W)", "evidence"],
            [[r.run_id, str(r.np), str(r.rank), text(r.host), text(r.gpu), fmt(r.median_work_ms, 2),
              fmt(r.run_median_ms, 2), pct(r.excess), fmt(r.sm_clock_mhz, 0), fmt(r.memory_clock_mhz, 0),
              fmt(r.temperature_c, 0), fmt(r.power_w, 0), text(r.evidence)] for r in slow.itertuples()])


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


DETAILS_FOLDED = (6, 7, 10, 12, 13)  # set-up, GPU util, memory clock, cuDNN autotune, NVLink: behind "every column"
WARMUP_TEXT = ("Steps left out of each run: at least those it ran as warm-up; more where its step times show a "
               "longer initial transient (the run of steps from the start, gaps of up to 3 allowed, further than 4 "
               "robust SDs from the second half's median); n/a where fewer than 20 steps leave nothing to detect. "
               "Block: the consecutive steps its interval resamples together, as long as the run's own "
               "autocorrelation asks (1: none found).")


def warmup_rows(runs: pd.DataFrame, stats: pd.DataFrame) -> Rows:
    merged = runs.merge(stats, on="run_id")
    return (["run", "system", "GPUs", "warm-up asked", "detected", "left out", "steady steps", "block (steps)"],
            [[r.run_id, r.system, str(r.np), str(r.warmup_asked),
              "n/a" if r.warmup_detected < 0 else str(r.warmup_detected), str(r.warmup_used), str(r.steps),
              str(r.block_steps)] for r in merged.itertuples()])


ADAPTIVE_TEXT = ("Runs with --target-ci ran their --steps, then chunks of steps until the 95% interval of throughput "
                 "was within ± the target (stopped by target) or --max-steps were timed (stopped by max_steps). "
                 "Reached: the half-width rank 0 judged when the run stopped; report: this report's own half-width, "
                 "after its warm-up detection and with more resamples.")


def adaptive_rows(runs: pd.DataFrame, stats: pd.DataFrame) -> Rows:
    merged = runs[runs["target_ci_pct"].notna()].merge(stats, on="run_id")
    return (["run", "GPUs", "steps timed", "target (±%)", "reached (±%)", "stopped by", "report (±%)"],
            [[r.run_id, str(r.np), str(r.timed_steps), fmt(r.target_ci_pct, 2),
              fmt(r.ci_reached_pct, 2), str(r.stopped_by), fmt((r.ci_high - r.ci_low) / 2 / r.throughput * 100, 2)]
             for r in merged.itertuples()])


def problems(collection: Collection) -> list[tuple[str, str, list[str], list[list[str]]]]:
    """Runs left out with their reasons, unreadable run descriptions, malformed log lines."""
    out = []
    excluded = collection.runs[collection.runs["status"] != "ok"]
    if len(excluded) or collection.spec_errors:
        rows = [[r.run_id, r.status, r.reason] for r in excluded.itertuples()]
        rows += [["-", "unreadable", error] for error in collection.spec_errors]
        out.append(("Runs left out", "Failed, timed-out, cancelled or incomplete runs are listed, not counted.",
                    ["run", "status", "reason"], rows))
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


FABRIC_TEXT = ("What each GPU run's NCCL said it used (its INFO output for INIT and NET, kept per rank in "
               "nccl-rank-N.log beside the run): the network that moved data between nodes, the plugin, GPUDirect "
               "RDMA, the NICs and the transports within a node. A run across nodes over TCP sockets on a cluster "
               "with InfiniBand or RoCE measures the fallback, not the fabric.")


def fabric_alerts(runs: pd.DataFrame, most: int = 3) -> list[str]:
    """Executive-summary lines for the runs whose NCCL logs warn (sockets beside RDMA, no GPUDirect RDMA)."""
    warned = runs[(runs["status"] == "ok") & runs["fabric_warnings"].notna()]
    lines = [f"Fabric warning: {r.run_id} ({r.nodes} node(s)): {str(r.fabric_warnings).split('; ')[0]} "
             "(see The network NCCL used)." for r in warned.head(most).itertuples()]
    if len(warned) > most:
        lines.append(f"Fabric warnings on {len(warned) - most} more run(s) (see The network NCCL used).")
    return lines


def params_alerts(runs: pd.DataFrame, most: int = 3) -> list[str]:
    """Executive-summary lines for exchanging runs whose ranks ended with different parameters: their gradients
    were not exchanged as said, so their throughput is not that of data-parallel training."""
    split = runs[(runs["status"] == "ok") & (runs["params_agree"] == False)]  # noqa: E712 - a nullable column
    lines = [f"Parameters differ across ranks after training: {r.run_id} (exchange {r.exchange}): its gradients "
             "were not exchanged as said; its throughput is not that of data-parallel training."
             for r in split.head(most).itertuples()]
    if len(split) > most:
        lines.append(f"Parameters differ across ranks in {len(split) - most} more run(s) (see the runs' details).")
    return lines


def fabric_rows(runs: pd.DataFrame) -> Rows:
    """The runs whose NCCL logs say which network NCCL used."""
    said = runs[runs["nccl_network"].notna() | runs["nccl_transports"].notna()]
    return (["run", "nodes", "GPUs", "network", "plugin", "GPUDirect RDMA", "NICs", "within a node", "warnings"],
            [[r.run_id, str(r.nodes), str(r.np), *(_text(v) for v in (r.nccl_network, r.nccl_plugin)),
              "-" if missing(r.nccl_gdr) else "yes" if r.nccl_gdr else "no",
              *(_text(v) for v in (r.nccl_nics, r.nccl_transports, r.fabric_warnings))] for r in said.itertuples()])


def _text(value: Any) -> str:
    return "-" if missing(value) or value == "" else str(value)


P2P_TEXT = ("Device-to-device copies from the row's GPU to the column's: the pair's link class (from the "
            "node's topology) and GB/s (10^9 bytes over the median of the timed copies, each bounded by device "
            "syncs). A PIX pair at PCIe rates or an NV# pair at NVLink rates shows here.")

COMM_TEXT = ("Timed calls back to back (nccl-tests' way: after a barrier and a device sync, the calls, one sync, the "
             "time / calls; per batch the slowest rank's; the figure the median over batches) or each call alone "
             "(bounded by a barrier and a sync; per call the slowest rank's; the figure their mean, which holds each "
             "call's cost of getting there). algbw = bytes / time per call; busbw as nccl-tests defines it "
             "(allreduce × 2(n−1)/n, allgather and alltoall × (n−1)/n, broadcast × 1). Every result was checked. "
             "A call's cost before any byte moves is shown beside (raw MPI: the same call on MPI_COMM_SELF with one "
             "element; Horovod: a one-element allreduce, its background cycle included): small messages stand on it. "
             "Beside each, the share of the nominal per-direction rate of the link the placement's GPUs share "
             "(NV#: # NVLinks × 25 GB/s; PCIe classes: the GPUs' PCIe generation × width; unknown across nodes "
             "or for mixed placements) and the training efficiency measured on the same placement and GPU count.")


def peak_rows(peaks: pd.DataFrame, scaling: pd.DataFrame) -> Rows:
    rows = []
    for r in peaks.itertuples():
        same = scaling[(scaling["system"] == r.system) & (scaling["placement"] == r.placement)
                       & (scaling["np"] == r.np)]
        training = ", ".join(f"{t.model} {t.efficiency:.0%}" for t in same.itertuples() if not math.isnan(t.efficiency))
        link = (f"{r.peak_busbw_gbs / r.link_gbs:.0%} of {r.link}" if not missing(r.link_gbs)
                else "unknown link rate")
        rows.append([r.system, r.placement or "-", str(r.np), r.op, r.path, r.dtype, TIMED[r.timing],
                     f"{r.peak_busbw_gbs:.3f}", f"{r.at_bytes:,}", link, fmt(r.path_cost_us, 1), training or "-"])
    return (["system", "placement", "GPUs", "op", "through", "dtype", "timed", "peak busbw (GB/s)", "at bytes",
             "of the link's nominal rate", "a call's own cost (µs)", "training efficiency here"], rows)


TIMED = {"batch": "back to back", "each": "each call", "steps": "training steps"}


def ratio_rows(ratio: pd.DataFrame) -> Rows:
    return (["system", "placement", "GPUs", "op", "dtype", "timed", "Horovod over", "bytes", "Horovod GB/s", "MPI GB/s",
             "ratio"],
            [[r.system, r.placement or "-", str(r.np), r.op, r.dtype, TIMED[r.timing], r.path, f"{r.bytes:,}",
              f"{r.horovod_gbs:.3f}", f"{r.mpi_gbs:.3f}", f"{r.ratio:.2f}"] for r in ratio.itertuples()])


KNOB_TEXT = ("Configurations that differ in one knob only (" + ", ".join(name.replace("_", " ") for name in AXES)
             + "), each against the knob's default (the exchange: each against Horovod at the same rank count): the "
             "throughput ratio with a 95% interval from both configurations' resampled runs (blocks of steps within "
             "each); where a side has one run the interval is within-run only: how steady that run was, not where "
             "another would land.")


def knob_rows(knobs: pd.DataFrame) -> Rows:
    return (["workload", "GPUs", "knob", "from → to", "throughput", "ratio [95% CI]", "runs"],
            [[f"{r.system} {r.framework} {r.benchmark} {r.model}", str(r.np), r.knob.replace("_", " "),
              f"{r.base_value} → {r.value}", f"{fmt(r.base_throughput)} → {fmt(r.throughput)}",
              "×" + ratio(r.ratio, r.ratio_low, r.ratio_high),
              f"{r.base_runs} / {r.runs}" + (" (within-run only)" if min(r.base_runs, r.runs) < 2 else "")]
             for r in knobs.itertuples()])


CROSS_TEXT = "Over workloads (runs with gradients exchanged), per system and GPU count."


def cross_rows(cross: pd.DataFrame) -> Rows:
    return (["system", "GPUs", "workloads", "median speedup", "median efficiency", "efficiency range"],
            [[r.system, str(r.np), str(r.workloads), fmt(r.median_speedup, 2), pct(r.median_efficiency),
              f"{pct(r.min_efficiency)} – {pct(r.max_efficiency)}"] for r in cross.itertuples()])


def best_rows(best: pd.DataFrame, describe: Any) -> Rows:
    return (["system", "workload", "GPUs", "throughput", "efficiency [95% CI]", "configuration"],
            [[r["system"], f"{r['framework']} {r['benchmark']} {r['model']}", str(r["np"]), fmt(r["throughput"]),
              efficiency_cell(r["efficiency"], r["efficiency_low"], r["efficiency_high"]), describe(r)]
             for _, r in best.iterrows()])


DATAPATH_TEXT = ("Training that reads a dataset (--data files: read, decoded and augmented by the loader's workers) "
                 "against the same training on synthetic batches: the ratio with its 95% interval; the share of step "
                 "time spent waiting for a batch; what the pipeline gives a rank alone (--data-only) against what "
                 "training asks (the synthetic rate a rank); the CPU cores a GPU needs at the measured decode rate "
                 "(what training asks over one worker's rate); the storage a node and 16 nodes need at the GPUs' "
                 "rate (the dataset's bytes a sample × the synthetic rate); and the accelerator utilization as MLPerf "
                 "Storage defines it (1 − the share waiting; its pass mark 90%).")


def datapath_rows(table: pd.DataFrame) -> Rows:
    """The data path table."""
    return (["workload", "ranks", "loader", "workers", "layout", "synthetic", "files", "files / synthetic [95% CI]",
             "waited on input", "alone a rank", "asked a rank", "verdict", "CPU cores a GPU", "storage a node (MB/s)",
             "16 nodes (MB/s)", "accelerator utilization"],
            [[f"{r.system} {r.framework} {r.benchmark} {r.model}", str(r.np), text(r.loader), text(r.workers),
              text(r.layout),
              fmt(r.synthetic), fmt(r.files), ratio(r.ratio, r.ratio_low, r.ratio_high), pct(r.wait_share),
              fmt(r.alone_per_rank), fmt(r.asked_per_rank), r.verdict, fmt(r.cores_per_gpu), fmt(r.node_mb_s),
              fmt(r.cluster_mb_s), (pct(r.au) + (" (≥ 90%)" if r.au >= 0.9 else " (below 90%)"))
              if not missing(r.au) else "n/a"] for r in table.itertuples()])


DETAILS_TEXT = ("Per run: trainable parameters, peak device memory (GPU) or peak resident set (CPU), wall time and "
                "its set-up part (start to the first timed step: imports, model build, compile, warm-up), and the "
                "timed window's means of GPU utilisation, power (summed over ranks) and clocks; energy per sample "
                "from NVML's energy counter where it exists, else power × time, timed window only; where GPUs have "
                "NVLink, its payload sent and received per GPU (NVML's counters over the timed window).")


def details_rows(details: pd.DataFrame) -> Rows:
    nvlink = bool(details["nvlink_gbs"].notna().any()) if "nvlink_gbs" in details else False  # where a GPU has it
    return (["run", "system", "GPUs", "parameters", "peak memory (GB)", "wall (s)", "set-up (s)", "GPU util (%)",
             "power (W)", "SM clock (MHz)", "memory clock (MHz)", "energy per sample (J)", "cuDNN autotune",
             *(["NVLink per GPU (GB/s, sent + received)"] if nvlink else [])],
            [[r.run_id, r.system, str(r.np), fmt(r.parameters, 0), f"{fmt(r.peak_memory_gb, 2)} {r.memory}",
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
    phases = [c for c in ("forward", "backward", "compute", "exchange", "optimizer") if c in breakdown]
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
