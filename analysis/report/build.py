"""Report: sections of tables built once from the DataFrames, rendered as Markdown, self-contained HTML
(plots inline as SVG) and terminal text; every table also as CSV and Parquet."""

from __future__ import annotations

from pathlib import Path
from typing import Callable

import pandas as pd


from hvdbench.core.errors import ReportError

from . import views
from ..collect import Collection, collect
from ..tables.comm import (
    comm_table, plot_bandwidth
)
from ..keys import ACROSS_SYSTEMS, identity
from ..verdicts.compare import compare_table, measured_best
from ..tables.system import (
    fabric_alerts, params_alerts, system_table
)
from ..verdicts.costs import cost_columns
from ..verdicts.judging import Judging
from ..verdicts.versus import verdict_inputs
from ..verdicts.decision import (decision_table, unpaired_table, weighted_figures)
from . import decision_view
from ..ratios import MIN_RUNS, pooled_spread
from ..sections import Inputs
from ..tables.datapath import datapath_summary
from ..tables.quality import decision_lines as quality_decision_lines, quality_summary, report_quality
from ..tables.efficiency import load_peaks, on_cpu_ranks, Peak, with_peaks
from ..document import Report, Section
from .output import terminal_text, write
from .parts import PARTS, Assembly, walk
from .plots import all_plots, breakdown_plot
from ..tables.scaling import (
    matrices, run_stats_table, scaling_table, straggler_table
)
from ..tables.full_node import full_node_table
from ..tables.pairs import pair_alerts, pair_table
from ..selection import by_time, window_line
from ..tables.screening import screening_table
from ..tables.summary import executive_lines
from ..stats import STRAGGLER_THRESHOLD


def _intro(collection: Collection, warmup: int | None) -> str:
    runs = collection.runs
    rule = (f"the first {warmup} steps of every run (--warmup {warmup})" if warmup is not None else
            "the steps each benchmark ran as warm-up, or more where the step times show a longer initial "
            "transient (see Warm-up)")
    devices = runs["device_name"].dropna() if "device_name" in runs else pd.Series(dtype=object)
    stand_in = ("These results are CPU stand-ins: ranks trained on CPUs, not GPUs. They show how hvdbench measures "
                "and judges, not what any GPU system does. ") if on_cpu_ranks(devices) else ""
    return (f"{stand_in}{len(runs)} run(s) read, {int((runs['status'] == 'ok').sum())} complete. Throughput is the sum "
            "over ranks of each rank's samples divided by its own steady-state step time (never rank 0 × N); "
            f"left out: {rule}. A configuration of several runs is their geometric mean; its 95% interval resamples "
            "the runs and, within each, blocks of its steps (Student's t over the runs); one run's interval is its "
            "steps' alone (within-run: the spread between runs unknown). Speedup = throughput(N) / throughput(1 rank, "
            f"same workload, arguments and system); efficiency = speedup / N.{window_line(collection)}")


