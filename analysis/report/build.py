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
    COMM_TEXT, comm_table, horovod_over_mpi, peak_rows, peak_table, plot_bandwidth, ratio_rows
)
from ..keys import ACROSS_SYSTEMS
from ..verdicts.compare import compare_table, measured_best
from ..tables.system import (
    FABRIC_TEXT, SYSTEM_TEXT, fabric_alerts, fabric_rows, params_alerts, system_table
)
from ..verdicts.costs import cost_columns
from ..verdicts.judging import Judging
from ..verdicts.decision import (decision_table, unpaired_table, weighted_figures,
                                 weighted_table)
from . import decision_view
from ..ratios import MIN_RUNS, pooled_spread
from ..sections import Inputs, TableSection
from ..tables.datapath import DATAPATH_SECTION, datapath_summary
from ..tables.critical_batch import CRITICAL_SECTION
from ..tables.quality import QUALITY_SECTION, decision_lines as quality_decision_lines, quality_table
from ..tables.details import BREAKDOWN_SECTION, DETAILS_SECTION, profile_rows
from ..tables.efficiency import load_peaks, Peak, with_peaks
from ..document import Report, Section
from .output import terminal_text, write
from ..tables.p2p import P2P_TEXT, host_rows, matrix_rows, p2p_table
from .plots import all_plots, breakdown_plot
from ..projection.project import DEFAULT_NODES, Projection, project
from ..projection.shown import projection_section
from ..tables.scaling import (
    ADAPTIVE_TEXT, WARMUP_TEXT, adaptive_rows, matrices, run_stats_table, scaling_table, straggler_rows,
    straggler_table, straggler_text, warmup_rows
)
from ..tables.full_node import THRESHOLD as FULL_THRESHOLD, full_node_rows, full_node_table, full_node_text
from ..tables.screening import THRESHOLD, screening_rows, screening_table, screening_text
from ..tables.summary import CROSS_SECTION, KNOBS_SECTION, best_configurations, best_rows, describe, executive_lines
from ..stats import STRAGGLER_THRESHOLD


def _intro(collection: Collection, warmup: int | None) -> str:
    runs = collection.runs
    rule = (f"the first {warmup} steps of every run (--warmup {warmup})" if warmup is not None else
            "the steps each benchmark ran as warm-up, or more where the step times show a longer initial "
            "transient (see Warm-up)")
    return (f"{len(runs)} run(s) read, {int((runs['status'] == 'ok').sum())} complete. Throughput is the sum "
            "over ranks of each rank's samples divided by its own steady-state step time (never rank 0 × N); "
            f"left out: {rule}. A configuration of several runs is their geometric mean; its 95% interval resamples "
            "the runs and, within each, blocks of its steps (Student's t over the runs); one run's interval is its "
            "steps' alone (within-run: the spread between runs unknown). Speedup = throughput(N) / throughput(1 GPU, "
            "same workload, arguments and system); efficiency = speedup / N.")


def _decision(collection: Collection, table: pd.DataFrame, compared: pd.DataFrame, baseline: str | None,
              margin: float, weights: dict[str, float], first_given: str | None = None,
              min_runs: int = MIN_RUNS) -> list[Section]:
    """The decision between systems, first after the summary: one row per workload and size against the baseline
    (ratio, interval, verdict, runs per side, cost), its forest plot, the weighted figures and costs, what the verdicts
    rest on; the side-by-side table, and what one system measured alone; nothing for one system."""
    quality = quality_table(collection.runs, margin, min_runs, baseline or first_given)
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
    alone = unpaired_table(measured_best(table), list(ACROSS_SYSTEMS))
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


def _compared(collection: Collection, table: pd.DataFrame, stats: pd.DataFrame,
              judging: Judging) -> tuple[pd.DataFrame, list[Section]]:
    """Systems against the baseline: the comparison table (with costs) and the decision's sections."""
    given = _given(table, judging.baseline, judging.first_given)
    spreads = pooled_spread(table, dict(zip(stats["run_id"], stats["throughput"])), judging.min_runs) \
        if judging.borrow_spread else None
    compared = compare_table(table, judging.prices, stats.attrs.get("draws"), judging.baseline or given, spreads,
                             judging.min_runs, stats.attrs.get("points"))
    if judging.costs:
        compared = cost_columns(compared, table, judging.costs)
    return compared, _decision(collection, table, compared, judging.baseline, judging.margin, judging.weights,
                               given if len(table) else judging.first_given, judging.min_runs)