def _decision(collection: Collection, table: pd.DataFrame, compared: pd.DataFrame, baseline: str | None,
              margin: float, weights: dict[str, float], quality: pd.DataFrame, first_given: str | None = None,
              min_runs: int = MIN_RUNS) -> list[Section]:
    """The decision between systems, first after the summary: one row per workload and size against the baseline
    (ratio, interval, verdict, runs per side, cost), its forest plot, the weighted figures and costs, what the verdicts
    rest on; the side-by-side table, and what one system measured alone; nothing for one system (``quality``: the
    report's time-to-target table)."""
    systems = sorted(set(table["system"]) | set(quality["system"])) if len(table) + len(quality) else []
    if len(systems) < 2:
        return []
    given = first_given if first_given in systems else None
    base: str = baseline or given or systems[0]
    how = ("chosen with --baseline" if baseline else "the first given on the command line; --baseline chooses"
           if given else "the first system by name; --baseline chooses")
    others = ", ".join(s for s in systems if s != base)
    section = Section(f"Decision: {others} against {base}", decision_view.decision_text(base, how, margin, min_runs),
                      role="decision")
    if len(compared):
        decided = decision_table(compared, margin, min_runs)
        weighted = weighted_figures(decided, compared.attrs.get("ratio_draws", {}), weights, margin) if weights else []
        section.banner = decision_view.banners(collection, decided, compared)
        section.lines = [w.line() for w in weighted] + [line for line in [decision_view.hourly_line(compared)] if line]
        section.header, section.rows, section.notes = decision_view.decision_rows(decided, compared)
        section.folded = (len(section.header) - 1,)
        section.figure = (decision_view.FOREST_FILE, decision_view.forest_svg(decided, weighted, margin))
        section.foot = ["Runs behind these verdicts:"] + decision_view.foot_lines(collection, compared)
        compared.attrs["decided"], compared.attrs["weighted"] = decided, weighted
    elif not quality_decision_lines(quality):
        section.lines = ["no decision between the systems: no workload was measured on two of them (see Measured on "
                         "one system only)"]
    section.lines += quality_decision_lines(quality)
    out = [section]
    if len(compared):
        out.append(Section("Systems side by side", decision_view.COMPARE_TEXT,
                           *decision_view.compare_rows(compared, base)))
    alone = unpaired_table(measured_best(table), identity(list(ACROSS_SYSTEMS), measured_only=True))
    if len(alone):
        out.append(Section("Measured on one system only", decision_view.UNPAIRED_TEXT,
                           *decision_view.unpaired_rows(alone), role="unpaired"))
    return out


def _given(table: pd.DataFrame, baseline: str | None, first_given: str | None) -> str | None:
    """The default baseline: the first results root's system, where none is chosen and it has results."""
    return first_given if baseline is None and len(table) and first_given in set(table["system"]) else None


def _headline(title: str, group: pd.DataFrame) -> Section:
    """One headline table: the figures first, columns the same on every row said in its text."""
    text, titles, rows, folded = views.headline_section(group)
    return Section(title, text, titles, rows, code=True, folded=folded)


def _nothing_to_report(collection: Collection, warmup: int | None) -> None:
    """The ReportError of a collection with no complete run, saying why."""
    reasons = "; ".join(sorted(set(collection.runs["reason"]) - {""})[:3])
    longest = int(collection.steps.groupby("run_id")["step"].nunique().max()) if len(collection.steps) else 0
    if not reasons and warmup is not None and warmup >= longest:
        reasons = f"--warmup {warmup} leaves no steps: the longest run has {longest}"
    raise ReportError(f"no complete run to report: {reasons or 'no timed steps'}")


def _compared(collection: Collection, table: pd.DataFrame, stats: pd.DataFrame, judging: Judging,
              quality: pd.DataFrame) -> tuple[pd.DataFrame, list[Section]]:
    """Systems against the baseline: the comparison table (with costs) and the decision's sections."""
    given = _given(table, judging.baseline, judging.first_given)
    spreads = pooled_spread(table, dict(zip(stats["run_id"], stats["throughput"])), judging.min_runs) \
        if judging.borrow_spread else None
    keys, draws, points = verdict_inputs(collection, stats)
    compared = compare_table(table, judging.prices, draws, judging.baseline or given, spreads, judging.min_runs,
                             points, keys)
    if judging.costs:
        compared = cost_columns(compared, table, judging.costs)
    return compared, _decision(collection, table, compared, judging.baseline, judging.margin, judging.weights,
                               quality, given if len(table) else judging.first_given, judging.min_runs)