def build(collection: Collection, *, warmup: int | None = None, threshold: float = STRAGGLER_THRESHOLD,
          peaks: list[Peak] | None = None, judging: Judging | None = None) -> Report:
    """Statistics, tables, sections and plots of collected runs (``peaks``: the peak table, default built-in;
    ``judging``: how systems are judged, every option of it in one object; default: Judging())."""
    judging = judging or Judging()
    stats = run_stats_table(collection, warmup)
    table = with_peaks(scaling_table(collection, stats), load_peaks() if peaks is None else peaks)
    comm = comm_table(collection)
    inputs = Inputs(collection, stats, table, scaling_table(collection, stats, pipelines=True), judging.margin,
                    judging.min_runs, judging.baseline or judging.first_given)
    timed = collection.runs["time_to_target_s"].notna().any() if len(collection.runs) else False
    if table.empty and comm.empty and collection.p2p.empty and inputs.pipelines.empty and not timed:
        _nothing_to_report(collection, warmup)
    slow = straggler_table(collection, stats, threshold)
    screen = screening_table(collection, stats)
    full = full_node_table(collection, stats)
    compared, decided = _compared(collection, table, stats, judging)
    headline = [_headline(f"{system}: {args or '(defaults)'}", group)
                for (system, args), group in table.groupby(["system", "args"], sort=True)]
    summary = (_decision_summary(compared, decided) + (executive_lines(table, screen, slow, full) if len(table) else [])
               + fabric_alerts(collection.runs) + params_alerts(collection.runs))
    sections = [Section("Executive summary", "", lines=summary)] if summary else []
    sections += decided
    described = system_table(collection)
    if len(described.columns) > 1:
        sections.append(Section("System under test", SYSTEM_TEXT, list(described.columns),
                                described.fillna("-").values.tolist(), role="system"))
    sections += headline
    for title, text, (header, rows) in views.axis_views(table):
        sections.append(Section(title, text, header, rows))
    tables = {"runs": collection.runs, "run_stats": stats, "scaling": table, "stragglers": slow, "system": described}
    sections += _buyer_sections(inputs, tables)
    if summary and "datapath" in tables:  # the data path's verdicts, once built, in the summary a buyer reads first
        sections[0].lines += datapath_summary(tables["datapath"])
    sections += _screen_sections(screen, full, tables)
    sections.append(Section("Stragglers", straggler_text(slow, threshold), *straggler_rows(slow)))
    sections += _recorded_sections(inputs, tables)
    sections += _run_sections(collection, stats)
    _keep_compared(tables, compared)
    if len(collection.profile):
        tables["profile"] = collection.profile
    sections += _bandwidth_sections(collection, comm, table, tables)
    projected = _projection(collection, warmup, stats)
    if projected is not None:
        sections.append(projection_section(projected))
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


def _keep_compared(tables: dict[str, pd.DataFrame], compared: pd.DataFrame) -> None:
    """The comparison (compare.csv) and the decision's rows (decision.csv), where systems were compared."""
    if not compared.empty:
        tables["compare"] = compared
        if compared.attrs.get("decided") is not None:
            tables["decision"] = compared.attrs["decided"]
        if compared.attrs.get("weighted"):
            tables["weighted"] = weighted_table(compared.attrs["weighted"])


def _run_sections(collection: Collection, stats: pd.DataFrame) -> list[Section]:
    """Warm-up, the adaptive run lengths and what was left out."""
    out = [Section("Warm-up", WARMUP_TEXT, *warmup_rows(collection.runs, stats))]
    if collection.runs["target_ci_pct"].notna().any():
        out.append(Section("Adaptive run length", ADAPTIVE_TEXT, *adaptive_rows(collection.runs, stats)))
    return out + [Section(title, text, header, rows) for title, text, header, rows in views.problems(collection)]


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


def _projection(collection: Collection, warmup: int | None, stats: pd.DataFrame) -> Projection | None:
    """The projection to 1-64 nodes where the results allow one (training runs with their independent
    twin and allreduce curves within and across nodes); None where they do not (``hvdbench project`` says
    what is missing)."""
    if collection.comm.empty or not (collection.runs["nodes"] > 1).any():
        return None
    try:
        return project(collection, DEFAULT_NODES, warmup=warmup, stats=stats)
    except ReportError:
        return None


def _bandwidth_sections(collection: Collection, comm: pd.DataFrame, table: pd.DataFrame,
                        tables: dict[str, pd.DataFrame]) -> list[Section]:
    """The collectives' peaks and Horovod against raw MPI; each host's peer-to-peer and host-GPU matrices."""
    out: list[Section] = []
    if len(comm):
        tables["collectives"] = comm
        out.append(Section("Collectives", COMM_TEXT, *peak_rows(peak_table(comm), table)))
        ratio = horovod_over_mpi(comm)
        if len(ratio):
            out.append(Section("Horovod against raw MPI", "busbw through Horovod / through mpi4py, near 64 MiB.",
                               *ratio_rows(ratio)))
    p2p = p2p_table(collection)
    if len(p2p):
        tables["p2p"] = p2p
        for (run_id, host), cases in p2p.groupby(["run_id", "host"], sort=True, dropna=False):
            where = f"{host} ({run_id})"
            out.append(Section(f"Peer-to-peer bandwidth, {where}", P2P_TEXT, *matrix_rows(cases, "uni")))
            if (cases["mode"] == "bi").any():
                out.append(Section(f"Both directions at once, {where}", "", *matrix_rows(cases, "bi")))
            out.append(Section(f"Host and GPU, {where}", "Pinned host memory.", *host_rows(cases)))
    return out


def _walk(descriptors: tuple[TableSection, ...], inputs: Inputs, tables: dict[str, pd.DataFrame]) -> list[Section]:
    """Each table section built, kept as its table and shown, where it has rows."""
    out: list[Section] = []
    for section in descriptors:
        table = section.build(inputs)
        if len(table):
            tables[section.name] = table
            out.append(Section(section.title, section.text, *section.rows(table), folded=section.folded,
                               banner=section.banner(table) if section.banner is not None else []))
    return out


# what a buyer compares, after the headline
BUYER_TABLES = (QUALITY_SECTION, CRITICAL_SECTION, KNOBS_SECTION, CROSS_SECTION, DATAPATH_SECTION)
RECORDED_TABLES = (BREAKDOWN_SECTION, DETAILS_SECTION)  # everything else the runs recorded


def _buyer_sections(inputs: Inputs, tables: dict[str, pd.DataFrame]) -> list[Section]:
    """Every knob side by side, the cross-model summary, the data path and the best configuration of each workload."""
    out = _walk(BUYER_TABLES, inputs, tables)
    best = best_configurations(inputs.table)
    if len(best) and (best["np"] > 1).any():
        out.append(Section("Best configuration per workload", "At the largest GPU count each workload was measured.",
                           *best_rows(best, describe)))
    return out


def _recorded_sections(inputs: Inputs, tables: dict[str, pd.DataFrame]) -> list[Section]:
    """Everything else the runs recorded: the --breakdown phases, run details, the network NCCL used, the profiles'
    top operators."""
    collection = inputs.collection
    out = _walk(RECORDED_TABLES, inputs, tables)
    header, rows = fabric_rows(collection.runs)
    if rows:
        out.append(Section("The network NCCL used", FABRIC_TEXT, header, rows))
    if len(collection.profile):
        out.append(Section("Top operators (--profile)", "Rank 0's five most expensive operators per profiled run; "
                           "every rank's in profile.csv, the traces beside the logs.",
                           *profile_rows(collection.profile)))
    return out


def _screen_sections(screen: pd.DataFrame, full: pd.DataFrame, tables: dict[str, pd.DataFrame]) -> list[Section]:
    """Screening (each GPU alone against its fleet) and full-node screening, where the runs hold them."""
    sections = []
    if len(screen):
        sections.append(Section("Screening", screening_text(THRESHOLD), *screening_rows(screen)))
        tables["screening"] = screen
    if len(full):
        sections.append(Section("Full-node screening", full_node_text(FULL_THRESHOLD),
                                *full_node_rows(full)))
        tables["full_node"] = full
    return sections


def build_report(roots: list[Path], out_dir: Path, *, warmup: int | None = None, peaks: Path | None = None,
                 extend: Callable[[Report, Collection], str] | None = None,
                 judging: Judging | None = None) -> tuple[str, dict[str, Path]]:
    """Collect, compute and write the report; return the terminal text and the paths written. ``extend``
    adds to the report before it is written (``hvdbench accept``: its section and table) and returns what
    to print besides; ``judging``: how systems are judged (the baseline, the margin, prices, costs, weights, the
    first root's system)."""
    peak_list = load_peaks(peaks)  # a bad peak file is named before anything is read
    collection = collect(roots)
    if collection.runs.empty:
        where = ", ".join(map(str, roots))
        raise ReportError(f"no runs found under {where} (no run.json)"
                          + (f"; {collection.spec_errors[0]}" if collection.spec_errors else ""))
    report = build(collection, warmup=warmup, peaks=peak_list, judging=judging)
    extra = extend(report, collection) if extend is not None else ""
    return terminal_text(report, collection) + extra, write(report, out_dir)