def build(collection: Collection, *, warmup: int | None = None, threshold: float = STRAGGLER_THRESHOLD,
          peaks: list[Peak] | None = None, judging: Judging | None = None) -> Report:
    """Statistics, tables, sections and plots of collected runs (``peaks``: the peak table, default built-in;
    ``judging``: how systems are judged, every option of it in one object; default: Judging())."""
    judging = judging or Judging()
    collection = by_time(collection, judging.window)
    stats = run_stats_table(collection, warmup)
    table = with_peaks(scaling_table(collection, stats), load_peaks() if peaks is None else peaks)
    comm = comm_table(collection)
    inputs = Inputs(collection, stats, table, scaling_table(collection, stats, pipelines=True), judging.margin,
                    judging.min_runs, judging.baseline or judging.first_given)
    timed = collection.runs["converged"].notna().any() if len(collection.runs) else False  # ran to a target, ended
    if table.empty and comm.empty and collection.p2p.empty and inputs.pipelines.empty and not timed:
        _nothing_to_report(collection, warmup)
    slow = straggler_table(collection, stats, threshold)
    screen = screening_table(collection, stats)
    full = full_node_table(collection, stats)
    compared, decided = _compared(collection, table, stats, judging, report_quality(inputs))
    headline = [_headline(f"{system}: {args or '(defaults)'}", group)
                for (system, args), group in table.groupby(["system", "args"], sort=True)]
    summary = (_decision_summary(compared, decided) + (executive_lines(table, screen, slow, full) if len(table) else [])
               + fabric_alerts(collection.runs) + pair_alerts(pairs := pair_table(comm, collection.runs))
               + params_alerts(collection.runs))
    described = system_table(collection)
    assembly = Assembly(inputs, comm, slow, screen, full, compared, decided, headline, summary, described, threshold,
                        warmup, {"runs": collection.runs, "run_stats": stats, "scaling": table, "stragglers": slow,
                                 "system": described, **({"fabric_pairs": pairs} if len(pairs) else {})})
    sections = [section for part in PARTS for section in walk(part, assembly)]
    tables = assembly.tables
    if summary and "datapath" in tables:  # the data path's verdicts, once built, in the summary a buyer reads first
        sections[0].lines += datapath_summary(tables["datapath"])
    if summary and len(tables.get("quality", ())):  # runs made to a target: best is fastest to it
        sections[0].lines += quality_summary(tables["quality"])
    return Report(_intro(collection, warmup), sections, tables, _plots(collection, table, stats, comm, tables),
                  headline)


def _decision_summary(compared: pd.DataFrame, sections: list[Section]) -> list[str]:
    """The executive summary's line on the decision (once: the verdicts themselves stand in Decision), or why there
    is none where several systems were measured but no workload on two of them."""
    decided = compared.attrs.get("decided")
    if decided is None:
        return sections[0].lines[:1] if sections else []
    line = decision_view.summary_line(decided, compared.attrs.get("weighted", []))
    return [line] if line else []


def _plots(collection: Collection, table: pd.DataFrame, stats: pd.DataFrame, comm: pd.DataFrame,
           tables: dict[str, pd.DataFrame]) -> dict[str, str]:
    """Every plot of the report, by title."""
    plots = all_plots(table, matrices(collection), collection.runs, stats, collection.telemetry)
    for title, svg in (("Where a step's time goes (--breakdown)",
                        breakdown_plot(tables["breakdown"]) if "breakdown" in tables else None),
                       ("Collective bus bandwidth against message size", plot_bandwidth(comm) if len(comm) else None)):
        if svg:
            plots[title] = svg
    return plots


def build_report(roots: list[Path], out_dir: Path, *, warmup: int | None = None, peaks: Path | None = None,
                 extend: Callable[[Report, Collection], str] | None = None,
                 judging: Judging | None = None, collection: Collection | None = None) -> tuple[str, dict[str, Path]]:
    """Collect (unless given the roots' ``collection``, read already), compute and write the report; return the
    terminal text and the paths written. ``extend`` adds to the report before it is written (``hvdbench accept``: its
    section and table) and returns what to print besides; ``judging``: how systems are judged (the baseline, the
    margin, prices, costs, weights, the first root's system)."""
    peak_list = load_peaks(peaks)  # a bad peak file is named before anything is read
    collection = collect(roots) if collection is None else collection
    if collection.runs.empty:
        where = ", ".join(map(str, roots))
        raise ReportError(f"no runs found under {where} (no run.json)"
                          + (f"; {collection.spec_errors[0]}" if collection.spec_errors else ""))
    collection = by_time(collection, (judging or Judging()).window)  # what extend and the terminal read, too
    report = build(collection, warmup=warmup, peaks=peak_list, judging=judging)
    extra = extend(report, collection) if extend is not None else ""
    return terminal_text(report, collection) + extra, write(report, out_dir)
